"""Where command output goes: stdout, or a file that appears only when complete (export/atomic.py)."""

from __future__ import annotations

import contextlib
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
