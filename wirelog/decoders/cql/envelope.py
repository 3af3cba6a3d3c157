"""The 9-byte envelope header shared by v3, v4 and v5 (reference/cql.md §8).

`version flags stream opcode length`, big-endian; bit 7 of the version byte is the direction.
`plausible` is the content test used by detection and by v3/v4 resynchronisation.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

HEADER = 9
MAX_LENGTH = 256 * 1024 * 1024  # the spec's envelope limit
_HEAD = struct.Struct(">BBhBI")

VERSIONS = {3: "v3", 4: "v4", 5: "v5", 6: "v6-beta", 0x41: "dse-v1", 0x42: "dse-v2"}
FRAMED_VERSIONS = frozenset({5, 6})  # STARTUP at these switches the connection to v5 frames

OPCODES = {
    0x00: "error",
    0x01: "startup",
    0x02: "ready",
    0x03: "authenticate",
    0x05: "options",
    0x06: "supported",
    0x07: "query",
    0x08: "result",
    0x09: "prepare",
    0x0A: "execute",
    0x0B: "register",
    0x0C: "event",
    0x0D: "batch",
    0x0E: "auth_challenge",
    0x0F: "auth_response",
    0x10: "auth_success",
}
REQUESTS = frozenset({0x01, 0x05, 0x07, 0x09, 0x0A, 0x0B, 0x0D, 0x0F})
RESPONSES = frozenset({0x00, 0x02, 0x03, 0x06, 0x08, 0x0C, 0x0E, 0x10})

FLAG_COMPRESSION = 0x01
FLAG_TRACING = 0x02
FLAG_CUSTOM_PAYLOAD = 0x04
FLAG_WARNING = 0x08
FLAG_BETA = 0x10
FLAG_NAMES = {
    FLAG_COMPRESSION: "compression",
    FLAG_TRACING: "tracing",
    FLAG_CUSTOM_PAYLOAD: "custom_payload",
    FLAG_WARNING: "warning",
    FLAG_BETA: "use_beta",
}


class EnvelopeHeader(NamedTuple):
    """A parsed header (a NamedTuple: built once per envelope, so construction must be cheap)."""

    version: int  # protocol version without the direction bit
    response: bool
    flags: int
    stream: int  # signed: server events use -1
    opcode: int
    length: int  # body length

    @property
    def total(self) -> int:
        return HEADER + self.length

    @property
    def version_name(self) -> str:
        return VERSIONS.get(self.version, f"0x{self.version:02x}")

    @property
    def opcode_name(self) -> str:
        return OPCODES.get(self.opcode, "unknown")

    @property
    def flag_names(self) -> list[str]:
        return [name for bit, name in FLAG_NAMES.items() if self.flags & bit]


def parse(data: bytes, at: int = 0) -> EnvelopeHeader:
    """Decode the header at `data[at:at+9]` (the caller ensures 9 bytes are there)."""
    v, flags, stream, opcode, length = _HEAD.unpack_from(data, at)
    return EnvelopeHeader(v & 0x7F, v >= 0x80, flags, stream, opcode, length)


def problem(head: EnvelopeHeader, response: bool | None, max_length: int) -> tuple[str, str] | None:
    """Why this cannot be a real envelope header sent in the given direction (None = either):
    (finding code suffix, sentence), or None when it is plausible."""
    if head.version not in VERSIONS:
        return "unknown-version", f"unknown protocol version 0x{head.version:02x}"
    if response is not None and head.response != response:
        return (
            "wrong-direction",
            f"{'response' if head.response else 'request'} version byte in the wrong direction",
        )
    if head.opcode not in (RESPONSES if head.response else REQUESTS):
        return (
            "unknown-opcode",
            f"opcode 0x{head.opcode:02x} is not a {'response' if head.response else 'request'}",
        )
    if head.flags & ~0x1F:
        return "bad-flags", f"reserved envelope flag bits set (0x{head.flags:02x})"
    if head.length > max_length:
        return "envelope-too-large", f"envelope body length {head.length} exceeds the limit of {max_length}"
    return None


def plausible(head: EnvelopeHeader, response: bool | None, max_length: int) -> bool:
    """Could this be a real envelope header sent in the given direction (None = either)?"""
    return problem(head, response, max_length) is None


def encode(version: int, response: bool, flags: int, stream: int, opcode: int, body: bytes) -> bytes:
    """Header + body; used to build responses in tests and benchmarks (the driver only encodes requests)."""
    return _HEAD.pack(version | (0x80 if response else 0), flags, stream, opcode, len(body)) + body
