"""Hercules binary output: the event encoder, and the mapping of any wirelog message to an event.

The encoder writes exactly what Java's EventBuilder writes (big-endian, Flag as 1/0, UUID in RFC
order) and accepts every value form the decoder produces, so decode → encode is byte-identical. It
refuses what Java would silently corrupt: keys over 255 bytes, more than 65535 tags, lengths of 2^31
or more.

The mapping (docs/hercules.md) turns a `Message` into an event a Java or .NET reader accepts:
timestamp from the record, a deterministic UUID, a `wirelog` container with the common columns, the
protocol `fields` and the `event` document mapped type by type, with tag names escaped reversibly.
"""

from __future__ import annotations

import hashlib
import re
import struct
import uuid as uuidlib
from datetime import datetime
from typing import Any, BinaryIO

from wirelog.decoders.hercules.types import (
    BIGINT_TAG,
    BYTE,
    CONTAINER,
    DOUBLE,
    FIXED,
    FIXED_STRUCTS,
    FLAG,
    HEAD,
    I32,
    ITEM_TAG,
    LONG,
    MAX_KEY_BYTES,
    MAX_LENGTH,
    MAX_TAGS,
    NULL,
    STRING,
    TICKS_PER_SECOND,
    U16,
    UUID,
    VECTOR,
    VERSION,
    Event,
    Key,
    Type,
    Variant,
    Vector,
    escape_name,
)
from wirelog.model import Finding, Message, Severity


class EncodeError(ValueError):
    """The value cannot be written as a valid Hercules event."""


def encode_event(ev: Event) -> bytes:
    """The wire bytes of one event."""
    out = bytearray()
    try:
        out += HEAD.pack(ev.version, ev.timestamp, bytes(ev.uuid))
    except struct.error as exc:
        raise EncodeError(f"bad event header: {exc}") from None
    if len(ev.uuid) != 16:
        raise EncodeError(f"uuid must be 16 bytes, not {len(ev.uuid)}")
    try:
        _container(out, ev.tags)
    except (struct.error, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, EncodeError):
            raise
        raise EncodeError(f"bad value: {exc}") from None
    return bytes(out)


def encode_batch(events: list[Event]) -> bytes:
    """A gateway request body: `Count:i32` then the events."""
    return I32.pack(len(events)) + b"".join(encode_event(ev) for ev in events)


def _container(out: bytearray, tags: tuple[tuple[Key, Variant], ...]) -> None:
    if len(tags) > MAX_TAGS:
        raise EncodeError(f"container of {len(tags)} tags (at most {MAX_TAGS})")
    out += U16.pack(len(tags))
    for key, var in tags:
        raw = key.encode() if isinstance(key, str) else key
        if len(raw) > MAX_KEY_BYTES:
            raise EncodeError(f"tag key of {len(raw)} bytes (at most {MAX_KEY_BYTES})")
        out.append(len(raw))
        out += raw
        t = var.type
        out.append(t)
        _value(out, t, var.value)


def _value(out: bytearray, t: Type, v: Any) -> None:
    """Value bytes, most frequent types first (struct/Type/length errors surface in encode_event)."""
    if t == STRING:
        raw = v.encode() if isinstance(v, str) else v
        _length(out, len(raw))
        out += raw
    elif t == CONTAINER:
        _container(out, v)
    elif t in FIXED_STRUCTS:
        out += v if isinstance(v, bytes) else FIXED_STRUCTS[t].pack(v)
    elif t == FLAG:
        out.append(int(v))
    elif t == BYTE:
        out.append(int(v) & 0xFF)
    elif t == VECTOR:
        _vector(out, v)
    elif t == UUID:
        raw = v.bytes if isinstance(v, uuidlib.UUID) else v
        if len(raw) != 16:
            raise EncodeError(f"uuid must be 16 bytes, not {len(raw)}")
        out += raw
    elif t != NULL:
        raise EncodeError(f"unknown type {t!r}")


