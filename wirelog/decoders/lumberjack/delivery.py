"""Windows, ACKs and the delivery truth of every event on one connection.

The first question about a log pipeline capture is "which events never made it", so event records
are held back until their fate is known (acknowledged, or the stream ended without an ACK) and are
emitted once, with their final `acked` state and the ACK that covered them. Holding is bounded by
`limits.max_pending_events`: beyond it the oldest window goes out early with `acked` left null.

ACKs are paired with windows in FIFO order (Beats pipeline several windows, each starting at seq
1, so values cannot be matched to windows). An ACK's value is a count of events on go-lumber
servers and the highest seq on Logstash; when the window's seqs are not 1..n the two readings
differ, which tells the server kind, and exposes the pylogbeat-vs-go-lumber stall.
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass, field

from wirelog.decoders.base import StreamContext
from wirelog.decoders.lumberjack.report import PROTOCOL, Pos, finding
from wirelog.decoders.lumberjack.resend import FirstCopy, ResendRegistry
from wirelog.model import Finding, Message, Record, Severity

GO_LUMBER_MAX_WINDOW = 10_000
COUNT, HIGHEST = "count", "highest-seq"
SERVER_TEXT = {
    COUNT: "the server ACKs the number of events in the window (go-lumber / Filebeat lumberjack input)",
    HIGHEST: "the server ACKs the highest sequence number of the window (Logstash beats input)",
}


@dataclass(slots=True)
class Window:
    """One `W` batch (or an implicit batch of events that arrived without a `W`)."""

    index: int
    count: int | None
    record: Message
    pos: Pos
    items: list[Message] = field(default_factory=list)  # compressed frames and events, in order
    events: list[Message] = field(default_factory=list)  # held event records (emptied on emission)
    seqs: array = field(default_factory=lambda: array("I"))  # every event's seq: the window's size
    acked_n: int = 0
    ack_value: int | None = None
    ack_frame: int | None = None
    c_frames: int = 0
    extra_reported: object = None  # the C frame (or the window itself) whose surplus was reported
    closed: bool = False
    truncated: bool = False
    gap: bool = False
    emitted: bool = False
    resends: int = 0

    @property
    def full(self) -> bool:
        return self.count is not None and len(self.seqs) >= self.count

    @property
    def resolved(self) -> bool:
        return self.acked_n == len(self.seqs) and (self.closed or self.full)


class Delivery:
    """Window/event/ACK bookkeeping for one connection; methods return (or append) records to emit."""

    def __init__(self, ctx: StreamContext) -> None:
        self._max_pending = ctx.limits.max_pending_events
        self._current: Window | None = None
        self._outstanding: deque[Window] = deque()  # unresolved windows, oldest first
        self._pending = 0  # held event records
        self._overflowed = False
        self.server_kind: str | None = None
        self._resends = ResendRegistry(ctx)
        self._last_ack_ts: int | None = None
        self._keepalives: list[float | None] = []
        self._first_keepalive: Pos | None = None
        self._s2c_gap = False
        self._c2s_gap = False
        self.stats = {"windows": 0, "events": 0, "acked_events": 0}  # for the connection summary

    # client side -------------------------------------------------------------------------------

    def open_window(self, count: int, record: Message, pos: Pos, inside_c: bool) -> list[Record]:
        out: list[Record] = []
        if inside_c:
            out.append(
                finding(
                    "window-in-compressed",
                    Severity.ERROR,
                    "W frame inside a compressed frame (go-lumber rejects it)",
                    pos,
                    count=count,
                )
            )
        out += self._close_current(pos)
        if count == 0:
            out.append(
                finding(
                    "window-empty",
                    Severity.WARNING,
                    "W 0: an empty window (Logstash >= 6.7 answers ACK 0, go-lumber never answers)",
                    pos,
                )
            )
        elif count > GO_LUMBER_MAX_WINDOW:
            out.append(
                finding(
                    "window-too-large",
                    Severity.WARNING,
                    f"window of {count} events is above go-lumber's MaxWindowSize "
                    f"{GO_LUMBER_MAX_WINDOW} (ErrWindowTooLarge)",
                    pos,
                    count=count,
                )
            )
        out += self._new_window(count, record, pos)
        return out

    def begin_compressed(self, record: Message, pos: Pos) -> list[Record]:
        """Attach a C frame's record to its window; flag a window spread over several C frames."""
        w = self._current
        if w is None or w.emitted:
            return [record]
        out: list[Record] = []
        if w.c_frames and not w.full:
            out.append(
                finding(
                    "window-split-compressed",
                    Severity.WARNING,
                    f"window {w.index} continues in another C frame (go-lumber fails: EOF inside the "
                    "first inflated stream; Logstash accepts it)",
                    pos,
                    window=w.index,
                    received=len(w.seqs),
                    count=w.count,
                )
            )
        w.c_frames += 1
        record.fields["window"] = w.index
        w.items.append(record)
        return out

    def add_event(
        self, record: Message, seq: int, payload: bytes, pos: Pos, c_frame: object, out: list[Record]
    ) -> None:
        """Add an event, appending records to `out` (the per-event path, so no list of its own).

        `c_frame` identifies the enclosing C frame (None outside compression).
        """
        w = self._current
        if w is None or w.count is None or len(w.seqs) >= w.count or w.emitted:
            w = self._place(record, seq, pos, c_frame, out)  # the uncommon cases; else there is room in w
        record.fields["window"] = w.index
        first = self._resends.first_copy(payload, pos.frame, seq)
        if first is not None:
            self._resent(w, record, first, pos, out)
        w.seqs.append(seq)
        self.stats["events"] += 1
        if w.emitted:
            out.append(record)
            return
        w.events.append(record)
        w.items.append(record)
        self._pending += 1
        if self._pending > self._max_pending:
            out += self._overflow(pos)

    def _place(self, event: Message, seq: int, pos: Pos, c_frame: object, out: list[Record]) -> Window:
        """The window for an event when the current one has no room left (or there is none)."""
        w = self._current
        if w is None or w.resolved:
            text = (
                "event before any W frame (go-lumber: 'Expected window frame')"
                if w is None
                else f"event after window {w.index} was complete, without a new W"
            )
            code = "event-without-window" if w is None else "window-exceeded"
            out.append(finding(code, Severity.ERROR, text, pos, seq=seq))
            implicit = Message(
                PROTOCOL, "window", pos.direction, pos.offset, 0, pos.frame, pos.ts, event.version
            )
            out += self._new_window(None, implicit, pos)
            return self._current  # type: ignore[return-value]
        if not w.full:
            return w
        if c_frame is None and w.extra_reported is None:
            w.extra_reported = w  # once per window: a v1 sliding-window client exceeds it forever
            out.append(
                finding(
                    "window-exceeded",
                    Severity.ERROR,
                    f"more events than window {w.index} announced ({w.count}); go-lumber drops "
                    "the connection ('Expected window frame')",
                    pos,
                    window=w.index,
                    count=w.count,
                    seq=seq,
                )
            )
        elif c_frame is not None and w.extra_reported is not c_frame:
            w.extra_reported = c_frame
            out.append(
                finding(
                    "compressed-extra-frames",
                    Severity.WARNING,
                    f"frames left in the C frame after window {w.index} is full ({w.count} events); "
                    "go-lumber silently discards them, Logstash keeps them",
                    pos,
                    window=w.index,
                    count=w.count,
                )
            )
        return w

    def gap(self, client_side: bool) -> None:
        if client_side:
            self._c2s_gap = True
            if self._current is not None:
                self._current.gap = True
        else:
            self._s2c_gap = True

    # server side -------------------------------------------------------------------------------

    def ack(self, value: int, record: Message, pos: Pos) -> list[Record]:
        """Apply one ACK; returns released windows/events, findings, then the ACK record."""
        fields = record.fields
        fields.update(keepalive=value == 0, window=None, acked_events=0, interpretation=None)
        out: list[Record] = []
        if value == 0:
            self._keepalive(fields, pos)
        else:
            target = next((w for w in self._outstanding if w.acked_n < len(w.seqs)), None)
            if target is None:
                lost = " (its window may be in a client→server capture gap)" if self._c2s_gap else ""
                out.append(
                    finding(
                        "ack-unexpected",
                        Severity.INFO if self._c2s_gap else Severity.WARNING,
                        f"ACK {value} while no event is waiting for an acknowledgement{lost}",
                        pos,
                        value=value,
                    )
                )
            else:
                out += self._apply(target, value, fields, pos)
        if pos.ts is not None:
            self._last_ack_ts = pos.ts
        out.append(record)
        return out

    def _apply(self, w: Window, value: int, fields: dict[str, object], pos: Pos) -> list[Record]:
        out: list[Record] = []
        done, n = w.acked_n, len(w.seqs)
        by_count = value if done < value <= n else None
        by_seq = next((i + 1 for i in range(n - 1, done - 1, -1) if w.seqs[i] == value), None)
        fields["window"] = w.index
        if by_count is None and by_seq is None:
            stale = value <= done or value in w.seqs[:done]
            code, sev = ("ack-stale", Severity.WARNING) if stale else ("ack-too-high", Severity.ERROR)
            text = (
                f"ACK {value} repeats an acknowledgement already received for window {w.index}"
                if stale
                else f"ACK {value} is above what window {w.index} can acknowledge ({n} events, "
                f"seqs {w.seqs[done]}..{w.seqs[-1]}); go-lumber clients fail: 'invalid sequence number "
                "received'"
            )
            return [finding(code, sev, text, pos, value=value, window=w.index, events=n)]
        interp, new = self._interpret(by_count, by_seq, n)
        fields["interpretation"] = interp
        if interp in (COUNT, HIGHEST) and self.server_kind is None:
            self.server_kind = interp
            out.append(finding("server-kind", Severity.INFO, SERVER_TEXT[interp], pos, server_kind=interp))
        last_seq = w.seqs[new - 1]
        if interp == COUNT and last_seq != value:
            out.append(
                finding(
                    "ack-stall",
                    Severity.WARNING,
                    f"ACK {value} counts events but the client numbers them continuously (last seq "
                    f"{last_seq}): a sender waiting for the highest seq (pylogbeat) hangs here",
                    pos,
                    value=value,
                    expected_seq=last_seq,
                    window=w.index,
                )
            )
        if new < n or (w.count is not None and n < w.count and not w.closed):
            out.append(
                finding(
                    "ack-partial",
                    Severity.INFO,
                    f"partial ACK {value}: {new} of {w.count if w.count is not None else n} events of "
                    f"window {w.index} acknowledged",
                    pos,
                    value=value,
                    window=w.index,
                    acked=new,
                )
            )
        fields["acked_events"] = new - done
        self.stats["acked_events"] += new - done
        if not w.emitted:
            frame, offset = pos.frame, pos.offset
            for ev in w.events[done:new]:
                ev.acked = True
                ev.fields["ack_frame"] = frame
                ev.fields["ack_offset"] = offset
        w.acked_n, w.ack_value, w.ack_frame = new, value, pos.frame
        if w.resolved:
            out[:0] = self._resolve(w)
        return out

    def _interpret(self, by_count: int | None, by_seq: int | None, n: int) -> tuple[str, int]:
        if by_seq is None:
            return COUNT, by_count  # type: ignore[return-value]
        if by_count is None:
            return HIGHEST, by_seq
        if by_count == by_seq:
            return f"{COUNT}={HIGHEST}", by_count
        if self.server_kind == COUNT or (self.server_kind is None and by_count == n):
            return COUNT, by_count
        return HIGHEST, by_seq

    def _keepalive(self, fields: dict[str, object], pos: Pos) -> None:
        refs = [t for t in (self._last_ack_ts,) if t is not None]
        if self._outstanding and self._outstanding[0].pos.ts is not None:
            refs.append(self._outstanding[0].pos.ts)  # type: ignore[arg-type]
        interval = (pos.ts - max(refs)) / 1e6 if refs and pos.ts is not None else None
        fields["interval_ms"] = interval
        if self._first_keepalive is None:
            self._first_keepalive = pos
        if self._outstanding:
            self._keepalives.append(interval)

    # emission ----------------------------------------------------------------------------------

    @property
    def acks_lost(self) -> bool:
        return self._s2c_gap

    def close(self) -> list[Record]:
        """Stream end: every held event goes out; unacknowledged windows become one finding.

        Events never acknowledged are `acked: false`, or `acked: null` when server→client bytes are
        missing from the capture (their ACK may be in the gap).
        """
        out: list[Record] = []
        unacked = [w for w in self._outstanding if w.acked_n < len(w.seqs)]
        if unacked:
            total = sum(len(w.seqs) - w.acked_n for w in unacked)
            first = unacked[0]
            note = "; server→client bytes are missing, ACKs may be in the gap" if self._s2c_gap else ""
            out.append(
                finding(
                    "unacked",
                    Severity.WARNING,
                    f"{total} events unacknowledged in {len(unacked)} window(s) at stream end{note}",
                    first.pos,
                    events=total,
                    windows=[w.index for w in unacked],
                    s2c_gap=self._s2c_gap,
                )
            )
        if self._keepalives:
            out.append(self._keepalive_summary())
        for w in list(self._outstanding):
            w.closed = True
            self._outstanding.remove(w)
            if not w.emitted:
                out += self._emit(w, final=not self._s2c_gap)
        return out

    def _keepalive_summary(self) -> Finding:
        known = [i for i in self._keepalives if i is not None]
        span = f", interval {min(known):.0f}..{max(known):.0f} ms" if known else ""
        return finding(
            "keepalive",
            Severity.INFO,
            f"{len(self._keepalives)} keep-alive ACK 0 while windows were outstanding{span} "
            "(go-lumber sends one every 3 s, Logstash every 5 s)",
            self._first_keepalive,  # type: ignore[arg-type]
            count=len(self._keepalives),
            min_ms=min(known) if known else None,
            max_ms=max(known) if known else None,
        )

    def _new_window(self, count: int | None, record: Message, pos: Pos) -> list[Record]:
        self.stats["windows"] += 1
        w = Window(self.stats["windows"], count, record, pos)
        self._current = w
        self._outstanding.append(w)
        return self._resolve(w) if w.resolved else []

    def _close_current(self, pos: Pos) -> list[Record]:
        w = self._current
        if w is None or w.closed:
            return []
        w.closed = True
        out: list[Record] = []
        if w.count is not None and len(w.seqs) < w.count:
            w.truncated = True
            why = " (bytes of this window are missing from the capture)" if w.gap else ""
            out.append(
                finding(
                    "window-truncated",
                    Severity.INFO if w.gap else Severity.WARNING,
                    f"new W before window {w.index} filled: {len(w.seqs)} of {w.count} events "
                    f"(Logstash flushes the partial batch){why}",
                    pos,
                    window=w.index,
                    received=len(w.seqs),
                    count=w.count,
                )
            )
        if w.resolved:
            out += self._resolve(w)
        return out

    def _resolve(self, w: Window) -> list[Record]:
        if w in self._outstanding:
            self._outstanding.remove(w)
        return [] if w.emitted else self._emit(w, final=True)

    def _emit(self, w: Window, final: bool) -> list[Record]:
        """Window record first, then its compressed frames and events.

        `final`: the window's fate is known (resolved or stream end), so events without an ACK
        are `acked: false`; otherwise (early release) they are `acked: null`.
        """
        w.emitted = True
        n = len(w.seqs)
        w.record.acked = (w.acked_n == n) if n else None
        w.record.fields.update(
            window=w.index,
            count=w.count,
            received=n,
            acked_events=w.acked_n,
            ack_value=w.ack_value,
            ack_frame=w.ack_frame,
            seq_first=w.seqs[0] if n else None,
            seq_last=w.seqs[-1] if n else None,
            compressed_frames=w.c_frames,
            truncated=w.truncated,
            implicit=w.count is None,
            resends=w.resends,
        )
        for ev in w.events[w.acked_n :]:
            ev.acked = False if final else None
        w.events = []
        self._pending -= [it.kind for it in w.items].count("event")
        out: list[Record] = [w.record, *w.items]
        w.items = []
        return out

    def _overflow(self, pos: Pos) -> list[Record]:
        out: list[Record] = []
        if not self._overflowed:
            self._overflowed = True
            out.append(
                finding(
                    "pending-overflow",
                    Severity.WARNING,
                    f"more than {self._max_pending} events wait for an ACK: the oldest windows are "
                    "output before their ACK, with acked = null",
                    pos,
                    limit=self._max_pending,
                )
            )
        for w in list(self._outstanding):
            if self._pending <= self._max_pending:
                break
            if not w.emitted:
                out += self._emit(w, final=False)
        return out

    def _resent(self, w: Window, record: Message, first: FirstCopy, pos: Pos, out: list) -> None:
        record.fields["resend_of"] = first._asdict()
        w.resends += 1
        if w.resends == 1:
            out.append(
                finding(
                    "resend",
                    Severity.INFO,
                    f"window {w.index} resends events first sent on stream {first.stream} (same content)",
                    pos,
                    window=w.index,
                    first_stream=first.stream,
                    first_frame=first.frame,
                )
            )
