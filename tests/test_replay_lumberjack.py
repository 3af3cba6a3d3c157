"""`wirelog replay` to go-lumber's server (a real Lumberjack v2 receiver), from captures of
go-lumber's own client (Filebeat's library) whose receiver was killed mid-window and which then
resent on a new connection to a receiver that stopped acknowledging (issue #45).

The receiver must get exactly the events that were never acknowledged, each once, JSON-equal to
the captured documents plus `@metadata._id` = the record's `event_id` with its first copy's time; the journal must keep a
rerun, or a run resumed after SIGKILL, from sending an acknowledged event again; a receiver that
refuses, resets or never acknowledges must end the run with one clear line and status 1.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from capture_tools import run_cli
from courier_go_helpers import free_port
from go_peer_helpers import ClientRun, require_golumber, run_client
from lumberjack_helpers import capture
from replay_helpers import (
    KillableGoServer,
    lost_records,
    replay_cmd,
    replay_env,
    run_replay,
    sent_id,
    summary,
    with_id,
)


@pytest.fixture(autouse=True)
def _golumber() -> None:
    require_golumber()


@dataclass
class Incident:
    pcap: Path
    docs: list[dict[str, Any]]
    runs: list[ClientRun]

    def lost(self) -> list[dict[str, Any]]:
        """The documents some run sent and no run saw acknowledged, from the peers' own reports."""
        acked = [s.doc for r in self.runs for s in r.events if r.acked(s.batch)]
        sent = [s.doc for r in self.runs for s in r.events]
        out: list[dict[str, Any]] = []
        for doc in sent:
            if doc not in acked and doc not in out:
                out.append(doc)
        return out


