"""Did every log event reach the server? The verdict `wirelog inspect` puts first.

Per-record ack states overstate loss when a client resends: Beats and Log Courier resend an
unacknowledged batch on a new connection, so an event unacknowledged on the first connection may be
delivered by its copy — or delivered twice, when the server had processed the first copy but its ACK
was lost. Lumberjack events carry `resend_of` (the first copy) and Courier deliveries their payload
nonce; from those this module counts distinct events and sorts them into delivered, recovered by a
resend, delivered twice, never acknowledged and unknown. Memory holds keys of unacknowledged events
and of resends only (capped), never the events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wirelog.model import Message

KEYS_LIMIT = 1_000_000  # unacknowledged events and resends remembered; beyond, counts are lower bounds
FIRST = 5  # frames of never-acknowledged events listed


def _key(capture: str, stream: Any, frame: Any, seq: Any) -> tuple:
    return (capture, stream, frame, seq)


class LumberjackDelivery:
    """Event records (with `resend_of`) in, the verdict out."""

    def __init__(self) -> None:
        self.events = 0
        self.acked = 0
        self.resends = 0
        self._open: dict[tuple, bool | None] = {}  # first copies not acknowledged: key → acked (False/None)
        self._resent_ok: set[tuple] = set()  # first copies whose resend was acknowledged
        self.capped = False

    def add(self, m: Message) -> None:
        self.events += 1
        if m.acked:
            self.acked += 1
        first = m.fields.get("resend_of")
        if first is not None:
            self.resends += 1
            if m.acked:
                self._remember(
                    self._resent_ok, _key(m.capture, first["stream"], first["frame"], first["seq"])
                )
        elif not m.acked:
            key = _key(m.capture, m.stream, m.frame, m.fields.get("seq"))
            if len(self._open) < KEYS_LIMIT:
                self._open[key] = m.acked
            else:
                self.capped = True

    def _remember(self, keys: set[tuple], key: tuple) -> None:
        if len(keys) < KEYS_LIMIT:
            keys.add(key)
        else:
            self.capped = True

    def result(self) -> dict[str, Any]:
        recovered = [k for k in self._open if k in self._resent_ok]
        lost = [k for k, acked in self._open.items() if acked is False and k not in self._resent_ok]
        unknown = sum(1 for k, acked in self._open.items() if acked is None and k not in self._resent_ok)
        twice = sum(1 for k in self._resent_ok if k not in self._open)
        distinct = self.events - self.resends
        return {
            "events": self.events,
            "distinct_events": distinct,
            "resent": self.resends,
            "delivered": distinct - len(lost) - unknown,
            "recovered_by_resend": len(recovered),
            "delivered_twice": twice,
            "never_acknowledged": len(lost),
            "ack_unknown": unknown,
            "never_acknowledged_at": [
                {"capture": c, "stream": s, "frame": f, "seq": q}
                for c, s, f, q in sorted(lost, key=_order)[:FIRST]
            ],
            "lower_bounds": self.capped,
        }


def _order(key: tuple) -> tuple:
    return tuple((v is None, v if v is not None else 0) for v in key)


@dataclass
class _Payload:
    events: int = 0
    best_acked: int = 0
    sendings: int = 0
    complete_sendings: int = 0
    incomplete_at: list[tuple] = field(default_factory=list)


class CourierDelivery:
    """Delivery records (one per payload sending, keyed by nonce) in, the verdict out."""

    def __init__(self) -> None:
        self._payloads: dict[tuple[str, str], _Payload] = {}
        self.capped = False

    def add(self, m: Message) -> None:
        f = m.fields
        key = (m.capture, str(f.get("nonce")))
        p = self._payloads.get(key)
        if p is None:
            if len(self._payloads) >= KEYS_LIMIT:
                self.capped = True
                return
            p = self._payloads[key] = _Payload()
        events = int(f.get("events") or 0)
        acked = int(f.get("acked_events") or 0)
        p.events = max(p.events, events)
        p.best_acked = max(p.best_acked, acked)
        p.sendings += 1
        if f.get("complete"):
            p.complete_sendings += 1
        elif not p.incomplete_at:
            p.incomplete_at.append((m.capture, m.stream, m.frame))

    def result(self) -> dict[str, Any]:
        ps = list(self._payloads.values())
        lost = [p for p in ps if p.best_acked < p.events]
        events = sum(p.events for p in ps)
        never = sum(p.events - p.best_acked for p in lost)
        first = sorted((p.incomplete_at[0] for p in lost if p.incomplete_at), key=_order)[:FIRST]
        return {
            "payloads": len(ps),
            "distinct_events": events,
            "resent_payloads": sum(1 for p in ps if p.sendings > 1),
            "delivered": events - never,
            "payloads_recovered_by_resend": sum(
                1
                for p in ps
                if p.sendings > 1 and p.best_acked == p.events and p.complete_sendings < p.sendings
            ),
            "payloads_delivered_twice": sum(1 for p in ps if p.complete_sendings > 1),
            "never_acknowledged": never,
            "never_acknowledged_at": [{"capture": c, "stream": s, "frame": f} for c, s, f in first],
            "lower_bounds": self.capped,
        }
