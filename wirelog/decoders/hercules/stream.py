"""One direction of bare Hercules events: a file of concatenated events (a Kafka dump), or of
count-prefixed batches (Gate bodies saved back to back).

Events have no length prefix, so an incomplete event is re-parsed when more bytes arrive; to keep
that linear, a retry waits until the buffer holds the bytes the last attempt proved missing and has
grown by half. After a corrupt event nothing can be located, so the parser scans for the next
plausible event start (version 1, timestamp in 2000..2100, and the event parses) and says how many
bytes it skipped.
"""

from __future__ import annotations

import struct

from wirelog.decoders.buffer import StreamBuffer
from wirelog.decoders.hercules.codec import Corrupt, EventParser, Problem, Truncated
from wirelog.decoders.hercules.records import PROTOCOL, Reporter, event_message
from wirelog.decoders.hercules.types import MIN_EVENT
from wirelog.model import Direction, Finding, Message, Record, Severity

_I32 = struct.Struct(">i")


class RawEvents:
    """Decoder state of one direction holding bare events or batches."""

    def __init__(self, direction: Direction, parser: EventParser, reporter: Reporter) -> None:
        self.direction = direction
        self.parser = parser
        self.reporter = reporter
        self.batches: bool | None = None  # decided from the first byte: 0x00 starts a count
        self.left = 0  # events still due in the current batch
        self.index = 0  # index of the next event in its batch
        self.batch_at: int | None = None  # offset of the current batch's count
        self.batch_origin: tuple[int | None, int | None] = (None, None)
        self.wait_end = 0  # do not re-parse before the buffer reaches this stream offset
        self.lost_at: int | None = None  # set while resynchronising: where the bad bytes began
        self.lost_origin: tuple[int | None, int | None] = (None, None)
        self.cut_at: int | None = None  # where the data ended inside an event (already reported)

    def gap(self, buf: StreamBuffer, resume: int) -> None:
        """Bytes are missing before `resume`: event boundaries are lost until resync."""
        if self.lost_at is None:
            self._lose(buf.offset, buf)
        buf.reset(resume)
        self.left = 0
        self.wait_end = 0

    def feed(self, buf: StreamBuffer, final: bool = False) -> list[Record]:
        if not final and (not len(buf) or buf.end < self.wait_end):
            return []
        data = buf.peek(len(buf))
        base = buf.offset
        out: list[Record] = []
        pos = 0
        while pos < len(data):
            if self.batches is None:
                self.batches = data[0] == 0
            if self.lost_at is not None:
                pos = self._resync(data, base, pos, final, out)
                if self.lost_at is not None:
                    break
            if self.batches and self.left == 0 and self.lost_at is None:
                if len(data) - pos < 4:
                    break
                pos = self._count(data, base, pos, buf, out)
                continue
            try:
                dec, problems = self.parser.parse(data, pos)
            except Truncated as exc:
                if not final:
                    grown = pos + (len(data) - pos) * 3 // 2 + 1
                    self.wait_end = base + max(exc.needed, grown)
                    break
                out.append(self._cut(base + pos, buf, len(data) - pos, exc.path))
                self._lose(base + pos, buf)
                self.cut_at = base + pos
                pos += 1
                continue
            except Corrupt as exc:
                out.append(self._corrupt(exc, base, pos, buf))
                self._lose(base + pos, buf)
                self.left = 0
                pos += 1
                continue
            extra = {"batch_index": self.index, "batch_offset": self.batch_at} if self.batches else {}
            out.append(event_message(dec, self.direction, base + pos, buf.origin(base + pos), extra))
            for p in problems:
                self._report(out, p, base, buf)
            pos += dec.length
            if self.batches:
                self.left -= 1
                self.index += 1
        if final:
            out += self._end(base + pos)
        buf.skip(pos)
        return out

    def _lose(self, offset: int, buf: StreamBuffer) -> None:
        self.lost_at = offset
        self.lost_origin = buf.origin(offset)

    def _report(self, out: list[Record], p: Problem, base: int, buf: StreamBuffer) -> None:
        f = self.reporter.finding(p, self.direction, base + p.offset, buf.origin(base + p.offset))
        if f is not None:
            out.append(f)

    def _finding(
        self,
        code: str,
        severity: Severity,
        text: str,
        offset: int,
        origin: tuple[int | None, int | None],
        **fields,
    ) -> Finding:
        frame, ts = origin
        return Finding(code, severity, text, PROTOCOL, self.direction, offset, frame, ts, fields)

    def _count(self, data: bytes, base: int, pos: int, buf: StreamBuffer, out: list[Record]) -> int:
        (count,) = _I32.unpack_from(data, pos)
        at = base + pos
        frame, ts = buf.origin(at)
        out.append(Message(PROTOCOL, "batch", self.direction, at, 4, frame, ts, None, {"count": count}))
        if count < 0:
            text = f"negative event count {count}"
            out.append(
                self._finding("hercules.count-mismatch", Severity.ERROR, text, at, (frame, ts), count=count)
            )
            self._lose(at, buf)
            return pos + 1
        self.left, self.index, self.batch_at, self.batch_origin = count, 0, at, (frame, ts)
        return pos + 4

    def _cut(self, offset: int, buf: StreamBuffer, size: int, path: str) -> Finding:
        return self._finding(
            "hercules.truncated",
            Severity.ERROR,
            f"the data ends inside an event ({size} bytes from offset {offset}, in {path or 'the header'})",
            offset,
            buf.origin(offset),
            path=path,
            bytes=size,
        )

    def _corrupt(self, exc: Corrupt, base: int, pos: int, buf: StreamBuffer) -> Finding:
        text = f"event at offset {base + pos}: {exc.message}"
        if self.batches and self.left > 1:
            text += f"; the remaining {self.left - 1} event(s) of the batch cannot be located"
        return self._finding(
            exc.code,
            Severity.ERROR,
            text,
            base + exc.offset,
            buf.origin(base + exc.offset),
            path=exc.path,
            event_offset=base + pos,
        )

    def _resync(self, data: bytes, base: int, pos: int, final: bool, out: list[Record]) -> int:
        """Position of the next event that parses (clearing `lost_at`), or where to wait."""
        q = pos
        while True:
            q = data.find(b"\x01", q)
            if q < 0 or len(data) - q < MIN_EVENT:
                return len(data) if final or q < 0 else q
            if self.parser.plausible_start(data, q):
                try:
                    self.parser.parse(data, q)
                except Truncated:
                    if not final:
                        return q
                except Corrupt:
                    pass
                else:
                    break
            q += 1
        lost = self.lost_at
        self.lost_at = None
        self.batches = False
        if base + q > lost:
            out.append(
                self._finding(
                    "hercules.resync",
                    Severity.WARNING,
                    f"skipped {base + q - lost} bytes after offset {lost} to the next event that parses",
                    lost,
                    self.lost_origin,
                    skipped=base + q - lost,
                    resumed_at=base + q,
                )
            )
        return q

    def _end(self, offset: int) -> list[Record]:
        out: list[Record] = []
        if self.lost_at is not None and offset > self.lost_at and self.lost_at != self.cut_at:
            out.append(
                self._finding(
                    "hercules.resync",
                    Severity.WARNING,
                    f"skipped {offset - self.lost_at} bytes after offset {self.lost_at}: no further event found",
                    self.lost_at,
                    self.lost_origin,
                    skipped=offset - self.lost_at,
                )
            )
            self.lost_at = None
        if self.batches and self.left > 0:
            out.append(
                self._finding(
                    "hercules.count-mismatch",
                    Severity.ERROR,
                    f"batch count says {self.index + self.left} events but the data holds {self.index}",
                    self.batch_at,
                    self.batch_origin,
                    count=self.index + self.left,
                    decoded=self.index,
                )
            )
            self.left = 0
        return out
