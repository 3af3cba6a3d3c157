"""CQL v5 frames ("segments"): header parsing, encoding, and CRC24 candidate search.

Layouts (reference/cql.md §2-3, little-endian): CRC frame = 3-byte header + CRC24 + payload + CRC32;
LZ4 frame = 5-byte header + CRC24 + payload + CRC32 (over the payload as transmitted). An LZ4 frame
with uncompressed length 0 carries its payload stored raw.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from wirelog.decoders.cql.compression import lz4_compress
from wirelog.decoders.cql.crc import crc24, crc32

MAX_PAYLOAD = (1 << 17) - 1  # 17-bit length fields
CRC_HEADER = 6  # 3 header bytes + 3 CRC24 bytes
LZ4_HEADER = 8  # 5 header bytes + 3 CRC24 bytes
TRAILER = 4

# Candidate headers for a resync search: the padding bits above the self-contained flag are written
# as 0, so a candidate's last header byte is small. The lookahead regex lets `re` skip the rest in C.
_CANDIDATE = {
    False: re.compile(rb"(?=[\x00-\xff]{2}[\x00-\x03])"),
    True: re.compile(rb"(?=[\x00-\xff]{4}[\x00-\x07])"),
}


class FrameHeader(NamedTuple):
    """A decoded frame header and whether its CRC24 holds (a NamedTuple: cheap to build per frame)."""

    lz4: bool
    payload_length: int
    uncompressed_length: int  # LZ4 frames only; 0 = stored raw (and always 0 for CRC frames)
    self_contained: bool
    padding: int  # the unused high header bits, written as 0
    stored_crc24: int
    computed_crc24: int

    @property
    def size(self) -> int:
        return LZ4_HEADER if self.lz4 else CRC_HEADER

    @property
    def total(self) -> int:
        """Bytes on the wire: header + payload + CRC32 trailer."""
        return self.size + self.payload_length + TRAILER

    @property
    def crc_ok(self) -> bool:
        return self.stored_crc24 == self.computed_crc24


def header_size(lz4: bool) -> int:
    return LZ4_HEADER if lz4 else CRC_HEADER


def parse_header(data: bytes, lz4: bool) -> FrameHeader:
    """Decode the first `header_size(lz4)` bytes of `data` (the caller ensures they are there)."""
    n = 5 if lz4 else 3
    raw = bytes(data[:n])
    value = int.from_bytes(raw, "little")
    stored = int.from_bytes(data[n : n + 3], "little")
    if lz4:
        return FrameHeader(
            True,
            value & MAX_PAYLOAD,
            (value >> 17) & MAX_PAYLOAD,
            bool(value >> 34 & 1),
            value >> 35,
            stored,
            crc24(raw),
        )
    return FrameHeader(False, value & MAX_PAYLOAD, 0, bool(value >> 17 & 1), value >> 18, stored, crc24(raw))


def trailer_crc32(data: bytes, header: FrameHeader) -> tuple[int, int]:
    """(stored, computed) CRC32 of the complete frame at the start of `data`."""
    end = header.size + header.payload_length
    stored = int.from_bytes(data[end : end + TRAILER], "little")
    return stored, crc32(data[header.size : end])


def next_candidate(data: bytes, start: int, lz4: bool) -> int:
    """The first offset >= start where a header of the given kind could begin, or -1 (CRC24 pre-filter)."""
    m = _CANDIDATE[lz4].search(data, start)
    return -1 if m is None else m.start()


def encode_header(payload_length: int, uncompressed_length: int, self_contained: bool, lz4: bool) -> bytes:
    """Header bytes including the CRC24."""
    if lz4:
        value = payload_length | uncompressed_length << 17 | int(self_contained) << 34
        raw = value.to_bytes(5, "little")
    else:
        raw = (payload_length | int(self_contained) << 17).to_bytes(3, "little")
    return raw + crc24(raw).to_bytes(3, "little")


def encode_frame(payload: bytes, self_contained: bool = True, lz4: bool = False) -> bytes:
    """One frame holding `payload` (<= MAX_PAYLOAD bytes); LZ4 frames store it raw unless that is larger."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"frame payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    uncompressed = 0
    if lz4:
        packed = lz4_compress(payload)
        if len(packed) < len(payload):
            payload, uncompressed = packed, len(payload)
    head = encode_header(len(payload), uncompressed, self_contained, lz4)
    return head + payload + crc32(payload).to_bytes(4, "little")


def encode_frames(envelope: bytes, lz4: bool = False, chunk: int = MAX_PAYLOAD) -> bytes:
    """An envelope as a sender would frame it: one self-contained frame, or SC=0 chunks if too big."""
    if len(envelope) <= MAX_PAYLOAD:
        return encode_frame(envelope, True, lz4)
    parts = [envelope[i : i + chunk] for i in range(0, len(envelope), chunk)]
    return b"".join(encode_frame(p, False, lz4) for p in parts)
