"""Recognise events resent on a later connection, by content.

Beats resend a batch after a timeout or a reconnect; their seqs restart at 1, so only the payload
identifies a resend. Fingerprints live in the per-capture `StreamContext.shared` dict, in two
generations: when the newer one is full it becomes the older one (the older is dropped), so memory is
bounded and the most recent GENERATION..2*GENERATION events are always remembered, however long the
capture (Beats resend within seconds of the first copy: the recent past is what matters).
"""

from __future__ import annotations

from typing import NamedTuple

from wirelog.decoders.base import StreamContext

GENERATION = 500_000  # payload fingerprints per generation (two are kept: ~110 MB at most)


class FirstCopy(NamedTuple):
    stream: int
    frame: int | None
    seq: int


_SEQ_BITS = 32  # Lumberjack seqs are unsigned 32-bit
_FRAME_BITS = 48


class ResendRegistry:
    """Payload fingerprint → where it was first seen, shared by every connection of a capture.

    Each place is packed into one int (stream, frame + 1 or 0 for none, seq): a million events cost
    ~110 MB as one int each, ~190 MB as tuples.
    """

    __slots__ = ("_generations", "_stream")

    def __init__(self, ctx: StreamContext) -> None:
        self._generations: list[dict[int, int]] = ctx.shared.setdefault("events", [{}, {}])  # newer, older
        self._stream = ctx.stream

    def first_copy(self, payload: bytes, frame: int | None, seq: int) -> FirstCopy | None:
        """Where this payload was first sent if that was another connection; else remember it."""
        key = hash(payload)  # 64-bit, in-process only: collisions are negligible, output unaffected
        generations = self._generations
        newer = generations[0]
        place = _pack(self._stream, frame, seq)
        first = newer.setdefault(key, place)  # one lookup per event: this runs for every event
        if first == place:  # not in the newer generation (or the very same place again)
            older = generations[1].get(key)
            if older is None:
                if len(newer) >= GENERATION:
                    generations[:] = [{}, newer]
                return None
            newer[key] = first = older
        stream, first_frame, first_seq = _unpack(first)
        return None if stream == self._stream else FirstCopy(stream, first_frame, first_seq)


def _pack(stream: int, frame: int | None, seq: int) -> int:
    return (((stream << _FRAME_BITS) | (0 if frame is None else frame + 1)) << _SEQ_BITS) | seq


def _unpack(place: int) -> tuple[int, int | None, int]:
    frame = (place >> _SEQ_BITS) & ((1 << _FRAME_BITS) - 1)
    return place >> (_SEQ_BITS + _FRAME_BITS), (frame - 1 if frame else None), place & ((1 << _SEQ_BITS) - 1)
