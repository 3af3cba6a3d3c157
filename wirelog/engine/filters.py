"""Which records a command keeps: `--protocol`, `--stream`, `--kind`, `--events`, `--since/--until`.

A record matches `--protocol` by its own protocol or by its stream's (so `--protocol cql` keeps the
TCP gaps of CQL streams too). `--kind` and `--events` select messages, so they drop findings.
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

    @property
    def active(self) -> bool:
        return bool(
            self.protocols
            or self.streams
            or self.kinds
            or self.events
            or self.since is not None
            or self.until is not None
        )

    def accepts(self, rec: Message | Finding, stream_protocol: str | None) -> bool:
        if self.protocols and rec.protocol not in self.protocols and stream_protocol not in self.protocols:
            return False
        if self.streams and rec.stream not in self.streams:
            return False
        if self.kinds or self.events:
            if not isinstance(rec, Message):
                return False
            if self.kinds and rec.kind not in self.kinds:
                return False
            if self.events and rec.event is None:
                return False
        if rec.ts is not None:
            if self.since is not None and rec.ts < self.since:
                return False
            if self.until is not None and rec.ts >= self.until:
                return False
        return True
