"""End to end: `wirelog convert` on the committed real pylogbeat capture and on crafted captures."""

from __future__ import annotations

from pathlib import Path

from capture_tools import ndjson, run_cli
from lumberjack_helpers import C2S, S2C, ack, cframe, jframe, window, write_capture

SAMPLE = Path(__file__).resolve().parent / "data" / "lumberjack" / "pylogbeat-logstash.pcap"


def convert(*args: str) -> list[dict]:
    code, out, err = run_cli("convert", *args, "--to", "json")
    assert code == 0, err
    return ndjson(out)


def test_real_pylogbeat_capture():
    rows = [r for r in convert(str(SAMPLE)) if r["protocol"] == "lumberjack"]
    events = [r for r in rows if r.get("kind") == "event"]
    assert len(events) == 9
    assert [e["seq"] for e in events] == list(range(1, 10))
    assert events[0]["event"]["message"].startswith(
        '10.0.4.17 - - [21/Nov/2026:06:00:01 +0000] "GET /api/orders'
    )
    assert events[4]["event"]["message"].endswith("ERROR payment-gateway timeout after 3000 ms (order 81723)")
    assert all(e["acked"] is True and e["event"]["@metadata"]["beat"] == "filebeat" for e in events)
    assert {e["server"] for e in events} == {"127.0.0.1:5044"}
    acks = [r for r in rows if r.get("kind") == "ack"]
    assert [a["value"] for a in acks] == [4, 0, 0, 7, 9]
    assert [e["ack_frame"] for e in events] == [acks[0]["frame"]] * 4 + [acks[3]["frame"]] * 3 + [
        acks[4]["frame"]
    ] * 2
    assert [w["count"] for w in rows if w.get("kind") == "window"] == [4, 3, 2]
    problems = [r for r in rows if r["record"] == "finding" and r["severity"] != "info"]
    assert problems == []
    info = {r["code"] for r in rows if r["record"] == "finding"}
    assert info == {"lumberjack.seq-profile", "lumberjack.server-kind", "lumberjack.keepalive"}


def test_json_sent_to_beats_port(tmp_path):
    pcap = write_capture(tmp_path / "json.pcap", [(C2S, b'{"message":"hello"}\n')], port=5044)
    rows = convert(str(pcap))
    (f,) = [r for r in rows if r.get("code") == "lumberjack.invalid-version"]
    assert "Invalid version of beats protocol: 123" in f["message"] and f["frame"] == 4


def test_decode_as_on_another_port(tmp_path):
    pcap = write_capture(tmp_path / "odd.pcap", [(C2S, b"<13>Nov 21 host app: hi\n")], port=7777)
    assert not [r for r in convert(str(pcap)) if r.get("protocol") == "lumberjack"]
    rows = convert(str(pcap), "--decode-as", "7777=lumberjack")
    assert next(r["code"] for r in rows if r.get("protocol") == "lumberjack") == "lumberjack.invalid-version"


def test_capture_gap_loses_only_the_missing_window(tmp_path):
    w = [
        window(2) + cframe(jframe(1, {"message": f"w{i}a"}) + jframe(2, {"message": f"w{i}b"}))
        for i in range(3)
    ]
    turns = [(C2S, w[0]), (S2C, ack(2)), (C2S, w[1]), (S2C, ack(2)), (C2S, w[2]), (S2C, ack(2))]
    rows = convert(str(write_capture(tmp_path / "gap.pcap", turns, port=6000, drop=2)))
    lj = [r for r in rows if r.get("protocol") == "lumberjack"]
    events = [r for r in lj if r.get("kind") == "event"]
    assert [e["event"]["message"] for e in events] == ["w0a", "w0b", "w2a", "w2b"]
    assert all(e["acked"] for e in events)
    assert any(r["record"] == "finding" and "gap" in r.get("code", "") for r in rows)


def test_events_only_gives_the_log_lines():
    rows = convert(str(SAMPLE), "--events")
    assert [r["kind"] for r in rows] == ["event"] * 9
    lines = [r["event"]["message"] for r in rows]
    assert lines[6] == "2026-11-21T06:00:05.004Z INFO payment for order 81723 captured"
    assert lines[8] == '10.0.4.22 - - [21/Nov/2026:06:00:07 +0000] "DELETE /api/cart/81723 HTTP/1.1" 204 0'
    assert all(r["acked"] is True for r in rows)


STALLED = SAMPLE.with_name("pylogbeat-stalled-resend.pcap")


def test_real_stalled_pipeline_then_resend():
    """Window 2 only got keep-alives before the receiver dropped the connection; the client resent it."""
    rows = [r for r in convert(str(STALLED)) if r["protocol"] == "lumberjack"]
    events = [r for r in rows if r.get("kind") == "event"]
    lost = [e for e in events if e["acked"] is False]
    assert [(e["stream"], e["seq"]) for e in lost] == [(0, 5), (0, 6), (0, 7)]
    resent = [e for e in events if "resend_of" in e]
    assert [e["event"] for e in resent] == [e["event"] for e in lost]
    assert all(e["stream"] == 1 and e["acked"] is True and e["resend_of"]["stream"] == 0 for e in resent)
    assert len(events) == 12 and sum(e["acked"] is True for e in events) == 9
    codes = {(r["stream"], r["code"]) for r in rows if r["record"] == "finding"}
    assert {(0, "lumberjack.unacked"), (0, "lumberjack.keepalive"), (1, "lumberjack.resend")} <= codes
    (unacked,) = [r for r in rows if r.get("code") == "lumberjack.unacked"]
    assert unacked["events"] == 3 and unacked["windows"] == [2]
