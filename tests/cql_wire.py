"""CQL bytes as peers write them, for the tests and the benchmark: envelopes and v5 frames.

The checksums come from independent implementations, not from wirelog: crcmod with Cassandra's CRC24
parameters (reference/cql.md §4) and zlib's CRC-32 primed with FA 2D 55 CA; LZ4 blocks from the
`lz4` package. The decoder under test lives in the core.
"""

from __future__ import annotations

import struct
import zlib

import crcmod
import lz4.block as lz4_block

MAX_PAYLOAD = (1 << 17) - 1  # 17-bit frame length fields
crc24 = crcmod.mkCrcFun(0x1974F0B, initCrc=0x875060, rev=False, xorOut=0)
CRC32_INITIAL = zlib.crc32(b"\xfa\x2d\x55\xca")


def crc32(payload: bytes) -> int:
    """The primed CRC32 of a v5 frame payload."""
    return zlib.crc32(payload, CRC32_INITIAL)


def envelope(version: int, response: bool, flags: int, stream: int, opcode: int, body: bytes) -> bytes:
    """A 9-byte envelope header + body."""
    return struct.pack(">BBhBI", version | (0x80 if response else 0), flags, stream, opcode, len(body)) + body


def header(payload_length: int, uncompressed_length: int, self_contained: bool, lz4: bool) -> bytes:
    """v5 frame header bytes including the CRC24."""
    if lz4:
        value = payload_length | uncompressed_length << 17 | int(self_contained) << 34
        raw = value.to_bytes(5, "little")
    else:
        raw = (payload_length | int(self_contained) << 17).to_bytes(3, "little")
    return raw + crc24(raw).to_bytes(3, "little")


def frame(payload: bytes, self_contained: bool = True, lz4: bool = False) -> bytes:
    """One v5 frame; LZ4 frames store the payload raw unless compressing makes it smaller."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"frame payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    uncompressed = 0
    if lz4:
        packed = lz4_block.compress(payload, store_size=False)
        if len(packed) < len(payload):
            payload, uncompressed = packed, len(payload)
    return (
        header(len(payload), uncompressed, self_contained, lz4)
        + payload
        + crc32(payload).to_bytes(4, "little")
    )


def frames(data: bytes, lz4: bool = False, chunk: int = MAX_PAYLOAD) -> bytes:
    """An envelope as a sender frames it: one self-contained frame, or SC=0 chunks when too big."""
    if len(data) <= MAX_PAYLOAD:
        return frame(data, True, lz4)
    return b"".join(frame(data[i : i + chunk], False, lz4) for i in range(0, len(data), chunk))
