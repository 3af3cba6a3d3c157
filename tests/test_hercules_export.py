"""Export of wirelog messages as Hercules events: mapping, reversibility, determinism, readers' limits."""

from __future__ import annotations

import io
import uuid

from hercules_helpers import README_EVENT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wirelog.decoders.hercules import decode_event_stream
from wirelog.decoders.hercules.types import (
    MAX_DOTNET_TAGS,
    TAG_NAME,
    Type,
    Variant,
    Vector,
    escape_name,
    unescape_name,
)
from wirelog.export.hercules import HerculesWriter, Mapper, iso_ticks, map_record
from wirelog.model import Direction, Message

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)  # the core's numbers hold 64 bits: wider ones below
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def message(doc=None, offset=10, **kw) -> Message:
    base = dict(
        protocol="lumberjack", kind="event", direction=Direction.C2S, offset=offset, length=50, frame=7,
        ts=1_700_000_000_123_456_789, version="2", fields={"seq": 3}, event=doc, acked=True, stream=4,
        capture="beats.pcap", client="10.0.0.1:40000", server="10.0.0.2:5044",
    )  # fmt: skip
    base.update(kw)
    return Message(**base)


def export(*records: Message) -> tuple[bytes, list]:
    out = io.BytesIO()
    writer = HerculesWriter(out)
    findings = [f for r in records for f in writer.write(r)]
    writer.close()
    return out.getvalue(), findings


@settings(max_examples=300)
@given(st.text(max_size=40))
def test_name_escaping_is_reversible_and_conventional(name):
    escaped = escape_name(name)
    assert unescape_name(escaped) == name
    if len(escaped) <= 255:
        assert TAG_NAME.fullmatch(escaped.encode())


def test_integers_wider_than_64_bits_come_back_as_their_marker():
    wide = [2**64, -(2**63) - 1, 2**70]
    data, _ = export(message({"n": wide}))
    (rec,) = list(decode_event_stream(data))
    assert rec.event == {"n": [{"_xn": str(n)} for n in wide]}


def test_conventional_names_are_kept():
    for name in ("host", "log.file.path", "a-b_c", "x_y", "_private"):
        assert escape_name(name) == name
    assert escape_name("@timestamp") == "_x40timestamp"
    assert escape_name("_xv") == "_x5fxv"
    assert escape_name("") == "_x"


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_documents_come_back_unchanged(doc):
    data, _ = export(message(doc))
    (rec,) = list(decode_event_stream(data))
    assert rec.event == doc
    src = rec.fields["source"]
    assert (src["protocol"], src["kind"], src["offset"], src["stream"]) == ("lumberjack", "event", 10, 4)
    assert src["fields"] == {"seq": 3} and src["acked"] is True and src["direction"] == "c2s"


def _walk(v: Variant):
    yield v.type, v.value
    if v.type == Type.CONTAINER:
        for _, inner in v.value:
            yield from _walk(inner)
    elif v.type == Type.VECTOR:
        vec: Vector = v.value
        yield ("elem", vec.elem)
        if vec.elem == Type.CONTAINER:
            for tags in vec.items:
                yield from _walk(Variant(Type.CONTAINER, tags))


@settings(max_examples=200)
@given(JSON)
def test_output_suits_java_and_dotnet_readers(doc):
    ev = map_record(message(doc), Mapper(), bytes(16))
    for kind, value in _walk(Variant(Type.CONTAINER, ev.tags)):
        assert (kind, value) not in (("elem", Type.VECTOR), ("elem", Type.NULL))
        if kind == Type.CONTAINER:
            assert len(value) <= MAX_DOTNET_TAGS
            assert all(TAG_NAME.fullmatch(k.encode()) for k, _ in value)


def test_type_by_type_mapping():
    doc = {
        "s": "x",
        "i": 5,
        "f": 1.5,
        "b": True,
        "n": None,
        "o": {"k": 1},
        "ls": [1, 2],
        "lf": [1.0],
        "lo": [{}],
    }
    ev = map_record(message(doc), Mapper(), bytes(16))
    mapped = dict(dict(ev.tags)["event"].value)
    assert {k: v.type for k, v in mapped.items()} == {
        "s": Type.STRING, "i": Type.LONG, "f": Type.DOUBLE, "b": Type.FLAG, "n": Type.NULL,
        "o": Type.CONTAINER, "ls": Type.VECTOR, "lf": Type.VECTOR, "lo": Type.VECTOR,
    }  # fmt: skip
    assert mapped["ls"].value == Vector(Type.LONG, (1, 2))
    assert mapped["lo"].value == Vector(Type.CONTAINER, ((),))


def test_timestamps():
    # §4.6: 2019-01-23T00:00Z is 0x003700CFC0164000 ticks
    assert iso_ticks("2019-01-23T00:00:00Z") == 0x003700CFC0164000
    assert iso_ticks("2019-01-23T03:00:00.5+03:00") == 0x003700CFC0164000 + 5_000_000
    assert iso_ticks("yesterday") is None
    ev = map_record(message({"@timestamp": "2019-01-23T00:00:00.000Z"}), Mapper(), bytes(16))
    assert ev.timestamp == 0x003700CFC0164000
    assert map_record(message({"x": 1}), Mapper(), bytes(16)).timestamp == 17_000_000_001_234_567
    assert map_record(message(None, ts=None), Mapper(), bytes(16)).timestamp == 0
    data, _ = export(message({"x": 1}), message(None, ts=None, offset=99, kind="connection"))
    assert [r.fields["timestamp"] for r in decode_event_stream(data)] == [17_000_000_001_234_567] * 2
    (herc,) = decode_event_stream(bytes.fromhex(README_EVENT))
    assert map_record(herc, Mapper(), bytes(16)).timestamp == 15_276_799_200_000_000


def test_writer_is_deterministic_and_uuids_distinct():
    records = [message({"a": i}, offset=o) for i, o in enumerate((10, 10, 10, 60, 60))]
    first, _ = export(*records)
    again, _ = export(*records)
    assert first == again
    uuids = [r.fields["uuid"] for r in decode_event_stream(first)]
    assert len(set(uuids)) == 5
    assert all(uuid.UUID(u).version == 5 for u in uuids)
    shifted, _ = export(*[message({"a": i}, offset=o, capture="other.pcap") for i, o in enumerate((10, 10))])
    assert not set(uuids) & {r.fields["uuid"] for r in decode_event_stream(shifted)}


def test_renamed_keys_reported_once_with_position():
    _, findings = export(message({"@timestamp": "x", "a b": 1}), message({"@timestamp": "y"}, offset=99))
    assert [f.code for f in findings] == ["hercules.export-key-renamed"] * 2
    assert [f.fields["key"] for f in findings] == ["@timestamp", "a b"]
    assert findings[0].offset == 10 and findings[0].capture == "beats.pcap"


def test_over_long_keys_are_shortened_and_reported():
    key = "k" * 300
    data, findings = export(message({key: 1}))
    assert [f.code for f in findings] == ["hercules.export-key-truncated"]
    (rec,) = decode_event_stream(data)
    (name,) = rec.event
    assert name.startswith("k" * 200) and len(name) == 200 + 3 + 16


def test_exported_events_parse_without_findings():
    data, _ = export(message({"message": "hello", "tags": ["a", "b"], "beat": {"hostname": "h"}}))
    (rec,) = decode_event_stream(data)
    assert rec.kind == "event" and rec.length == len(data)
