"""Where command output goes: stdout, or a file written under a temporary name and renamed."""

from __future__ import annotations

import contextlib
import os
import select
import sys
from collections.abc import Iterator
from typing import IO

from wirelog.export.atomic import publish, temporary_beside


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
    if os.path.islink(path) or (os.path.exists(path) and not os.path.isfile(path)):
        with open(path, "wb") as f:  # /dev/null, a FIFO, /dev/stdout: write through, never replace
            yield f
        return
    fd, tmp = temporary_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        publish(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
