"""What the inputs held that the filters name, so that a filter matching nothing is said.

A typo in `--stream 7` or `--protocol` would otherwise give an empty output and status 0, which a
CI job cannot tell from a clean capture. The status stays what README's "Exit status" says (the
inputs were read); one line on stderr names what matched nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from wirelog.engine import protocols
from wirelog.engine.filters import RecordFilter
from wirelog.export.hercules import is_events
from wirelog.export.json import rfc3339
from wirelog.model import EventCounts, Finding, Message, RecordLines, RecordRows, StreamInfo


class StreamIds:
    """A set of stream ids as bits (ids are dense, 0-based in the order streams open): 25 KB at
    200,000 connections where a set of ints took 13 MB, which grew with every connection."""

    __slots__ = ("_bits",)

    def __init__(self) -> None:
        self._bits = bytearray()

    def add(self, stream: int) -> None:
        byte = stream >> 3
        if byte >= len(self._bits):
            self._bits.extend(bytes(max(byte + 1 - len(self._bits), len(self._bits) >> 3)))
        self._bits[byte] |= 1 << (stream & 7)

    def __contains__(self, stream: object) -> bool:
        if not isinstance(stream, int) or stream < 0 or stream >> 3 >= len(self._bits):
            return False
        return bool(self._bits[stream >> 3] >> (stream & 7) & 1)

    def __iter__(self) -> Iterator[int]:
        """The ids in increasing order."""
        for byte, bits in enumerate(self._bits):
            if bits:
                yield from (byte << 3 | k for k in range(8) if bits >> k & 1)


@dataclass(slots=True)
class Seen:
    """The stream ids and protocols of the inputs, and whether any record passed the filters."""

    streams: StreamIds = field(default_factory=StreamIds)
    protocols: set[str] = field(default_factory=set)
    tls: bool = False  # a TLS stream's plaintext protocol is not in its summary
    records: bool = False

    def add(self, item: object) -> None:
        if type(item) is StreamInfo:  # (the model's classes have no subclasses)
            self.streams.add(item.stream)
            if item.tls is not None:
                self.tls = True
            if item.protocol:
                self.protocols.add(item.protocol)
        elif not self.records:
            self.records = _holds_records(item)

    def unmatched(self, keep: RecordFilter, decoded: bool, records: bool) -> str | None:
        """The line that says what in `keep` matched nothing, or None. `decoded`: streams were
        decoded (their protocols are known); `records`: the command outputs the records kept (not
        `validate`, whose empty output is the verdict of a clean capture)."""
        missing = sorted(s for s in keep.streams if s not in self.streams)
        if missing:
            return f"no stream {ids(missing)} in the input (its streams: {ids(sorted(self.streams))})"
        named = keep.protocols & set(protocols.names())
        if decoded and named and named == keep.protocols and not (named & self.protocols) and not self.tls:
            held = ", ".join(sorted(self.protocols)) or "none decoded"
            return f"no {' or '.join(sorted(named))} stream in the input (its protocols: {held})"
        if decoded and records and _user_filter(keep) and not self.records:
            return f"no record matched the filters ({_described(keep)})"
        return None


def _holds_records(item: object) -> bool:
    if isinstance(item, Message | Finding):
        return True
    if isinstance(item, RecordLines):
        return item.count > 0
    if isinstance(item, RecordRows):
        return item.batch.num_rows > 0
    if isinstance(item, EventCounts):
        return bool(item.counts or item.messages or item.findings)
    return is_events(item) and len(item) > 0  # type: ignore[arg-type]


def _user_filter(keep: RecordFilter) -> bool:
    """Whether the user chose records (a command's own `findings` restriction is not a filter)."""
    return bool(_described(keep))


def _described(keep: RecordFilter) -> str:
    """The filters as options: `--kind query --events`."""
    words = [f"--protocol {p}" for p in sorted(keep.protocols)]
    words += [f"--stream {s}" for s in sorted(keep.streams)]
    words += [f"--kind {k}" for k in sorted(keep.kinds)]
    words += ["--events"] if keep.events else []
    words += [f"--since {rfc3339(keep.since)}"] if keep.since is not None else []
    words += [f"--until {rfc3339(keep.until)}"] if keep.until is not None else []
    return " ".join(words)


def ids(numbers: list[int]) -> str:
    """`0-41` for a run of ids (a capture can hold thousands of streams), `3, 7` otherwise."""
    if not numbers:
        return "none"
    if len(numbers) > 2 and numbers[-1] - numbers[0] == len(numbers) - 1:
        return f"{numbers[0]}-{numbers[-1]}"
    return ", ".join(map(str, numbers))
