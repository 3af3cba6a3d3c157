"""A progress line on stderr while long inputs are read: only on a terminal, never in pipes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from wirelog.model import CaptureInfo, EventCounts, Finding, Message, StreamInfo

EVERY = 2048  # items between refreshes: keeps the per-record cost to a counter increment


@contextlib.contextmanager
def progress(console: Console) -> Iterator[Callable[[Any], None]]:
    """Yields `tick(item)`; shows captures done, streams and records while a TTY is attached."""
    err = Console(stderr=True)
    if not err.is_terminal:
        yield lambda _item: None
        return
    counts = {"records": 0, "streams": 0, "captures": 0}
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err,
                  transient=True) as bar:  # fmt: skip
        task = bar.add_task("reading")

        def tick(item: Any) -> None:
            if isinstance(item, Message | Finding):
                counts["records"] += 1
                if counts["records"] % EVERY:
                    return
            elif isinstance(item, EventCounts):
                counts["records"] += sum(row[-1] for row in (*item.counts, *item.messages))
            elif isinstance(item, StreamInfo):
                counts["streams"] += 1
            elif isinstance(item, CaptureInfo):
                counts["captures"] += 1
            bar.update(task, description=f"{counts['captures']} captures, {counts['streams']} streams, "
                                          f"{counts['records']} records")  # fmt: skip

        yield tick
