"""Nonce sightings across the connections of one capture: resends versus reused nonces.

A resend keeps the nonce and carries only the events not yet acknowledged, numbered from 1 again
(reference/courier.md §3), so a legitimate resend's events are a suffix of the previous sending.
Anything else under the same nonce is a reused nonce; across connections that is normal for the
unseeded Go 2.0–2.6.3 clients, whose nonce sequence repeats on every run.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from wirelog.decoders.courier.delivery import At, Payload
from wirelog.decoders.courier.findings import finding
from wirelog.model import Direction, Record, Severity

SHARED_KEY = "nonces"


@dataclass(slots=True)
class Sighting:
    stream: int
    payload: Payload
    digests: bytes | None  # 8-byte content hash per event; None when too many to keep
    first_stream: int
    first_frame: int | None


def check(
    shared: dict, nonce: str, stream: int, p: Payload, digests: bytes | None, unseeded: bool
) -> list[Record]:
    """Record this sending of `nonce` and judge it against the previous one in the capture."""
    seen: dict[str, Sighting] = shared.setdefault(SHARED_KEY, {})
    prev = seen.get(nonce)
    at: At = p.at
    count = p.count or 0
    if prev is None:
        seen[nonce] = Sighting(stream, p, digests, stream, at[1])
        return []
    seen[nonce] = Sighting(stream, p, digests, prev.first_stream, prev.first_frame)
    old = prev.payload
    old_count = old.count or 0
    where = f"stream {prev.stream}" if prev.stream != stream else "this connection"
    if _is_suffix(digests, prev.digests, count, old_count):
        msg = (
            f"payload {nonce} resent with {count} of its {old_count} events (previous sending in {where}, "
            f"{old.acked} acknowledged); event numbering restarts at 1"
        )
        fields = {"nonce": nonce, "events": count, "previous_events": old_count, "previous_acked": old.acked}
        fields |= {
            "previous_stream": prev.stream,
            "previous_frame": old.at[1],
            "first_stream": prev.first_stream,
        }
        return [finding("courier.resend", msg, Direction.C2S, at, **fields)]
    severity = Severity.INFO if unseeded and prev.stream != stream else None
    why = (
        " (normal for unseeded Go 2.0-2.6.3 clients, whose nonces repeat on every run)"
        if severity is Severity.INFO
        else "; nonces must be unique per connection and should be globally unique"
    )
    msg = f"nonce {nonce} reused for different content (previous sending in {where}){why}"
    fields = {"nonce": nonce, "events": count, "previous_events": old_count}
    fields |= {"previous_stream": prev.stream, "previous_frame": old.at[1]}
    return [finding("courier.nonce-reused", msg, Direction.C2S, at, severity, **fields)]


def digest(events: list[bytes]) -> bytes:
    """8 bytes per event (a process-local hash: only compared within one run)."""
    return array("q", [hash(e) for e in events]).tobytes()


def _is_suffix(new: bytes | None, old: bytes | None, n: int, m: int) -> bool:
    if n > m:
        return False
    if new is None or old is None:
        return True  # too large to compare: judge by counts alone
    return new == old[len(old) - len(new) :]
