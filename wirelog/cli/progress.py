"""Progress on stderr while the inputs are read, and the line a run ends with: only when stderr is a
terminal, never in pipes or CI.

The bar is measured in input bytes read (a compressed input's compressed bytes, as they are read
from it), against the inputs' sizes when every one is known before reading (files; not a pipe or a
URI): percent, rate and time left, then counts that grow as the run goes (packets, streams,
records). Nothing here runs per packet: the engine calls `Meter.watch` once per read of an input
(256 KiB), which pushes the numbers to the bar at most `PUSH_S` apart; `Meter.tick` adds up the
pipeline items the command consumes anyway (batches of records when the core writes them).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.filesize import decimal

from wirelog.cli.text import clean
from wirelog.export.hercules import is_events
from wirelog.inputs.sources import display_name, input_size
from wirelog.model import (
    CaptureInfo,
    EventCounts,
    Finding,
    Message,
    RecordLines,
    RecordRows,
    StreamInfo,
    StreamLines,
)

if TYPE_CHECKING:
    from rich.progress import Progress

    from wirelog.cli.common import Session
    from wirelog.engine.capture import CoreCapture

# seconds between two updates of the bar's numbers (it redraws progress_bar.REFRESH times a second)
PUSH_S = 0.25


def on_terminal() -> bool:
    """Whether stderr is a terminal: progress and the closing line are for people, not for pipes."""
    try:
        return os.isatty(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # closed, or replaced by an object without a descriptor
        return False


def _stdout_on_terminal() -> bool:
    try:
        return os.isatty(sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        return False


class Meter:
    """The counters of one run and the bar they are drawn in."""

    def __init__(self, bar: Progress | None, sizes: dict[str, list[int]], total: int | None, records: str):
        self.bar = bar
        self.task = bar.add_task("", total=total) if bar is not None else None
        self._sizes = sizes  # capture name → sizes of the inputs of that name still to read
        self._records_label = records
        self.records = 0
        self.streams = 0
        self.packets = 0  # of the inputs done
        self.captures = 0
        self.read_done = 0  # input bytes of the inputs done
        self._current = (0, 0)  # (bytes, packets) of the input being read
        self._next_push = 0.0
        self.started = time.monotonic()

    @property
    def bytes_read(self) -> int:
        return self.read_done + self._current[0]

    def watch(self, capture: CoreCapture) -> None:
        """From the engine, after each read of an input: the bar's numbers, at most every PUSH_S."""
        now = time.monotonic()
        if now >= self._next_push:
            self._next_push = now + PUSH_S
            self._current = capture.progress()
            self._push()

    def tick(self, item: Any) -> None:
        """Add up one pipeline item the command consumed (a record, a batch of them, a summary)."""
        kind = type(item)
        if kind is Message or kind is Finding:
            self.records += 1
        elif kind is RecordLines:
            self.records += item.count
        elif kind is RecordRows:
            self.records += item.batch.num_rows
        elif kind is EventCounts:
            self.records += sum(
                row[-1] for rows in (item.counts, item.messages, item.findings) for row in rows
            )
        elif kind is StreamInfo:
            self.streams += 1
        elif kind is StreamLines:
            self.streams += item.data.count(b"\n")
        elif kind is CaptureInfo:
            self.captures += 1
            self.packets += item.packets
            sizes = self._sizes.get(item.capture)
            self.read_done += sizes.pop(0) if sizes else self._current[0]
            self._current = (0, 0)
            self._push()
        elif is_events(item):
            self.records += len(item)

    def counts(self) -> str:
        packets = self.packets + self._current[1]
        text = f"{packets:,} packets  {self.streams:,} streams"
        if self._records_label:
            text += f"  {self.records:,} {self._records_label}"
        return text

    def _push(self) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=self.bytes_read, counts=self.counts())

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The bar taken off the screen while the command writes to the same terminal."""
        if self.bar is None or not self.bar.live.is_started:
            yield
            return
        self.bar.stop()
        try:
            yield
        finally:
            self.bar.start()

    def give_way(self) -> None:
        """The bar off the screen for good when stdout is the terminal: the command's output
        starts there while the inputs are still read."""
        if self.bar is not None and _stdout_on_terminal():
            self.bar.stop()

    def read_note(self) -> str:
        """`1 capture, 12.6 MB read in 1.1 s`: for the closing line."""
        captures = f"{self.captures:,} capture{'' if self.captures == 1 else 's'}"
        return f"{captures}, {decimal(self.bytes_read)} read in {time.monotonic() - self.started:.1f} s"


@contextlib.contextmanager
def progress(
    session: Session, command: str, records: str = "records", stdout_busy: bool = False
) -> Iterator[Meter]:
    """A progress bar on stderr while `session`'s inputs are read, when stderr is a terminal; the
    meter counts then (`session.meter`) for the closing line. `records`: what the records the
    command reads are called (empty: it reads none); `stdout_busy`: the command writes to stdout
    as it reads (records, rows): when stdout is a terminal too, no bar (as curl does), so that
    the two never mix."""
    sizes: dict[str, list[int]] = {}
    total: int | None = 0
    for path in session.paths:
        size = input_size(path)
        sizes.setdefault(display_name(path), []).append(size or 0)
        total = None if size is None or total is None else total + size
    if session.raw:  # the raw dumps are one input, named "raw"
        raw = [input_size(path) for path in session.raw]
        sizes.setdefault("raw", []).append(sum(size or 0 for size in raw))
        total = None if None in raw or total is None else total + sum(raw)  # type: ignore[arg-type]
    if not on_terminal():
        yield Meter(None, sizes, total, records)
        return
    bar = None
    if not (stdout_busy and _stdout_on_terminal()):
        # imported here: rich's console and bar are ~25 ms of start-up a run in a pipe never uses
        from wirelog.cli.progress_bar import bar_on_stderr

        bar = bar_on_stderr()
    meter = Meter(bar, sizes, total or None, records)
    session.meter = meter
    try:
        if bar is None:
            yield meter
            return
        bar.update(meter.task, description=command, counts=meter.counts())
        with bar:
            yield meter
    finally:
        session.meter = None


def closing_line(text: str) -> None:
    """The one line a run ends with (`convert`, `report`): on stderr, on a terminal only."""
    if on_terminal():
        print(f"wirelog: {clean(text)}", file=sys.stderr, flush=True)
