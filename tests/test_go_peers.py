"""elastic/go-lumber, a real Go peer, over loopback: captured with tcpdump, decoded by the CLI.

go-lumber's v2 client (SyncClient and AsyncClient, plain J frames and zlib) talks to go-lumber's
own server and to wirelog's test receiver (lumberjack_helpers.LumberjackServer); go-lumber's
server also stalls its ACKs (keep-alive ACK 0s) or stops ACKing. Every event the client says it
framed must come out of `wirelog convert --to json` exactly once, with its document, seq, window
and ACK state, and the ACKs in the capture must be the ones the peers say they wrote and read.

Log Courier's own Go shipper and receiver are driven in tests/test_courier_go_peers.py.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from capture_tools import ndjson, run_cli
from delivery_helpers import assert_every_surface_agrees
from go_peer_helpers import ClientRun, GoServer, beats_file, require_golumber, run_client
from lumberjack_helpers import LumberjackServer, capture

# zlib header and wirelog's level class per compression level (reference/lumberjack.md §3)
ZLIB = {3: ("785e", "2-5"), 9: ("78da", "7-9")}


@pytest.fixture(autouse=True)
def _golumber() -> None:
    require_golumber()


def convert(pcap: Path) -> list[dict[str, Any]]:
    """The Lumberjack records of `wirelog convert PCAP --to json`."""
    code, out, err = run_cli("convert", str(pcap), "--to", "json")
    assert code == 0, err
    return [r for r in ndjson(out) if r["protocol"] == "lumberjack"]


def kind(records: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [r for r in records if r["record"] == "message" and r["kind"] == name]


def findings(records: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    return Counter((r["code"], r["severity"]) for r in records if r["record"] == "finding")


def wire_acks(records: list[dict[str, Any]]) -> list[int]:
    """ACK values in the order the server wrote them (records come out in release order)."""
    return [a["value"] for a in sorted(kind(records, "ack"), key=lambda a: a["offset"])]


def check_events(records: list[dict[str, Any]], run: ClientRun, level: int) -> None:
    """Every event the client framed, decoded once, in order, with its window, seq and ACK state."""
    events = kind(records, "event")
    assert {r["client"] for r in records if r["record"] == "message"} == {run.local}
    got = [(e["window"], e["seq"], e["event"], e["acked"]) for e in events]
    assert got == [(s.batch, s.seq, s.doc, run.acked(s.batch)) for s in run.events]
    assert all(e["compressed"] is (level > 0) for e in events)
    # each acked event names the frame of the (non-zero) ACK paired with its window
    ack_frames = {a["window"]: a["frame"] for a in kind(records, "ack") if not a["keepalive"]}
    assert [e["ack_frame"] for e in events] == [ack_frames.get(e["window"]) for e in events]


def check_windows(records: list[dict[str, Any]], run: ClientRun, level: int) -> None:
    """One window record per batch, with its count, seqs, ACK and compression as sent."""
    windows = kind(records, "window")
    sent = Counter(s.batch for s in run.events)
    assert [(w["window"], w["count"], w["received"]) for w in windows] == [(b, n, n) for b, n in sent.items()]
    for w in windows:
        acked = run.acked(w["window"])
        assert (w["seq_first"], w["seq_last"]) == (1, w["count"])
        assert (w["acked"], w["ack_value"]) == ((True, w["count"]) if acked else (False, None))
        assert w["compressed_frames"] == (1 if level else 0)
    compressed = kind(records, "compressed")
    if level == 0:
        assert compressed == []
    else:
        header, flevel = ZLIB[level]
        assert [c["window"] for c in compressed] == list(sent)
        assert {(c["zlib_header"], c["zlib_level"], c["depth"]) for c in compressed} == {(header, flevel, 1)}
        assert [c["frames"] for c in compressed] == list(sent.values())


def check_connection(records: list[dict[str, Any]], **expected: Any) -> None:
    """The one `connection` record has the `expected` counts."""
    (conn,) = kind(records, "connection")
    assert {k: conn[k] for k in expected} == expected


def check_clean(records: list[dict[str, Any]], run: ClientRun, level: int, keepalives: int = 0) -> None:
    """A run where every window was ACKed: all events acked, only info findings."""
    assert all(run.acked(b) for b in run.results)
    check_events(records, run, level)
    check_windows(records, run, level)
    windows, n = len(run.results), len(run.events)
    check_connection(
        records,
        windows=windows,
        events=n,
        acked_events=n,
        unacked_events=0,
        unknown_events=0,
        acks=windows,  # non-zero ACKs: one per window
        keepalives=keepalives,
        acks_lost=False,
        seq_profile="per-window" if windows > 1 else None,
        server_kind=None,  # seq 1..n per window: the count and highest-seq readings agree
    )
    expected = Counter({("lumberjack.seq-profile", "info"): 1} if windows > 1 else {})
    if keepalives:
        expected[("lumberjack.keepalive", "info")] = 1
    assert findings(records) == expected
    acks = [a for a in kind(records, "ack") if not a["keepalive"]]
    assert [(a["window"], a["acked_events"], a["interpretation"]) for a in acks] == [
        (b, r["count"], "count=highest-seq") for b, r in run.results.items()
    ]


@pytest.mark.parametrize("level", [0, 3])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_golumber_client_to_golumber_server(tmp_path: Path, mode: str, level: int) -> None:
    pcap = tmp_path / "golumber.pcap"
    # 4 × 20 kB of hex per window: the plain windows span several loopback segments
    with GoServer() as server, capture(pcap, server.port):
        run = run_client(server.port, mode=mode, level=level, batches=3, batch=4, size=20_000)
    records = convert(pcap)
    check_clean(records, run, level)
    assert [e for b in server.batches for e in b] == [s.doc for s in run.events]
    assert wire_acks(records) == server.acks == run.acks_read == [4, 4, 4]
    assert server.remotes == {run.local}


@pytest.mark.parametrize("level", [0, 9])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_golumber_client_to_wirelog_server(tmp_path: Path, mode: str, level: int) -> None:
    docs = beats_file(tmp_path / "events.json")
    pcap = tmp_path / "wirelog-server.pcap"
    with LumberjackServer("highest-seq") as server, capture(pcap, server.port):
        run = run_client(server.port, mode=mode, level=level, batch=3, events_file=docs)
    records = convert(pcap)
    check_clean(records, run, level)
    assert [s.doc for s in run.events] == json.loads(docs.read_text())
    (conn,) = server.connections
    assert [(seq, json.loads(raw)) for seq, raw in conn.events] == [(s.seq, s.doc) for s in run.events]
    assert conn.windows == [3, 3, 2]
    assert wire_acks(records) == conn.acks == run.acks_read == [3, 3, 2]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_golumber_keepalives_while_acks_stall(tmp_path: Path, mode: str) -> None:
    """go-lumber's server sends ACK 0 every `keepalive` while its pipeline holds a batch; the async
    client meanwhile has all three windows on the wire, and the ACKs pair with them in order."""
    pcap = tmp_path / "keepalive.pcap"
    with GoServer(keepalive="100ms", ack_delay="450ms") as server, capture(pcap, server.port):
        run = run_client(server.port, mode=mode, level=3, batches=3, batch=2, inflight=2)
    records = convert(pcap)
    keep = server.acks.count(0)
    assert keep >= 6  # about four per window (450 ms / 100 ms); fewer only on a starved machine
    assert wire_acks(records) == server.acks == run.acks_read
    check_clean(records, run, 3, keepalives=keep)
    alive = [a for a in kind(records, "ack") if a["keepalive"]]
    assert len(alive) == keep and all(a["window"] is None and a["acked_events"] == 0 for a in alive)
    assert all(80 <= a["interval_ms"] <= 1000 for a in alive)
    (finding,) = [r for r in records if r["record"] == "finding" and r["code"] == "lumberjack.keepalive"]
    assert finding["count"] == keep
    first_ack = min(a["frame"] for a in kind(records, "ack") if not a["keepalive"])
    in_flight = [w["window"] for w in kind(records, "window") if w["frame"] < first_ack]
    assert in_flight == ([1, 2, 3] if mode == "async" else [1])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_golumber_server_stops_acking(tmp_path: Path, mode: str) -> None:
    """The server ACKs the first window only and sends no keep-alives: the client times out and
    closes. The later windows' events are unacknowledged, and lost as far as the capture knows."""
    pcap = tmp_path / "no-ack.pcap"
    with GoServer(keepalive="0s", ack_batches=1) as server, capture(pcap, server.port):
        run = run_client(server.port, mode=mode, level=3, batches=3, batch=2, timeout="700ms")
    records = convert(pcap)
    assert run.acked(1) and not any(run.acked(b) for b in (2, 3))
    assert "timeout" in run.results[2]["error"]
    sent_windows = 3 if mode == "async" else 2  # the sync client gives up before the third window
    assert {s.batch for s in run.events} == set(range(1, sent_windows + 1))
    check_events(records, run, 3)
    check_windows(records, run, 3)
    lost = sum(1 for s in run.events if s.batch > 1)
    assert wire_acks(records) == server.acks == run.acks_read == [2]
    check_connection(
        records,
        windows=sent_windows,
        events=len(run.events),
        acked_events=2,
        unacked_events=lost,
        unknown_events=0,
        acks=1,
        keepalives=0,
    )
    assert findings(records) == Counter(
        {
            ("lumberjack.seq-profile", "info"): 1,
            ("lumberjack.unacked", "warning"): 1,
            ("lumberjack.never-acknowledged", "error"): 1,
        }
    )
    (unacked,) = [r for r in records if r.get("code") == "lumberjack.unacked"]
    assert unacked["events"] == lost
    (never,) = [r for r in records if r.get("code") == "lumberjack.never-acknowledged"]
    first = next(e for e in kind(records, "event") if e["window"] == 2)
    assert never["events"] == lost
    # each event record says its fate, and counted as docs/schema.md says they give the verdict
    assert [e["delivery"] for e in kind(records, "event")] == ["delivered"] * 2 + [
        "never_acknowledged"
    ] * lost
    assert assert_every_surface_agrees(pcap, tmp_path)["lumberjack"]["never_acknowledged"] == lost
    assert never["first"] | {"stream": first["stream"], "frame": first["frame"], "seq": 1} == never["first"]


