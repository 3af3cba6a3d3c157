"""Recognise events resent on a later connection, by content.

Beats resend a batch after a timeout or a reconnect; their seqs restart at 1, so only the payload
identifies a resend. Fingerprints live in the per-capture `StreamContext.shared` dict, bounded.
"""

from __future__ import annotations

from typing import NamedTuple

from wirelog.decoders.base import StreamContext

REGISTRY_CAP = 1_000_000  # payload fingerprints remembered per capture


class FirstCopy(NamedTuple):
    stream: int
    frame: int | None
    seq: int


class ResendRegistry:
    """Payload fingerprint → where it was first seen, shared by every connection of a capture."""

    __slots__ = ("_seen", "_stream")

    def __init__(self, ctx: StreamContext) -> None:
        self._seen: dict[int, tuple[int, int | None, int]] = ctx.shared.setdefault("events", {})
        self._stream = ctx.stream

    def first_copy(self, payload: bytes, frame: int | None, seq: int) -> FirstCopy | None:
        """Where this payload was first sent if that was another connection; else remember it."""
        key = hash(payload)  # 64-bit, in-process only: collisions are negligible, output unaffected
        seen = self._seen
        if len(seen) < REGISTRY_CAP:
            entry = (self._stream, frame, seq)
            first = seen.setdefault(key, entry)  # one lookup per event: this runs for every event
            if first is entry:
                return None
        else:
            first = seen.get(key)
            if first is None:
                return None
        return None if first[0] == self._stream else FirstCopy(*first)
