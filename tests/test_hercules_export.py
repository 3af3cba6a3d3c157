"""Export of wirelog messages as Hercules events: mapping, reversibility, determinism, readers' limits."""

from __future__ import annotations

import io
import json
import re
import struct
import uuid

from hercules_helpers import README_EVENT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wirelog import _core
from wirelog.engine.hercules_events import decode_event_stream
from wirelog.export.hercules import HerculesWriter
from wirelog.model import Direction, Message

TAG_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,255}")
MAX_DOTNET_TAGS = 32767  # the .NET reader reads a container's count as a signed Int16

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


def export(*records: Message) -> tuple[bytes, list[dict]]:
    """The bytes of `records` and the mapping notes (NDJSON finding objects)."""
    out = io.BytesIO()
    writer = HerculesWriter(out)
    notes = []
    for r in records:
        writer.write(r)
        notes += [json.loads(line) for _, line in writer.notes()]
    writer.close()
    return out.getvalue(), notes


def plain(data: bytes) -> list[dict]:
    """The events as a plain reader sees them (tag names as written, no mapping undone)."""
    return _core.hercules_documents(data)


@settings(max_examples=300)
@given(st.text(max_size=40))
def test_names_come_back_and_are_conventional(name):
    data, _ = export(message({name: 1}))
    (written,) = plain(data)[0]["tags"]["event"]
    assert len(written) <= 255 and TAG_NAME.fullmatch(written)
    (rec,) = decode_event_stream(data)
    if "_xh" not in written:  # `_xh` only ends a shortened name (escapes are `_x` + hex digits)
        assert rec.event == {name: 1}


def test_integers_beyond_a_long_are_written_as_their_marker_and_come_back():
    wide = [2**63, 2**64 - 1]  # beyond a signed Long, within the core's 64-bit numbers
    data, _ = export(message({"n": wide}))
    assert plain(data)[0]["tags"]["event"] == {"n": [{"_xn": str(n)} for n in wide]}
    (rec,) = list(decode_event_stream(data))
    assert rec.event == {"n": wide}


def test_conventional_names_are_kept():
    names = ("host", "log.file.path", "a-b_c", "x_y", "_private", "@timestamp", "_xv", "")
    data, _ = export(message(dict.fromkeys(names, 1)))
    assert list(plain(data)[0]["tags"]["event"]) == [*names[:5], "_x40timestamp", "_x5fxv", "_x"]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_documents_come_back_unchanged(doc):
    data, _ = export(message(doc))
    (rec,) = list(decode_event_stream(data))
    assert rec.event == doc
    src = rec.fields["source"]
    assert (src["protocol"], src["kind"], src["offset"], src["stream"]) == ("lumberjack", "event", 10, 4)
    assert src["fields"] == {"seq": 3} and src["acked"] is True and src["direction"] == "c2s"


def _check_readable(v) -> None:
    """No Vector<Vector> or Vector<Null> (a list holding a list or a null: wrapped items are
    containers), conventional names, containers .NET can count."""
    if isinstance(v, dict):
        assert len(v) <= MAX_DOTNET_TAGS
        for k, inner in v.items():
            assert TAG_NAME.fullmatch(k)
            _check_readable(inner)
    elif isinstance(v, list):
        for item in v:
            assert item is not None and not isinstance(item, list)
            _check_readable(item)


@settings(max_examples=200)
@given(JSON)
def test_output_suits_java_and_dotnet_readers(doc):
    data, _ = export(message(doc))
    _check_readable(plain(data)[0]["tags"])


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
        "mixed": [1, "a"],
        "nested": [[1]],
        "empty": [],
    }
    data, _ = export(message(doc))
    assert plain(data)[0]["tags"]["event"] == {
        "s": "x", "i": 5, "f": 1.5, "b": True, "n": None, "o": {"k": 1}, "ls": [1, 2], "lf": [1.0],
        "lo": [{}], "mixed": [{"_xv": 1}, {"_xv": "a"}], "nested": [{"_xv": [1]}], "empty": [],
    }  # fmt: skip
    # Long 5, Double 1.5, Vector<Long> [1, 2]: the type bytes as the Java reader sees them
    assert b"\x01i\x05" + (5).to_bytes(8, "big") in data
    assert b"\x01f\x08" + struct.pack(">d", 1.5) in data
    assert b"\x02ls\x80\x05\x00\x00\x00\x02" in data


def ticks(*records: Message) -> list[int]:
    data, _ = export(*records)
    return [e["timestamp"] for e in plain(data)]


def test_timestamps():
    # §4.6: 2019-01-23T00:00Z is 0x003700CFC0164000 ticks
    assert ticks(message({"@timestamp": "2019-01-23T00:00:00.000Z"})) == [0x003700CFC0164000]
    assert ticks(message({"@timestamp": "2019-01-23T03:00:00.5+03:00"})) == [0x003700CFC0164000 + 5_000_000]
    assert ticks(message({"@timestamp": "yesterday"})) == [17_000_000_001_234_567]  # the capture time
    assert ticks(message(None, ts=None)) == [0]
    assert (
        ticks(message({"x": 1}), message(None, ts=None, offset=99, kind="connection"))
        == [17_000_000_001_234_567] * 2
    )
    (herc,) = decode_event_stream(bytes.fromhex(README_EVENT))
    assert ticks(herc) == [15_276_799_200_000_000]


def test_writer_is_deterministic_and_uuids_distinct():
    records = [message({"a": i}, offset=o) for i, o in enumerate((10, 10, 10, 60, 60))]
    first, _ = export(*records)
    again, _ = export(*records)
    assert first == again
    uuids = [r.fields["uuid"] for r in decode_event_stream(first)]
    assert len(set(uuids)) == 5
    assert all(uuid.UUID(u).version == 5 for u in uuids)
    # the first: uuid5 of capture, stream, direction, offset, protocol, kind and the repeat counter
    name = "beats.pcap\x004\x00c2s\x0010\x00lumberjack\x00event\x000"
    assert uuids[0] == str(uuid.uuid5(uuid.UUID("6f1d0e2a-4c57-5e6b-9a51-77697265c06f"), name))
    shifted, _ = export(*[message({"a": i}, offset=o, capture="other.pcap") for i, o in enumerate((10, 10))])
    assert not set(uuids) & {r.fields["uuid"] for r in decode_event_stream(shifted)}


def test_renamed_keys_reported_once_with_position():
    _, notes = export(message({"@timestamp": "x", "a b": 1}), message({"@timestamp": "y"}, offset=99))
    assert [f["code"] for f in notes] == ["hercules.export-key-renamed"] * 2
    assert [f["key"] for f in notes] == ["@timestamp", "a b"]
    assert notes[0]["offset"] == 10 and notes[0]["capture"] == "beats.pcap" and notes[0]["stream"] == 4
    assert (
        notes[0]["message"]
        == "key '@timestamp' is outside the tag-name rules; written as '_x40timestamp' (reversible)"
    )


def test_over_long_keys_are_shortened_and_reported():
    key = "k" * 300
    data, notes = export(message({key: 1}))
    assert [f["code"] for f in notes] == ["hercules.export-key-truncated"]
    (rec,) = decode_event_stream(data)
    (name,) = rec.event
    assert name.startswith("k" * 200) and len(name) == 200 + 3 + 16


def test_exported_events_parse_without_findings():
    data, _ = export(message({"message": "hello", "tags": ["a", "b"], "beat": {"hostname": "h"}}))
    (rec,) = decode_event_stream(data)
    assert rec.kind == "event" and rec.length == len(data)
