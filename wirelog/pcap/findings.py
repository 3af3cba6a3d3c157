"""Capture-level findings, appended the moment they occur and rate-limited where a capture can repeat
the same problem in every packet (a capture with a small snaplen would otherwise bury everything else).
"""

from __future__ import annotations

from typing import Any

from wirelog.model import Finding, Severity

INDIVIDUAL_LIMIT = 10

# The rate-limited codes and the sentence of their end-of-capture summary.
SUMMARIES = {
    "pcap.time-backwards": "timestamps went backwards {n} times",
    "pcap.snaplen-truncated": "{n} TCP packets were cut short by the capture's snap length",
    "pcap.malformed-record": "{n} packet records were malformed",
    "ip.malformed": "{n} packets had a malformed IP header",
    "ip.fragments-incomplete": "{n} fragmented IP datagrams were never completed",
    "tcp.malformed": "{n} packets had a malformed TCP header",
}


class FindingSink:
    """Appends findings to the caller's list in frame order; `finish()` adds the end-of-capture summaries.

    A finding's protocol is its code's prefix (`pcap`, `ip`, `tcp`). For a `limited` code only the
    first `limit` occurrences are appended individually; `finish()` then adds one summary finding with
    the total in `fields["count"]`.
    """

    def __init__(self, out: list[Finding], limit: int = INDIVIDUAL_LIMIT) -> None:
        self.out = out
        self.limit = limit
        self.counts: dict[str, int] = {}
        self._severity: dict[str, Severity] = {}

    def add(
        self,
        code: str,
        severity: Severity,
        message: str,
        frame: int | None = None,
        ts: int | None = None,
        **fields: Any,
    ) -> None:
        """Report one occurrence (always; use `limited` for codes that may repeat per packet)."""
        protocol = code.partition(".")[0]
        self.out.append(Finding(code, severity, message, protocol, frame=frame, ts=ts, fields=fields))

    def limited(
        self,
        code: str,
        severity: Severity,
        message: str,
        frame: int | None,
        ts: int | None,
        **fields: Any,
    ) -> None:
        """Report one occurrence of a repeatable problem (a code listed in SUMMARIES)."""
        n = self.counts.get(code, 0) + 1
        self.counts[code] = n
        if n <= self.limit:
            self.add(code, severity, message, frame, ts, **fields)
        elif n == self.limit + 1:
            self._severity[code] = severity

    def finish(self) -> None:
        """Append one summary per limited code that exceeded the limit."""
        for code, severity in self._severity.items():
            n = self.counts[code]
            text = f"{SUMMARIES[code].format(n=n)} (only the first {self.limit} are reported individually)"
            self.add(code, severity, text, count=n)
        self._severity.clear()
