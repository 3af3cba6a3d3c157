"""One receive buffer per direction, shared by every decoder.

Guarantee (as in h11's receive buffer): consuming many short frames from a long buffer costs
O(bytes consumed), never O(n²): bytes are appended to one bytearray, reads advance a start index,
and the consumed prefix is dropped only when it is at least half the buffer. Never write
`buf = buf[n:]` in a loop.

The buffer also remembers which frame (and timestamp) carried each stream offset, so a decoder can
stamp a message with the frame that carried its first byte.
"""

from __future__ import annotations

from bisect import bisect_right

from wirelog.model import Chunk


class StreamBuffer:
    """Bytes of one direction not yet consumed, with their stream offsets and frame numbers."""

    __slots__ = ("_buf", "_start", "_base", "_marks_off", "_marks_meta")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._start = 0  # index in _buf of the first unconsumed byte
        self._base = 0  # stream offset of _buf[0]
        self._marks_off: list[int] = []  # stream offsets where a chunk began (ascending)
        self._marks_meta: list[tuple[int | None, int | None]] = []  # (frame, ts) of that chunk

    def __len__(self) -> int:
        return len(self._buf) - self._start

    @property
    def offset(self) -> int:
        """Stream offset of the first unconsumed byte."""
        return self._base + self._start

    @property
    def end(self) -> int:
        """Stream offset one past the last buffered byte."""
        return self._base + len(self._buf)

    def append(self, chunk: Chunk) -> None:
        """Add a chunk; its offset must continue the buffer (after `reset` at a gap, it may jump)."""
        if not self:
            self._buf.clear()
            self._start = 0
            self._base = chunk.offset
        self._buf += chunk.data
        self._marks_off.append(chunk.offset)
        self._marks_meta.append((chunk.frame, chunk.ts))

    def reset(self, offset: int) -> None:
        """Drop everything (after a gap): the next byte will be at `offset`."""
        self._buf.clear()
        self._start = 0
        self._base = offset
        self._marks_off.clear()
        self._marks_meta.clear()

    def peek(self, n: int, at: int = 0) -> bytes:
        """Up to `n` bytes starting `at` bytes after the read position, without consuming."""
        i = self._start + at
        return bytes(self._buf[i : i + n])

    def view(self) -> memoryview:
        """A read-only view of the unconsumed bytes; release it before the next append/consume."""
        return memoryview(self._buf)[self._start :].toreadonly()

    def find(self, needle: bytes, start: int = 0) -> int:
        """Position of `needle` relative to the read position, or -1."""
        i = self._buf.find(needle, self._start + start)
        return -1 if i < 0 else i - self._start

    def consume(self, n: int) -> bytes:
        """Remove and return the next `n` bytes (fewer if the buffer is shorter)."""
        i = self._start
        out = bytes(self._buf[i : i + n])
        self.skip(len(out))
        return out

    def skip(self, n: int) -> None:
        """Drop the next `n` bytes without copying them."""
        self._start = min(self._start + n, len(self._buf))
        if self._start == len(self._buf):
            self._base += self._start
            self._buf.clear()
            self._start = 0
        elif self._start > 65536 and self._start * 2 > len(self._buf):
            del self._buf[: self._start]
            self._base += self._start
            self._start = 0
        self._trim_marks()

    def origin(self, offset: int | None = None) -> tuple[int | None, int | None]:
        """(frame, ts) of the chunk that carried stream `offset` (default: the read position).

        Valid for offsets at or after the read position: marks of consumed bytes are dropped.
        """
        off = self.offset if offset is None else offset
        i = bisect_right(self._marks_off, off) - 1
        if i < 0:
            return (None, None)
        return self._marks_meta[i]

    def _trim_marks(self) -> None:
        # Keep the mark covering the read position; drop the ones before it.
        i = bisect_right(self._marks_off, self.offset) - 1
        if i > 0:
            del self._marks_off[:i]
            del self._marks_meta[:i]