def _length(out: bytearray, n: int) -> None:
    if n > MAX_LENGTH:
        raise EncodeError(f"length {n} does not fit a signed 32-bit length")
    out += I32.pack(n)


def _vector(out: bytearray, vec: Vector) -> None:
    elem, items = Type(vec.elem), vec.items
    out.append(elem)
    _length(out, len(items))
    if elem == BYTE:
        out += bytes(items)
    elif elem == FLAG:
        out += bytes(int(x) for x in items)
    elif elem in FIXED and not any(isinstance(x, bytes) for x in items):
        out += struct.pack(f">{len(items)}{FIXED[elem][0]}", *items)
    elif elem != NULL:
        for x in items:
            _value(out, elem, x)


# --- the mapping of wirelog messages to events (docs/hercules.md) ---

NAMESPACE = uuidlib.UUID("6f1d0e2a-4c57-5e6b-9a51-77697265c06f")  # wirelog's uuid5 namespace
_MIN_LONG, _MAX_LONG = -(2**63), 2**63 - 1
_ISO = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[.,](\d+))?(Z|[+-]\d\d:?\d\d)?")
_SHORTENED = 200  # bytes of an over-long escaped name kept before its hash
_NAME_CACHE_MAX = 10_000
_COMMON = ("protocol", "kind", "capture", "stream", "client", "server", "direction", "offset", "length", "frame", "ts", "version", "acked")  # fmt: skip


def iso_ticks(text: str) -> int | None:
    """An ISO 8601 time (as Beats write @timestamp) in 100-ns Unix ticks; None if it is not one."""
    m = _ISO.fullmatch(text.strip())
    if m is None:
        return None
    try:
        when = datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) in (None, "Z") else m.group(3)))
    except ValueError:
        return None
    frac = (m.group(2) or "")[:7].ljust(7, "0")
    return int(when.timestamp()) * TICKS_PER_SECOND + int(frac)


def event_ticks(rec: Message) -> int | None:
    """The event time: a Hercules event's own, the document's @timestamp, else the capture time."""
    if rec.protocol == "hercules" and isinstance(rec.fields.get("timestamp"), int):
        return rec.fields["timestamp"]
    if isinstance(rec.event, dict) and isinstance(rec.event.get("@timestamp"), str):
        ticks = iso_ticks(rec.event["@timestamp"])
        if ticks is not None:
            return ticks
    return rec.ts // 100 if rec.ts is not None else None


class Mapper:
    """Maps JSON-compatible values to Hercules values; reports each renamed key once."""

    def __init__(self) -> None:
        self._reported: set[str] = set()
        self._names: dict[str, str] = {}  # key → tag name (a bounded cache)
        self.findings: list[Finding] = []

    def value(self, x: Any) -> Variant:
        if isinstance(x, str):
            return Variant(STRING, x.encode("utf-8", "surrogatepass"))
        if isinstance(x, dict):
            return Variant(CONTAINER, self.container(x))
        if isinstance(x, bool):
            return Variant(FLAG, x)
        if isinstance(x, int):
            if _MIN_LONG <= x <= _MAX_LONG:
                return Variant(LONG, x)
            return Variant(CONTAINER, ((BIGINT_TAG, Variant(STRING, str(x))),))
        if isinstance(x, float):
            return Variant(DOUBLE, x)
        if x is None:
            return Variant(NULL, None)
        if isinstance(x, list | tuple):
            return Variant(VECTOR, self.vector(x))
        return Variant(STRING, str(x))

    def container(self, doc: dict[Any, Any]) -> tuple[tuple[Key, Variant], ...]:
        items = list(doc.items())
        if len(items) > MAX_TAGS:
            self._report(
                "hercules.export-too-many-tags",
                Severity.ERROR,
                f"an object of {len(items)} keys was cut to {MAX_TAGS} tags",
                f"#{len(items)}",
            )
            items = items[:MAX_TAGS]
        return tuple((self.name(str(k)), self.value(v)) for k, v in items)

    def vector(self, items: list[Any] | tuple[Any, ...]) -> Vector:
        values = [self.value(x) for x in items]
        types = {v.type for v in values}
        if len(types) == 1 and not types & {VECTOR, NULL}:
            return Vector(values[0].type, tuple(v.value for v in values))
        # Empty, mixed, or arrays of arrays/nulls (which .NET readers cannot read): wrap each item.
        return Vector(CONTAINER, tuple(((ITEM_TAG, v),) for v in values))

    def name(self, key: str) -> str:
        name = self._names.get(key)
        if name is None:
            name = self._name(key)
            if len(self._names) < _NAME_CACHE_MAX:
                self._names[key] = name
        return name

    def _name(self, key: str) -> str:
        name = escape_name(key)
        if len(name) > MAX_KEY_BYTES:
            digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
            name = f"{name[:_SHORTENED]}_xh{digest}"
            self._report(
                "hercules.export-key-truncated",
                Severity.WARNING,
                f"key of {len(key)} characters is too long for a tag name; written as {name!r} (not reversible)",
                key,
            )
        elif name != key:
            self._report(
                "hercules.export-key-renamed",
                Severity.INFO,
                f"key {key!r} is outside the tag-name rules; written as {name!r} (reversible)",
                key,
                name=name,
            )
        return name

    def _report(self, code: str, severity: Severity, message: str, key: str, **fields: Any) -> None:
        if key in self._reported:
            return
        self._reported.add(key)
        self.findings.append(Finding(code, severity, message, "hercules", fields={"key": key, **fields}))


