"""Content-based detection: Log Courier has no well-known port, only four-letter types and strict lengths."""

from __future__ import annotations

from wirelog.decoders.base import Limits, Sample
from wirelog.decoders.courier import framing

_MAX_FRAME = Limits().max_frame


def _opens(data: bytes, types: frozenset[bytes]) -> bool | None:
    """Does `data` open with a plausible message of `types`? None: too few bytes to tell."""
    if len(data) < framing.HEADER:
        return None if any(t.startswith(data[:4]) for t in types) else False
    if data[:4] not in types or not framing.plausible(data[: framing.HEADER], _MAX_FRAME):
        return False
    if data[:4] in (b"JDAT", b"EVNT"):
        at = framing.HEADER + framing.NONCE
        return None if len(data) <= at else data[at] == 0x78
    return True


def find_start(data: bytes) -> int | None:
    """The first client message in bytes from the middle of a stream: framing.find_header's strict
    header check (a JDAT/EVNT also needs its nonce and zlib byte), client types only."""
    pos = 0
    while True:
        at, _ = framing.find_header(data[pos:], _MAX_FRAME)
        if at is None:
            return None
        if data[pos + at : pos + at + 4] in framing.CLIENT_TYPES:
            return pos + at
        pos += at + 1


def detect(sample: Sample) -> float | None:
    c2s = _opens(sample.c2s, framing.CLIENT_TYPES)
    s2c = _opens(sample.s2c, framing.SERVER_TYPES)
    if c2s and s2c:
        return 0.99
    if c2s:
        return 0.95
    if s2c:
        return 0.9
    waiting = (c2s is None and sample.c2s) or (s2c is None and sample.s2c) or not (sample.c2s or sample.s2c)
    if waiting and not sample.closed:
        return None
    return 0.0
