"""Decoding Hercules events: one event, a concatenated stream of events, a gateway batch.

Events carry no length prefix, so an event's size is known only once all of it is parsed, and a value
of an unknown type cannot be skipped: a corrupt event ends the parse of everything after it. Every
length is checked against the bytes present and the event-size limit before anything is allocated.
Problems that do not stop the parse (bad tag names, duplicate keys, invalid UTF-8, ...) are collected
as `Problem`s with offsets relative to the decoded bytes; the decoder turns them into findings.
"""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from wirelog.decoders.hercules.types import (
    BYTE,
    CONTAINER,
    DOUBLE,
    FIXED,
    FIXED_STRUCTS,
    FLAG,
    FLOAT,
    GATE_MAX_EVENT,
    HEAD,
    I32,
    MAX_DEPTH,
    MAX_DOTNET_TAGS,
    MIN_EVENT,
    NULL,
    STRING,
    TAG_NAME,
    TICKS_PER_SECOND,
    TYPE_CODES,
    U16,
    UUID,
    VECTOR,
    VERSION,
    Event,
    Type,
    Variant,
    Vector,
)
from wirelog.model import Severity

_I64 = struct.Struct(">q")
# bytes the smallest element of each vector element type takes (Null takes none)
_MIN_ELEM = {CONTAINER: 2, BYTE: 1, FLAG: 1, STRING: 4, UUID: 16, NULL: 0, VECTOR: 5}  # fmt: skip
_SCALARS = {int(t): (t, size, FIXED_STRUCTS[t]) for t, (_, size) in FIXED.items()}  # code → what to unpack
MAX_NULLS = 1 << 20  # Vector<Null> costs no bytes per element: cap what we materialise

# A plausible event time: 2000-01-01T00:00Z .. 2100-01-01T00:00Z in 100-ns ticks.
PLAUSIBLE_TICKS = (946_684_800 * TICKS_PER_SECOND, 4_102_444_800 * TICKS_PER_SECOND)
_NAME_CACHE_MAX = 4096


@dataclass(slots=True)
class Problem:
    """A finding-to-be: `offset` is relative to the start of the decoded bytes."""

    code: str
    severity: Severity
    message: str
    offset: int
    fields: dict[str, Any] = field(default_factory=dict)


class Truncated(Exception):
    """The bytes end inside an event; `needed` is the least end offset that could complete it."""

    def __init__(self, needed: int, offset: int, path: str) -> None:
        super().__init__(f"truncated at {offset} ({path or 'event'})")
        self.needed = needed
        self.offset = offset
        self.path = path


