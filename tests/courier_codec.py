"""Log Courier encoder for the tests: the bytes each message type puts on the wire (fixtures, replay).

No Log Courier peer installs from a package registry, so wirelog builds its own messages; tests
check them byte for byte against genuine captures and the vectors in reference/courier.md §4.
Compression styles: "ruby" = zlib default level (header 78 9c, identical to the Ruby gem's bytes);
"go" = level 3 (header 78 5e) closed with an empty final stored block, so the stream ends
`00 00 ff ff` + Adler-32 like Go's compress/flate (Go's deflate itself is not reproducible).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterable, Mapping

STREAMED = 0xFFFFFFFF
Version = tuple[int, int, int]


def message(mtype: bytes, body: bytes = b"", length: int | None = None) -> bytes:
    """`type[4]` + u32 BE length + body; `length` overrides the field (for malformed fixtures)."""
    return mtype + struct.pack(">I", len(body) if length is None else length) + body


def handshake_body(
    layout: int, flags: int = 0, version: Version = (2, 12, 0), client: bytes = b"LCOR"
) -> bytes:
    """A HELO/VERS body in one of the historic layouts: 0, 1, 8, 20 or 32 bytes (reference §2)."""
    major, minor, patch = version
    if layout == 0:
        return b""
    if layout == 1:
        return bytes([flags])
    if layout == 8:
        return bytes([flags, major, minor, patch]) + client
    head = bytes([flags, 0, 0, 0]) if layout == 32 else struct.pack(">I", flags)
    body = head + struct.pack(">III", major, minor, patch) + client
    if layout == 20:
        return body
    if layout == 32:
        return body + bytes(12)
    raise ValueError(f"unknown handshake layout {layout}")


def helo(layout: int = 32, flags: int = 0, version: Version = (2, 12, 0), client: bytes = b"LCOR") -> bytes:
    """Client hello; Go >= 2.6.4 sends layout 32 with flags 0 and `LCOR`."""
    return message(b"HELO", handshake_body(layout, flags, version, client))


def vers(layout: int = 20, flags: int = 0, version: Version = (2, 12, 0), client: bytes = b"RYLC") -> bytes:
    """Server reply to HELO; flag 0x01 allows EVNT. The Ruby gem >= 2.7.2 sends layout 20, `RYLC`."""
    return message(b"VERS", handshake_body(layout, flags, version, client))


def ping() -> bytes:
    return message(b"PING")


def pong() -> bytes:
    return message(b"PONG")


def unknown_reply() -> bytes:
    """`????`: the Ruby server's reply to a type it does not handle (e.g. HELO with handshake disabled)."""
    return message(b"????")


def ackn(nonce: bytes, sequence: int) -> bytes:
    return message(b"ACKN", nonce + struct.pack(">I", sequence))


def event_json(doc: Mapping[str, object], style: str = "ruby") -> bytes:
    """One event as its sender writes it: Go sorts keys, Ruby keeps insertion order; both compact."""
    return json.dumps(doc, separators=(",", ":"), sort_keys=style == "go", ensure_ascii=False).encode()


def event_block(events: Iterable[bytes]) -> bytes:
    """The inflated payload: `[u32 length][JSON]` per event, back to back."""
    return b"".join(struct.pack(">I", len(e)) + e for e in events)


def deflate(data: bytes, style: str = "ruby") -> bytes:
    """A zlib stream as Ruby ("ruby") or in Go's shape ("go"); see the module docstring."""
    if style == "ruby":
        return zlib.compress(data)
    c = zlib.compressobj(3, zlib.DEFLATED, -15)
    raw = c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH) + b"\x01\x00\x00\xff\xff"
    return b"\x78\x5e" + raw + struct.pack(">I", zlib.adler32(data))


def jdat(nonce: bytes, compressed: bytes, length: int | None = None) -> bytes:
    return message(b"JDAT", nonce + compressed, length)


def evnt(nonce: bytes, compressed: bytes) -> bytes:
    """Streamed payload: length field 0xFFFFFFFF, the message ends where the zlib stream ends."""
    return message(b"EVNT", nonce + compressed, STREAMED)


def payload(nonce: bytes, events: Iterable[bytes], style: str = "ruby", streamed: bool = False) -> bytes:
    """A whole JDAT (or EVNT when `streamed`) carrying already-serialised `events`."""
    compressed = deflate(event_block(events), style)
    return evnt(nonce, compressed) if streamed else jdat(nonce, compressed)
