"""`wirelog replay` to Log Courier's log-carver (the genuine Go receiver, ../shared/peers), from
the capture of the genuine Go shipper whose receiver was SIGKILLed mid-stream, which resent to a
second receiver on the same port, killed in its turn (test_courier_go_peers.killed).

log-carver's `test` transport with `debug events: true` logs every event its pipeline took
("Final event: {...}"): it must take exactly the events never acknowledged, each once, with the
captured document plus `event_id` (courier's default id field) = the record's `event_id`; over
plain TCP (`courier://`) and over log-carver's `tls` receiver (`couriers://`).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_courier_go_peers
from courier_go_helpers import ACCEPTED, Carver, free_port, require_log_courier, wait_for
from lumberjack_helpers import self_signed
from replay_helpers import lost_records, run_replay, summary
from test_courier_go_peers import KilledRun

from wirelog.replay.courier import CourierSender
from wirelog.replay.driver import Driver, GaveUp, Settings
from wirelog.replay.journal import Journal
from wirelog.replay.target import parse_target

killed = test_courier_go_peers.killed  # the module-scoped capture fixture, shared

# What log-carver adds to every event it receives (lc-lib/transports/tcp/receiver*.go)
RECEIVER_FIELDS = ("receiver",)


def with_id(doc: dict[str, Any], event_id: str) -> dict[str, Any]:
    """`doc` as log-carver takes it from a replay: `event_id` added (Log Courier's receivers
    reset `@metadata`, so replay's default id field for courier:// is top-level)."""
    return {**doc, "event_id": event_id, "@metadata": {}}


def final_events(carver: Carver) -> list[dict[str, Any]]:
    """The documents log-carver's pipeline took, without the fields it adds."""
    out = []
    for m in map(ACCEPTED.search, carver.lines()):
        if m is not None:
            doc = json.loads(m[1])
            for name in RECEIVER_FIELDS:
                doc.get("@metadata", {}).pop(name, None)
            out.append(doc)
    return out


def assert_received_once(carver: Carver, lost: list[dict[str, Any]]) -> None:
    """log-carver's pipeline took exactly the `lost` records' events, each once, with its id."""
    wait_for("log-carver's pipeline to take every event", lambda: len(final_events(carver)) >= len(lost))
    time.sleep(0.3)  # anything more (a duplicate) would be logged by now
    got = final_events(carver)
    expected = [with_id(r["event"], r["event_id"]) for r in lost]
    assert sorted(got, key=json.dumps) == sorted(expected, key=json.dumps)
    assert len({d["event_id"] for d in got}) == len(got)


@pytest.fixture(autouse=True)
def _courier() -> None:
    require_log_courier()


def test_replay_sends_the_never_acknowledged_events_to_log_carver(killed: KilledRun, tmp_path: Path) -> None:
    lost = lost_records(killed.pcap)
    fates = killed.delivery.fates()
    assert sorted(r["event"]["message"] for r in lost) == sorted(
        killed.messages[line] for line, fate in fates.items() if fate == "lost"
    )
    assert lost
    port = free_port()
    carver = Carver(tmp_path, "carver", [f"127.0.0.1:{port}"], spool=4)
    carver.start()
    try:
        code, out, err = run_replay(str(killed.pcap), "--to", f"courier://127.0.0.1:{port}", "--journal",
                                    str(tmp_path / "journal"), "--window", "50", "--json")  # fmt: skip
        assert code == 0, err
        assert_received_once(carver, lost)
    finally:
        carver.stop()
    s = summary(out)
    assert (s["selected"], s["acknowledged"], s["failed"]) == (len(lost), len(lost), 0)
    assert s["receiver"].startswith("Log Carver") or s["receiver"]
    # every ACKN log-carver wrote named a payload of the replay, and its log says it read them
    assert sum(n for _, _, n in carver.received()) == len(lost)


def test_replay_to_a_stalled_log_carver_fails_with_the_journal_intact(
    killed: KilledRun, tmp_path: Path
) -> None:
    """A receiver whose pipeline holds every batch for 30 s: no ACKN within --timeout."""
    port = free_port()
    carver = Carver(tmp_path, "slow", [f"127.0.0.1:{port}"], spool=4, delay=30)
    carver.start()
    journal = tmp_path / "journal"
    try:
        code, out, err = run_replay(str(killed.pcap), "--to", f"courier://127.0.0.1:{port}", "--journal",
                                    str(journal), "--timeout", "1", "--retries", "0", "--json")  # fmt: skip
    finally:
        carver.kill()
    assert code == 1
    assert "stalled: no acknowledgement in 1 s" in err.strip().splitlines()[-1]
    assert [x for x in journal.read_text().splitlines() if not x.startswith("#")] == []
    assert summary(out)["failed"] == len(lost_records(killed.pcap))


def test_couriers_checks_the_receiver_and_gives_it_the_client_certificate(
    killed: KilledRun, tmp_path: Path
) -> None:
    """log-carver's `tls` receiver with a certificate the test made, requiring a client
    certificate (`ssl client ca`): a wrong CA is refused in one line, status 1; the right CA
    without --cert is refused by the receiver; with --ca, --cert and --key the lost events
    arrive once."""
    made = {}
    for name in ("server", "client", "other"):
        (tmp_path / name).mkdir()
        made[name] = self_signed(tmp_path / name)
    (cert, key), (client, client_key), (other, _) = made["server"], made["client"], made["other"]
    lost = lost_records(killed.pcap)
    port = free_port()
    tls = {"ssl certificate": str(cert), "ssl key": str(key), "ssl client ca": [str(client)]}
    carver = Carver(tmp_path, "carver", [f"127.0.0.1:{port}"], spool=4, tls=tls)
    carver.start()
    to = ("--to", f"couriers://127.0.0.1:{port}", "--retries", "0", "--timeout", "5")
    try:
        journal = tmp_path / "refused.journal"
        code, out, err = run_replay(str(killed.pcap), *to, "--ca", str(other), "--cert", str(client),
                                    "--key", str(client_key), "--journal", str(journal))  # fmt: skip
        assert code == 1
        (line,) = err.strip().splitlines()  # one line, no traceback
        assert "TLS: the receiver's certificate was refused" in line and "--ca" in line
        code, out, err = run_replay(str(killed.pcap), *to, "--ca", str(cert), "--journal", str(journal))
        assert code == 1
        (line,) = err.strip().splitlines()
        assert "TLS: the receiver requires a client certificate (--cert, --key)" in line
        assert final_events(carver) == []
        assert journal.read_text().splitlines()[2:] == []
        code, out, err = run_replay(str(killed.pcap), *to, "--ca", str(cert), "--cert", str(client), "--key",
                                    str(client_key), "--journal", str(tmp_path / "journal"), "--json")  # fmt: skip
        assert code == 0, err
        assert_received_once(carver, lost)
    finally:
        carver.stop()
    s = summary(out)
    assert (s["selected"], s["acknowledged"], s["failed"], s["connections"]) == (len(lost), len(lost), 0, 1)


def test_an_idle_connection_is_pinged_and_log_carver_answers_pong(tmp_path: Path) -> None:
    """A selection that goes quiet (a capture read for a while with nothing selected) leaves the
    connection idle with no payload pending: after `keepalive` seconds the sender PINGs, as the Go
    shipper does after 10 s (lc-lib/publisher: timeoutKeepalive), and log-carver's PONGs keep the
    one connection going; the events before and after the pause arrive once."""
    port = free_port()
    url = f"courier://127.0.0.1:{port}"
    carver = Carver(tmp_path, "carver", [f"127.0.0.1:{port}"], spool=4)
    carver.start()

    def quiet_for_a_while() -> Iterator[tuple[str, bytes]]:
        for i in range(6):
            if i == 3:
                time.sleep(1.6)
            yield f"0:0:{i}", json.dumps({"message": f"line {i}"}).encode()

    journal = Journal(str(tmp_path / "journal"), url)
    journal.open()
    settings = Settings(window=10, keepalive=0.3, timeout=5, retries=0)
    try:
        tally = Driver(CourierSender(), parse_target(url), settings, journal).run(quiet_for_a_while())
        journal.close()
        wait_for("log-carver's pipeline to take every event", lambda: len(final_events(carver)) >= 6)
        lines = carver.lines()
    finally:
        carver.stop()
    assert (tally.acked, tally.connections, tally.problems) == (6, 1, [])
    pings = sum("] Received ping" in line for line in lines)
    pongs = sum("] Sending pong" in line for line in lines)
    assert pings >= 2 and pongs == pings, (pings, pongs)  # ~1.6 s idle / 0.3 s
    assert sorted(d["message"] for d in final_events(carver)) == [f"line {i}" for i in range(6)]


def test_a_receiver_that_never_answers_the_ping_ends_the_connection(tmp_path: Path) -> None:
    """log-carver frozen (SIGSTOP: the kernel still takes the bytes, nothing answers) while the
    connection is idle: the PING gets no PONG within --timeout, the connection ends with one line
    and the run gives up; the journal keeps the event acknowledged before."""
    port = free_port()
    url = f"courier://127.0.0.1:{port}"
    carver = Carver(tmp_path, "carver", [f"127.0.0.1:{port}"], spool=4)
    carver.start()
    assert carver.proc is not None

    def then_quiet() -> Iterator[tuple[str, bytes]]:
        yield "0:0:1", b'{"message":"before"}'
        wait_for("log-carver to acknowledge the first event", lambda: carver.acks_written())
        os.kill(carver.proc.pid, signal.SIGSTOP)
        time.sleep(3)
        yield "0:0:2", b'{"message":"after"}'

    journal = Journal(str(tmp_path / "journal"), url)
    journal.open()
    settings = Settings(window=10, keepalive=0.3, timeout=1, retries=0)
    try:
        with pytest.raises(GaveUp, match=r"stalled: no PONG to a PING in 1 s"):
            Driver(CourierSender(), parse_target(url), settings, journal).run(then_quiet())
        journal.close()
    finally:
        os.kill(carver.proc.pid, signal.SIGCONT)
        carver.kill()
    assert (tmp_path / "journal").read_text().splitlines()[2:] == ["0:0:1"]
