"""Recognising Hercules traffic: an HTTP request to a Gate (or Stream/Timeline API) endpoint, or bare
events.

Gate traffic is identified by path, not port (the Gate's port is 6306 by default, 8080 per its
README). Bare events have no magic number: a version byte 1 followed by a plausible timestamp is a
hint, and an event that parses completely (or up to the end of the sample) makes it near-certain.
"""

from __future__ import annotations

import re
import struct

from wirelog.decoders.base import Sample
from wirelog.decoders.hercules.codec import Corrupt, EventParser, Truncated
from wirelog.decoders.hercules.types import MIN_EVENT

_REQUEST = re.compile(rb"([A-Z]{3,10}) (/[^ \r\n]*) HTTP/1\.[01]\r\n")
_METHOD = re.compile(rb"[A-Z]{1,10}(?: |$)")
GATE_PATHS = (b"/stream/send", b"/stream/sendAsync")
READ_PATHS = (b"/stream/read", b"/timeline/read")  # Stream and Timeline APIs
OTHER_GATE_PATHS = (b"/ping", b"/about", b"/status", b"/stream/seekToEnd")
_PARSER = EventParser(64 * 1024 * 1024)


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
    if not _PARSER.plausible_start(data, pos):
        return 0.0
    try:
        dec, _ = _PARSER.parse(data, pos)
    except Truncated:
        return 0.7 if not closed else 0.3
    except Corrupt:
        return 0.1
    return 0.95 if dec.length >= 40 or pos + dec.length == len(data) else 0.8


def detect(sample: Sample) -> float | None:
    data = sample.c2s
    if not data:
        return None if not sample.closed else 0.0
    if looks_like_http(data):
        return _http(data, sample.closed)
    return _events(data, sample.closed)
