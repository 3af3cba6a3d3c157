"""The Hercules event codec, decoded by the core: reference vectors, every type, validation findings,
hostile input; and the encoder's refusals. (Decode → encode byte identity is a cargo test:
native/src/decoders/hercules/tests.rs.)"""

from __future__ import annotations

import dataclasses
import math
import struct
import uuid

import pytest
from hercules_codec import EncodeError, Event, Type, Variant, encode_batch, encode_event
from hercules_helpers import (
    EVENTS,
    FORMATTER_EVENT,
    MIXED_VECTORS,
    README_EVENT,
    REFERENCE,
    SCALARS_EVENT,
    codes,
    decode_stream,
    event_bytes,
    messages,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wirelog.engine.hercules_events import decode_event_stream
from wirelog.engine.protocols import Limits
from wirelog.model import Finding, Message


def parse(data: bytes, **limits: int) -> tuple[Message | None, list[str]]:
    """The first event of `data` (None when none decodes) and the codes of the findings."""
    recs = list(decode_event_stream(data, Limits(**limits) if limits else None))
    events = messages(recs, "event")
    return (events[0] if events else None), codes(recs)


def corrupt(data: bytes, **limits: int) -> Finding:
    """The finding that stopped the first event of `data`."""
    recs = list(decode_event_stream(data, Limits(**limits) if limits else None))
    assert not messages(recs, "event")
    return next(r for r in recs if isinstance(r, Finding))


@pytest.mark.skipif(not REFERENCE.exists(), reason="../shared absent")
def test_vectors_are_the_reference_text():
    text = "".join(REFERENCE.read_text().split())
    for vec in (README_EVENT, FORMATTER_EVENT, SCALARS_EVENT):
        assert vec in text
    assert "000106766563746f7280800000000204000000020000000100000002090000000100000001" + "78" in text


def test_readme_sample_65_bytes():
    data = bytes.fromhex(README_EVENT)
    assert len(data) == 65
    ev, found = parse(data)
    assert (ev.length, ev.version, ev.fields["timestamp"]) == (65, "1", 15_276_799_200_000_000)
    assert ev.fields["uuid"] == "11203800-63fd-11e8-83e2-3a587d902000"
    assert ev.fields["time"] == "2018-05-30T11:32:00.0000000Z"
    assert ev.event == {"host": "localhost", "timestamp": 1_527_679_920_000_000}
    assert found == []


def test_gate_batch_69_bytes():
    body = bytes.fromhex("00000001" + README_EVENT)
    recs = list(decode_event_stream(body))
    assert len(body) == 69 and codes(recs) == []
    assert [(r.kind, r.offset) for r in recs] == [("batch", 0), ("event", 4)]
    assert recs[0].fields["count"] == 1


def test_formatter_event_169_bytes():
    data = bytes.fromhex(FORMATTER_EVENT)
    ev, found = parse(data)
    assert len(data) == 169 == ev.length
    assert ev.event == {
        "String tag": "String value",
        "Null tag": None,
        "Uuid tag": "5ef18239-8e6c-4e19-b222-c87fd06b003d",
        "Container array tag": [
            {"Some integer tag": 123345567},
            {"Byte vector tag": [0xDE, 0xAD, 0xBE, 0xEF]},
        ],
    }
    assert set(found) == {"hercules.tag-name"}  # keys with spaces break the convention, nothing more


def test_scalars_71_bytes():
    data = bytes.fromhex(SCALARS_EVENT)
    ev, found = parse(data)
    assert (len(data), ev.fields["timestamp"], ev.fields["uuid"]) == (
        71,
        1,
        "00000000-0000-0000-0000-000000000000",
    )
    assert ev.event == {
        "f": True, "g": False, "n": [None, None, None], "d": 1.5, "fl": -0.25, "b": 255, "s": -2,
    }  # fmt: skip
    assert found == ["hercules.timestamp-range"]  # tick 1 is 1970


def test_vector_of_vectors_with_mixed_element_types():
    assert parse(event_bytes(MIXED_VECTORS))[0].event == {"vector": [[1, 2], ["x"]]}


def test_vector_of_vectors_of_integers():
    inner = "04000000020000000{}0000000{}"
    hexed = "000106766563746f72808000000002" + inner.format(1, 2) + inner.format(3, 4)
    assert parse(event_bytes(hexed))[0].event == {"vector": [[1, 2], [3, 4]]}


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS, st.integers(0, 255))
def test_every_encoded_event_decodes_whole(ev: Event, version: int):
    ev = dataclasses.replace(ev, version=version)
    data = encode_event(ev)
    dec, found = parse(encode_batch([ev]))  # in a batch: a bare event of version 0 reads as a count
    assert (dec.length, dec.version, dec.fields["timestamp"]) == (len(data), str(version), ev.timestamp)
    assert (dec.fields["uuid"], dec.fields["tag_count"]) == (str(uuid_of(ev)), len(ev.tags))
    assert not {"hercules.truncated", "hercules.unknown-type", "hercules.resync"} & set(found)


def uuid_of(ev: Event) -> uuid.UUID:
    return uuid.UUID(bytes=ev.uuid)


@settings(max_examples=200)
@given(st.binary(min_size=4, max_size=4), st.binary(min_size=8, max_size=8))
def test_floats_of_any_bits_decode(f32: bytes, f64: bytes):
    body = "0002" + "0166" + "07" + f32.hex() + "0167" + "08" + f64.hex()
    ev, _ = parse(event_bytes(body))
    x, y = struct.unpack(">f", f32)[0], struct.unpack(">d", f64)[0]
    assert [ev.event["f"], ev.event["g"]] == [as_json(x), as_json(y)]


