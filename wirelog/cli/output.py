"""Where command output goes: stdout, or a file that appears only when complete (export/atomic.py)."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import select
import sys
from collections.abc import Iterator
from typing import IO

from wirelog.export.atomic import AtomicFile


def flush_if_stdin_waits() -> None:
    """Flush stdout when stdin has nothing to read right now.

    The pipeline calls this before it reads more of a capture on stdin, after every record of what it
    read is out: on a live capture (`tcpdump -U -w - | wirelog convert - | jq`) the records reach the
    next command as their packets arrive instead of when a buffer fills or the capture ends. A file
    on stdin is always ready, so a large conversion does not pay a flush per read.
    """
    try:
        ready = select.select([sys.stdin], [], [], 0)[0]
    except (OSError, ValueError):  # no descriptor to ask (stdin closed, or replaced in a test)
        ready = []
    if not ready:
        sys.stdout.flush()


@contextlib.contextmanager
def open_output(path: str | None) -> Iterator[IO[bytes]]:
    """A binary stream for `path` ('-' or None = stdout); a file appears only when complete."""
    if path in (None, "-"):
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    with AtomicFile(path) as out:
        yield out


def silence_stdout() -> None:
    """Point stdout at /dev/null once its reader has gone (EPIPE): what is still buffered, and the
    flush at interpreter exit, then go nowhere instead of raising again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real descriptor (replaced in a test)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


class _ClosedStdout(io.BufferedIOBase):
    """stdout when the caller closed it (`wirelog ... >&-`): every write fails as a write to the
    closed descriptor would (EBADF), named `stdout`, so the run ends as for any output that cannot
    be written (status 2, one line); a run that writes nothing there is not affected."""

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        raise OSError(errno.EBADF, os.strerror(errno.EBADF), "stdout")


def stand_in_for_closed_stdout() -> None:
    """When the process started with descriptor 1 closed (Python then has no sys.stdout), give it
    /dev/null, so that no file this run opens (an output, a capture) gets the number of stdout,
    and make sys.stdout a stream whose writes fail with EBADF."""
    if sys.stdout is not None:
        return
    with contextlib.suppress(OSError):
        fd = os.open(os.devnull, os.O_WRONLY)
        if fd != 1:
            os.dup2(fd, 1)
            os.close(fd)
    sys.stdout = io.TextIOWrapper(_ClosedStdout(), encoding="utf-8", write_through=True)
