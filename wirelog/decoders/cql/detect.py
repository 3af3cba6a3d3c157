"""Content detection of CQL streams on any port (reference/cql.md §13).

Strong evidence: a v5 frame header whose CRC24 holds (1 in 16.7 M by chance), or an envelope header of
the right direction whose body decodes cleanly (the core's decoder judges the body). Mid-stream samples
are searched for a CRC24-valid frame carrying a v5 envelope, or for two envelope headers back to back.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from wirelog import _core
from wirelog.decoders.base import Sample
from wirelog.decoders.cql.crc import crc24

SANE_LENGTH = 16 * 1024 * 1024  # a first envelope larger than this is not evidence of CQL
HEADER = 9  # version flags stream opcode length, big-endian; bit 7 of the version byte = response
_HEAD = struct.Struct(">BBhBI")
VERSIONS = frozenset({3, 4, 5, 6, 0x41, 0x42})
FRAMED_VERSIONS = frozenset({5, 6})  # the versions that switch to v5 frames
REQUESTS = frozenset({0x01, 0x05, 0x07, 0x09, 0x0A, 0x0B, 0x0D, 0x0F})
RESPONSES = frozenset({0x00, 0x02, 0x03, 0x06, 0x08, 0x0C, 0x0E, 0x10})
FLAG_COMPRESSION = 0x01


class _Envelope(NamedTuple):
    version: int
    flags: int
    length: int

    @property
    def total(self) -> int:
        return HEADER + self.length


def _frame_at(data: bytes, pos: int, lz4: bool) -> bool:
    """A v5 frame header (5 bytes for LZ4 frames, else 3) with zero padding bits and a valid CRC24."""
    n = 5 if lz4 else 3
    if len(data) - pos < n + 3:
        return False
    raw = data[pos : pos + n]
    if raw[-1] >> (3 if lz4 else 2):  # the bits above the self-contained flag are written as 0
        return False
    return crc24(raw) == int.from_bytes(data[pos + n : pos + n + 3], "little")


def _envelope_at(data: bytes, pos: int, response: bool) -> _Envelope | None:
    """A plausible envelope header sent in this direction."""
    if len(data) - pos < HEADER:
        return None
    v, flags, _stream, opcode, length = _HEAD.unpack_from(data, pos)
    version = v & 0x7F
    if (
        version not in VERSIONS
        or (v >= 0x80) != response
        or opcode not in (RESPONSES if response else REQUESTS)
        or flags & ~0x1F
        or length > SANE_LENGTH
    ):
        return None
    return _Envelope(version, flags, length)


def _score_start(data: bytes, response: bool) -> float:
    """Confidence that `data` starts at a CQL boundary."""
    if _frame_at(data, 0, False) or _frame_at(data, 0, True):
        return 0.95
    head = _envelope_at(data, 0, response)
    if head is None:
        return 0.0
    if len(data) < head.total:
        return 0.7
    if head.flags & FLAG_COMPRESSION and head.version < 5:
        return 0.8  # compressed bodies are checked by the decoder
    return 0.95 if _core.cql_envelope_decodes(data[: head.total]) else 0.5


def _score_inside(data: bytes, response: bool) -> float:
    """Confidence from a boundary found later in the sample (mid-stream capture)."""
    for pos in range(1, max(len(data) - HEADER, 0)):
        for lz4 in (False, True):
            if _frame_at(data, pos, lz4):
                head = _envelope_at(data, pos + (8 if lz4 else 6), response)
                if head is not None and head.version in FRAMED_VERSIONS:
                    return 0.9
        head = _envelope_at(data, pos, response)
        if head is not None and _envelope_at(data, pos + head.total, response) is not None:
            return 0.7
    return 0.0


def detect(sample: Sample) -> float | None:
    sides = ((sample.c2s, False), (sample.s2c, True))
    if all(len(d) < HEADER for d, _ in sides) and not sample.closed:
        return None
    best = max(_score_start(d, r) for d, r in sides)
    if best >= 0.9:
        return best
    return max(best, *(_score_inside(d, r) for d, r in sides))
