"""Cell decoding of every CQL type against values serialised by the real cassandra-driver (cqltypes)."""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal

import pytest
from cassandra import cqltypes as ct
from cassandra.util import Duration
from cql_helpers import S2C, codes, messages, run, s_bytes, s_int, s_string

from tests import cql_wire as wire

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


def decoded(opt: str, cell: bytes | None) -> tuple[str, object]:
    """(type name, cell value) of a one-column RESULT Rows of type `opt` holding `cell`, decoded by the core."""
    body = (
        s_int(2) + s_int(1) + s_int(1) + s_string("ks") + s_string("t") + s_string("c") + bytes.fromhex(opt)
    )
    recs = run([(S2C, wire.envelope(4, True, 0, -1, 0x08, body + s_int(1) + s_bytes(cell)))])
    assert codes(recs) == ["cql.response-without-request"]  # the whole body was read: no trailing bytes
    (m,) = messages(recs)
    return m.fields["columns"][0]["type"], m.fields["rows"][0][0]


@pytest.mark.parametrize(
    ("opt", "name", "driver", "value", "expected"), NATIVE, ids=[f"{n[1]}-{i}" for i, n in enumerate(NATIVE)]
)
def test_native_types(opt: str, name: str, driver, value, expected) -> None:
    assert decoded(opt, driver.serialize(value, 4)) == (name, expected)


def test_collections() -> None:
    ser = ct.ListType.apply_parameters([ct.Int32Type]).serialize([1, -2, 3], 4)
    assert decoded("00200009", ser) == ("list<int>", [1, -2, 3])
    ser = ct.SetType.apply_parameters([ct.UTF8Type]).serialize({"a"}, 4)
    assert decoded("0022000d", ser) == ("set<varchar>", ["a"])
    ser = ct.MapType.apply_parameters([ct.UTF8Type, ct.LongType]).serialize({"x": 1, "y": 2}, 4)
    assert decoded("0021000d0002", ser) == ("map<varchar, bigint>", {"x": 1, "y": 2})
    ser = ct.MapType.apply_parameters(
        [ct.Int32Type, ct.ListType.apply_parameters([ct.BooleanType])]
    ).serialize({5: [True, False]}, 4)
    assert decoded("0021000900200004", ser) == ("map<int, list<boolean>>", [[5, [True, False]]])


def test_tuple_and_udt() -> None:
    ser = ct.TupleType.apply_parameters([ct.Int32Type, ct.UTF8Type]).serialize((1, None), 4)
    assert decoded("003100020009000d", ser) == ("tuple<int, varchar>", [1, None])
    udt_opt = "003000026b7300046164647200020006737472656574000d00037a69700009"
    cls = ct.UserType.make_udt_class("ks", "addr", ["street", "zip"], [ct.UTF8Type, ct.Int32Type])
    assert decoded(udt_opt, cls.serialize(("Main", 12345), 4)) == (
        "ks.addr",
        {"street": "Main", "zip": 12345},
    )


def test_custom_types_bad_lengths_and_nulls() -> None:
    assert decoded("00000005612e622e43", b"\x01\x02") == ("'a.b.C'", "0102")
    duration = "0000002c" + b"org.apache.cassandra.db.marshal.DurationType".hex()
    ser = ct.DurationType.serialize(Duration(1, -2, 3000), 4)
    assert decoded(duration, ser)[1] == {"months": 1, "days": -2, "nanoseconds": 3000}
    assert decoded("0009", b"\x00\x01") == (
        "int",
        {"hex": "0001", "error": "2 bytes are not a valid int value"},
    )
    assert decoded("0010", b"\x7f\x00\x00\x01") == ("inet", "127.0.0.1")
    assert decoded("0009", None) == ("int", None)
