"""Output files that appear only when complete, and never replace what is not a regular file.

A regular output is written into a file without a name (O_TMPFILE) in its directory, then linked
under its name when complete (straight to the name when it is new; else to a temporary name beside
it, renamed over the old file at once): a reader never sees half a file, and a run that stops for
any reason, a SIGKILL or an abort included, leaves the previous file as it was and nothing beside
it, since no cleanup is needed to remove a file that never had a name. Where the file system or
the kernel has no O_TMPFILE (or /proc is not mounted to link it by), the file is written under a
temporary name beside the output instead (`.wirelog-*`), removed by every stop Python sees (errors,
signals it handles) but left by a SIGKILL or an abort. Anything else is written in place, because renaming over it would replace
it: a device (`/dev/null`; as root, for the whole machine), a FIFO, or a name for a descriptor this
process holds (`/dev/stdout`, `/dev/fd/N`). A symbolic link is followed: its target is replaced
beside the target, the link stays.

mkstemp makes its file 0600; a published output gets the mode any new file would get (0666 minus
the umask), or keeps the mode of the file it replaces, so `events.parquet` is as readable as a file
written by `cp` or a shell redirection.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import secrets
import shutil
import stat
import tempfile
from typing import BinaryIO, Self

_MAX_LINKS = 40  # as the kernel's own limit on a chain of symbolic links


class _NamedFile(io.FileIO):
    """The descriptor under an output: a failed write (ENOSPC, EIO, EPIPE) names the output as the
    user gave it, not the temporary file nor nothing at all. Called once per buffer flush."""

    def __init__(self, fd: int, shown: str) -> None:
        super().__init__(fd, "wb")
        self.shown = shown

    def write(self, data) -> int | None:  # type: ignore[override]
        try:
            return super().write(data)
        except OSError as e:
            raise OSError(e.errno, e.strerror, self.shown) from None


def _names_descriptor(path: str) -> bool:
    """True for /dev/stdout, /dev/fd/N, /proc/self/fd/N or a link to them: "this descriptor", even
    when it is a regular file a shell opened, so it is written where it points, never renamed over."""
    for _ in range(_MAX_LINKS):
        if os.path.realpath(os.path.dirname(os.path.abspath(path))).startswith("/proc/"):
            return True
        if not os.path.islink(path):
            return False
        path = os.path.join(os.path.dirname(path), os.readlink(path))
    return False


def destination(path: str) -> str | None:
    """The regular file an output named `path` replaces (a link's target; `path` itself when it is
    new), or None when `path` is to be written in place."""
    if _names_descriptor(path):
        return None
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return os.path.realpath(path)  # a new file, or the missing target of a link
    return os.path.realpath(path) if stat.S_ISREG(mode) else None


def _temporary_beside(target: str, suffix: str, shown: str) -> tuple[int, str]:
    try:
        return tempfile.mkstemp(prefix=".wirelog-", suffix=suffix, dir=os.path.dirname(target))
    except OSError as e:
        raise OSError(e.errno, e.strerror, shown) from None


# O_TMPFILE refused: EOPNOTSUPP by a file system without it, EISDIR by a kernel older than 3.11
# (the flag includes O_DIRECTORY), EINVAL by a few others
_NO_TMPFILE = (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL)


def _proc_name(fd: int) -> str:
    return f"/proc/self/fd/{fd}"


def _unnamed_beside(target: str, shown: str) -> int | None:
    """A new file without a name in `target`'s directory, or None where there cannot be one that
    can be linked later (no O_TMPFILE, or no /proc to link it by)."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return None
    try:
        fd = os.open(os.path.dirname(target), flag | os.O_WRONLY, 0o600)
    except OSError as e:
        if e.errno in _NO_TMPFILE:
            return None
        raise OSError(e.errno, e.strerror, shown) from None
    if not os.path.exists(_proc_name(fd)):
        os.close(fd)
        return None
    return fd


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