@pytest.mark.parametrize("level", [0, 3])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_golumber_captures_decode_the_same_when_impaired(tmp_path: Path, mode: str, level: int) -> None:
    """Twenty windows of go-lumber, the copy with packets reordered or duplicated: the same events,
    windows, ACK pairings, `acked` flags and verdicts (impair.assert_same_when_impaired)."""
    from impair import assert_same_when_impaired

    pcap = tmp_path / "golumber.pcap"
    with GoServer() as server, capture(pcap, server.port):
        run = run_client(server.port, mode=mode, level=level, batches=20, batch=3, size=2_000)
    records = assert_same_when_impaired(pcap, tmp_path)
    check_clean([r for r in records if r["protocol"] == "lumberjack"], run, level)


def test_golumber_stalled_server_captures_decode_the_same_when_impaired(tmp_path: Path) -> None:
    """A server that ACKs two windows and then stops: the unacknowledged events stay
    unacknowledged and the acknowledged ones acknowledged in every impaired copy."""
    from impair import assert_same_when_impaired

    pcap = tmp_path / "stall.pcap"
    with GoServer(keepalive="0s", ack_batches=2) as server, capture(pcap, server.port):
        run = run_client(server.port, mode="async", level=3, batches=4, batch=2, timeout="700ms")
    records = assert_same_when_impaired(pcap, tmp_path)
    events = kind([r for r in records if r["protocol"] == "lumberjack"], "event")
    assert [e["acked"] for e in events] == [run.acked(s.batch) for s in run.events]
    assert any(e["acked"] for e in events) and not all(e["acked"] for e in events)
