"""The core's decoders behind the per-stream interface the tests drive: `feed(chunk)`, `gap(gap)`,
`close()`, each returning the records (Message/Finding objects) that step produced.

Each decoder is a stream attached to a `wirelog._core.Decoding` session (the same decoding a
capture gets). Decoders meant to share capture-level state (resends seen on another connection)
share one session: pass the same `shared` dict to each, the session lives in it.
"""

from __future__ import annotations

from dataclasses import asdict

from wirelog import _core
from wirelog.engine.protocols import StreamContext
from wirelog.model import Chunk, Gap, Record

_SESSION = "_core_session"


class CoreDecoder:
    """One stream decoded by the core."""

    def __init__(self, protocol: str, ctx: StreamContext) -> None:
        session = ctx.shared.get(_SESSION)
        if session is None:
            # a horizon of 0: each connection's records come out as it gives them, not held until
            # the end of the input for a resend on another connection to decide their fate
            limits = {**asdict(ctx.limits), "fate_horizon_ns": 0}
            session = _core.Decoding("", records="objects", show_secrets=ctx.show_secrets, limits=limits)
            ctx.shared[_SESSION] = session
        self._session = session
        self.stream = ctx.stream
        assert session.attach(protocol, ctx), f"the core has no {protocol} decoder"

    def feed(self, chunk: Chunk) -> list[Record]:
        return _records(self._session.decode(_restamped(chunk, self.stream)))

    def gap(self, gap: Gap) -> list[Record]:
        return _records(self._session.decode(_restamped(gap, self.stream)))

    def close(self) -> list[Record]:
        return _records(self._session.end_stream(self.stream, True)[1])


def _restamped(item: Chunk | Gap, stream: int) -> Chunk | Gap:
    """Tests build chunks with stream 0 for any decoder: the session routes by stream id."""
    if item.stream == stream:
        return item
    if isinstance(item, Chunk):
        return Chunk(stream, item.direction, item.offset, item.data, item.frame, item.ts)
    return Gap(stream, item.direction, item.offset, item.length, item.frame, item.ts)


def _records(items: list[list[Record]]) -> list[Record]:
    """The records of a step's items (the session gives them as one list per take)."""
    return [r for records in items for r in records]
