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

import struct
import uuid as uuidlib
from datetime import datetime
from typing import Any, BinaryIO

from wirelog.decoders.hercules.types import (
    BIGINT_TAG,
    ITEM_TAG,
    MAX_KEY_BYTES,
    MAX_LENGTH,
    MAX_TAGS,
    TICKS_PER_SECOND,
    VERSION,
    Event,
    Key,
    Type,
    Variant,
    Vector,
    escape_name,
)
from wirelog.model import Finding, Message, Severity

_HEAD = struct.Struct(">Bq16s")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_FIXED = {Type.SHORT: "h", Type.INTEGER: "i", Type.LONG: "q", Type.FLOAT: "f", Type.DOUBLE: "d"}
_STRUCTS = {t: struct.Struct(">" + f) for t, f in _FIXED.items()}


class EncodeError(ValueError):
    """The value cannot be written as a valid Hercules event."""


def encode_event(ev: Event) -> bytes:
    """The wire bytes of one event."""
    out = bytearray()
    try:
        out += _HEAD.pack(ev.version, ev.timestamp, bytes(ev.uuid))
    except struct.error as exc:
        raise EncodeError(f"bad event header: {exc}") from None
    if len(ev.uuid) != 16:
        raise EncodeError(f"uuid must be 16 bytes, not {len(ev.uuid)}")
    _container(out, ev.tags)
    return bytes(out)


def encode_batch(events: list[Event]) -> bytes:
    """A gateway request body: `Count:i32` then the events."""
    return _I32.pack(len(events)) + b"".join(encode_event(ev) for ev in events)


def _container(out: bytearray, tags: tuple[tuple[Key, Variant], ...]) -> None:
    if len(tags) > MAX_TAGS:
        raise EncodeError(f"container of {len(tags)} tags (at most {MAX_TAGS})")
    out += _U16.pack(len(tags))
    for key, var in tags:
        raw = key.encode() if isinstance(key, str) else key
        if len(raw) > MAX_KEY_BYTES:
            raise EncodeError(f"tag key of {len(raw)} bytes (at most {MAX_KEY_BYTES})")
        out.append(len(raw))
        out += raw
        out.append(var.type)
        _value(out, var.type, var.value)


def _value(out: bytearray, t: Type, v: Any) -> None:
    try:
        if t == Type.CONTAINER:
            _container(out, v)
        elif t == Type.STRING:
            raw = v.encode() if isinstance(v, str) else v
            _length(out, len(raw))
            out += raw
        elif t in _STRUCTS:
            out += v if isinstance(v, bytes) else _STRUCTS[t].pack(v)
        elif t in (Type.BYTE, Type.FLAG):
            out.append(int(v) & 0xFF if t == Type.BYTE else int(v))
        elif t == Type.UUID:
            raw = v.bytes if isinstance(v, uuidlib.UUID) else v
            if len(raw) != 16:
                raise EncodeError(f"uuid must be 16 bytes, not {len(raw)}")
            out += raw
        elif t == Type.VECTOR:
            _vector(out, v)
        elif t != Type.NULL:
            raise EncodeError(f"unknown type {t!r}")
    except (struct.error, TypeError, ValueError) as exc:
        if isinstance(exc, EncodeError):
            raise
        raise EncodeError(f"bad {Type(t).name} value {v!r}: {exc}") from None


def _length(out: bytearray, n: int) -> None:
    if n > MAX_LENGTH:
        raise EncodeError(f"length {n} does not fit a signed 32-bit length")
    out += _I32.pack(n)


def _vector(out: bytearray, vec: Vector) -> None:
    elem, items = Type(vec.elem), vec.items
    out.append(elem)
    _length(out, len(items))
    if elem == Type.BYTE:
        out += bytes(items)
    elif elem == Type.FLAG:
        out += bytes(int(x) for x in items)
    elif elem in _FIXED and not any(isinstance(x, bytes) for x in items):
        out += struct.pack(f">{len(items)}{_FIXED[elem]}", *items)
    elif elem != Type.NULL:
        for x in items:
            _value(out, elem, x)
