"""Hercules wire constants in Python, for detection (wirelog/decoders/hercules/detect.py); the
decoder and the export encoder are the core's (native/src/decoders/hercules/types.rs holds their
constants, native/src/records/hercules.rs the export mapping).
"""

from __future__ import annotations

from enum import IntEnum


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
# slower than reading a global, and detection compares type codes for every value.
CONTAINER, BYTE, SHORT, INTEGER, LONG, FLAG, FLOAT, DOUBLE, STRING, UUID, NULL, VECTOR = Type

# Struct letter and size of the fixed-size numeric types.
FIXED = {Type.SHORT: ("h", 2), Type.INTEGER: ("i", 4), Type.LONG: ("q", 8), Type.FLOAT: ("f", 4), Type.DOUBLE: ("d", 8)}  # fmt: skip

VERSION = 1
MAX_DEPTH = 64  # containers/vectors; nothing documents a maximum, Java is bounded by its stack
MIN_EVENT = 1 + 8 + 16 + 2  # version, timestamp, uuid, empty container
TICKS_PER_SECOND = 10_000_000  # timestamps are 100-ns ticks since the Unix epoch
