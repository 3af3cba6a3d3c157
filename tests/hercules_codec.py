"""A Python Hercules event encoder, for crafting test inputs: an independent implementation of
../shared/reference/hercules.md §1 that the core's decoder is checked against (the product's encoder
is the core's, native/src/records/hercules.rs).

It writes exactly what Java's EventBuilder writes (big-endian, Flag as given, UUID in RFC order) and
accepts every value form the decoder's documents come from, so decode → encode is byte-identical.
It refuses what Java would silently corrupt: keys over 255 bytes, more than 65535 tags, lengths of
2^31 or more.

Values take a form that writes the exact bytes wanted, so a few types hold raw bytes where a Python
value would lose information:

| type      | `Variant.value`                                                                  |
|-----------|----------------------------------------------------------------------------------|
| CONTAINER | tuple of `(key, Variant)` pairs in wire order (duplicates kept)                   |
| BYTE      | int 0..255                                                                       |
| SHORT/INTEGER/LONG | int                                                                      |
| FLAG      | bool for 0x00/0x01; the raw int for any other byte (Java reads it as true)        |
| FLOAT/DOUBLE | float; the raw 4/8 bytes for a NaN whose payload a Python float would change   |
| STRING    | str, or raw bytes (invalid UTF-8)                                                |
| UUID      | 16 bytes in wire (RFC 4122) order                                                |
| NULL      | None                                                                             |
| VECTOR    | `Vector`                                                                         |

Keys are str, or bytes when they are not valid UTF-8. A `Vector` holds bare element values (no
`Variant` per element, as on the wire); a vector of bytes holds one `bytes` object.
"""

from __future__ import annotations

import struct
import uuid as uuidlib
from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class Type(IntEnum):
    """Type codes of protocol/Type.java (the .NET TagType uses the same numbers)."""

    CONTAINER = 0x01
    BYTE = 0x02
    SHORT = 0x03
    INTEGER = 0x04
    LONG = 0x05
    FLAG = 0x06
    FLOAT = 0x07
    DOUBLE = 0x08
    STRING = 0x09
    UUID = 0x0A
    NULL = 0x0B
    VECTOR = 0x80


CONTAINER, BYTE, SHORT, INTEGER, LONG, FLAG, FLOAT, DOUBLE, STRING, UUID, NULL, VECTOR = Type
# Struct letter and size of the fixed-size numeric types.
FIXED = {SHORT: ("h", 2), INTEGER: ("i", 4), LONG: ("q", 8), FLOAT: ("f", 4), DOUBLE: ("d", 8)}
HEAD = struct.Struct(">Bq16s")
U16 = struct.Struct(">H")
I32 = struct.Struct(">i")
FIXED_STRUCTS = {t: struct.Struct(">" + letter) for t, (letter, _) in FIXED.items()}
MAX_KEY_BYTES = 255  # u8 key length
MAX_TAGS = 65535  # u16 container count
MAX_LENGTH = 2**31 - 1  # string and vector lengths are signed i32

Key = str | bytes


@dataclass(frozen=True, slots=True)
class Vector:
    """`elem` typed elements; `items` is `bytes` for BYTE vectors, else a tuple of bare values."""

    elem: Type
    items: Any


@dataclass(frozen=True, slots=True)
class Variant:
    """One typed value (a tag's value, or an event payload when `type` is CONTAINER)."""

    type: Type
    value: Any


@dataclass(frozen=True, slots=True)
class Event:
    """One Hercules event: version byte, 100-ns Unix ticks, 16 UUID bytes, payload tags."""

    version: int
    timestamp: int
    uuid: bytes
    tags: tuple[tuple[Key, Variant], ...]


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
