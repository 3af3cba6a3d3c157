"""Delivery truth for one connection: which events each ACKN acknowledged, and which never were.

ACKN semantics (reference/courier.md §3): `sequence` = events of that payload accepted so far; an
unknown nonce is ignored, a lower or equal sequence has no effect, a sequence at or above the count
completes the payload. Both servers acknowledge in payload order and repeat the same sequence every
5 s while their pipeline is blocked. Events are held back until acknowledged (or the connection
closes) so each can be emitted once with its final `acked`; `max_pending` bounds what is held.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from wirelog.decoders.courier.findings import PROTOCOL, finding
from wirelog.model import Direction, Message, Record

At = tuple[int | None, int | None, int | None]  # (offset, frame, ts)


@dataclass(slots=True)
class Payload:
    """One JDAT/EVNT sent on this connection."""

    nonce: str
    kind: str
    at: At
    count: int | None = None  # None while an EVNT is still streaming
    acked: int = 0
    seen_seq: int = 0  # highest ACKN sequence seen, possibly before `count` is known
    seen_at: At = (None, None, None)
    ack_frames: list[int | None] = field(default_factory=list)
    events: list[Message] = field(default_factory=list)
    released: int = 0  # events[:released] have been emitted
    resend: bool = False
    serial: int = 0  # position among this connection's payloads
    over_count: bool = False
    closed: bool = False

    @property
    def complete(self) -> bool:
        return self.count is not None and self.acked >= self.count


@dataclass(slots=True)
class AckRun:
    """Consecutive ACKNs repeating one sequence for one nonce (back-pressure or partial progress)."""

    seq: int = -1
    count: int = 0
    first: At = (None, None, None)
    last: At = (None, None, None)
    unknown_reported: bool = False

    def push(self, seq: int, at: At, nonce: str) -> list[Record]:
        if seq == self.seq:
            self.count += 1
            self.last = at
            return []
        out = self.flush(nonce)
        self.seq, self.count, self.first, self.last = seq, 1, at, at
        return out

    def flush(self, nonce: str) -> list[Record]:
        count, self.count = self.count, 0
        if count < 2:
            return []
        t0, t1 = self.first[2], self.last[2]
        interval = round((t1 - t0) / (count - 1) / 1e9, 3) if t0 is not None and t1 is not None else None
        every = f", every {interval} s" if interval is not None else ""
        why = (
            "back-pressure: the server's pipeline is blocked"
            if self.seq == 0
            else "partial progress repeated"
        )
        msg = f"ACKN sequence {self.seq} for nonce {nonce} sent {count} times{every} ({why})"
        fields = {"nonce": nonce, "sequence": self.seq, "count": count, "interval_s": interval}
        fields |= {"first_frame": self.first[1], "last_frame": self.last[1]}
        return [finding("courier.ack-repeated", msg, Direction.S2C, self.first, **fields)]


class Delivery:
    """Payloads and acknowledgements of one connection, in wire order."""

    def __init__(self, max_pending: int) -> None:
        self.payloads: dict[str, Payload] = {}
        self._order: dict[int, Payload] = {}  # incomplete payloads in send order, by serial
        self._runs: dict[str, AckRun] = {}
        self._held = 0
        self._max_pending = max_pending
        self._overflowed = False
        self.history: list[Payload] = []  # every payload ever sent here, for the summary

    def pending(self) -> bool:
        """Payloads sent and not fully acknowledged (Go receivers drop a PING then)."""
        return bool(self._order)

    def open(self, nonce: str, kind: str, at: At) -> list[Record]:
        """A payload's nonce was read; an earlier one with the same nonce here is superseded (resend)."""
        out: list[Record] = []
        old = self.payloads.get(nonce)
        if old is not None:
            out += self._finish(old, rest=False, superseded=True)
        p = Payload(nonce, kind, at, resend=old is not None, serial=len(self.history))
        self.payloads[nonce] = p
        self._order[p.serial] = p
        self.history.append(p)
        run = self._runs.get(nonce)
        if run is not None:
            out += run.flush(nonce)
            run.seq = -1
        return out

    def fill(self, p: Payload, events: list[Message]) -> list[Record]:
        """The payload's events are known: hold them and apply any ACKN that came first (EVNT)."""
        p.count = len(events)
        p.events = events
        self._held += len(events)
        out = self._apply(p, p.seen_at) if p.seen_seq else []
        if p.complete:
            out += self._finish(p, rest=True)
        return out + self._bound()

    def ack(self, nonce: str, seq: int, at: At) -> list[Record]:
        run = self._runs.setdefault(nonce, AckRun())
        out = run.push(seq, at, nonce)
        p = self.payloads.get(nonce)
        if p is None:
            if not run.unknown_reported:
                run.unknown_reported = True
                msg = (
                    f"ACKN for nonce {nonce} matches no payload seen on this connection "
                    "(a late duplicate, or a payload sent before the capture began)"
                )
                out.append(
                    finding("courier.unknown-nonce", msg, Direction.S2C, at, nonce=nonce, sequence=seq)
                )
            return out
        if seq < p.seen_seq:
            msg = f"ACKN sequence for nonce {nonce} went back from {p.seen_seq} to {seq}"
            out.append(
                finding(
                    "courier.ack-regressed",
                    msg,
                    Direction.S2C,
                    at,
                    nonce=nonce,
                    sequence=seq,
                    previous=p.seen_seq,
                )
            )
            return out
        if seq == p.seen_seq or p.closed:
            return out
        first = next(iter(self._order.values()), p)
        if first is not p and p.serial in self._order:
            msg = (
                f"ACKN advances payload {nonce} while the earlier payload {first.nonce} is not fully "
                "acknowledged (both servers acknowledge in order)"
            )
            out.append(
                finding(
                    "courier.ack-out-of-order",
                    msg,
                    Direction.S2C,
                    at,
                    nonce=nonce,
                    earlier_nonce=first.nonce,
                    earlier_frame=first.at[1],
                )
            )
        p.seen_seq, p.seen_at = seq, at
        if p.count is not None:
            out += self._apply(p, at)
            if p.complete:
                out += self._finish(p, rest=True)
        return out

    def _apply(self, p: Payload, at: At) -> list[Record]:
        assert p.count is not None
        out: list[Record] = []
        target = p.seen_seq
        if target > p.count and not p.over_count:
            p.over_count = True
            msg = f"ACKN sequence {target} for {p.nonce} exceeds its {p.count} events: treated as complete"
            out.append(
                finding(
                    "courier.ack-over-count",
                    msg,
                    Direction.S2C,
                    at,
                    nonce=p.nonce,
                    sequence=target,
                    events=p.count,
                )
            )
        target = min(target, p.count)
        if target > p.acked:
            p.acked = target
            p.ack_frames.append(at[1])
            out += self._release(p, target, True, {"ack_frame": at[1]})
        return out

    def _release(self, p: Payload, upto: int, acked: bool | None, extra: dict[str, object]) -> list[Record]:
        start = p.released
        if upto <= start:
            return []
        batch = p.events[start:upto]
        for ev in batch:
            ev.acked = acked
            ev.fields.update(extra)
        p.released = upto
        self._held -= len(batch)
        return list(batch)

    def _finish(self, p: Payload, rest: bool | None, superseded: bool = False) -> list[Record]:
        """Emit the events of `p` still held (with acked=`rest`) and its delivery record."""
        if p.closed:
            return []
        p.closed = True
        self._order.pop(p.serial, None)
        count = p.count if p.count is not None else len(p.events)
        extra: dict[str, object] = {"resent": True} if superseded else {}
        out = self._release(p, len(p.events), rest, extra)
        p.events = []  # emitted: keep only the counts
        offset, frame, ts = p.at
        fields = {
            "nonce": p.nonce,
            "payload": p.kind,
            "events": count,
            "acked_events": p.acked,
            "unacked_events": count - p.acked,
            "ack_frames": p.ack_frames,
            "complete": p.complete,
            "resend": p.resend,
            "superseded": superseded,
        }
        out.append(Message(PROTOCOL, "delivery", Direction.C2S, offset, 0, frame, ts, None, fields))
        return out

    def _bound(self) -> list[Record]:
        """Emit the oldest held events with acked=None when more than `max_pending` wait."""
        out: list[Record] = []
        for p in list(self._order.values()):
            if self._held <= self._max_pending:
                break
            upto = min(len(p.events), p.released + self._held - self._max_pending)
            out += self._release(p, upto, None, {})
            if not self._overflowed:
                self._overflowed = True
                msg = f"over {self._max_pending} events wait for an ACKN; the oldest go out with acked=null"
                out.append(
                    finding("courier.pending-overflow", msg, Direction.C2S, p.at, limit=self._max_pending)
                )
        return out

    def close(self, acks_lost: bool) -> list[Record]:
        """End of connection: unacknowledged events go out with acked=False (None if ACKNs may be lost)."""
        out: list[Record] = []
        for nonce, run in self._runs.items():
            out += run.flush(nonce)
        for p in list(self._order.values()):
            count = p.count if p.count is not None else len(p.events)
            missing = count - p.acked
            if missing > 0:
                cause = " (the capture lost server bytes, so an ACKN may be missing)" if acks_lost else ""
                msg = f"payload {p.nonce}: {missing} of {count} events never acknowledged by the close{cause}"
                out.append(
                    finding(
                        "courier.unacked-at-close",
                        msg,
                        Direction.C2S,
                        p.at,
                        nonce=p.nonce,
                        events=count,
                        unacked=missing,
                    )
                )
            out += self._finish(p, rest=None if acks_lost else False)
        return out
