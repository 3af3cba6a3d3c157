"""The journal: every event a receiver acknowledged, one id a line (its `event_id`, qualified as
`selection.replay_id` says), appended as each ACK arrives, so a rerun (or a run resumed after SIGKILL) never sends an acknowledged event again.

One `os.write` per ACK on an O_APPEND descriptor: the kernel completes a write(2) to a regular
file even if the process is killed during it, so SIGKILL leaves whole lines, and a line cut by a crash of the machine
is ignored when read back (it is not an id). What can be sent twice is only what was on the wire
when the run was killed: the window in flight, whose ACK came after the last write or not at all.
The file is fsync'ed when the run ends and every `SYNC_EVERY` writes.

Memory does not grow with the journal. The ids an earlier run journaled are looked up in an index
that SQLite (the stdlib's) keeps in an unnamed temporary file, behind a page cache of
`INDEX_CACHE_KIB`: a B-tree answers a lookup in a few page reads whatever the journal's size, needs
no bound chosen in advance (a fixed-size hash set would need one, and a spill path past it), and
its file is unlinked as soon as it is opened, so no exit leaves it behind. The text file stays the
journal of record (one line per id, readable, appendable by a write(2) that SIGKILL cannot cut).
The ids acknowledged during this run are written, not remembered: the selection gives each event
once (a resent copy names its first in `resend_of` and is skipped), so none is asked about again.
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3
from collections.abc import Iterator

HEADER = "# wirelog replay journal 1: event ids the receiver acknowledged, one a line\n"
_ID = re.compile(r"[0-9A-Za-z_.:@/+=-]{1,256}")
SYNC_EVERY = 256
INDEX_CACHE_KIB = 2048  # the index's page cache; its pages past that are in its temporary file
_INSERT_BATCH = 10_000  # ids per executemany while the index is built


class JournalError(Exception):
    """The journal cannot be read or written (one line, with the path)."""


class Journal:
    def __init__(self, path: str, target: str) -> None:
        self.path = path
        self._index: sqlite3.Connection | None = None  # None: no id journaled before this run
        self._known = 0  # ids journaled before this run
        self._fd: int | None = None
        self._writes = 0
        self._target = target
        self._read()

    def _read(self) -> None:
        """The ids of the file into the index, a batch at a time (never the whole file)."""
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                batch: list[tuple[str]] = []
                for text in _ids(f):
                    batch.append((text,))
                    if len(batch) >= _INSERT_BATCH:
                        self._insert(batch)
                        batch = []
                if batch:
                    self._insert(batch)
            if self._index is not None:
                self._index.commit()
                self._known = self._index.execute("SELECT count(*) FROM ids").fetchone()[0]
        except FileNotFoundError:
            pass
        except OSError as e:
            raise JournalError(f"{self.path}: {e.strerror} (the journal, --journal)") from None
        except sqlite3.Error as e:  # the temporary directory is full or not writable
            raise JournalError(f"{self.path}: its index: {e} (the journal, --journal; TMPDIR)") from None

    def _insert(self, batch: list[tuple[str]]) -> None:
        if self._index is None:
            # "": a temporary database in an unnamed file; no rollback journal (it is rebuilt
            # from the text file by every run, so nothing in it needs to survive a crash)
            # looked up by the thread that reads the selection ahead (driver._ReadAhead), the
            # only one that uses it once it is built
            self._index = sqlite3.connect("", check_same_thread=False)
            self._index.execute(f"PRAGMA cache_size = -{INDEX_CACHE_KIB}")
            self._index.execute("PRAGMA journal_mode = OFF")
            self._index.execute("CREATE TABLE ids (id TEXT PRIMARY KEY) WITHOUT ROWID")
        self._index.executemany("INSERT OR IGNORE INTO ids VALUES (?)", batch)

    def __contains__(self, key: str) -> bool:
        """Whether an earlier run journaled `key`."""
        if self._index is None:
            return False
        return self._index.execute("SELECT 1 FROM ids WHERE id = ?", (key,)).fetchone() is not None

    def __len__(self) -> int:
        """Ids journaled before this run."""
        return self._known

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
        if not keys or self._fd is None:
            return
        try:
            os.write(self._fd, ("\n".join(keys) + "\n").encode())
            self._writes += 1
            if self._writes % SYNC_EVERY == 0:
                _sync(self._fd)
        except OSError as e:
            raise JournalError(f"{self.path}: {e.strerror} (the journal, --journal)") from None

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None
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


def _ids(lines: Iterator[str]) -> Iterator[str]:
    """The ids of journal lines: whole lines (a cut last line is not one) that are ids."""
    for line in lines:
        text = line.rstrip("\n")
        if line.endswith("\n") and _ID.fullmatch(text):
            yield text
