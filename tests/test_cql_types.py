"""Cell decoding of every CQL type against values serialised by the real cassandra-driver (cqltypes)."""

from __future__ import annotations

import datetime
import ipaddress
import uuid
from decimal import Decimal

import pytest
from cassandra import cqltypes as ct
from cassandra.util import Duration

from wirelog.decoders.cql.types import CqlType, Reader, decode_value

U = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
TS = datetime.datetime(2016, 6, 26, 13, 30, 26, 861000, tzinfo=datetime.UTC)

# (type option bytes, CQL name, driver type, value, expected JSON-compatible value)
NATIVE = [
    ("0001", "ascii", ct.AsciiType, "abc", "abc"),
    ("0002", "bigint", ct.LongType, -(2**62), -(2**62)),
    ("0003", "blob", ct.BytesType, b"\x00\xff", "00ff"),
    ("0004", "boolean", ct.BooleanType, True, True),
    ("0005", "counter", ct.CounterColumnType, 7, 7),
    ("0006", "decimal", ct.DecimalType, Decimal("-12.345"), "-12.345"),
    ("0007", "double", ct.DoubleType, 2.5, 2.5),
    ("0007", "double", ct.DoubleType, float("inf"), "Infinity"),
    ("0008", "float", ct.FloatType, -0.5, -0.5),
    ("0009", "int", ct.Int32Type, -42, -42),
    ("000b", "timestamp", ct.DateType, TS, "2016-06-26T13:30:26.861Z"),
    ("000c", "uuid", ct.UUIDType, U, str(U)),
    ("000d", "varchar", ct.UTF8Type, "żółw", "żółw"),
    ("000e", "varint", ct.IntegerType, -(10**30), str(-(10**30))),
    ("000e", "varint", ct.IntegerType, 255, 255),
    ("000f", "timeuuid", ct.TimeUUIDType, U, str(U)),
    ("0010", "inet", ct.InetAddressType, "2001:db8::1", "2001:db8::1"),
    ("0010", "inet", ct.InetAddressType, "10.1.2.3", "10.1.2.3"),
    ("0011", "date", ct.SimpleDateType, datetime.date(1969, 12, 31), "1969-12-31"),
    ("0012", "time", ct.TimeType, 1234, 1234),
    ("0013", "smallint", ct.ShortType, -300, -300),
    ("0014", "tinyint", ct.ByteType, -7, -7),
    (
        "0015",
        "duration",
        ct.DurationType,
        Duration(1, -2, 3000),
        {"months": 1, "days": -2, "nanoseconds": 3000},
    ),
]


@pytest.mark.parametrize(
    ("opt", "name", "driver", "value", "expected"), NATIVE, ids=[f"{n[1]}-{i}" for i, n in enumerate(NATIVE)]
)
def test_native_types(opt: str, name: str, driver, value, expected) -> None:
    t = Reader(bytes.fromhex(opt)).option()
    assert str(t) == name
    assert decode_value(t, driver.serialize(value, 4)) == expected


def _opt(hexstr: str) -> CqlType:
    r = Reader(bytes.fromhex(hexstr))
    t = r.option()
    assert r.remaining == 0
    return t


def test_collections() -> None:
    lst = _opt("00200009")
    assert str(lst) == "list<int>"
    assert decode_value(lst, ct.ListType.apply_parameters([ct.Int32Type]).serialize([1, -2, 3], 4)) == [
        1,
        -2,
        3,
    ]
    st = _opt("0022000d")
    assert decode_value(st, ct.SetType.apply_parameters([ct.UTF8Type]).serialize({"a"}, 4)) == ["a"]
    mp = _opt("0021000d0002")
    ser = ct.MapType.apply_parameters([ct.UTF8Type, ct.LongType]).serialize({"x": 1, "y": 2}, 4)
    assert str(mp) == "map<varchar, bigint>" and decode_value(mp, ser) == {"x": 1, "y": 2}
    imap = _opt("0021000900200004")
    ser = ct.MapType.apply_parameters(
        [ct.Int32Type, ct.ListType.apply_parameters([ct.BooleanType])]
    ).serialize({5: [True, False]}, 4)
    assert decode_value(imap, ser) == [[5, [True, False]]]


def test_tuple_and_udt() -> None:
    tup = _opt("003100020009000d")
    assert str(tup) == "tuple<int, varchar>"
    ser = ct.TupleType.apply_parameters([ct.Int32Type, ct.UTF8Type]).serialize((1, None), 4)
    assert decode_value(tup, ser) == [1, None]
    udt_opt = "003000026b7300046164647200020006737472656574000d00037a69700009"
    udt = _opt(udt_opt)
    assert str(udt) == "ks.addr"
    cls = ct.UserType.make_udt_class("ks", "addr", ["street", "zip"], [ct.UTF8Type, ct.Int32Type])
    ser = cls.serialize(("Main", 12345), 4)
    assert decode_value(udt, ser) == {"street": "Main", "zip": 12345}


def test_custom_type_and_bad_lengths() -> None:
    custom = _opt("00000005612e622e43")
    assert str(custom) == "'a.b.C'" and decode_value(custom, b"\x01\x02") == "0102"
    with pytest.raises(ValueError):
        decode_value(_opt("0009"), b"\x00\x01")
    assert str(ipaddress.ip_address(decode_value(_opt("0010"), b"\x7f\x00\x00\x01"))) == "127.0.0.1"
