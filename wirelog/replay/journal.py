"""The journal: every event a receiver acknowledged, one `event_id` a line, appended as each ACK
arrives, so a rerun (or a run resumed after SIGKILL) never sends an acknowledged event again.

One `os.write` per ACK on an O_APPEND descriptor: the kernel completes a write(2) to a regular
file even if the process is killed during it, so SIGKILL leaves whole lines, and a line cut by a crash of the machine
is ignored when read back (it is not an id). What can be sent twice is only what was on the wire
when the run was killed: the window in flight, whose ACK came after the last write or not at all.
The file is fsync'ed when the run ends and every `SYNC_EVERY` writes.
"""

from __future__ import annotations

import errno
import os
import re

HEADER = "# wirelog replay journal 1: event ids the receiver acknowledged, one a line\n"
_ID = re.compile(r"[0-9A-Za-z_.:@/+=-]{1,256}")
SYNC_EVERY = 256


class JournalError(Exception):
    """The journal cannot be read or written (one line, with the path)."""


class Journal:
    def __init__(self, path: str, target: str) -> None:
        self.path = path
        self.acked: set[str] = set()
        self._fd: int | None = None
        self._writes = 0
        self._target = target
        self._read()

    def _read(self) -> None:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    text = line.rstrip("\n")
                    if line.endswith("\n") and _ID.fullmatch(text):
                        self.acked.add(text)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise JournalError(f"{self.path}: {e.strerror} (the journal, --journal)") from None

    def __contains__(self, key: str) -> bool:
        return key in self.acked

    def __len__(self) -> int:
        return len(self.acked)

    def open(self) -> None:
        """Opened for appending before anything is sent: a journal that cannot be written stops
        the run before the first event goes out."""
        try:
            fresh = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            if fresh:
                os.write(self._fd, f"{HEADER}# to {self._target}\n".encode())
        except OSError as e:
            raise JournalError(f"{self.path}: {e.strerror} (the journal, --journal)") from None

    def add(self, keys: list[str]) -> None:
        if not keys:
            return
        self.acked.update(keys)
        if self._fd is None:
            return
        try:
            os.write(self._fd, ("\n".join(keys) + "\n").encode())
            self._writes += 1
            if self._writes % SYNC_EVERY == 0:
                _sync(self._fd)
        except OSError as e:
            raise JournalError(f"{self.path}: {e.strerror} (the journal, --journal)") from None

    def close(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            _sync(fd)
        except OSError as e:
            raise JournalError(f"{self.path}: {e.strerror} (the journal, --journal)") from None
        finally:
            os.close(fd)


def _sync(fd: int) -> None:
    """fsync, where the journal is a file that has one (not /dev/null, a pipe)."""
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.EROFS, errno.ENOTSUP):
            raise
