"""Hercules event types in Python, for the encoder (wirelog/export/hercules.py) and detection; the
decoder is the core's (native/src/decoders/hercules/types.rs holds its constants).

Values take a form that writes the exact bytes wanted, so a few types hold raw bytes where a Python
value would lose information:

| type      | `Variant.value`                                                                  |
|-----------|----------------------------------------------------------------------------------|
| CONTAINER | tuple of `(key, Variant)` pairs in wire order (duplicates kept)                   |
| BYTE      | int 0..255 (the README's unsigned view; Java prints it signed)                    |
| SHORT/INTEGER/LONG | int                                                                      |
| FLAG      | bool for 0x00/0x01; the raw int for any other byte (Java reads it as true)        |
| FLOAT/DOUBLE | float; the raw 4/8 bytes for a NaN whose payload a Python float would change   |
| STRING    | str when valid UTF-8, else the raw bytes                                         |
| UUID      | 16 bytes in wire (RFC 4122) order                                                |
| NULL      | None                                                                             |
| VECTOR    | `Vector`                                                                         |

Keys are str, or bytes when they are not valid UTF-8. A `Vector` holds bare element values (no
`Variant` per element, as on the wire); a vector of bytes holds one `bytes` object.
"""

from __future__ import annotations

import re
import struct
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


# The members as module constants: `Type.X` is an attribute lookup on the enum class, several times
# slower than reading a global, and the encoder compares type codes for every value.
CONTAINER, BYTE, SHORT, INTEGER, LONG, FLAG, FLOAT, DOUBLE, STRING, UUID, NULL, VECTOR = Type

# Wire layout (all big-endian): the event header, container counts, string/vector lengths, and the
# struct letter and size of the fixed-size numeric types.
HEAD = struct.Struct(">Bq16s")
U16 = struct.Struct(">H")
I32 = struct.Struct(">i")
FIXED = {Type.SHORT: ("h", 2), Type.INTEGER: ("i", 4), Type.LONG: ("q", 8), Type.FLOAT: ("f", 4), Type.DOUBLE: ("d", 8)}  # fmt: skip
FIXED_STRUCTS = {t: struct.Struct(">" + letter) for t, (letter, _) in FIXED.items()}

VERSION = 1
MAX_KEY_BYTES = 255  # u8 key length
MAX_TAGS = 65535  # u16 container count
MAX_DOTNET_TAGS = 32767  # the .NET reader reads the count as a signed Int16
MAX_LENGTH = 2**31 - 1  # string and vector lengths are signed i32
MAX_DEPTH = 64  # containers/vectors; nothing documents a maximum, Java is bounded by its stack
MIN_EVENT = 1 + 8 + 16 + 2  # version, timestamp, uuid, empty container
TICKS_PER_SECOND = 10_000_000  # timestamps are 100-ns ticks since the Unix epoch

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


# Tag names: the README's naming convention (nothing enforces it on the wire).
TAG_NAME = re.compile(rb"[A-Za-z0-9_.\-]{1,255}")
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")

# Reversible renaming of names outside the convention, used by the export mapping and undone by the
# core's decoder on events wirelog exported. Every character outside [A-Za-z0-9.-] and every "_"
# that is followed by "x" becomes `_x` + two lowercase hex digits per UTF-8 byte, so an escaped name only
# contains "_x" as the start of such an escape. That leaves names that can never come out of
# escaping for the mapping's own markers: EMPTY_NAME (the empty key) and the wrapper tags below.
EMPTY_NAME = "_x"
ITEM_TAG = "_xv"  # Vector<Container{_xv: value}>: an array that is not a homogeneous Vector
BIGINT_TAG = "_xn"  # Container{_xn: String}: an integer outside the signed 64-bit range
_ESCAPE = re.compile(r"_x([0-9a-f]{2})")


def is_tag_name(name: str) -> bool:
    """True when `name` follows the naming convention (non-empty, <= 255 bytes, [a-zA-Z0-9_.-])."""
    return TAG_NAME.fullmatch(name.encode("utf-8", "surrogatepass")) is not None


def escape_name(name: str) -> str:
    """`name` made into a conventional tag name, reversibly (`unescape_name` undoes it)."""
    if not name:
        return EMPTY_NAME
    if is_tag_name(name) and "_x" not in name:
        return name
    out = []
    for i, ch in enumerate(name):
        if ch in _SAFE or (ch == "_" and name[i + 1 : i + 2] != "x"):
            out.append(ch)
        else:
            out.append("".join(f"_x{b:02x}" for b in ch.encode("utf-8", "surrogatepass")))
    return "".join(out)


def unescape_name(name: str) -> str:
    """Inverse of `escape_name`; a name that no escaping could have produced comes back unchanged."""
    if name == EMPTY_NAME:
        return ""
    if "_x" not in name:
        return name
    data = bytearray()
    pos = 0
    for m in _ESCAPE.finditer(name):
        data += name[pos : m.start()].encode("utf-8", "surrogatepass")
        data.append(int(m.group(1), 16))
        pos = m.end()
    data += name[pos:].encode("utf-8", "surrogatepass")
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return name
