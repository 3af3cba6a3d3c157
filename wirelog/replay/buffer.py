"""A receive buffer whose consumption is O(bytes read): frames are taken from an offset, and the
consumed prefix is dropped only when it is at least half the buffer (never `buf = buf[n:]` per
frame, which is quadratic on a long buffer of short frames)."""

from __future__ import annotations


class ReceiveBuffer:
    __slots__ = ("_data", "_start")

    def __init__(self) -> None:
        self._data = bytearray()
        self._start = 0

    def feed(self, data: bytes) -> None:
        if self._start and self._start * 2 >= len(self._data):
            del self._data[: self._start]
            self._start = 0
        self._data += data

    def __len__(self) -> int:
        return len(self._data) - self._start

    def peek(self, n: int) -> bytes | None:
        """The next `n` bytes without consuming them, or None while fewer are buffered."""
        if len(self) < n:
            return None
        return bytes(self._data[self._start : self._start + n])

    def take(self, n: int) -> bytes | None:
        """The next `n` bytes, consumed, or None (nothing consumed) while fewer are buffered."""
        out = self.peek(n)
        if out is not None:
            self._start += n
        return out
