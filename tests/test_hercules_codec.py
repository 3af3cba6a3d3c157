"""The Hercules event codec: reference vectors, round trips, validation findings, hostile input."""

from __future__ import annotations

import dataclasses
import struct
import uuid

import pytest
from hercules_helpers import (
    EVENTS,
    FORMATTER_EVENT,
    MIXED_VECTORS,
    README_EVENT,
    REFERENCE,
    SCALARS_EVENT,
    event_bytes,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wirelog.decoders.hercules.codec import Corrupt, EventParser, Truncated, decode_batch
from wirelog.decoders.hercules.render import document
from wirelog.decoders.hercules.types import Event, Type, Variant, Vector
from wirelog.export.hercules import EncodeError, encode_batch, encode_event

PARSER = EventParser(64 * 1024 * 1024)


def parse(data: bytes):
    dec, problems = EventParser(64 * 1024 * 1024).parse(data)
    return dec, [p.code for p in problems]


def tags(data: bytes) -> dict:
    return dict(parse(data)[0].event.tags)


@pytest.mark.skipif(not REFERENCE.exists(), reason="../shared absent")
def test_vectors_are_the_reference_text():
    text = "".join(REFERENCE.read_text().split())
    for vec in (README_EVENT, FORMATTER_EVENT, SCALARS_EVENT):
        assert vec in text
    assert "000106766563746f7280800000000204000000020000000100000002090000000100000001" + "78" in text


def test_readme_sample_65_bytes():
    data = bytes.fromhex(README_EVENT)
    assert len(data) == 65
    dec, found = parse(data)
    ev = dec.event
    assert (dec.length, ev.version, ev.timestamp) == (65, 1, 15_276_799_200_000_000)
    assert str(uuid.UUID(bytes=ev.uuid)) == "11203800-63fd-11e8-83e2-3a587d902000"
    assert uuid.UUID(bytes=ev.uuid).version == 1
    assert document(ev.tags) == {"host": "localhost", "timestamp": 1_527_679_920_000_000}
    assert dict(ev.tags)["timestamp"].type == Type.LONG
    assert found == []
    assert encode_event(ev) == data


def test_gate_batch_69_bytes():
    body = bytes.fromhex("00000001" + README_EVENT)
    batch = decode_batch(body, PARSER)
    assert (len(body), batch.count, len(batch.events), batch.problems) == (69, 1, 1, [])
    assert batch.events[0].offset == 4
    assert encode_batch([batch.events[0].event]) == body


def test_formatter_event_169_bytes():
    data = bytes.fromhex(FORMATTER_EVENT)
    dec, found = parse(data)
    t = dict(dec.event.tags)
    assert len(data) == 169 == dec.length
    assert t["String tag"] == Variant(Type.STRING, "String value")
    assert t["Null tag"] == Variant(Type.NULL, None)
    assert str(uuid.UUID(bytes=t["Uuid tag"].value)) == "5ef18239-8e6c-4e19-b222-c87fd06b003d"
    vec = t["Container array tag"].value
    assert vec.elem == Type.CONTAINER and len(vec.items) == 2
    assert dict(vec.items[0])["Some integer tag"] == Variant(Type.INTEGER, 123345567)
    assert dict(vec.items[1])["Byte vector tag"].value == Vector(Type.BYTE, b"\xde\xad\xbe\xef")
    assert document(dec.event.tags)["Container array tag"][1] == {"Byte vector tag": [0xDE, 0xAD, 0xBE, 0xEF]}
    assert set(found) == {"hercules.tag-name"}  # keys with spaces break the convention, nothing more
    assert encode_event(dec.event) == data


def test_scalars_71_bytes():
    data = bytes.fromhex(SCALARS_EVENT)
    dec, found = parse(data)
    ev = dec.event
    assert (len(data), ev.timestamp, ev.uuid) == (71, 1, bytes(16))
    assert document(ev.tags) == {
        "f": True, "g": False, "n": [None, None, None], "d": 1.5, "fl": -0.25, "b": 255, "s": -2,
    }  # fmt: skip
    assert found == ["hercules.timestamp-range"]  # tick 1 is 1970
    assert encode_event(ev) == data


def test_vector_of_vectors_with_mixed_element_types():
    data = event_bytes(MIXED_VECTORS)
    vec = tags(data)["vector"].value
    assert vec == Vector(Type.VECTOR, (Vector(Type.INTEGER, (1, 2)), Vector(Type.STRING, ("x",))))
    assert encode_event(parse(data)[0].event) == data


def test_vector_of_vectors_of_integers():
    inner = "04000000020000000{}0000000{}"
    hexed = "000106766563746f72808000000002" + inner.format(1, 2) + inner.format(3, 4)
    assert document(parse(event_bytes(hexed))[0].event.tags) == {"vector": [[1, 2], [3, 4]]}


def test_event_id_ticks_from_reference():
    # §4.6: the event id of 2019-01-23T00:00Z starts with the ticks 0x003700CFC0164000
    from wirelog.export.hercules import iso_ticks

    assert iso_ticks("2019-01-23T00:00:00Z") == 0x003700CFC0164000


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS, st.integers(0, 255))
def test_encode_decode_round_trip(ev: Event, version: int):
    ev = dataclasses.replace(ev, version=version)
    data = encode_event(ev)
    dec, _ = PARSER.parse(data)
    assert dec.event == ev
    assert dec.length == len(data)
    assert encode_event(dec.event) == data


