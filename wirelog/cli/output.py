"""Where command output goes: stdout, or a file written under a temporary name and renamed."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import IO


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
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".wirelog-", dir=directory)
    except OSError as e:  # name the output, not our temporary file
        raise OSError(e.errno, e.strerror, path) from e
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
