"""Output files that appear only when complete: written under a temporary name beside the target,
then renamed over it.

mkstemp makes its file 0600; a published output gets the mode any new file would get (0666 minus
the umask), or keeps the mode of the file it replaces, so `events.parquet` is as readable as a file
written by `cp` or a shell redirection.
"""

from __future__ import annotations

import os
import stat
import tempfile


def temporary_beside(path: str, suffix: str = "") -> tuple[int, str]:
    """(fd, name) of a new temporary file in `path`'s directory; an OSError names `path`, not it."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        return tempfile.mkstemp(prefix=".wirelog-", suffix=suffix, dir=directory)
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from e


def temporary_dir_beside(path: str) -> tempfile.TemporaryDirectory:
    """A temporary directory in `path`'s directory (or the system's for stdout), removed with its
    contents when the `with` block ends; an OSError names `path`, not it."""
    where = os.path.dirname(os.path.abspath(path)) if path != "-" else None
    try:
        return tempfile.TemporaryDirectory(prefix=".wirelog-parts-", dir=where)
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from e


def _new_file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def publish(tmp: str, path: str) -> None:
    """Rename the finished `tmp` over `path`, with the mode `path` has or a new file would get."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = _new_file_mode()
    os.chmod(tmp, mode)
    os.replace(tmp, path)
