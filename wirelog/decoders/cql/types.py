"""CQL notation readers ([int], [string], [bytes], [option] ...) and cell value decoding.

Everything returned is JSON-compatible: blobs and unknown values as hex, UUIDs/inet/dates/decimals as
strings, integers beyond 64 bits as strings (JSON consumers lose precision above that), non-finite
floats as "NaN"/"Infinity". Short reads raise `Truncated`, which the message layer turns into a finding.
"""

from __future__ import annotations

import datetime
import ipaddress
import math
import struct
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

_S16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_S32 = struct.Struct(">i")
_S64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")

UNSET = "<unset>"  # a [value] of length -2 (v4+: "leave this bound variable unchanged")

CONSISTENCY = {
    0x0000: "ANY",
    0x0001: "ONE",
    0x0002: "TWO",
    0x0003: "THREE",
    0x0004: "QUORUM",
    0x0005: "ALL",
    0x0006: "LOCAL_QUORUM",
    0x0007: "EACH_QUORUM",
    0x0008: "SERIAL",
    0x0009: "LOCAL_SERIAL",
    0x000A: "LOCAL_ONE",
}


class Truncated(Exception):
    """A field runs past the end of the body (or a count/length is negative where it may not be)."""


class Reader:
    """Sequential reader over one message body."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def take(self, n: int) -> bytes:
        p = self.pos
        if n < 0 or p + n > len(self.data):
            raise Truncated(f"need {n} bytes at body offset {p}, {len(self.data) - p} left")
        self.pos = p + n
        return self.data[p : p + n]

    def _unpack(self, st: struct.Struct) -> Any:
        p = self.pos
        try:
            (value,) = st.unpack_from(self.data, p)
        except struct.error:
            raise Truncated(f"need {st.size} bytes at body offset {p}, {len(self.data) - p} left") from None
        self.pos = p + st.size
        return value

    def byte(self) -> int:
        return self.take(1)[0]

    def short(self) -> int:
        return self._unpack(_U16)

    def int(self) -> int:
        return self._unpack(_S32)

    def long(self) -> int:
        return self._unpack(_S64)

    def count(self) -> int:
        """An [int] used as a count: negative counts are malformed."""
        n = self.int()
        if n < 0:
            raise Truncated(f"negative count {n}")
        return n

    def string(self) -> str:
        d, p = self.data, self.pos
        try:
            (n,) = _U16.unpack_from(d, p)
        except struct.error:
            raise Truncated(f"need 2 bytes at body offset {p}, {len(d) - p} left") from None
        end = p + 2 + n
        if end > len(d):
            raise Truncated(f"need {n} bytes at body offset {p + 2}, {len(d) - p - 2} left")
        self.pos = end
        return d[p + 2 : end].decode("utf-8", "replace")

    def long_string(self) -> str:
        return self.take(self.count()).decode("utf-8", "replace")

    def string_list(self) -> list[str]:
        return [self.string() for _ in range(self.short())]

    def bytes(self) -> bytes | None:
        d, p = self.data, self.pos
        try:
            (n,) = _S32.unpack_from(d, p)
        except struct.error:
            raise Truncated(f"need 4 bytes at body offset {p}, {len(d) - p} left") from None
        if n < 0:
            self.pos = p + 4
            return None
        end = p + 4 + n
        if end > len(d):
            raise Truncated(f"need {n} bytes at body offset {p + 4}, {len(d) - p - 4} left")
        self.pos = end
        return d[p + 4 : end]

    def value(self) -> bytes | str | None:
        """[value]: like [bytes] but -2 means "not set"."""
        n = self.int()
        if n == -2:
            return UNSET
        return None if n < 0 else self.take(n)

    def short_bytes(self) -> bytes:
        return self.take(self.short())

    def string_map(self) -> dict[str, str]:
        return {self.string(): self.string() for _ in range(self.short())}

    def string_multimap(self) -> dict[str, list[str]]:
        return {self.string(): self.string_list() for _ in range(self.short())}

    def bytes_map(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for _ in range(self.short()):
            key = self.string()
            out[key] = hexed(self.bytes())
        return out

    def uuid(self) -> str:
        return str(uuid.UUID(bytes=self.take(16)))

    def inetaddr(self) -> str:
        n = self.byte()
        if n not in (4, 16):
            raise Truncated(f"inet address of {n} bytes")
        return str(ipaddress.ip_address(self.take(n)))

    def inet(self) -> str:
        addr = self.inetaddr()
        port = self.int()
        return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"

    def consistency(self) -> str:
        c = self.short()
        return CONSISTENCY.get(c, f"0x{c:04x}")

    def option(self, depth: int = 0, max_depth: int = 16) -> CqlType:
        """A type [option]; nesting beyond `max_depth` is treated as malformed."""
        if depth > max_depth:
            raise Truncated(f"type nesting deeper than {max_depth}")
        code = self.short()
        if code == 0x0000:
            return CqlType(code, custom=self.string())
        if code in (0x0020, 0x0022):
            return CqlType(code, (self.option(depth + 1, max_depth),))
        if code == 0x0021:
            return CqlType(code, (self.option(depth + 1, max_depth), self.option(depth + 1, max_depth)))
        if code == 0x0030:
            ks, name = self.string(), self.string()
            names, params = [], []
            for _ in range(self.short()):
                names.append(self.string())
                params.append(self.option(depth + 1, max_depth))
            return CqlType(code, tuple(params), tuple(names), f"{ks}.{name}")
        if code == 0x0031:
            return CqlType(code, tuple(self.option(depth + 1, max_depth) for _ in range(self.short())))
        return CqlType(code)


def hexed(b: bytes | str | None) -> str | None:
    """Bytes as hex for JSON output; None and the unset marker pass through."""
    return b.hex() if isinstance(b, bytes) else b


NATIVE = {
    0x0001: "ascii",
    0x0002: "bigint",
    0x0003: "blob",
    0x0004: "boolean",
    0x0005: "counter",
    0x0006: "decimal",
    0x0007: "double",
    0x0008: "float",
    0x0009: "int",
    0x000B: "timestamp",
    0x000C: "uuid",
    0x000D: "varchar",
    0x000E: "varint",
    0x000F: "timeuuid",
    0x0010: "inet",
    0x0011: "date",
    0x0012: "time",
    0x0013: "smallint",
    0x0014: "tinyint",
    0x0015: "duration",
}
_CONTAINERS = {0x0020: "list", 0x0021: "map", 0x0022: "set", 0x0031: "tuple"}


@dataclass(frozen=True, slots=True)
class CqlType:
    """A column or bound-variable type from an [option]."""

    code: int
    params: tuple[CqlType, ...] = ()
    field_names: tuple[str, ...] = ()  # UDT fields
    custom: str = ""  # custom class name, or "ks.name" of a UDT

    def __str__(self) -> str:
        if self.code in NATIVE:
            return NATIVE[self.code]
        if self.code == 0x0000:
            return f"'{self.custom}'"
        if self.code == 0x0030:
            return self.custom
        if self.code in _CONTAINERS:
            return f"{_CONTAINERS[self.code]}<{', '.join(str(p) for p in self.params)}>"
        return f"0x{self.code:04x}"


_EPOCH_DATE = datetime.date(1970, 1, 1)
_INT64 = 1 << 63


def _int_json(n: int) -> int | str:
    return n if -_INT64 <= n < _INT64 else str(n)


def _float_json(x: float) -> float | str:
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def _vint(r: Reader) -> int:
    """A zigzag [vint] (v5 duration fields): leading 1-bits of the first byte count extra bytes."""
    first = r.byte()
    extra = 8 - (~first & 0xFF).bit_length() if first & 0x80 else 0
    value = first & (0xFF >> extra) if extra < 8 else 0
    for b in r.take(extra):
        value = value << 8 | b
    return (value >> 1) ^ -(value & 1)


def _timestamp(ms: int) -> str | int:
    try:
        t = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(milliseconds=ms)
    except OverflowError:
        return ms
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _date(days: int) -> str | int:
    try:
        return (_EPOCH_DATE + datetime.timedelta(days=days - (1 << 31))).isoformat()
    except OverflowError:
        return days


def _elements(data: bytes, n_types: list[CqlType], depth: int) -> list[Any]:
    r = Reader(data)
    return [decode_value(t, r.bytes(), depth + 1) for t in n_types]


def _collection(t: CqlType, data: bytes, depth: int) -> Any:
    r = Reader(data)
    n = r.count()
    if t.code == 0x0021:
        pairs = [
            (decode_value(t.params[0], r.bytes(), depth + 1), decode_value(t.params[1], r.bytes(), depth + 1))
            for _ in range(n)
        ]
        if all(isinstance(k, str) for k, _ in pairs):
            return dict(pairs)
        return [list(p) for p in pairs]
    return [decode_value(t.params[0], r.bytes(), depth + 1) for _ in range(n)]


def _udt(t: CqlType, data: bytes, depth: int) -> dict[str, Any]:
    r = Reader(data)
    out: dict[str, Any] = {}
    for name, ft in zip(t.field_names, t.params, strict=True):
        if not r.remaining:  # trailing fields may be omitted (fields added after the value was written)
            break
        out[name] = decode_value(ft, r.bytes(), depth + 1)
    return out


def decode_value(t: CqlType, data: bytes | str | None, depth: int = 0) -> Any:
    """A cell or bound value as JSON-compatible data; raises Truncated/ValueError on malformed bytes."""
    if data is None or isinstance(data, str):
        return data
    if depth > 32:
        raise Truncated("value nesting too deep")
    code = t.code
    if code in (0x0001, 0x000D):
        return data.decode("utf-8", "replace")
    if code in (0x0002, 0x0005, 0x0012):
        return _S64.unpack(data)[0] if len(data) == 8 else _bad(t, data)
    if code == 0x0009:
        return _S32.unpack(data)[0] if len(data) == 4 else _bad(t, data)
    if code == 0x0013:
        return _S16.unpack(data)[0] if len(data) == 2 else _bad(t, data)
    if code == 0x0014:
        return int.from_bytes(data, "big", signed=True) if len(data) == 1 else _bad(t, data)
    if code == 0x0004:
        return data != b"\x00" if len(data) == 1 else _bad(t, data)
    if code == 0x0007:
        return _float_json(_F64.unpack(data)[0]) if len(data) == 8 else _bad(t, data)
    if code == 0x0008:
        return _float_json(_F32.unpack(data)[0]) if len(data) == 4 else _bad(t, data)
    if code == 0x000B:
        return _timestamp(_S64.unpack(data)[0]) if len(data) == 8 else _bad(t, data)
    if code in (0x000C, 0x000F):
        return str(uuid.UUID(bytes=data)) if len(data) == 16 else _bad(t, data)
    if code == 0x0010:
        return str(ipaddress.ip_address(data)) if len(data) in (4, 16) else _bad(t, data)
    if code == 0x0011:
        return _date(int.from_bytes(data, "big")) if len(data) == 4 else _bad(t, data)
    if code == 0x000E:
        return _int_json(int.from_bytes(data, "big", signed=True)) if data else _bad(t, data)
    if code == 0x0006:
        if len(data) < 5:
            return _bad(t, data)
        scale = _S32.unpack_from(data)[0]
        return str(Decimal(int.from_bytes(data[4:], "big", signed=True)).scaleb(-scale))
    if code == 0x0015:
        r = Reader(data)
        return {"months": _vint(r), "days": _vint(r), "nanoseconds": _vint(r)}
    if code in (0x0020, 0x0021, 0x0022):
        return _collection(t, data, depth)
    if code == 0x0030:
        return _udt(t, data, depth)
    if code == 0x0031:
        return _elements(data, list(t.params), depth)
    return data.hex()


def _bad(t: CqlType, data: bytes) -> Any:
    raise ValueError(f"{len(data)} bytes are not a valid {t} value")