class Corrupt(Exception):
    """The event cannot be parsed past `offset`; nothing after it can be located."""

    def __init__(self, code: str, message: str, offset: int, path: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.offset = offset
        self.path = path


@dataclass(slots=True)
class Decoded:
    """An event and the span it came from."""

    event: Event
    offset: int
    length: int


def _hpath(parts: list[str]) -> str:
    return "/".join(parts).replace("/[", "[")


def _name_info(raw: bytes) -> tuple[str | bytes, str, bool]:
    """(key as kept, key as shown in paths, whether it breaks the naming rules or UTF-8)."""
    try:
        key: str | bytes = raw.decode()
    except UnicodeDecodeError:
        return raw, raw.decode("utf-8", "replace"), True
    return key, key, TAG_NAME.fullmatch(raw) is None


class _Reader:
    """Recursive-descent parser over one bytes object; `limit` caps the current event's end."""

    __slots__ = ("data", "end", "limit", "names", "path", "problems", "reported")

    def __init__(self, data: bytes, end: int, names: dict[bytes, tuple[str | bytes, str, bool]]) -> None:
        self.data = data
        self.end = end
        self.limit = end
        self.names = names
        self.path: list[str] = []
        self.problems: list[Problem] = []
        self.reported: list[bytes] = []  # keys reported by this parse

    def _need(self, pos: int, n: int, what: str) -> int:
        stop = pos + n
        if stop > self.limit:
            raise Corrupt(
                "hercules.absurd-length",
                f"{what} of {n} bytes at offset {pos} runs past the event size limit",
                pos,
                _hpath(self.path),
            )
        if stop > self.end:
            raise Truncated(stop, pos, _hpath(self.path))
        return stop

    def _length(self, pos: int, what: str) -> int:
        self._need(pos, 4, what)
        (n,) = I32.unpack_from(self.data, pos)
        if n < 0:
            raise Corrupt(
                "hercules.negative-length", f"{what} has negative length {n}", pos, _hpath(self.path)
            )
        return n

    def _problem(self, code: str, severity: Severity, message: str, offset: int, **fields: Any) -> None:
        self.problems.append(Problem(code, severity, message, offset, {"path": _hpath(self.path), **fields}))

    def event(self, pos: int, max_event: int) -> tuple[Event, int]:
        self.limit = pos + max_event
        self._need(pos, MIN_EVENT, "event header")
        version, ticks, uuid = HEAD.unpack_from(self.data, pos)
        tags, stop = self.container(pos + 25, 1)
        return Event(version, ticks, uuid, tags), stop

    def container(self, pos: int, depth: int) -> tuple[tuple[tuple[str | bytes, Variant], ...], int]:
        if depth > MAX_DEPTH:
            raise Corrupt(
                "hercules.too-deep", f"nesting deeper than {MAX_DEPTH} levels", pos, _hpath(self.path)
            )
        data = self.data
        p = self._need(pos, 2, "container count")
        (count,) = U16.unpack_from(data, pos)
        if count > MAX_DOTNET_TAGS:
            self._problem(
                "hercules.dotnet-tag-count",
                Severity.INFO,
                f"container of {count} tags: the .NET reader reads the count as signed and fails",
                pos,
                count=count,
            )
        tags = []
        path = self.path
        names = self.names
        bound = min(self.end, self.limit)
        for _ in range(count):
            if p >= bound or p + data[p] + 2 > bound:  # key length, key and type byte
                self._need(p, 1, "tag key length")
                self._need(self._need(p + 1, data[p], "tag key"), 1, "tag type")
            kstop = p + 1 + data[p]
            raw = data[p + 1 : kstop]
            info = names.get(raw)
            if info is None:
                info = _name_info(raw)
                if len(names) < _NAME_CACHE_MAX:
                    names[raw] = info
            key, label, report = info
            path.append(label)
            if report and raw not in self.reported:
                self._tag_name_problem(key, raw, p)
                self.reported.append(raw)
            value, p = self.value(data[kstop], kstop + 1, depth)
            path.pop()
            tags.append((key, value))
        if count > 1 and len({k for k, _ in tags}) < count:
            dups = sorted(str(k) for k, c in Counter(k for k, _ in tags).items() if c > 1)
            self._problem(
                "hercules.duplicate-key",
                Severity.WARNING,
                f"duplicate tag keys {dups}: Java keeps the last occurrence",
                pos,
                keys=dups,
            )
        return tuple(tags), p

    def _tag_name_problem(self, key: str | bytes, raw: bytes, pos: int) -> None:
        if isinstance(key, bytes):
            self._problem(
                "hercules.invalid-utf8",
                Severity.WARNING,
                f"tag key {raw.hex()} is not valid UTF-8",
                pos,
                raw=raw.hex(),
            )
        else:
            self._problem(
                "hercules.tag-name",
                Severity.INFO,
                f"tag key {key!r} breaks the naming convention (non-empty, [a-zA-Z0-9_.-])",
                pos,
                key=key,
            )

    def value(self, t: int, pos: int, depth: int) -> tuple[Variant, int]:
        data = self.data
        if t == CONTAINER:
            tags, p = self.container(pos, depth + 1)
            return Variant(CONTAINER, tags), p
        if t == STRING:
            n = self._length(pos, "string")
            return Variant(STRING, self._string(pos + 4, n)), pos + 4 + n
        fixed = _SCALARS.get(t)
        if fixed is not None:
            typ, size, st = fixed
            p = self._need(pos, size, typ.name.lower())
            v = st.unpack_from(data, pos)[0]
            if v != v:
                v = _nan(data[pos:p], v, st)
            return Variant(typ, v), p
        if t == BYTE:
            p = self._need(pos, 1, "byte")
            return Variant(BYTE, data[pos]), p
        if t == FLAG:
            p = self._need(pos, 1, "flag")
            return Variant(FLAG, self._flag(data[pos], pos)), p
        if t == UUID:
            p = self._need(pos, 16, "uuid")
            return Variant(UUID, data[pos:p]), p
        if t == NULL:
            return Variant(NULL, None), pos
        if t == VECTOR:
            vec, p = self.vector(pos, depth + 1)
            return Variant(VECTOR, vec), p
        raise self._unknown(t, pos - 1)

    def _unknown(self, t: int, pos: int) -> Corrupt:
        return Corrupt(
            "hercules.unknown-type",
            f"unknown type code 0x{t:02x} at offset {pos}: values carry no size, so nothing after it "
            "can be decoded",
            pos,
            _hpath(self.path),
        )

    def _flag(self, b: int, pos: int) -> bool | int:
        if b > 1:
            self._problem(
                "hercules.flag-value",
                Severity.INFO,
                f"flag byte 0x{b:02x} is neither 0 nor 1 (Java reads it as true)",
                pos,
                raw=b,
            )
            return b
        return b == 1

    def _string(self, pos: int, n: int) -> str | bytes:
        stop = self._need(pos, n, "string")
        raw = self.data[pos:stop]
        try:
            return raw.decode()
        except UnicodeDecodeError:
            self._problem(
                "hercules.invalid-utf8",
                Severity.WARNING,
                "string value is not valid UTF-8 (kept as raw bytes)",
                pos,
                raw=raw[:64].hex(),
            )
            return raw

    def vector(self, pos: int, depth: int) -> tuple[Vector, int]:
        if depth > MAX_DEPTH:
            raise Corrupt(
                "hercules.too-deep", f"nesting deeper than {MAX_DEPTH} levels", pos, _hpath(self.path)
            )
        data = self.data
        self._need(pos, 1, "vector element type")
        t = data[pos]
        if t not in TYPE_CODES:
            raise self._unknown(t, pos)
        elem = Type(t)
        n = self._length(pos + 1, "vector")
        p = pos + 5
        if elem in FIXED:
            letter, size = FIXED[elem]
            stop = self._need(p, n * size, "vector")
            items = struct.unpack_from(f">{n}{letter}", data, p)
            if elem in (FLOAT, DOUBLE) and any(x != x for x in items):
                items = tuple(
                    _nan(data[p + i * size : p + (i + 1) * size], x, FIXED_STRUCTS[elem]) if x != x else x
                    for i, x in enumerate(items)
                )
            return Vector(elem, items), stop
        self._need(p, n * _MIN_ELEM[elem], "vector")
        if elem == BYTE:
            return Vector(elem, data[p : p + n]), p + n
        if elem == FLAG:
            return Vector(elem, tuple(self._flag(b, p + i) for i, b in enumerate(data[p : p + n]))), p + n
        if elem == UUID:
            return Vector(elem, tuple(data[q : q + 16] for q in range(p, p + 16 * n, 16))), p + 16 * n
        if elem == NULL:
            if n > MAX_NULLS:
                raise Corrupt(
                    "hercules.absurd-length",
                    f"vector of {n} nulls (more than {MAX_NULLS})",
                    pos,
                    _hpath(self.path),
                )
            return Vector(elem, (None,) * n), p
        return self._elements(elem, n, p, depth)

    def _elements(self, elem: Type, n: int, p: int, depth: int) -> tuple[Vector, int]:
        items: list[Any] = []
        path = self.path
        for i in range(n):
            path.append(f"[{i}]")
            if elem == STRING:
                size = self._length(p, "string")
                items.append(self._string(p + 4, size))
                p += 4 + size
            elif elem == CONTAINER:
                tags, p = self.container(p, depth + 1)
                items.append(tags)
            else:
                vec, p = self.vector(p, depth + 1)
                items.append(vec)
            path.pop()
        return Vector(elem, tuple(items)), p


def _nan(raw: bytes, value: float, st: struct.Struct) -> float | bytes:
    """A NaN whose payload survives a Python float stays a float; otherwise keep its raw bytes."""
    return value if st.pack(value) == raw else bytes(raw)


def _event_problems(ev: Event, offset: int, length: int) -> list[Problem]:
    out: list[Problem] = []
    if ev.version != VERSION:
        out.append(
            Problem(
                "hercules.version",
                Severity.WARNING,
                f"event version {ev.version} (only 1 exists; the Gate rejects the request with 400)",
                offset,
                {"event_version": ev.version},
            )
        )
    lo, hi = PLAUSIBLE_TICKS
    if not lo <= ev.timestamp < hi:
        why = "negative: the Gate rejects it" if ev.timestamp < 0 else "outside 2000..2100"
        out.append(
            Problem(
                "hercules.timestamp-range",
                Severity.WARNING,
                f"event timestamp {ev.timestamp} (100-ns ticks) is {why}",
                offset,
                {"timestamp": ev.timestamp},
            )
        )
    if length > GATE_MAX_EVENT:
        out.append(
            Problem(
                "hercules.event-too-large",
                Severity.WARNING,
                f"event of {length} bytes exceeds the Gate's default limit of {GATE_MAX_EVENT}",
                offset,
                {"event_length": length},
            )
        )
    return out


class EventParser:
    """Parses events out of byte strings, remembering tag names across calls (a bounded cache)."""

    def __init__(self, max_event: int) -> None:
        self.max_event = max_event
        self._names: dict[bytes, tuple[str | bytes, str, bool]] = {}

    def parse(self, data: bytes, pos: int = 0, end: int | None = None) -> tuple[Decoded, list[Problem]]:
        """The event at `pos`; raises Truncated or Corrupt (offsets absolute in `data`)."""
        reader = _Reader(data, len(data) if end is None else end, self._names)
        ev, stop = reader.event(pos, self.max_event)
        for raw in reader.reported:  # once per key and parser: it would repeat in every event
            if raw in self._names:
                key, label, _ = self._names[raw]
                self._names[raw] = (key, label, False)
        problems = reader.problems
        problems.extend(_event_problems(ev, pos, stop - pos))
        return Decoded(ev, pos, stop - pos), problems

    def plausible_start(self, data: bytes, pos: int) -> bool:
        """Whether an event could start at `pos`: version 1 and a plausible timestamp (for resync)."""
        if len(data) - pos < MIN_EVENT or data[pos] != VERSION:
            return False
        ticks = _I64.unpack_from(data, pos + 1)[0]
        return PLAUSIBLE_TICKS[0] <= ticks < PLAUSIBLE_TICKS[1]


@dataclass(slots=True)
class Batch:
    """A gateway body (`Count:i32` + events) as far as it could be decoded."""

    count: int | None
    events: list[Decoded]
    problems: list[Problem]


def decode_batch(body: bytes, parser: EventParser) -> Batch:
    """Decode a complete gateway body; stops at the first corrupt event, as the Gate does."""
    if len(body) < 4:
        msg = f"batch of {len(body)} bytes has no 4-byte event count (the Gate answers 400)"
        return Batch(None, [], [Problem("hercules.batch-malformed", Severity.ERROR, msg, 0)])
    (count,) = I32.unpack_from(body, 0)
    if count < 0:
        msg = f"negative event count {count}"
        return Batch(
            count, [], [Problem("hercules.count-mismatch", Severity.ERROR, msg, 0, {"count": count})]
        )
    events: list[Decoded] = []
    problems: list[Problem] = []
    pos = 4
    while len(events) < count:
        if pos >= len(body):
            problems.append(_short_batch(count, len(events), pos))
            break
        try:
            dec, probs = parser.parse(body, pos)
        except Truncated as exc:
            problems.append(
                _lost(count, len(events), exc.offset, "hercules.truncated", "event ends early", exc.path)
            )
            break
        except Corrupt as exc:
            problems.append(_lost(count, len(events), exc.offset, exc.code, exc.message, exc.path))
            break
        events.append(dec)
        problems.extend(probs)
        pos += dec.length
    else:
        if pos < len(body):
            problems.append(
                Problem(
                    "hercules.trailing-bytes",
                    Severity.WARNING,
                    f"{len(body) - pos} bytes after the {count} events the count announced",
                    pos,
                    {"trailing": len(body) - pos},
                )
            )
    return Batch(count, events, problems)


def _short_batch(count: int, got: int, pos: int) -> Problem:
    return Problem(
        "hercules.count-mismatch",
        Severity.ERROR,
        f"count says {count} events but the body holds {got} (the Gate answers 400)",
        pos,
        {"count": count, "decoded": got},
    )


def _lost(count: int, index: int, offset: int, code: str, message: str, path: str) -> Problem:
    lost = count - index
    return Problem(
        code,
        Severity.ERROR,
        f"event {index} of the batch: {message}; the remaining {lost} event(s) cannot be located",
        offset,
        {"path": path, "event_index": index, "events_lost": lost},
    )