def as_json(x: float) -> float | str:
    """A float as the decoder renders it: non-finite ones as text."""
    if math.isnan(x):
        return "NaN"
    return ("Infinity" if x > 0 else "-Infinity") if math.isinf(x) else x


@settings(max_examples=200)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_become_records(data: bytes):
    for r in decode_event_stream(data):
        assert isinstance(r, Message | Finding)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(EVENTS, st.data())
def test_every_truncation_is_reported_as_truncated(ev: Event, data):
    raw = encode_event(ev)
    cut = data.draw(st.integers(1, len(raw) - 1))
    ev, found = parse(raw[:cut])
    # the cut event is never an event; the resync after it may still find a plausible-looking one
    # inside its bytes (a "truncation" can be garbage before real events: the decoder looks on)
    assert "hercules.truncated" in found and (ev is None or ev.offset > 0)


# --- validation findings ---


def test_version_other_than_1():
    data = bytearray(bytes.fromhex(README_EVENT))
    data[0] = 2
    ev, found = parse(bytes(data))
    assert found == ["hercules.version"] and ev.version == "2"


def test_negative_timestamp():
    _, found = parse(event_bytes("0000", ticks=-5))
    assert found == ["hercules.timestamp-range"]


def test_duplicate_keys_kept_in_order_and_flagged():
    one = "01610400000001"
    two = "01610400000002"
    data = event_bytes("0002" + one + two)
    ev, found = parse(data)
    assert ev.fields["tag_count"] == 2
    assert found == ["hercules.duplicate-key"]
    assert ev.event == {"a": 2}  # last wins, like Java's HashMap


def test_tag_names_outside_convention():
    # empty key, a 255-byte key is fine by length, a key with '@'
    data = event_bytes("0003" + "00" + "0b" + "ff" + "61" * 255 + "0b" + "024061" + "0b")
    _, found = parse(data)
    assert found == ["hercules.tag-name", "hercules.tag-name"]


def test_invalid_utf8_in_key_and_string():
    data = event_bytes("0002" + "01ff0b" + "0173" + "09" + "00000002" + "c328")
    recs = list(decode_event_stream(data))
    assert codes(recs) == ["hercules.invalid-utf8", "hercules.invalid-utf8"]
    assert [r.fields["raw"] for r in recs if isinstance(r, Finding)] == ["ff", "c328"]
    assert messages(recs)[0].event["s"] == "\ufffd("


def test_flag_byte_other_than_0_1():
    data = event_bytes("0001" + "0166" + "06" + "02")
    ev, found = parse(data)
    assert found == ["hercules.flag-value"]
    assert ev.event == {"f": True}


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
    f = corrupt(event_bytes(body) + bytes(2000), max_frame=1000)
    assert (f.code, f.fields["path"]) == (code, "a")


def test_unknown_type_in_nested_path_names_the_tag_path():
    inner = "0001" + "0162" + "8001" + "00000002" + "0000" + "0001" + "0163" + "0d"
    f = corrupt(event_bytes("0001" + "0161" + "01" + inner))
    assert f.fields["path"] == "a/b[1]/c"
    assert "nothing after it" in f.message


def test_depth_is_capped():
    nested = "0001" + "0161" + "01"
    assert corrupt(event_bytes(nested * 100 + "0000")).code == "hercules.too-deep"


def test_big_containers_are_flagged_for_dotnet():
    body = struct.pack(">H", 40000).hex() + ("00" + "0b") * 40000
    _, found = parse(event_bytes(body))
    assert "hercules.dotnet-tag-count" in found


def test_gate_event_size_limit():
    body = "0001" + "0173" + "09" + struct.pack(">i", 600_000).hex() + "61" * 600_000
    _, found = parse(event_bytes(body))
    assert found == ["hercules.event-too-large"]


def gate(body: bytes) -> list:
    """A Gate request carrying `body`, answered 400."""
    head = f"POST /stream/send?stream=s HTTP/1.1\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    return decode_stream(head + body, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


def test_batch_count_mismatch_truncation_trailing_and_malformed():
    ev = bytes.fromhex(README_EVENT)
    short = gate(struct.pack(">i", 3) + ev * 2)
    assert len(messages(short, "event")) == 2 and "hercules.count-mismatch" in codes(short)
    trailing = gate(struct.pack(">i", 1) + ev + b"xyz")
    (f,) = [r for r in trailing if isinstance(r, Finding) and r.code == "hercules.trailing-bytes"]
    assert f.fields["trailing"] == 3
    assert "hercules.batch-malformed" in codes(gate(b"\x00\x00"))
    cut = [r for r in gate(struct.pack(">i", 2) + ev + ev[:30]) if isinstance(r, Finding)]
    assert cut[0].code == "hercules.truncated" and cut[0].fields["events_lost"] == 1
    bad = gate(struct.pack(">i", 3) + ev + event_bytes("0001" + "0161" + "0e") + ev)
    assert len(messages(bad, "event")) == 1
    (f,) = [r for r in bad if isinstance(r, Finding) and r.code == "hercules.unknown-type"]
    assert "remaining 2 event(s) cannot be located" in f.message
    assert "hercules.count-mismatch" in codes(gate(struct.pack(">i", -1)))


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
