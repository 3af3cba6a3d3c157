"""NDJSON lines: the record contract of docs/records.md on the writer's fast and slow paths."""

from __future__ import annotations

import json

from wirelog.export.json import dumps, dumps_line, rfc3339
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
        "protocol", "kind", "version", "length", "seq", "window", "event", "acked",
    ]  # fmt: skip
    assert json.loads(line)["ts"] == "2023-11-14T22:13:20.000060000Z"


def test_field_named_like_a_common_key_gets_the_protocol_prefix_in_place():
    d = json.loads(dumps(message({"seq": 1, "kind": "x", "event": 2, "z": 3})))
    assert list(d)[13:] == ["seq", "lumberjack_kind", "lumberjack_event", "z", "event", "acked"]
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