@settings(max_examples=200)
@given(st.binary(min_size=4, max_size=4), st.binary(min_size=8, max_size=8))
def test_float_bits_survive_including_nan_payloads(f32: bytes, f64: bytes):
    body = "0002" + "0166" + "07" + f32.hex() + "0167" + "08" + f64.hex()
    vec = "0001" + "0176" + "8007" + "00000001" + f32.hex()
    for data in (event_bytes(body), event_bytes(vec)):
        assert encode_event(parse(data)[0].event) == data


@settings(max_examples=200)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise_anything_else(data: bytes):
    try:
        dec, _ = PARSER.parse(data)
    except (Truncated, Corrupt):
        return
    assert encode_event(dec.event) == data[: dec.length]


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS, st.data())
def test_every_truncation_is_reported_as_truncated(ev: Event, data):
    raw = encode_event(ev)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(Truncated):
        PARSER.parse(raw[:cut])


# --- validation findings ---


def test_version_other_than_1():
    data = bytearray(bytes.fromhex(README_EVENT))
    data[0] = 2
    dec, found = parse(bytes(data))
    assert found == ["hercules.version"] and dec.event.version == 2
    assert encode_event(dec.event) == bytes(data)


def test_negative_timestamp():
    _, found = parse(event_bytes("0000", ticks=-5))
    assert found == ["hercules.timestamp-range"]


def test_duplicate_keys_kept_in_order_and_flagged():
    one = "01610400000001"
    two = "01610400000002"
    data = event_bytes("0002" + one + two)
    dec, found = parse(data)
    assert [k for k, _ in dec.event.tags] == ["a", "a"]
    assert found == ["hercules.duplicate-key"]
    assert document(dec.event.tags) == {"a": 2}  # last wins, like Java's HashMap


def test_tag_names_outside_convention():
    # empty key, a 255-byte key is fine by length, a key with '@'
    data = event_bytes("0003" + "00" + "0b" + "ff" + "61" * 255 + "0b" + "024061" + "0b")
    _, found = parse(data)
    assert found == ["hercules.tag-name", "hercules.tag-name"]


def test_invalid_utf8_in_key_and_string():
    data = event_bytes("0002" + "01ff0b" + "0173" + "09" + "00000002" + "c328")
    dec, found = parse(data)
    assert found == ["hercules.invalid-utf8", "hercules.invalid-utf8"]
    assert dict(dec.event.tags)["s"].value == b"\xc3\x28"
    assert document(dec.event.tags)["s"] == "\ufffd("
    assert encode_event(dec.event) == data


