"""Content detection of CQL streams on any port (reference/cql.md §13).

Strong evidence: a v5 frame header whose CRC24 holds (1 in 16.7 M by chance), or an envelope header of
the right direction whose body decodes cleanly. Mid-stream samples are searched for a CRC24-valid frame
carrying a v5 envelope, or for two envelope headers back to back.
"""

from __future__ import annotations

from wirelog.decoders.base import Sample
from wirelog.decoders.cql import envelope as env
from wirelog.decoders.cql import framing

SANE_LENGTH = 16 * 1024 * 1024  # a first envelope larger than this is not evidence of CQL


def _frame_at(data: bytes, pos: int, lz4: bool) -> bool:
    size = framing.header_size(lz4)
    if len(data) - pos < size:
        return False
    h = framing.parse_header(data[pos : pos + size], lz4)
    return h.crc_ok and not h.padding


def _envelope_at(data: bytes, pos: int, response: bool) -> env.EnvelopeHeader | None:
    if len(data) - pos < env.HEADER:
        return None
    head = env.parse(data, pos)
    return head if env.plausible(head, response, SANE_LENGTH) else None


def _score_start(data: bytes, response: bool) -> float:
    """Confidence that `data` starts at a CQL boundary."""
    if _frame_at(data, 0, False) or _frame_at(data, 0, True):
        return 0.95
    head = _envelope_at(data, 0, response)
    if head is None:
        return 0.0
    if len(data) < head.total:
        return 0.7
    body = data[env.HEADER : head.total]
    if head.flags & env.FLAG_COMPRESSION and head.version < 5:
        return 0.8  # compressed bodies are checked by the decoder
    # imported here: only a complete envelope at the start needs it (start-up skips ~27 KB of source)
    from wirelog.decoders.cql.messages import BodyContext, decode

    decoded = decode(head, body, BodyContext(head.version))
    return 0.95 if decoded.error is None and not decoded.trailing else 0.5


def _score_inside(data: bytes, response: bool) -> float:
    """Confidence from a boundary found later in the sample (mid-stream capture)."""
    for pos in range(1, max(len(data) - env.HEADER, 0)):
        for lz4 in (False, True):
            if _frame_at(data, pos, lz4):
                head = _envelope_at(data, pos + framing.header_size(lz4), response)
                if head is not None and head.version in env.FRAMED_VERSIONS:
                    return 0.9
        head = _envelope_at(data, pos, response)
        if head is not None and _envelope_at(data, pos + head.total, response) is not None:
            return 0.7
    return 0.0


def detect(sample: Sample) -> float | None:
    sides = ((sample.c2s, False), (sample.s2c, True))
    if all(len(d) < env.HEADER for d, _ in sides) and not sample.closed:
        return None
    best = max(_score_start(d, r) for d, r in sides)
    if best >= 0.9:
        return best
    return max(best, *(_score_inside(d, r) for d, r in sides))
