"""The Hercules stream decoder: Gate HTTP traffic, or bare events/batches in either direction."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from wirelog.decoders.base import Limits, StreamContext
from wirelog.decoders.buffer import StreamBuffer
from wirelog.decoders.hercules.codec import EventParser
from wirelog.decoders.hercules.detect import looks_like_http
from wirelog.decoders.hercules.gateway import Gateway
from wirelog.decoders.hercules.records import Reporter
from wirelog.decoders.hercules.stream import RawEvents
from wirelog.model import Chunk, Direction, Gap, Record

_DECIDE = 8  # bytes that tell an HTTP start line from bare events


class HerculesDecoder:
    """Chooses per direction between Gate HTTP (both directions then) and bare events."""

    def __init__(self, ctx: StreamContext) -> None:
        self.ctx = ctx
        self.parser = EventParser(ctx.limits.max_frame)
        self.reporter = Reporter(ctx.shared)
        self.bufs = {Direction.C2S: StreamBuffer(), Direction.S2C: StreamBuffer()}
        self.gateway: Gateway | None = None
        self.raw: dict[Direction, RawEvents] = {}

    def feed(self, chunk: Chunk) -> list[Record]:
        self.bufs[chunk.direction].append(chunk)
        return self._run(chunk.direction, False)

    def gap(self, gap: Gap) -> list[Record]:
        buf = self.bufs[gap.direction]
        if gap.direction in self.raw:
            self.raw[gap.direction].gap(buf, gap.offset + gap.length)
            return []
        if self.gateway is not None:
            return self.gateway.gap(gap.direction, buf, gap)
        buf.reset(gap.offset + gap.length)
        return []

    def close(self) -> list[Record]:
        out = self._run(Direction.C2S, True) + self._run(Direction.S2C, True)
        if self.gateway is not None:
            out += self.gateway.close(self.bufs)
        return out

    def _run(self, d: Direction, final: bool) -> list[Record]:
        buf = self.bufs[d]
        if d in self.raw:
            return self.raw[d].feed(buf, final)
        if self.gateway is None and len(buf) < _DECIDE and not final:
            return []
        if self.gateway is None and not looks_like_http(buf.peek(_DECIDE)):
            if not len(buf):
                return []
            self.raw[d] = RawEvents(d, self.parser, self.reporter)
            return self.raw[d].feed(buf, final)
        if self.gateway is None:
            self.gateway = Gateway(self.ctx, self.parser, self.reporter)
        return self.gateway.feed(d, buf)


def decode_event_stream(data: bytes | Iterable[bytes], limits: Limits | None = None) -> Iterator[Record]:
    """Records of a raw Hercules file: concatenated events, or count-prefixed batches.

    `data` is the whole file or an iterable of its chunks. Yields `event` (and `batch`) messages and
    findings, with offsets into the file; the direction is c2s, like a raw dump's.
    """
    ctx = StreamContext(0, "", "", 0, 0, limits=limits or Limits())
    raw = RawEvents(Direction.C2S, EventParser(ctx.limits.max_frame), Reporter(ctx.shared))
    buf = StreamBuffer()
    offset = 0
    chunks = [data] if isinstance(data, bytes | bytearray | memoryview) else data
    for piece in chunks:
        if piece:
            buf.append(Chunk(0, Direction.C2S, offset, bytes(piece)))
            offset += len(piece)
            yield from raw.feed(buf)
    yield from raw.feed(buf, True)
