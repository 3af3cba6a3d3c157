"""The progress bar itself (rich), drawn on stderr: imported only when stderr is a terminal
(`progress.progress`), so that a run in a pipe or CI does not load rich's console at start-up."""

from __future__ import annotations

from rich.console import Console
from rich.filesize import decimal
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn
from rich.text import Text

REFRESH = 4  # redraws a second


class _Numbers(ProgressColumn):
    """`37%  4.6/12.6 MB  9.8 MB/s  ETA 0:00:01  14,000 packets  3 streams  254,499 records`; with no
    known total: the bytes read and the rate."""

    def render(self, task: Task) -> Text:
        parts = []
        done = int(task.completed)
        if task.total:
            parts.append(f"{min(100.0, 100.0 * done / task.total):3.0f}%")
            parts.append(f"{decimal(done)}/{decimal(int(task.total))}")
        else:
            parts.append(f"{decimal(done)} read")
        speed = task.finished_speed or task.speed
        parts.append(f"{decimal(int(speed))}/s" if speed else "-/s")
        if task.total:
            left = task.time_remaining
            parts.append(f"ETA {_clock(left)}" if left is not None else "ETA -:--:--")
        counts = task.fields.get("counts")
        if counts:
            parts.append(counts)
        return Text("  ".join(parts))


def _clock(seconds: float) -> str:
    s = int(seconds + 0.999)
    return f"{s // 3600}:{s % 3600 // 60:02}:{s % 60:02}"


def bar_on_stderr() -> Progress:
    """`command  [bar]  37%  4.6/12.6 MB ...` on stderr, gone when the run ends."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=24),
        _Numbers(),
        console=Console(stderr=True),
        transient=True,
        refresh_per_second=REFRESH,
        redirect_stdout=False,
    )
