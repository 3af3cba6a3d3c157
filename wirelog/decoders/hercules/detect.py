"""Recognising Hercules traffic: an HTTP request to a Gate (or Stream/Timeline API) endpoint, or bare
events.

Gate traffic is identified by path, not port (the Gate's port is 6306 by default, 8080 per its
README). Bare events have no magic number: a version byte 1 followed by a plausible timestamp is a
hint, and an event that parses completely (or up to the end of the sample) makes it near-certain.
The event is only walked here (`event_end`), never decoded: the decoder is the core's.
"""

from __future__ import annotations

import re
import struct

from wirelog.decoders.base import Sample
from wirelog.decoders.hercules.types import (
    BYTE,
    CONTAINER,
    FIXED,
    FLAG,
    MAX_DEPTH,
    MIN_EVENT,
    NULL,
    STRING,
    TICKS_PER_SECOND,
    UUID,
    VECTOR,
    VERSION,
)

_REQUEST = re.compile(rb"([A-Z]{3,10}) (/[^ \r\n]*) HTTP/1\.[01]\r\n")
_METHOD = re.compile(rb"[A-Z]{1,10}(?: |$)")
GATE_PATHS = (b"/stream/send", b"/stream/sendAsync")
READ_PATHS = (b"/stream/read", b"/timeline/read")  # Stream and Timeline APIs
OTHER_GATE_PATHS = (b"/ping", b"/about", b"/status", b"/stream/seekToEnd")
MAX_EVENT = 64 * 1024 * 1024  # the decoder's default event-size cap (Limits.max_frame)
MAX_NULLS = 1 << 20  # a Vector<Null> costs no bytes per element: the decoder's cap
# A plausible event time: 2000-01-01T00:00Z .. 2100-01-01T00:00Z in 100-ns ticks.
PLAUSIBLE_TICKS = (946_684_800 * TICKS_PER_SECOND, 4_102_444_800 * TICKS_PER_SECOND)
_SIZES = {BYTE: 1, FLAG: 1, UUID: 16, NULL: 0} | {t: size for t, (_, size) in FIXED.items()}
_MIN_SIZES = {CONTAINER: 2, STRING: 4, VECTOR: 5}  # the least bytes of an element of these types
_U16, _I32, _I64 = struct.Struct(">H"), struct.Struct(">i"), struct.Struct(">q")


class Truncated(Exception):
    """The data ends inside the event."""


class Corrupt(Exception):
    """The event cannot be parsed (unknown type, negative or absurd length, too deep)."""


class _Walk:
    """Steps over one event's values, checking each length against the data and the size cap."""

    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.cap = pos + MAX_EVENT

    def need(self, pos: int, n: int) -> int:
        """The end of `n` bytes at `pos`: past the size cap the event is corrupt (nothing is read
        from such a length), past the data truncated."""
        stop = pos + n
        if stop > self.cap:
            raise Corrupt
        if stop > len(self.data):
            raise Truncated
        return stop

    def length(self, pos: int) -> tuple[int, int]:
        """A signed 32-bit String or Vector length, and where its content starts."""
        stop = self.need(pos, 4)
        n = _I32.unpack_from(self.data, pos)[0]
        if n < 0:
            raise Corrupt
        return n, stop

    def container(self, pos: int, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise Corrupt
        self.need(pos, 2)
        count, pos = _U16.unpack_from(self.data, pos)[0], pos + 2
        for _ in range(count):
            self.need(pos, 1)
            pos = self.need(pos + 1, self.data[pos] + 1)
            pos = self.value(self.data[pos - 1], pos, depth)
        return pos

    def value(self, t: int, pos: int, depth: int) -> int:
        if t in _SIZES:
            return self.need(pos, _SIZES[t])
        if t == STRING:
            n, pos = self.length(pos)
            return self.need(pos, n)
        if t == CONTAINER:
            return self.container(pos, depth + 1)
        if t == VECTOR:
            return self.vector(pos, depth + 1)
        raise Corrupt

    def vector(self, pos: int, depth: int) -> int:
        if depth > MAX_DEPTH:
            raise Corrupt
        self.need(pos, 1)
        elem = self.data[pos]
        if elem not in _SIZES and elem not in _MIN_SIZES:
            raise Corrupt
        n, pos = self.length(pos + 1)
        if elem == NULL and n > MAX_NULLS:
            raise Corrupt
        if elem in _SIZES:
            return self.need(pos, n * _SIZES[elem])
        self.need(pos, n * _MIN_SIZES[elem])  # before a loop of n steps
        if elem == CONTAINER:
            for _ in range(n):
                pos = self.container(pos, depth + 1)
            return pos
        for _ in range(n):
            pos = self.value(elem, pos, depth)
        return pos


def event_end(data: bytes, pos: int = 0) -> int:
    """Where the event at `pos` ends; raises Truncated or Corrupt."""
    walk = _Walk(data, pos)
    return walk.container(walk.need(pos, 25), 0)


def plausible_start(data: bytes, pos: int) -> bool:
    """Whether an event could start at `pos`: version 1 and a plausible timestamp."""
    if len(data) - pos < MIN_EVENT or data[pos] != VERSION:
        return False
    return PLAUSIBLE_TICKS[0] <= _I64.unpack_from(data, pos + 1)[0] < PLAUSIBLE_TICKS[1]


def looks_like_http(data: bytes) -> bool:
    """Whether a direction starts like an HTTP/1.x request or response (8 bytes decide)."""
    return data.startswith(b"HTTP/") or _METHOD.match(data[:11]) is not None


def _http(data: bytes, closed: bool) -> float | None:
    m = _REQUEST.match(data)
    if m is None:
        return None if b"\r\n" not in data and not closed and len(data) < 512 else 0.0
    path = m.group(2).split(b"?", 1)[0]
    if path in GATE_PATHS:
        return 0.95 if m.group(1) == b"POST" else 0.6
    if path in READ_PATHS:
        return 0.7 if m.group(1) == b"POST" else 0.4
    return 0.4 if path in OTHER_GATE_PATHS else 0.0


def _events(data: bytes, closed: bool) -> float | None:
    pos = 0
    if data[:1] == b"\x00":
        if len(data) < 4:
            return None if not closed else 0.0
        if struct.unpack_from(">i", data)[0] <= 0:
            return 0.0
        pos = 4
    if len(data) - pos < MIN_EVENT:
        return None if not closed and data[pos : pos + 1] in (b"", b"\x01") else 0.0
    if not plausible_start(data, pos):
        return 0.0
    try:
        end = event_end(data, pos)
    except Truncated:
        return 0.7 if not closed else 0.3
    except Corrupt:
        return 0.1
    return 0.95 if end - pos >= 40 or end == len(data) else 0.8


def detect(sample: Sample) -> float | None:
    data = sample.c2s
    if not data:
        return None if not sample.closed else 0.0
    if looks_like_http(data):
        return _http(data, sample.closed)
    return _events(data, sample.closed)