def test_flag_byte_other_than_0_1():
    data = event_bytes("0001" + "0166" + "06" + "02")
    dec, found = parse(data)
    assert found == ["hercules.flag-value"]
    assert document(dec.event.tags) == {"f": True}
    assert encode_event(dec.event) == data


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("0001" + "0161" + "0c", "hercules.unknown-type"),
        ("0001" + "0161" + "00", "hercules.unknown-type"),
        ("0001" + "0161" + "ff", "hercules.unknown-type"),
        ("0001" + "0161" + "8000" + "00000001", "hercules.unknown-type"),
        ("0001" + "0161" + "09" + "ffffffff", "hercules.negative-length"),
        ("0001" + "0161" + "8004" + "80000000", "hercules.negative-length"),
        ("0001" + "0161" + "09" + "7fffffff", "hercules.absurd-length"),
        ("0001" + "0161" + "800b" + "7fffffff", "hercules.absurd-length"),
        ("0001" + "0161" + "8001" + "7fffffff", "hercules.absurd-length"),
    ],
)
def test_corrupt_values(body: str, code: str):
    parser = EventParser(1000)
    data = event_bytes(body) + bytes(2000)
    with pytest.raises(Corrupt) as exc:
        parser.parse(data)
    assert exc.value.code == code
    assert exc.value.path == "a"


def test_unknown_type_in_nested_path_names_the_tag_path():
    inner = "0001" + "0162" + "8001" + "00000002" + "0000" + "0001" + "0163" + "0d"
    with pytest.raises(Corrupt) as exc:
        PARSER.parse(event_bytes("0001" + "0161" + "01" + inner))
    assert exc.value.path == "a/b[1]/c"
    assert "nothing after it" in exc.value.message


def test_depth_is_capped():
    nested = "0001" + "0161" + "01"
    with pytest.raises(Corrupt) as exc:
        PARSER.parse(event_bytes(nested * 100 + "0000"))
    assert exc.value.code == "hercules.too-deep"


def test_big_containers_are_flagged_for_dotnet():
    body = struct.pack(">H", 40000).hex() + ("00" + "0b") * 40000
    _, found = parse(event_bytes(body))
    assert "hercules.dotnet-tag-count" in found


def test_gate_event_size_limit():
    body = "0001" + "0173" + "09" + struct.pack(">i", 600_000).hex() + "61" * 600_000
    _, found = parse(event_bytes(body))
    assert found == ["hercules.event-too-large"]


def test_batch_count_mismatch_truncation_trailing_and_malformed():
    ev = bytes.fromhex(README_EVENT)
    short = decode_batch(struct.pack(">i", 3) + ev * 2, PARSER)
    assert len(short.events) == 2 and [p.code for p in short.problems] == ["hercules.count-mismatch"]
    trailing = decode_batch(struct.pack(">i", 1) + ev + b"xyz", PARSER)
    assert [p.code for p in trailing.problems] == ["hercules.trailing-bytes"]
    assert trailing.problems[0].fields["trailing"] == 3
    assert [p.code for p in decode_batch(b"\x00\x00", PARSER).problems] == ["hercules.batch-malformed"]
    cut = decode_batch(struct.pack(">i", 2) + ev + ev[:30], PARSER)
    assert [p.code for p in cut.problems] == ["hercules.truncated"]
    assert cut.problems[0].fields["events_lost"] == 1
    bad = decode_batch(struct.pack(">i", 3) + ev + event_bytes("0001" + "0161" + "0e") + ev, PARSER)
    assert len(bad.events) == 1
    assert bad.problems[0].code == "hercules.unknown-type"
    assert "remaining 2 event(s) cannot be located" in bad.problems[0].message
    assert [p.code for p in decode_batch(struct.pack(">i", -1), PARSER).problems] == [
        "hercules.count-mismatch"
    ]


# --- the encoder refuses what Java would corrupt ---


def test_encoder_rejects_long_keys_many_tags_and_bad_uuids():
    ok = Event(1, 0, bytes(16), (("k" * 255, Variant(Type.NULL, None)),))
    assert len(encode_event(ok)) == 27 + 1 + 255 + 1
    with pytest.raises(EncodeError):
        encode_event(Event(1, 0, bytes(16), (("k" * 256, Variant(Type.NULL, None)),)))
    with pytest.raises(EncodeError):
        encode_event(Event(1, 0, bytes(16), (("k", Variant(Type.NULL, None)),) * 65536))
    with pytest.raises(EncodeError):
        encode_event(Event(1, 0, bytes(15), ()))
    with pytest.raises(EncodeError):
        encode_event(Event(1, 0, bytes(16), (("k", Variant(Type.SHORT, 70000)),)))
    with pytest.raises(EncodeError):
        encode_event(Event(1, 2**63, bytes(16), ()))
