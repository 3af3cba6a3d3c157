"""`wirelog report` against elastic/go-lumber, a real Go client and server over loopback (the harness
in tests/peers/go), whose own logs are the expected answer: the server that holds its ACKs draws
one answered stall per window with go-lumber's keep-alives drawn as keep-alives, and the server
that stops ACKing draws an unanswered stall and the never-acknowledged events the client says it
sent and never saw acknowledged."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from tests.capture_tools import ndjson, run_cli
from tests.go_peer_helpers import GoServer, require_golumber, run_client
from tests.lumberjack_helpers import capture
from tests.test_report import assert_page_inspect, inspect_json, report, rows

pytest.importorskip("vl_convert")


@pytest.fixture(autouse=True)
def _golumber() -> None:
    require_golumber()


def ns(rfc3339: str) -> int:
    """A record's `ts` (RFC 3339 with nanoseconds) as ns since the epoch."""
    whole, fraction = rfc3339.rstrip("Z").split(".")
    return int(datetime.fromisoformat(whole + "+00:00").timestamp()) * 10**9 + int(fraction.ljust(9, "0"))


def lumberjack(pcap: Path, kind: str) -> list[dict]:
    code, out, err = run_cli("convert", str(pcap), "--to", "json", "--kind", kind)
    assert code == 0, err
    return ndjson(out)


def test_held_acks_are_stalls_and_keepalives_are_drawn_as_such(tmp_path: Path) -> None:
    pcap = tmp_path / "held.pcap"
    with GoServer(keepalive="100ms", ack_delay="600ms") as server, capture(pcap, server.port):
        run = run_client(server.port, mode="sync", level=3, batches=3, batch=2)
    assert all(run.acked(b) for b in (1, 2, 3))
    _, data = report(tmp_path, str(pcap), "--stall", "0.3")
    assert_page_inspect(data["inspect"], inspect_json(str(pcap)))
    marks = rows(data["datasets"]["marks"])
    by_kind = {k: [m for m in marks if m["kind"] == k] for k in ("send", "answer", "keepalive", "unacked")}
    windows = [m for m in by_kind["send"] if m["what"] == "window"]
    assert [(m["count"], m["first"], m["last"]) for m in windows] == [(2, 1, 2)] * 3  # the client's
    answers = by_kind["answer"]
    assert [m["first"] for m in answers] == [a for a in server.acks if a]  # go-lumber's real ACKs
    assert all(595 <= m["latency_ms"] < 5000 for m in answers)  # held 600 ms
    assert len(by_kind["keepalive"]) == server.acks.count(0) >= 3
    assert not by_kind["unacked"]
    stalls = rows(data["datasets"]["stalls"])
    assert len(stalls) == 3 and all(s["answered"] for s in stalls)
    # each stall runs from its window to its ACK, as the capture timed them (ack_delay 600 ms)
    windows = {w["frame"]: ns(w["ts"]) for w in lumberjack(pcap, "window")}
    acks = {a["frame"]: ns(a["ts"]) for a in lumberjack(pcap, "ack") if not a["keepalive"]}
    for s in stalls:
        held = (acks[s["answer_frame"]] - windows[s["sent_frame"]]) / 1e9
        assert s["seconds"] == pytest.approx(held, abs=1e-6) and 0.55 <= held < 5
    # keep-alives fall inside the stalls, they do not end them
    assert all(any(s["t"] <= k["t"] <= s["t2"] for s in stalls) for k in by_kind["keepalive"])


def test_a_server_that_stops_acking_draws_an_unanswered_stall_and_the_lost_events(tmp_path: Path) -> None:
    pcap = tmp_path / "stopped.pcap"
    with GoServer(keepalive="0s", ack_batches=1) as server, capture(pcap, server.port):
        run = run_client(server.port, mode="async", level=3, batches=3, batch=2, timeout="700ms")
    lost = [s for s in run.events if not run.acked(s.batch)]
    assert run.acked(1) and len(lost) == 4
    text, data = report(tmp_path, str(pcap), "--stall", "0.3")
    expected = inspect_json(str(pcap))
    assert_page_inspect(data["inspect"], expected)
    assert expected["delivery"]["lumberjack"]["never_acknowledged"] == len(lost)
    marks = rows(data["datasets"]["marks"])
    unacked = [m for m in marks if m["kind"] == "unacked"]
    assert sum(m["count"] for m in unacked) == len(lost)
    assert sorted((m["first"], m["last"]) for m in unacked) == [(1, 2), (1, 2)]  # windows 2 and 3
    stalls = rows(data["datasets"]["stalls"])
    # each unacknowledged window is its own stall, from its own send to the client's close
    assert [s["answered"] for s in stalls] == [False, False]
    sends = {m["frame"]: m for m in marks if m["kind"] == "send" and m["what"] == "window"}
    for s in stalls:
        window = sends[s["sent_frame"]]
        assert s["t"] == window["t"] and (s["seq_first"], s["seq_last"]) == (window["first"], window["last"])
    assert stalls[0]["t"] < stalls[1]["t"] and stalls[0]["t2"] == stalls[1]["t2"]
    assert stalls[0]["seconds"] >= 0.6  # from the first unacknowledged window to the client's close
    series = rows(data["datasets"]["series"])
    assert sum(r["never acknowledged/s"] for r in series) * float(data_bin(text)) == pytest.approx(len(lost))


def data_bin(text: str) -> float:
    from tests.test_report import data_bin_s

    return data_bin_s(text)
