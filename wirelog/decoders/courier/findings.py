"""The Log Courier finding catalogue: every code this decoder emits, with its default severity.

One table, so the code, the docs page and the tests agree on the stable codes.
"""

from __future__ import annotations

from wirelog.model import Direction, Finding, Severity

PROTOCOL = "courier"

CODES: dict[str, Severity] = {
    "courier.helo-not-first": Severity.WARNING,
    "courier.ping-first": Severity.WARNING,
    "courier.vers-not-first": Severity.WARNING,
    "courier.vers-without-helo": Severity.WARNING,
    "courier.handshake-layout": Severity.INFO,
    "courier.evnt-flag-bug": Severity.WARNING,
    "courier.evnt-not-negotiated": Severity.ERROR,
    "courier.wrong-direction": Severity.ERROR,
    "courier.nonzero-length": Severity.WARNING,
    "courier.bad-length": Severity.ERROR,
    "courier.length-over-limit": Severity.ERROR,
    "courier.ping-while-pending": Severity.WARNING,
    "courier.pong-without-ping": Severity.WARNING,
    "courier.unknown-nonce": Severity.INFO,
    "courier.ack-regressed": Severity.WARNING,
    "courier.ack-over-count": Severity.WARNING,
    "courier.ack-out-of-order": Severity.WARNING,
    "courier.ack-repeated": Severity.INFO,
    "courier.decompress-failed": Severity.ERROR,
    "courier.inflate-limit": Severity.ERROR,
    "courier.trailing-data": Severity.WARNING,
    "courier.bad-event-framing": Severity.ERROR,
    "courier.event-over-limit": Severity.ERROR,
    "courier.invalid-json": Severity.WARNING,
    "courier.resend": Severity.INFO,
    "courier.nonce-reused": Severity.WARNING,
    "courier.unknown-type": Severity.WARNING,
    "courier.tls-mismatch": Severity.ERROR,
    "courier.desync": Severity.ERROR,
    "courier.resync-after-gap": Severity.WARNING,
    "courier.truncated": Severity.WARNING,
    "courier.unacked-at-close": Severity.WARNING,
    "courier.pending-overflow": Severity.WARNING,
    "courier.fingerprint-mismatch": Severity.INFO,
}


def finding(
    code: str,
    message: str,
    direction: Direction | None,
    at: tuple[int | None, int | None, int | None],
    severity: Severity | None = None,
    **fields: object,
) -> Finding:
    """A courier Finding; `at` is (offset, frame, ts). Unknown codes fail loudly in tests, not on input."""
    offset, frame, ts = at
    sev = CODES[code] if severity is None else severity
    return Finding(code, sev, message, PROTOCOL, direction, offset, frame, ts, dict(fields))