def map_record(rec: Message, mapper: Mapper, uuid: bytes, default_ticks: int = 0) -> Event:
    """The Hercules event for one message (see docs/hercules.md); `default_ticks` when it has no time."""
    common = []
    for name in _COMMON:
        v = getattr(rec, name)
        if v is not None:
            common.append((name, mapper.value(v.value if name == "direction" else v)))
    tags: list[tuple[Key, Variant]] = [("wirelog", Variant(CONTAINER, tuple(common)))]
    if rec.fields:
        tags.append(("fields", Variant(CONTAINER, mapper.container(rec.fields))))
    if rec.event is not None:
        tags.append(("event", mapper.value(rec.event)))
    ticks = event_ticks(rec)
    return Event(VERSION, default_ticks if ticks is None else ticks, uuid, tuple(tags))


class HerculesWriter:
    """Streams messages as concatenated Hercules events (the form of a Kafka dump).

    Deterministic: the UUID is a uuid5 of capture, stream, direction, offset, protocol and kind, plus
    a counter for consecutive messages sharing them (several events of one frame), so a re-run gives
    identical bytes and a consumer can deduplicate.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self._out = stream
        self._mapper = Mapper()
        self._last: str | None = None
        self._repeat = 0
        self._ticks = 0  # time of the latest timed record, for records without one

    def write(self, record: Message) -> list[Finding]:
        """Write one event; returns the findings this record raised for the first time."""
        key = "\0".join(
            str(x)
            for x in (
                record.capture,
                record.stream,
                record.direction and record.direction.value,
                record.offset,
            )
        )
        key += f"\0{record.protocol}\0{record.kind}"
        self._repeat = self._repeat + 1 if key == self._last else 0
        self._last = key
        uuid = uuidlib.uuid5(NAMESPACE, f"{key}\0{self._repeat}").bytes
        event = map_record(record, self._mapper, uuid, self._ticks)
        self._ticks = event.timestamp
        self._out.write(encode_event(event))
        new, self._mapper.findings = self._mapper.findings, []
        for f in new:  # where the key was first seen
            f.capture, f.stream, f.direction, f.offset = (
                record.capture,
                record.stream,
                record.direction,
                record.offset,
            )
            f.frame, f.ts, f.client, f.server = record.frame, record.ts, record.client, record.server
        return new

    def close(self) -> None:
        """Flush; the caller owns (and closes) the stream."""
        self._out.flush()