def _mode_for(target: str) -> int:
    """The mode `target` has, or a new file would get."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        return _new_file_mode()


def _publish(tmp: str, target: str, shown: str) -> None:
    """Rename the finished `tmp` over `target`, with the mode `target` has or a new file would get."""
    try:
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except OSError as e:
        raise OSError(e.errno, e.strerror, shown) from None


def _link(fd: int, directory: int, name: str) -> None:
    # a directory descriptor makes os.link call linkat() with AT_SYMLINK_FOLLOW: link() would try to
    # link the /proc symbolic link itself (EXDEV)
    os.link(_proc_name(fd), name, dst_dir_fd=directory)


def _publish_unnamed(fd: int, target: str, shown: str) -> None:
    """Give the finished unnamed file `fd` the name `target`, with the mode `target` has or a new
    file would get: linked there when the name is free, else linked beside it and renamed over it
    (a SIGKILL between the two leaves that one name, `.wirelog-*`: microseconds, not the run)."""
    folder, name = os.path.split(target)
    try:
        directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise OSError(e.errno, e.strerror, shown) from None
    try:
        os.fchmod(fd, _mode_for(target))
        with contextlib.suppress(FileExistsError):
            _link(fd, directory, name)
            return
        while True:
            temporary = f".wirelog-{secrets.token_hex(6)}"
            with contextlib.suppress(FileExistsError):
                _link(fd, directory, temporary)
                break
        try:
            os.replace(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=directory)
            raise
    except OSError as e:
        raise OSError(e.errno, e.strerror, shown) from None
    finally:
        os.close(directory)


class AtomicFile:
    """The binary file `file` of the output `path`, published by `commit()` and removed by `abort()`.

    As a context manager it gives `file`, commits when the block ends normally and aborts when it
    raises (an error, SIGINT/SIGTERM, EPIPE...). A failed commit aborts too: whatever happens, the
    name `path` holds the previous file or the complete new one, and no temporary file is left.
    """

    def __init__(self, path: str, suffix: str = "") -> None:
        self.path = path
        self._target = destination(path)
        self._tmp: str | None = None  # the temporary name, where the file has one
        self._unnamed = False  # an O_TMPFILE file, linked under the target's name by commit()
        if self._target is None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        else:
            unnamed = _unnamed_beside(self._target, path)
            self._unnamed = unnamed is not None
            if unnamed is None:
                fd, self._tmp = _temporary_beside(self._target, suffix, path)
            else:
                fd = unnamed
        try:
            self.file: BinaryIO = io.BufferedWriter(_NamedFile(fd, path))
        except BaseException:
            with contextlib.suppress(OSError):  # already closed if _NamedFile took it
                os.close(fd)
            self._remove()
            raise

    def commit(self) -> None:
        """Write what is buffered, then put the file under the destination's name."""
        try:
            if self._unnamed and self._target is not None:
                self.file.flush()
                _publish_unnamed(self.file.fileno(), self._target, self.path)
            self.file.close()
            if self._tmp is not None and self._target is not None:
                _publish(self._tmp, self._target, self.path)
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Leave the destination as it was (a device or FIFO keeps what already reached it)."""
        self._remove()  # first: the close below may flush what is buffered into the removed file
        with contextlib.suppress(OSError):
            self.file.close()

    def _remove(self) -> None:
        if self._tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._tmp)

    def __enter__(self) -> BinaryIO:
        return self.file

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class Published:
    """A writer used as a context manager: `close()` (publish) when the block ends normally,
    `abort()` (leave nothing) when it raises."""

    def close(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def install(finished: str, path: str) -> None:
    """Put the complete file `finished` (in a directory beside `path`) under the name `path`, as an
    AtomicFile would have written it there: renamed when it can be, else copied."""
    target = destination(path)
    if target is not None:
        try:
            _publish(finished, target, path)
            return
        except OSError as e:
            if e.errno != errno.EXDEV:  # a link's target on another file system
                raise
    with open(finished, "rb") as src, AtomicFile(path) as out:
        shutil.copyfileobj(src, out, 1 << 20)
    os.unlink(finished)
