"""Where capture bytes come from: file names and globs, stdin, and transparent decompression.

Compression is recognised by the first bytes of the input (never by its name), so `capture.pcap`
that is really gzip, or a zstd stream on stdin, both work. Everything reads forward only: stdin pipes
cannot seek, so the few magic bytes we look at are read once and replayed in front of the rest.
"""

from __future__ import annotations

import bz2
import errno
import glob
import gzip
import io
import lzma
import os
import stat
import sys
import zlib
from collections.abc import Callable, Iterable
from typing import BinaryIO

import lz4.frame
import zstandard

from wirelog.inputs import remote
from wirelog.inputs.errors import CaptureError

STDIN = "-"

_MAGIC_LEN = 6


def _zstd(stream: BinaryIO) -> BinaryIO:
    return zstandard.ZstdDecompressor().stream_reader(stream, read_across_frames=True)


def _lz4(stream: BinaryIO) -> BinaryIO:
    return lz4.frame.LZ4FrameFile(stream, mode="rb")


# (magic prefix, name, opener). The openers accept a binary stream and read it forward only.
_COMPRESSIONS: tuple[tuple[bytes, str, Callable[[BinaryIO], BinaryIO]], ...] = (
    (b"\x1f\x8b", "gzip", lambda s: gzip.GzipFile(fileobj=s, mode="rb")),
    (b"\x28\xb5\x2f\xfd", "zstd", _zstd),
    (b"\x04\x22\x4d\x18", "lz4", _lz4),
    (b"BZh", "bzip2", lambda s: bz2.BZ2File(s, mode="rb")),
    (b"\xfd7zXZ\x00", "xz", lambda s: lzma.LZMAFile(s, mode="rb")),  # noqa: SIM115
)

# What reading a damaged compressed stream may raise (gzip: BadGzipFile is an OSError, EOFError for a
# missing end marker; lz4: RuntimeError). Readers turn these into a truncation finding.
READ_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    EOFError,
    zlib.error,
    lzma.LZMAError,
    zstandard.ZstdError,
    RuntimeError,
    ValueError,
)


# Python's readers raise EOFError with these words for a compressed stream cut before its end (the
# core's gzip reader says the same, in Python's words: native/src/capture/gzip.rs)
def truncated(compression: str, where: str = "before its end-of-stream marker") -> str:
    """The one sentence for a compressed input cut before its end."""
    return f"{compression}: the compressed file is truncated (it ends {where})"


def read_error(e: BaseException, compression: str | None) -> str:
    """Why reading an input stopped early, for the user (one of READ_ERRORS)."""
    if isinstance(e, EOFError) and compression:
        return truncated(compression)
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def expand_inputs(patterns: Iterable[str]) -> list[str]:
    """File names for the command line's inputs: a file as it is named (even with `[` or `*` in its
    name), a directory as the files under it (`files_under`), globs expanded (sorted; a directory
    matched as its files), `-` kept for stdin, URIs (s3://, gs://, hdfs://, ...) listed through their
    file system (remote.py), a directory there as its files too: what the Spark engine reads.

    Raises CaptureError for a name that does not exist, a glob that matches nothing or a directory
    that holds no file, so a typo is reported before any work starts.
    """
    paths: list[str] = []
    for given in patterns:
        pattern = remote.local_path(given)
        if pattern == STDIN:
            paths.append(pattern)
        elif remote.is_uri(pattern):
            paths.extend(f.uri for f in remote.expand(pattern, directories=True))
        elif os.path.isfile(pattern):
            paths.append(pattern)
        elif os.path.isdir(pattern):
            files = files_under(pattern)
            if not files:
                raise CaptureError(f"{pattern}: directory holds no capture files")
            paths.extend(files)
        elif glob.has_magic(pattern):
            hits = sorted(glob.glob(pattern, recursive=True))
            # a dict: glob.glob lists a file once per way `**/**` reaches it
            matches = dict.fromkeys(
                f for hit in hits for f in (files_under(hit) if os.path.isdir(hit) else [hit])
            )
            if not matches:
                raise CaptureError(f"{pattern}: no file matches this pattern")
            paths.extend(matches)
        else:
            raise CaptureError(f"{pattern}: no such file")
    return paths


def files_under(directory: str, basedir: str = "") -> list[str]:
    """The files under `directory`, recursively, sorted (each directory's files, then its
    subdirectories in turn), named as `directory` is (relative to `basedir`); names starting with `.`
    or `_` are skipped, as Spark skips them (`_SUCCESS`, `.crc`), so every engine reads the same."""
    out = []
    full = os.path.join(basedir, directory)
    for root, dirs, files in os.walk(full):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        rel = os.path.relpath(root, full)
        out += [
            os.path.normpath(os.path.join(directory, rel, f))
            for f in sorted(files)
            if not f.startswith((".", "_"))
        ]
    return out


