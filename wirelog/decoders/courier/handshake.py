"""HELO/VERS bodies: four historic layouts, and what each says about the software that sent it.

Layouts (reference/courier.md §2): 0 bytes (Go 2.5.0–2.6.3 HELO), 1 byte = flags (Go 2.5.0–2.6.3
VERS), 8 bytes = flags, major, minor, patch as u8 + client[4] (Ruby 2.7.0–2.7.1), 20 bytes = flags,
major, minor, patch as u32 + client[4] (Ruby >= 2.7.2), 32 bytes = the 20-byte layout + 12 reserved
zero bytes (Go >= 2.6.4). Receivers zero-pad shorter bodies to 32 and read flag byte 0, so any other
length is parsed the same way and reported.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

EVNT_FLAG = 0x01
CLIENT_NAMES = {
    "LCOR": "Log Courier",
    "LCVR": "Log Carver",
    "RYLC": "Ruby Log Courier",
    "00000000": "unspecified",
}
HELO_CLASSES = {
    0: ("go", "Go log-courier 2.5.0-2.6.3"),
    8: ("ruby", "Ruby gem 2.7.0-2.7.1"),
    20: ("ruby", "Ruby gem >= 2.7.2"),
    32: ("go", "Go log-courier >= 2.6.4"),
}
VERS_CLASSES = {
    1: ("go", "Go receiver 2.5.0-2.6.3"),
    8: ("ruby", "Ruby gem 2.7.0-2.7.1"),
    20: ("ruby", "Ruby gem >= 2.7.2"),
    32: ("go", "Go receiver (Log Carver) >= 2.6.4"),
}
KNOWN_LENGTHS = frozenset({0, 1, 8, 20, 32})


@dataclass(frozen=True, slots=True)
class Handshake:
    """One HELO or VERS body, parsed."""

    length: int
    flags: int  # byte 0, the only byte anyone reads
    version: str | None
    client_id: str | None

    @property
    def evnt(self) -> bool:
        return bool(self.flags & EVNT_FLAG)

    def fields(self) -> dict[str, object]:
        return {
            "flags": self.flags,
            "evnt": self.evnt,
            "software_version": self.version,
            "client_id": self.client_id,
            "client_name": CLIENT_NAMES.get(self.client_id or ""),
            "layout": self.length if self.length in KNOWN_LENGTHS else None,
        }


def parse(body: bytes) -> Handshake:
    """Parse any body length the receivers accept (they zero-pad to 32 bytes)."""
    n = len(body)
    if n == 8:
        flags, major, minor, patch = body[0], body[1], body[2], body[3]
        return Handshake(8, flags, f"{major}.{minor}.{patch}", _client(body[4:8]))
    padded = body[:32].ljust(32, b"\0")
    major, minor, patch = struct.unpack_from(">III", padded, 4)
    version = f"{major}.{minor}.{patch}" if n >= 16 else None
    client = _client(padded[16:20]) if n >= 20 else None
    return Handshake(n, padded[0], version, client)


def _client(raw: bytes) -> str:
    """ASCII IDs as text; anything else (e.g. the all-zero "unspecified") as hex."""
    return raw.decode("ascii") if all(0x20 <= b < 0x7F for b in raw) else raw.hex()
