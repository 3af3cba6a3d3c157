"""Which records a command keeps: `--protocol`, `--stream`, `--kind`, `--events`, `--since/--until`.

A record matches `--protocol` by its own protocol or by its stream's (so `--protocol cql` keeps the
TCP gaps of CQL streams too). `--kind` and `--events` select messages, so they drop findings;
`findings` (what `validate` reads) drops every message.
"""

from __future__ import annotations

from dataclasses import dataclass

from wirelog.model import Finding, Message


@dataclass(frozen=True, slots=True)
class RecordFilter:
    protocols: frozenset[str] = frozenset()
    streams: frozenset[int] = frozenset()
    kinds: frozenset[str] = frozenset()
    events: bool = False
    since: int | None = None  # ns since the epoch, inclusive
    until: int | None = None  # ns since the epoch, exclusive
    findings: bool = False  # findings only: no message becomes an object only to be dropped

    @property
    def active(self) -> bool:
        return bool(
            self.protocols
            or self.streams
            or self.kinds
            or self.events
            or self.since is not None
            or self.until is not None
            or self.findings
        )

    def select(
        self, records: list[Message | Finding], stream_protocol: str | None
    ) -> list[Message | Finding]:
        """The records kept, in order. Works on a decoder step's records at once, one comprehension
        per active criterion, because it runs for every event of a capture."""
        if self.protocols and stream_protocol not in self.protocols:
            records = [r for r in records if r.protocol in self.protocols]
        if self.streams:
            records = [r for r in records if r.stream in self.streams]
        if self.kinds or self.events:
            records = [r for r in records if isinstance(r, Message)]
            if self.kinds:
                records = [r for r in records if r.kind in self.kinds]
            if self.events:
                records = [r for r in records if r.event is not None]
        if self.findings:
            records = [r for r in records if isinstance(r, Finding)]
        if self.since is not None:
            records = [r for r in records if r.ts is None or r.ts >= self.since]
        if self.until is not None:
            records = [r for r in records if r.ts is None or r.ts < self.until]
        return records
