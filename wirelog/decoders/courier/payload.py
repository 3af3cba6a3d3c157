"""JDAT/EVNT payload bodies: a capped streaming inflate, then `[u32 length][JSON]` events.

One inflater serves both message types: JDAT hands it the whole body, EVNT feeds it as bytes
arrive and learns from it where the message ends (zlib's end of stream, after the Adler-32).
Nobody on the wire limits the inflated size, so the cap comes from `Limits.max_inflated`.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass

import orjson

MAX_EVENT = 10 * 1024 * 1024  # Go receiver's ErrEventTooLarge
GO_TAIL = b"\x00\x00\xff\xff"  # Go's deflate ends with an empty stored block before the Adler-32
LEVELS = {0: "fastest", 1: "fast", 2: "default", 3: "maximum"}  # zlib FLEVEL (header byte 1 >> 6)


class Inflater:
    """Streaming zlib with an output cap; tells how many input bytes belonged to the stream."""

    __slots__ = ("_d", "_out", "_cap", "consumed", "error", "over_cap", "head", "tail")

    def __init__(self, cap: int) -> None:
        self._d = zlib.decompressobj()
        self._out = bytearray()
        self._cap = cap
        self.consumed = 0  # compressed bytes that belong to the zlib stream
        self.error: str | None = None
        self.over_cap = False
        self.head = b""  # first 2 bytes: the zlib header (level fingerprint)
        self.tail = b""  # last 8 bytes of the stream: Go's 0000ffff + Adler-32

    @property
    def done(self) -> bool:
        """The stream ended (eof) or cannot go on (error, cap)."""
        return self._d.eof or self.error is not None or self.over_cap

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def output(self) -> bytes:
        return bytes(self._out)

    def feed(self, data: bytes) -> None:
        """Inflate more compressed bytes; stops at the end of the stream, an error or the cap."""
        if self.done or not data:
            return
        if len(self.head) < 2:
            self.head = (self.head + data[: 2 - len(self.head)])[:2]
        room = self._cap - len(self._out)
        try:
            out = self._d.decompress(data, room + 1)
        except zlib.error as exc:
            self.error = str(exc)
            return
        used = len(data) - len(self._d.unconsumed_tail) - len(self._d.unused_data)
        self.tail = (self.tail + bytes(data[max(0, used - 8) : used]))[-8:]
        self.consumed += used
        if len(out) > room:
            self.over_cap = True
            out = out[:room]
        self._out += out

    def level(self) -> str | None:
        """Level class from the zlib header: 78 5e = fast (Go level 3), 78 9c = default (Ruby)."""
        if len(self.head) < 2 or self.head[0] & 0x0F != 8:
            return None
        return LEVELS[self.head[1] >> 6]

    def go_tail(self) -> bool:
        return self.eof and self.tail[:4] == GO_TAIL


@dataclass(slots=True)
class RawEvent:
    index: int
    data: bytes


@dataclass(slots=True)
class Framing:
    """Events cut from inflated bytes, and the first framing problem (code, sentence) if any."""

    events: list[RawEvent]
    problem: tuple[str, str] | None = None


def split_events(data: bytes, complete: bool = True) -> Framing:
    """Cut `[u32 length][JSON]` records; `complete=False` means a cut tail is expected (not a finding)."""
    events: list[RawEvent] = []
    pos, end = 0, len(data)
    unpack = struct.unpack_from
    while pos < end:
        if end - pos < 4:
            return Framing(
                events, _cut(complete, f"{end - pos} stray bytes where an event length was expected")
            )
        (n,) = unpack(">I", data, pos)
        if n > MAX_EVENT:
            msg = f"event {len(events)} declares {n} bytes, over the 10 MiB event limit"
            return Framing(events, ("courier.event-over-limit", msg))
        if end - pos - 4 < n:
            return Framing(
                events, _cut(complete, f"event {len(events)} declares {n} bytes, only {end - pos - 4} left")
            )
        events.append(RawEvent(len(events), data[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    return Framing(events)


def _cut(complete: bool, msg: str) -> tuple[str, str] | None:
    return ("courier.bad-event-framing", msg) if complete else None


def parse_json(raw: bytes) -> tuple[object, str | None]:
    """(document, error). A failure keeps the text as `{"message": text}`, as the Ruby server does."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:  # orjson refuses integers beyond 64 bits, which are valid JSON
            doc = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            return {"message": raw.decode("utf-8", "replace")}, str(exc).split("\n")[0]
    if not isinstance(doc, dict):
        return {"message": raw.decode("utf-8", "replace")}, f"a JSON {type(doc).__name__}, not an object"
    return doc, None
