"""Did every log event of a capture reach the server? The verdict across connections.

Per-connection ACK states overstate loss when a client resends: Beats and Log Courier resend an
unacknowledged batch on a new connection, so an event unacknowledged on the first connection may be
delivered by its copy — or delivered twice, when the server had processed the first copy but its ACK
was lost. Lumberjack events carry `resend_of` (the first copy) and Courier deliveries their payload
nonce; from those the trackers count distinct events and sort them into delivered, recovered by a
resend, delivered twice, never acknowledged, and unknown (no ACK in the capture because the connection
was still open when it ended, or server bytes are missing). Memory holds keys of unacknowledged events
and of resends only (capped), never the events.

The engine emits the verdict as findings at the end of each capture (`lumberjack.never-acknowledged`,
`lumberjack.delivered-twice`, and the same for `courier`), so `validate` can fail on data loss;
`inspect` shows the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from wirelog.model import Direction, Finding, Message, Severity, StreamInfo

LOST, TWICE = "never-acknowledged", "delivered-twice"
CODES = (LOST, TWICE)  # under each protocol's name: lumberjack.never-acknowledged, ...
KEYS_LIMIT = 1_000_000  # unacknowledged events and resends remembered; beyond, counts are lower bounds
FIRST = 5  # places of never-acknowledged events listed


def _closed(info: StreamInfo) -> bool:
    """The connection ended in the capture (FIN or RST), so a missing ACK will not come later."""
    return info.fin_c2s or info.fin_s2c or info.reset


def _order(key: tuple) -> tuple:
    return tuple((v is None, v if v is not None else 0) for v in key)


class LumberjackDelivery:
    """Event records (with `resend_of`) and stream ends in, the verdict out."""

    def __init__(self) -> None:
        self.events = 0
        self.resends = 0
        # first copies not acknowledged: (capture, stream, frame, seq) → False (refused or lost) or None
        self._open: dict[tuple, bool | None] = {}
        self._open_in: dict[tuple[str, int | None], list[tuple]] = {}  # the same keys by connection
        self._resent_ok: set[tuple] = set()  # first copies whose resend was acknowledged
        self._resent_unknown: set[tuple] = set()  # first copies with a resend whose ACK may still come
        self._resends_in: dict[tuple[str, int | None], list[tuple]] = {}  # unacked resends by connection
        self._resends_waiting = 0  # keys in _resends_in (they count toward KEYS_LIMIT too)
        self.capped = False

    def add_all(self, events: list[Message]) -> None:
        """Events of one decoder step: the acknowledged first copies (nearly all) are only counted."""
        self.events += len(events)
        for m in events:
            if m.acked is not True or "resend_of" in m.fields:
                self._track(m)

    def _track(self, m: Message) -> None:
        first = m.fields.get("resend_of")
        if first is not None:
            self.resends += 1
            key = (m.capture, first["stream"], first["frame"], first["seq"])
            if len(self._resent_ok) + len(self._resent_unknown) + self._resends_waiting >= KEYS_LIMIT:
                self.capped = True
            elif m.acked:
                self._resent_ok.add(key)
            elif m.acked is None:
                self._resent_unknown.add(key)
            else:
                self._resends_in.setdefault((m.capture, m.stream), []).append(key)
                self._resends_waiting += 1
        elif not m.acked:
            if len(self._open) < KEYS_LIMIT:
                key = (m.capture, m.stream, m.frame, m.fields.get("seq"))
                self._open[key] = m.acked
                self._open_in.setdefault((m.capture, m.stream), []).append(key)
            else:
                self.capped = True

    def stream_ended(self, info: StreamInfo) -> None:
        """Events unacknowledged on a connection still open at the end of the capture: unknown."""
        keys = self._open_in.pop((info.capture, info.stream), ())
        resent = self._resends_in.pop((info.capture, info.stream), ())
        self._resends_waiting -= len(resent)
        if not _closed(info):
            for key in keys:
                self._open[key] = None
            self._resent_unknown.update(resent)

    def result(self) -> dict[str, Any]:
        ok, pending = self._resent_ok, self._resent_unknown
        lost = sorted(
            (k for k, a in self._open.items() if a is False and k not in ok and k not in pending), key=_order
        )
        unknown = sum(1 for k, a in self._open.items() if k not in ok and (a is None or k in pending))
        distinct = self.events - self.resends
        return {
            "events": self.events,
            "distinct_events": distinct,
            "resent": self.resends,
            "delivered": distinct - len(lost) - unknown,
            "recovered_by_resend": sum(1 for k in self._open if k in self._resent_ok),
            "delivered_twice": sum(1 for k in self._resent_ok if k not in self._open),
            "never_acknowledged": len(lost),
            "ack_unknown": unknown,
            "never_acknowledged_at": [
                {"capture": c, "stream": s, "frame": f, "seq": q} for c, s, f, q in lost[:FIRST]
            ],
            "lower_bounds": self.capped,
        }


@dataclass
class _Payload:
    events: int = 0
    best_acked: int = 0
    sendings: int = 0
    complete_sendings: int = 0
    open_sendings: list[tuple] = field(default_factory=list)  # (capture, stream, frame) not complete
    cut: bool = False  # a sending was cut by the end of the capture, not by its connection's end


class CourierDelivery:
    """Delivery records (one per payload sending, keyed by nonce) and stream ends in, the verdict out."""

    def __init__(self) -> None:
        self._payloads: dict[tuple[str, str], _Payload] = {}
        self._open_in: dict[tuple[str, int | None], list[_Payload]] = {}  # incomplete sendings by connection
        self.capped = False

    def add_all(self, deliveries: list[Message]) -> None:
        for m in deliveries:
            self._add(m)

    def _add(self, m: Message) -> None:
        f = m.fields
        key = (m.capture, str(f.get("nonce")))
        p = self._payloads.get(key)
        if p is None:
            if len(self._payloads) >= KEYS_LIMIT:
                self.capped = True
                return
            p = self._payloads[key] = _Payload()
        p.events = max(p.events, int(f.get("events") or 0))
        p.best_acked = max(p.best_acked, int(f.get("acked_events") or 0))
        p.sendings += 1
        if f.get("complete"):
            p.complete_sendings += 1
        else:
            p.open_sendings.append((m.capture, m.stream, m.frame))
            self._open_in.setdefault((m.capture, m.stream), []).append(p)

    def stream_ended(self, info: StreamInfo) -> None:
        payloads = self._open_in.pop((info.capture, info.stream), ())
        if not _closed(info):
            for p in payloads:
                p.cut = True

    def result(self) -> dict[str, Any]:
        ps = list(self._payloads.values())
        missing = [p for p in ps if p.best_acked < p.events]
        lost = [p for p in missing if not p.cut]
        never = sum(p.events - p.best_acked for p in lost)
        unknown = sum(p.events - p.best_acked for p in missing if p.cut)
        events = sum(p.events for p in ps)
        first = sorted((p.open_sendings[0] for p in lost), key=_order)[:FIRST]
        return {
            "payloads": len(ps),
            "distinct_events": events,
            "resent_payloads": sum(1 for p in ps if p.sendings > 1),
            "delivered": events - never - unknown,
            "payloads_recovered_by_resend": sum(
                1
                for p in ps
                if p.sendings > 1 and p.best_acked == p.events and p.complete_sendings < p.sendings
            ),
            "payloads_delivered_twice": sum(1 for p in ps if p.complete_sendings > 1),
            "never_acknowledged": never,
            "ack_unknown": unknown,
            "never_acknowledged_at": [{"capture": c, "stream": s, "frame": f} for c, s, f in first],
            "lower_bounds": self.capped,
        }


class DeliveryVerdict:
    """Both trackers behind one feed: messages and stream ends of any protocol go in."""

    KINDS: ClassVar[dict[str, str]] = {"lumberjack": "event", "courier": "delivery"}

    def __init__(self) -> None:
        self.trackers: dict[str, LumberjackDelivery | CourierDelivery] = {
            "lumberjack": LumberjackDelivery(),
            "courier": CourierDelivery(),
        }
        self._seen: set[str] = set()

    def add(self, records: list[Message | Finding], protocol: str) -> None:
        """Records of `protocol` (any; those without acknowledgements are ignored)."""
        kind = self.KINDS.get(protocol)
        if kind is None:
            return
        mine = [r for r in records if r.__class__ is Message and r.kind == kind]
        if mine:
            self._seen.add(protocol)
            self.trackers[protocol].add_all(mine)

    def stream_ended(self, info: StreamInfo) -> None:
        for name in self._seen:
            self.trackers[name].stream_ended(info)

    def results(self) -> dict[str, dict[str, Any]]:
        return {name: self.trackers[name].result() for name in sorted(self._seen)}

    def findings(self) -> list[Finding]:
        """The verdict as findings: loss (error) and duplicates (warning), where there are any."""
        out = []
        for name, r in self.results().items():
            bound = "at least " if r["lower_bounds"] else ""
            if r["never_acknowledged"]:
                at = r["never_acknowledged_at"][0]
                where = f"stream {at['stream']} frame {at['frame']}" + (
                    f" seq {at['seq']}" if "seq" in at else ""
                )
                out.append(
                    Finding(
                        f"{name}.{LOST}",
                        Severity.ERROR,
                        f"{bound}{r['never_acknowledged']} of {r['distinct_events']} distinct events were never "
                        f"acknowledged on a connection that ended, nor resent and acknowledged on another "
                        f"(first: {where}): data lost between client and server unless sent again later",
                        name,
                        Direction.C2S,
                        None,
                        at["frame"],
                        fields={"events": r["never_acknowledged"], "first": at},
                        stream=at["stream"],
                    )
                )
            twice = r["delivered_twice"] if name == "lumberjack" else r["payloads_delivered_twice"]
            if twice:
                what = "events" if name == "lumberjack" else "payloads"
                out.append(
                    Finding(
                        f"{name}.{TWICE}",
                        Severity.WARNING,
                        f"{bound}{twice} {what} were acknowledged on one connection and again, resent, on "
                        "another: the server received them twice (duplicates downstream unless deduplicated)",
                        name,
                        fields={what: twice},
                    )
                )
        return out