def display_name(path: str) -> str:
    """A path as the records name it: text, with the bytes of a file name that are not UTF-8 (Python
    keeps them as lone surrogates, which no UTF-8 writer takes) shown as `\\xNN`."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class _Replay(io.RawIOBase):
    """A forward-only stream that first returns `head` (bytes already read), then the rest of `tail`.

    Closing it closes `tail` only when we opened it (never stdin).
    """

    def __init__(self, head: bytes, tail: BinaryIO, owns_tail: bool) -> None:
        super().__init__()
        self._head = head
        self._tail = tail
        # read1: what a pipe has now, where read() waits to fill the whole request (and readinto1
        # too, when part of the request is buffered and the rest exceeds the buffer: CPython 3.11)
        self._read1 = getattr(tail, "read1", tail.read)
        self._owns_tail = owns_tail
        self.consumed = len(head)  # bytes taken from the source so far (compressed ones, if it is)

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._read1(len(b))
        b[: len(data)] = data
        self.consumed += len(data)
        return len(data)

    def close(self) -> None:
        if self._owns_tail:
            self._tail.close()
        super().close()


class _Decompressed(io.RawIOBase):
    """A decompressing reader that returns what it has decoded so far, and whose close() also closes
    the compressed source.

    (GzipFile, BZ2File and LZ4FrameFile leave a file object they were given open.)
    """

    def __init__(self, inner: BinaryIO, source: BinaryIO) -> None:
        super().__init__()
        self._inner = inner
        self._source = source

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        # read1: one step of decompression, so bytes decoded before a damaged spot are not lost
        # with the exception that reports it.
        data = self._inner.read1(len(b))
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._source.close()
            super().close()


def consumed(stream: BinaryIO) -> int:
    """Bytes `open_input`'s stream has taken from its source so far: for a compressed input, the
    compressed bytes (its read-ahead of up to 64 KiB included). What progress is measured in."""
    if isinstance(stream, _Decompressed):
        stream = stream._source
    raw = getattr(stream, "raw", None)
    return raw.consumed if isinstance(raw, _Replay) else 0


def input_size(path: str) -> int | None:
    """The size in bytes of an input as it is read (compressed, if it is), when known before reading
    it: a regular file's, stdin's when it is one (`< capture.pcap`); None for a pipe, a device, a
    URI."""
    try:
        if path == STDIN:
            st = os.fstat(sys.stdin.fileno()) if sys.stdin is not None else None
        elif remote.is_uri(path):
            return None
        else:
            st = os.stat(path)
    except (OSError, ValueError, AttributeError):
        return None
    return st.st_size if st is not None and stat.S_ISREG(st.st_mode) else None


def _read_head(stream: BinaryIO, n: int) -> bytes:
    """Up to `n` bytes, looping because a pipe may deliver fewer than asked."""
    parts = []
    while n > 0:
        part = stream.read(n)
        if not part:
            break
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def open_input(path: str, inflated_by_caller: frozenset[str] = frozenset()) -> tuple[BinaryIO, str | None]:
    """Open `path` (`-` = stdin) and undo its compression, if any.

    Returns (binary stream, compression name or None). The stream reads forward only; the caller
    closes it. Raises CaptureError when the input cannot be opened or its compressed header is bad.
    A compression named in `inflated_by_caller` is recognised but left as it is (the native core
    inflates gzip and zstd captures itself: faster, and a cut stream is told from a complete one).
    """
    try:
        if remote.is_uri(path):
            raw: BinaryIO = remote.open_stream(path)
        else:
            if path == STDIN and sys.stdin is None:  # started with descriptor 0 closed (`<&-`)
                raise OSError(errno.EBADF, "stdin is closed")
            raw = sys.stdin.buffer if path == STDIN else open(path, "rb")  # noqa: SIM115
    except OSError as e:
        raise CaptureError(f"{path}: cannot open: {e.strerror or e}") from e
    try:
        head = _read_head(raw, _MAGIC_LEN)
    except OSError as e:
        raw.close()
        raise CaptureError(f"{path}: cannot read: {e.strerror or e}") from e
    stream = io.BufferedReader(_Replay(head, raw, owns_tail=path != STDIN), buffer_size=1 << 16)
    for magic, name, opener in _COMPRESSIONS:
        if head.startswith(magic):
            return (stream if name in inflated_by_caller else _Decompressed(opener(stream), stream)), name
    return stream, None