def documents(n: int) -> list[dict[str, Any]]:
    return [
        {
            "@timestamp": f"2026-11-23T11:{i // 60:02d}:{i % 60:02d}.000Z",
            "@metadata": {"beat": "filebeat", "type": "_doc", "version": "8.11.0"},
            "message": f"line {i} <&> \u00fcn\u00efcode",
            "n": i,
            "big": 2**63 - 1,
            "log": {"offset": i * 80, "file": {"path": "/var/log/app.log"}},
        }
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Incident:
    """12 events in windows of 3. Receiver 1 acknowledges window 1, is SIGKILLed while holding
    window 2; the shipper resends everything not acknowledged on a new connection to receiver 2
    (same port), which acknowledges one window and then never again: the shipper times out."""
    require_golumber()
    tmp = tmp_path_factory.mktemp("lj-incident")
    docs = documents(12)
    port = free_port()
    pcap = tmp / "incident.pcap"
    with capture(pcap, port):
        first = KillableGoServer(port, "-ack-batches", "1", "-keepalive", "0s")
        events = tmp / "all.json"
        events.write_text(json.dumps(docs))
        runs: list[ClientRun] = []
        t = threading.Thread(
            target=lambda: runs.append(run_client(port, batch=3, events_file=events, timeout="10s"))
        )
        t.start()
        first.wait_batches(2)
        time.sleep(0.2)
        first.kill()
        t.join(timeout=30)
        acked = [s.doc for s in runs[0].events if runs[0].acked(s.batch)]
        rest = tmp / "rest.json"
        rest.write_text(json.dumps([d for d in docs if d not in acked]))
        with KillableGoServer(port, "-ack-batches", "1", "-keepalive", "0s"):
            runs.append(run_client(port, batch=3, events_file=rest, timeout="700ms"))
    return Incident(pcap, docs, runs)


def test_the_incident_has_losses_resends_and_deliveries(incident: Incident) -> None:
    """The capture is the story the peers tell: wirelog's never-acknowledged events are the ones
    no run saw acknowledged."""
    lost = lost_records(incident.pcap)
    assert [r["event"] for r in lost] == incident.lost()
    assert len(lost) == 3
    assert lost_records(incident.pcap, ("recovered_by_resend",))


def test_replay_sends_exactly_the_never_acknowledged_events_once(incident: Incident, tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    lost = lost_records(incident.pcap)
    with KillableGoServer() as server:
        code, out, err = run_replay(str(incident.pcap), "--to", f"lumberjack://127.0.0.1:{server.port}",
                                    "--journal", str(journal), "--json")  # fmt: skip
        assert code == 0, err
        got = server.events()
    assert got == [with_id(r["event"], sent_id(r)) for r in lost]
    s = summary(out)
    assert (s["selected"], s["sent"], s["acknowledged"], s["failed"], s["already_in_journal"]) == (
        3,
        3,
        3,
        0,
        0,
    )
    ids = [line for line in journal.read_text().splitlines() if not line.startswith("#")]
    assert ids == [sent_id(r) for r in lost]

    # a rerun sends nothing: everything is in the journal
    with KillableGoServer() as server:
        code, out, err = run_replay(str(incident.pcap), "--to", f"lumberjack://127.0.0.1:{server.port}",
                                    "--journal", str(journal), "--json")  # fmt: skip
        assert code == 0, err
        assert server.events() == []
    s = summary(out)
    assert (s["selected"], s["sent"], s["already_in_journal"]) == (3, 0, 3)


@pytest.mark.parametrize("level", [0, 9])
def test_replay_of_widened_classes_plain_and_compressed(
    incident: Incident, tmp_path: Path, level: int
) -> None:
    """--delivery widens the selection; windows of 2 events; plain J frames or zlib 9."""
    classes = ("never_acknowledged", "recovered_by_resend", "delivered")
    chosen = lost_records(incident.pcap, classes)
    with KillableGoServer() as server:
        args = [str(incident.pcap), "--to", f"lumberjack://127.0.0.1:{server.port}", "--journal",
                str(tmp_path / "j"), "--window", "2", "--compression-level", str(level)]  # fmt: skip
        for c in classes:
            args += ["--delivery", c]
        code, _, err = run_replay(*args)
        assert code == 0, err
        assert server.events() == [with_id(r["event"], sent_id(r)) for r in chosen]
        assert all(len(b) <= 2 for b in server.batches)
    sent = sorted({s.doc["n"] for r in incident.runs for s in r.events})  # what the capture holds
    assert sorted(e["n"] for e in server.events()) == sent  # each event once


def test_replay_from_wirelogs_own_ndjson_and_parquet(incident: Incident, tmp_path: Path) -> None:
    """The list can be reviewed and edited first: convert's output is an input."""
    ndjson_path, parquet_path = tmp_path / "review.ndjson", tmp_path / "review.parquet"
    code, out, err = run_cli("convert", str(incident.pcap), "--events", "--to", "json")
    assert code == 0, err
    lines = out.splitlines()
    ndjson_path.write_bytes(b"\n".join(lines[1:]) + b"\n")  # edited: the first record removed
    code, _, err = run_cli("convert", str(incident.pcap), "--to", "parquet", "-o", str(parquet_path))
    assert code == 0, err
    lost = lost_records(incident.pcap)
    first = json.loads(lines[0])
    expected_ndjson = [r for r in lost if r["event_id"] != first["event_id"]]
    for path, expected in ((ndjson_path, expected_ndjson), (parquet_path, lost)):
        with KillableGoServer() as server:
            code, _, err = run_replay(str(path), "--to", f"lumberjack://127.0.0.1:{server.port}",
                                      "--journal", str(tmp_path / f"{path.name}.j"))  # fmt: skip
            assert code == 0, err
            assert server.events() == [with_id(r["event"], sent_id(r)) for r in expected]


def test_two_captures_with_the_same_coordinates_keep_their_events_apart(
    incident: Incident, tmp_path: Path
) -> None:
    """A Lumberjack `event_id` (STREAM:FRAME:SEQ) names a place in one capture: another capture
    of the same shape (here the incident an hour later) has the same ids for other events. Replayed
    together with one journal, each capture's lost events are sent once under ids of their own;
    before, both went out under the same three ids (one Elasticsearch document for two events), and
    a later run with that journal skipped the second capture's as "already in the journal"."""
    from impair import read_pcap, write_pcap

    header, records = read_pcap(incident.pcap)
    later = tmp_path / "later.pcap"
    hour = 3600
    write_pcap(later, header, [
        (int.from_bytes(r[:4], "little") + hour).to_bytes(4, "little") + r[4:] for r in records
    ])  # fmt: skip
    lost = lost_records(incident.pcap) + lost_records(later)
    assert len({r["event_id"] for r in lost}) == len(lost) // 2  # the same coordinates
    with KillableGoServer() as server:
        code, out, err = run_replay(str(incident.pcap), str(later), "--to", f"lumberjack://127.0.0.1:{server.port}",
                                    "--journal", str(tmp_path / "journal"), "--json")  # fmt: skip
        assert code == 0, err
        got = server.events()
    assert summary(out)["acknowledged"] == len(lost) == 6
    assert got == [with_id(r["event"], sent_id(r)) for r in lost]
    assert len({d["@metadata"]["_id"] for d in got}) == 6


def test_id_field_and_no_id(incident: Incident, tmp_path: Path) -> None:
    lost = lost_records(incident.pcap)
    for extra, expect in (
        (
            ["--id-field", "fields.replay_id"],
            [r["event"] | {"fields": {"replay_id": sent_id(r)}} for r in lost],
        ),
        (["--no-id"], [r["event"] for r in lost]),
    ):
        with KillableGoServer() as server:
            code, _, err = run_replay(str(incident.pcap), "--to", f"lumberjack://127.0.0.1:{server.port}",
                                      "--journal", str(tmp_path / extra[0]), *extra)  # fmt: skip
            assert code == 0, err
            assert server.events() == expect


def many(tmp_path: Path, n: int, size: int = 40) -> Path:
    """wirelog's NDJSON records of `n` never-acknowledged events (as `convert --events` writes them)."""
    path = tmp_path / "many.ndjson"
    with path.open("w") as f:
        for i in range(n):
            rec = {"record": "message", "capture": "big.pcap", "stream": i // 1000, "protocol": "lumberjack",
                   "kind": "event", "seq": i % 1000 + 1, "event": {"message": f"event {i} " + "x" * size, "n": i},
                   "acked": False, "event_id": f"{i:016x}", "delivery": "never_acknowledged"}  # fmt: skip
            f.write(json.dumps(rec) + "\n")
    return path


def test_a_replay_killed_and_run_again_never_resends_what_was_acknowledged(tmp_path: Path) -> None:
    src, journal = many(tmp_path, 3000), tmp_path / "journal"
    with KillableGoServer(0, "-ack-delay", "30ms") as server:
        url = f"lumberjack://127.0.0.1:{server.port}"
        proc = subprocess.Popen(replay_cmd(str(src), "--to", url, "--journal", str(journal), "--window", "50"),
                                env=replay_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and journal_ids(journal).__len__() < 500:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        before = journal_ids(journal)
        assert 500 <= len(before) < 3000
        time.sleep(0.5)  # the windows the killed run had on the wire reach the server's report
        first = [e["n"] for e in server.events()]
        first_run = len(first)
        code, out, err = run_replay(
            str(src), "--to", url, "--journal", str(journal), "--window", "50", "--json"
        )
        assert code == 0, err
        second = [e["n"] for e in server.events()[first_run:]]
    acked_before = {int(i, 16) for i in before}
    assert not acked_before & set(second)  # nothing acknowledged is sent again
    assert acked_before | set(second) == set(range(3000))  # and nothing is missing
    assert len(second) == len(set(second))
    # sent twice: at most the windows in flight when the run was killed (2 windows of 50)
    assert len(set(first) & set(second)) <= 100
    s = summary(out)
    assert s["already_in_journal"] == len(before) and s["acknowledged"] == 3000 - len(before)
    assert journal_ids(journal) == {f"{i:016x}" for i in range(3000)}


def journal_ids(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {line for line in path.read_text().splitlines() if line and not line.startswith("#")}


def test_a_refused_connection_is_one_line_and_status_1(incident: Incident, tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    port = free_port()
    code, out, err = run_replay(str(incident.pcap), "--to", f"lumberjack://127.0.0.1:{port}", "--journal",
                                str(journal), "--retries", "1", "--backoff", "0.05", "--json")  # fmt: skip
    assert code == 1
    final = err.strip().splitlines()[-1]
    assert final.startswith(f"wirelog: 127.0.0.1:{port}: connection refused") and "gave up after 2" in final
    s = summary(out)
    assert (s["acknowledged"], s["failed"], s["status"]) == (0, 3, 1)
    assert journal_ids(journal) == set()


def test_a_receiver_that_never_acknowledges_stalls_the_run(incident: Incident, tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    with KillableGoServer(0, "-ack-batches", "0", "-keepalive", "0s") as server:
        code, _, err = run_replay(str(incident.pcap), "--to", f"lumberjack://127.0.0.1:{server.port}",
                                    "--journal", str(journal), "--timeout", "0.5", "--retries", "0")  # fmt: skip
    assert code == 1
    assert (
        err.strip()
        .splitlines()[-1]
        .endswith(
            "stalled: no acknowledgement in 0.5 s (3 events waiting); gave up after 1 failed connections in a row"
        )
    )
    assert journal_ids(journal) == set()


def test_a_receiver_killed_mid_window_resets_and_the_rest_is_resent(tmp_path: Path) -> None:
    """The first receiver dies holding a window: the run reconnects, and a receiver started on
    the same port gets the unacknowledged rest; what the first acknowledged is not sent again."""
    src, journal = many(tmp_path, 40), tmp_path / "journal"
    port = free_port()
    first = KillableGoServer(port, "-ack-batches", "2", "-keepalive", "0s")
    proc = subprocess.Popen(replay_cmd(str(src), "--to", f"lumberjack://127.0.0.1:{port}", "--journal", str(journal),
                                       "--window", "10", "--pipelining", "1", "--backoff", "0.5", "--json"),
                            env=replay_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    first.wait_batches(3)
    first.kill()
    second = KillableGoServer(port)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        second.close()
    assert proc.returncode == 0, err
    assert "the receiver closed the connection" in err or "reset" in err
    assert [e["n"] for e in second.events()] == list(range(20, 40))
    assert journal_ids(journal) == {f"{i:016x}" for i in range(40)}
    assert summary(out)["connections"] == 2


def test_a_receiver_that_dies_for_good_fails_with_the_journal_intact(tmp_path: Path) -> None:
    src, journal = many(tmp_path, 40), tmp_path / "journal"
    server = KillableGoServer(0, "-ack-batches", "1", "-keepalive", "0s")
    proc = subprocess.Popen(replay_cmd(str(src), "--to", f"lumberjack://127.0.0.1:{server.port}", "--journal",
                                       str(journal), "--window", "10", "--retries", "2", "--backoff", "0.05"),
                            env=replay_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    server.wait_batches(2)
    server.kill()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    lines = err.strip().splitlines()
    assert "connection refused" in lines[-1] and "gave up" in lines[-1]
    assert journal_ids(journal) == {f"{i:016x}" for i in range(10)}
    assert "10 acknowledged" in out and "30 failed" in out


def test_dry_run_opens_no_socket(incident: Incident, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("a socket was opened")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    journal = tmp_path / "journal"
    code, out, err = run_cli("replay", str(incident.pcap), "--to", "lumberjack://192.0.2.1:5044", "--dry-run",
                             "--journal", str(journal), "--json")  # fmt: skip
    assert code == 0, err
    s = json.loads(out)
    lost = lost_records(incident.pcap)
    assert (s["selected"], s["would_send"]) == (3, 3)
    assert s["first_events"] == [with_id(r["event"], sent_id(r)) for r in lost]
    assert [c["events"] for c in s["connections"]] == [3]
    assert not journal.exists()
    code, out, err = run_cli("replay", str(incident.pcap), "--dry-run")
    assert code == 0 and "would send 3 events" in out.decode()


def test_usage_errors(incident: Incident) -> None:
    for args, says in (
        ([], "nothing is sent without --to"),
        (["--to", "http://x:1"], "unknown scheme http://"),
        (["--to", "lumberjack://"], "no host"),
        (["--to", "lumberjack://h:1", "--ca", __file__], "--ca/--cert/--key are for TLS"),
        (["--to", "hercules+http://h:1"], "name the Gate stream"),
    ):
        code, _, err = run_cli("replay", str(incident.pcap), *args)
        assert code == 2 and says in err, (args, err)
