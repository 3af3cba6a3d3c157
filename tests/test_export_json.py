"""NDJSON lines: the record contract of docs/records.md on the writer's fast and slow paths."""

from __future__ import annotations

import io
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from wirelog.export.json import JsonWriter, dumps, dumps_line, rfc3339
from wirelog.model import Direction, Finding, Message, Severity


def message(fields: dict) -> Message:
    rec = Message("lumberjack", "event", Direction.C2S, 6, 417, 3, 1_700_000_000_000_060_000, "2", fields)
    rec.capture, rec.stream, rec.client, rec.server = "x.pcap", 0, "10.0.0.1:40000", "10.0.0.2:5044"
    rec.event, rec.acked = {"message": "hi"}, True
    return rec


def test_message_line_keys_in_contract_order():
    line = dumps(message({"seq": 1, "window": 1}))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert list(json.loads(line)) == [
        "record", "capture", "stream", "client", "server", "direction", "frame", "offset", "ts",
        "protocol", "kind", "version", "length", "seq", "window", "event", "acked", "event_id",
        "delivery",
    ]  # fmt: skip
    assert json.loads(line)["ts"] == "2023-11-14T22:13:20.000060000Z"


def test_field_named_like_a_common_key_gets_the_protocol_prefix_in_place():
    d = json.loads(dumps(message({"seq": 1, "kind": "x", "event": 2, "z": 3})))
    assert list(d)[13:] == [
        "seq",
        "lumberjack_kind",
        "lumberjack_event",
        "z",
        "event",
        "acked",
        "event_id",
        "delivery",
    ]
    assert d["kind"] == "event" and d["lumberjack_kind"] == "x" and d["lumberjack_event"] == 2


def test_finding_field_named_like_a_finding_key_gets_the_prefix():
    f = Finding("lumberjack.resync", Severity.WARNING, "skipped", "lumberjack", Direction.S2C, 0, 1, None)
    f.fields = {"skipped": 4, "message": "m", "code": "c"}
    d = json.loads(dumps(f))
    assert d["message"] == "skipped" and d["lumberjack_message"] == "m" and d["lumberjack_code"] == "c"
    assert list(d)[-3:] == ["skipped", "lumberjack_message", "lumberjack_code"] and d["ts"] is None


def test_non_string_keys_big_ints_and_bytes_still_encode():
    assert dumps_line({"m": {1: "a", 2.5: "b"}}) == b'{"m":{"1":"a","2.5":"b"}}\n'
    assert dumps_line({"n": 2**70, "b": b"\x01\xff"}) == b'{"n":1180591620717411303424,"b":"01ff"}\n'
    assert dumps_line({"t": (1, 2), "s": "é"}) == '{"t":[1,2],"s":"é"}\n'.encode()


def test_rfc3339_nanoseconds_and_none():
    assert rfc3339(None) is None
    assert rfc3339(0) == "1970-01-01T00:00:00.000000000Z"
    assert rfc3339(1_700_000_000_123_456_789) == "2023-11-14T22:13:20.123456789Z"


values = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, -1, 2**63, 2**70, 0.5, 1e16, "", "é", "a\nb"]),
)
field_dicts = st.dictionaries(
    st.sampled_from(["seq", "window", "kind", "event", "lumberjack_kind", "code"]),
    values | st.dictionaries(st.sampled_from([1, 2.5, "k"]), values, max_size=1),
    max_size=3,
)


@st.composite
def records(draw) -> Message | Finding:
    fields = draw(field_dicts)
    frame = draw(st.sampled_from([1, 2, None]))
    if draw(st.integers(0, 4)) == 0:
        rec: Message | Finding = Finding("tcp.gap", Severity.WARNING, "gap", "tcp", Direction.C2S, 0, frame)
        rec.fields = fields
    else:
        version = draw(st.sampled_from(["1", "2", None]))
        rec = Message(
            "lumberjack", draw(st.sampled_from(["event", "window"])), Direction.C2S, 6, 9, frame, 5, version
        )
        rec.fields, rec.event, rec.acked = fields, draw(values), draw(st.sampled_from([True, False, None]))
    rec.capture, rec.stream = "c.pcap", draw(st.sampled_from([0, 1]))
    return rec


@settings(max_examples=300)
@given(st.lists(records(), max_size=6))
def test_writer_lines_are_the_records_dumps(recs):
    """JsonWriter encodes a shared message head once; every line must still be dumps(rec)."""
    out = io.BytesIO()
    writer = JsonWriter(out)
    for rec in recs:
        writer.write(rec)
    writer.close()
    assert out.getvalue() == b"".join(dumps(rec) for rec in recs)
    assert writer.count == len(recs)
