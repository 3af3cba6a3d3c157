"""The genuine Go Log Courier over loopback: log-courier ships a file to log-carver, tcpdump
captures it, the CLI decodes it (issue #28, item 3).

Each run writes numbered lines (or multi-line events) to a file that the shipper reads from its
beginning; the peers' debug logs say which payload carried which lines on which connection and
which ACKN sequences went over the wire (courier_go_helpers.Delivery). Every event the shipper sent
must come out of `wirelog convert --to json` once per sending, with its payload nonce, index and
`acked` flag as the receiver acknowledged it; per-payload `delivery` records, findings and the
cross-connection verdict (`inspect --json`, `courier.never-acknowledged`) must say what the logs
say. Runs: many small payloads with partial ACKNs (plain and multiline), the receiver killed
(SIGKILL) mid-stream and restarted on its port, two receivers load-balanced, and a shipper started
before its receiver listens (refused connections). Every capture also decodes the same with its
packets reordered or duplicated (impair.assert_same_when_impaired).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest
from capture_tools import ndjson, run_cli
from courier_go_helpers import (
    Carver,
    Delivery,
    Shipper,
    free_port,
    refused_first,
    require_log_courier,
    wait_for,
    write_lines,
)
from delivery_helpers import assert_every_surface_agrees
from lumberjack_helpers import capture


@dataclass
class Run:
    """One captured run: the capture, the input's event messages, the peers and their logs' story."""

    pcap: Path
    messages: list[str]
    shipper: Shipper
    carvers: list[Carver]

    @cached_property
    def records(self) -> list[dict[str, Any]]:
        """The Courier records of `wirelog convert --to json`."""
        code, out, err = run_cli("convert", str(self.pcap), "--to", "json")
        assert code in (0, 1), err
        return [r for r in ndjson(out) if r["protocol"] == "courier"]

    @cached_property
    def delivery(self) -> Delivery:
        """The logs' story; what each payload holds is read from its largest sending here."""
        contents: dict[str, dict[int, list[str]]] = {}
        for e in sorted(kind(self.records, "event"), key=lambda e: (e["stream"], e["frame"], e["index"])):
            contents.setdefault(e["nonce"], {}).setdefault(e["stream"], []).append(e["event"]["message"])
        largest = {nonce: max(by_stream.values(), key=len) for nonce, by_stream in contents.items()}
        return Delivery.from_logs(self.messages, self.shipper, self.carvers, largest)

    def verdict(self) -> dict[str, Any]:
        """The cross-connection delivery numbers of `wirelog inspect --json`."""
        code, out, err = run_cli("inspect", str(self.pcap), "--json")
        assert code in (0, 1), err
        return json.loads(out)["delivery"]["courier"]


def kind(records: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [r for r in records if r["record"] == "message" and r["kind"] == name]


def findings(records: list[dict[str, Any]], code: str | None = None) -> list[dict[str, Any]]:
    return [r for r in records if r["record"] == "finding" and code in (None, r["code"])]


def numbered(n: int) -> list[str]:
    return [f"line {i} of the input" for i in range(1, n + 1)]


def multiline_events(n: int) -> list[str]:
    """`n` events of one to three lines; continuation lines start with a space."""
    return [
        "\n".join([f"event {i}"] + [f"  detail {i}.{k}" for k in range(1, i % 3 + 1)])
        for i in range(1, n + 1)
    ]


# The Go shipper's own start-up race (lc-lib/transports/tcp: its endpoint is "ready" before the
# transport holds the connection): the first payload's send fails, the shipper drops the
# connection, and it then sends the first lines again in a payload of their own. A run the shipper
# spoiled so is made again, once: the runs here are about what the receiver's ACKs do.
SHIPPER_RACE = "Forcing endpoint failure: invalid connection state"


def ship(
    tmp: Path,
    messages: list[str],
    spool: int,
    carver_spool: int = 7,
    multiline: bool = False,
    loadbalance: bool = False,
    delay: int = 0,
) -> Run:
    """Ship `messages` to one log-carver (two, on 127.0.0.1 and 127.0.0.2, with `loadbalance`)
    until the shipper has every event acknowledged, then stop both gracefully (a second time,
    in a folder of its own, when the shipper lost its first run to its start-up race)."""
    require_log_courier()
    for attempt in (tmp, tmp / "again"):
        attempt.mkdir(exist_ok=True)
        run = _ship_once(attempt, messages, spool, carver_spool, multiline, loadbalance, delay)
        if not any(SHIPPER_RACE in line for line in run.shipper.lines()):
            break
    return run


def _ship_once(
    tmp: Path,
    messages: list[str],
    spool: int,
    carver_spool: int,
    multiline: bool,
    loadbalance: bool,
    delay: int,
) -> Run:
    port = free_port()
    hosts = ["127.0.0.1", "127.0.0.2"] if loadbalance else ["127.0.0.1"]
    servers = [f"{h}:{port}" for h in hosts]
    pcap = tmp / "courier.pcap"
    source = write_lines(tmp / "input.log", messages)
    carvers = [
        Carver(tmp, f"log-carver{i}", [s], spool=carver_spool, delay=delay) for i, s in enumerate(servers)
    ]
    method = "loadbalance" if loadbalance else "random"
    shipper = Shipper(tmp, source, servers, spool=spool, method=method, multiline=multiline)
    with capture(pcap, port):
        try:
            for c in carvers:
                c.start()
            shipper.start()
            shipper.wait_registered(len(messages))
        finally:
            shipper.stop()
            for c in carvers:
                c.stop()
    return Run(pcap, messages, shipper, carvers)


# -- the peers' logs against the capture's decoding ----------------------------------------------


def check_events(run: Run, records: list[dict[str, Any]]) -> None:
    """Every event of every sending, with its nonce, index, message and `acked` flag; what the
    payloads hold (read from the capture) agrees with the input, the shipper's log and the order in
    which each receiver took the events."""
    got = [
        (e["client"], e["nonce"], e["index"], e["event"]["message"], e["acked"])
        for e in kind(records, "event")
    ]
    assert run.delivery.payload_problems(run.shipper) == []
    assert sorted(got) == sorted(run.delivery.events())
    # each receiver took the events in the order of the payloads it read, as wirelog decoded them
    sent: dict[tuple[str, str], list[str]] = {}
    for e in sorted(kind(records, "event"), key=lambda e: e["index"]):
        sent.setdefault((e["client"], e["nonce"]), []).append(e["event"]["message"])
    for carver in run.carvers:
        read = [(client, m) for client, nonce, n in carver.received() for m in sent[(client, nonce)]]
        assert [len(sent[(c, nonce)]) for c, nonce, _ in carver.received()] == [
            n for _, _, n in carver.received()
        ]
        accepted = carver.accepted()
        assert accepted == read[: len(accepted)]
    for e in kind(records, "event"):
        assert e["sequence"] == e["index"] + 1 and e["payload"] == "evnt"
        assert (e["ack_frame"] is not None) is e["acked"]


def check_acks(run: Run, records: list[dict[str, Any]]) -> None:
    """The ACKNs in the capture, per connection and in order, are those the receivers say they
    wrote and the shipper says it read."""
    wire: dict[str, list[tuple[str, int]]] = {}
    for a in sorted(kind(records, "ackn"), key=lambda a: (a["stream"], a["offset"])):
        wire.setdefault(a["client"], []).append((a["nonce"], a["sequence"]))
    wrote: dict[str, list[tuple[str, int]]] = {}
    for c in run.carvers:
        for client, nonce, seq in c.acks_written():
            wrote.setdefault(client, []).append((nonce, seq))
    assert wire == wrote
    assert [(s.wrote, s.read) for s in run.delivery.sendings] == [
        (s.read, s.read) for s in run.delivery.sendings
    ]


def check_deliveries(run: Run, records: list[dict[str, Any]]) -> None:
    """One `delivery` record per sending: its events, how many were acknowledged, complete or not."""
    got = sorted(
        (d["client"], d["nonce"], d["events"], d["acked_events"], d["complete"], d["resend"])
        for d in kind(records, "delivery")
    )
    want = sorted(
        (s.client, s.nonce, len(s.lines), s.wrote, s.wrote == len(s.lines), False)
        for s in run.delivery.sendings
    )
    assert got == want


def check_fingerprint(records: list[dict[str, Any]]) -> None:
    """Log Courier 2.12.0 (LCOR) to Log Carver 2.12.0 (LCVR), EVNT negotiated, on every connection
    that carried payloads."""
    for conn in kind(records, "connection"):
        if conn["payloads"] == 0:  # refused, accepted by a dying receiver, or given up at once
            continue
        assert conn["handshake"] == "helo+vers"
        assert (conn["client_id"], conn["client_version"], conn["helo_length"]) == ("LCOR", "2.12.0", 32)
        assert (conn["server_id"], conn["server_version"], conn["vers_length"]) == ("LCVR", "2.12.0", 32)
        assert conn["evnt_negotiated"] is True
        assert (conn["client_impl"], conn["client_class"]) == ("go", "Go log-courier >= 2.6.4")
        assert (conn["server_impl"], conn["server_class"]) == ("go", "Go receiver (Log Carver) >= 2.6.4")
        assert (conn["zlib_go_tail"], conn["nonce_with_ff"], conn["unseeded_go_nonce"]) == (
            True,
            False,
            False,
        )


def check_clean(run: Run) -> list[dict[str, Any]]:
    """A run where every payload was sent once and fully acknowledged."""
    records = run.records
    d = run.delivery
    assert len({s.nonce for s in d.sendings}) == len(d.sendings)  # no resends
    assert all(s.wrote == len(s.lines) for s in d.sendings)
    check_events(run, records)
    check_acks(run, records)
    check_deliveries(run, records)
    check_fingerprint(records)
    messages = [e["event"]["message"] for e in kind(records, "event")]
    assert sorted(messages) == sorted(run.messages)  # every event once
    assert sorted(m for c in run.carvers for _, m in c.accepted()) == sorted(run.messages)
    assert findings(records) == []
    conns = kind(records, "connection")
    assert sum(c["events"] for c in conns) == sum(c["acked_events"] for c in conns) == len(run.messages)
    assert sum(c["payloads"] for c in conns) == sum(c["complete_payloads"] for c in conns) == len(d.sendings)
    verdict = run.verdict()
    assert (verdict["distinct_events"], verdict["delivered"], verdict["payloads"]) == (
        len(run.messages),
        len(run.messages),
        len(d.sendings),
    )
    assert (verdict["never_acknowledged"], verdict["ack_unknown"], verdict["resent_payloads"]) == (0, 0, 0)
    return records


def partial_acks(run: Run) -> int:
    """ACKNs that acknowledged part of their payload."""
    sizes = {s.nonce: len(s.lines) for s in run.delivery.sendings}
    return sum(seq < sizes[nonce] for c in run.carvers for _, nonce, seq in c.acks_written())


# -- runs ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_batches(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """150 lines in payloads of 20; the receiver's pipeline takes batches of 7 (and its test
    transport sometimes acknowledges a batch in two steps): partial ACKNs on most payloads."""
    return ship(tmp_path_factory.mktemp("small"), numbered(150), spool=20, carver_spool=7)


@pytest.fixture(scope="module")
def multiline(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """60 events of one to three lines (the multiline codec) in payloads of 4, batches of 3."""
    return ship(
        tmp_path_factory.mktemp("multiline"), multiline_events(60), spool=4, carver_spool=3, multiline=True
    )


@pytest.fixture(scope="module")
def loadbalance(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """100 lines in payloads of 5 to two receivers (`method: loadbalance`); each holds its ACKs
    1 s, so that payloads wait and the shipper spreads them over both."""
    return ship(
        tmp_path_factory.mktemp("lb"), numbered(100), spool=5, carver_spool=4, loadbalance=True, delay=1
    )


@dataclass
class KilledRun(Run):
    first_ack: int = 0  # the sequence the first receiver had acknowledged when it was killed
    resent: int = 0  # events of that payload's resend


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> KilledRun:
    """250 lines in five payloads of 50, four in flight at most; the receiver acknowledges its
    batches of 4, ten at a time, after 1 s. The first receiver is killed (SIGKILL) just after its
    first ACKNs, which acknowledge part of the first payload; a second one on the same port gets
    the payloads sent to the first again (the first one's unacknowledged suffix only), then the
    others, and is killed as soon as it has acknowledged that resend. The shipper, reconnecting in vain (refused),
    is killed too: what the second receiver had not acknowledged is lost."""
    require_log_courier()
    tmp = tmp_path_factory.mktemp("killed")
    messages = numbered(250)
    source = write_lines(tmp / "input.log", messages)
    port = free_port()
    listen = [f"127.0.0.1:{port}"]
    pcap = tmp / "courier.pcap"
    first = Carver(tmp, "log-carver1", listen, spool=4, delay=1)
    second = Carver(tmp, "log-carver2", listen, spool=4, delay=1)
    shipper = Shipper(tmp, source, listen, spool=50, max_pending=4)
    with capture(pcap, port):
        try:
            first.start()
            shipper.start()
            wait_for("the first ACKN", first.acks_written)
            time.sleep(0.3)  # the rest of its burst; the next comes 1 s later
            acks = first.acks_written()
            nonce, acked = acks[-1][1:]
            wait_for("the ACKNs to reach the shipper", lambda: shipper.registered() == acked)
            first.kill()
            second.start()
            resent = 50 - acked

            def resend_acked_and_all_sent() -> bool:
                done = [c for c, n, s in second.acks_written() if (n, s) == (nonce, resent)]
                return bool(done) and len(shipper.sent_on(done[0])) == 5

            wait_for("the resend acknowledged and every payload sent again", resend_acked_and_all_sent, 25)
            refusals = shipper.refusals()
            second.kill()
            wait_for("a refused reconnection", lambda: shipper.refusals() > refusals)
        finally:
            shipper.kill()
            first.kill()
            second.kill()
    return KilledRun(pcap, messages, shipper, [first, second], first_ack=acked, resent=resent)


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The shipper starts before its receiver listens: refused connections (SYN, RST) first."""
    require_log_courier()
    tmp = tmp_path_factory.mktemp("refused")
    messages = numbered(30)
    source = write_lines(tmp / "input.log", messages)
    port = free_port()
    listen = [f"127.0.0.1:{port}"]
    pcap = tmp / "courier.pcap"
    carver = Carver(tmp, "log-carver", listen)
    shipper = Shipper(tmp, source, listen, spool=10)
    with capture(pcap, port):
        try:
            shipper.start()
            wait_for(
                "two refused connections", lambda: sum("refused" in line for line in shipper.lines()) >= 2
            )
            carver.start()
            shipper.wait_registered(len(messages))
        finally:
            shipper.stop()
            carver.stop()
    return Run(pcap, messages, shipper, [carver])


# -- tests -----------------------------------------------------------------------------------------


def test_small_batches_with_partial_acks(small_batches: Run) -> None:
    assert len(small_batches.delivery.sendings) == 8  # 7 × 20 + 10
    assert partial_acks(small_batches) >= 4
    records = check_clean(small_batches)
    assert len(kind(records, "ackn")) == sum(len(c.acks_written()) for c in small_batches.carvers)


def test_multiline_events_in_small_batches(multiline: Run) -> None:
    """Events of several lines arrive whole (the joined lines in `message`), one per input event."""
    assert len(multiline.delivery.sendings) >= 15
    assert partial_acks(multiline) >= 3
    records = check_clean(multiline)
    assert sum("\n" in e["event"]["message"] for e in kind(records, "event")) == 40


def test_two_receivers_load_balanced(loadbalance: Run) -> None:
    """Payloads spread over both receivers, one connection each; each receiver took exactly the
    events of its own connection."""
    records = check_clean(loadbalance)
    by_server = Counter(e["server"].rsplit(":", 1)[0] for e in kind(records, "event"))
    assert set(by_server) == {"127.0.0.1", "127.0.0.2"} and sum(by_server.values()) == 100
    assert len(kind(records, "connection")) == 2
    for carver in loadbalance.carvers:
        ((client,),) = {(c,) for c, _ in carver.accepted()}
        sent = sorted(e["event"]["message"] for e in kind(records, "event") if e["client"] == client)
        assert sorted(m for _, m in carver.accepted()) == sent


def test_refused_connections_are_not_midstream(refused: Run) -> None:
    """Connections refused before the receiver listened (SYN answered by RST) are complete
    streams, not mid-stream ones; the delivery that followed is clean."""
    code, out, err = run_cli("streams", str(refused.pcap), "--json")
    assert code == 0, err
    streams = ndjson(out)
    rejected = [s for s in streams if s["bytes_c2s"] == s["bytes_s2c"] == 0 and s["reset"]]
    assert len(rejected) >= 2
    assert all(not s["handshake"] and s["client_by"] == "syn" for s in rejected)
    assert [s["stream"] for s in streams if s["midstream"]] == []
    records = check_clean(refused)
    assert not [r for r in records if r["record"] == "finding" and "midstream" in r["code"]]


def test_killed_receiver_events_and_resends(killed: KilledRun) -> None:
    """Per sending and per event, wirelog says what the peers' logs say: the first receiver's
    partial ACKN covers the first events of the first payload only; its resend (the other events,
    numbered from 1 again) is acknowledged on the second connection; what the second receiver had
    not acknowledged when it died is unacknowledged there."""
    run, d = killed, killed.delivery
    records = run.records
    assert 0 < run.first_ack < 50
    assert {n for _, n, _ in run.carvers[0].acks_written()} == {d.sendings[0].nonce}
    fates = Counter(d.fates().values())
    assert fates["delivered"] == run.first_ack and fates["resend"] >= run.resent
    assert fates["lost"] > 0 and fates["twice"] == 0 and sum(fates.values()) == 250
    check_events(run, records)
    check_acks(run, records)
    check_deliveries(run, records)
    check_fingerprint(records)
    # every event acknowledged on a connection was taken by that connection's receiver
    taken = {(c, m) for carver in run.carvers for c, m in carver.accepted()}
    assert {(c, m) for c, _, _, m, acked in d.events() if acked} <= taken
    # the second connection resends the payloads of the first (the first one's suffix only), then
    # sends the others
    first, second = sorted({s.client for s in d.sendings}, key=[s.client for s in d.sendings].index)
    firsts = {s.nonce: s for s in d.sendings if s.client == first}
    assert len(firsts) >= 1 and len([s for s in d.sendings if s.client == second]) == 5
    resends = sorted(
        (f["client"], f["nonce"], f["events"], f["previous_events"], f["previous_acked"])
        for f in findings(records, "courier.resend")
    )
    assert resends == sorted(
        (second, s.nonce, len(s.lines), len(firsts[s.nonce].lines), firsts[s.nonce].wrote)
        for s in d.sendings
        if s.client == second and s.nonce in firsts
    )
    unacked = sorted(
        (f["client"], f["nonce"], f["unacked"]) for f in findings(records, "courier.unacked-at-close")
    )
    assert unacked == sorted(
        (s.client, s.nonce, len(s.lines) - s.wrote) for s in d.sendings if s.wrote < len(s.lines)
    )
    assert {f["severity"] for f in findings(records, "courier.unacked-at-close")} == {"warning"}


def test_killed_receiver_verdict_counts_each_event_once(killed: KilledRun) -> None:
    """Across connections each distinct event counts once, by its best fate: acknowledged on its
    first sending (fully or by a partial ACKN) = delivered; acknowledged only on a later one =
    delivered by a resend; acknowledged nowhere = never acknowledged."""
    d = killed.delivery
    fates = Counter(d.fates().values())
    delivered = fates["delivered"] + fates["resend"]
    recovered = sum(
        1
        for nonce, lines in d.payloads.items()
        if all(d.fates()[line] != "lost" for line in lines)
        and any(d.fates()[line] == "resend" for line in lines)
    )
    verdict = killed.verdict()
    got = {k: verdict[k] for k in ("distinct_events", "delivered", "never_acknowledged", "ack_unknown")}
    got |= {k: verdict[k] for k in ("payloads_recovered_by_resend", "payloads_delivered_twice")}
    assert got == {
        "distinct_events": 250,
        "delivered": delivered,
        "never_acknowledged": fates["lost"],
        "ack_unknown": 0,
        "payloads_recovered_by_resend": recovered,
        "payloads_delivered_twice": 0,
    }
    (never,) = findings(killed.records, "courier.never-acknowledged")
    assert never["events"] == fates["lost"]


def test_killed_receiver_records_say_each_lines_fate(killed: KilledRun, tmp_path: Path) -> None:
    """Each event record says what the peers' own logs say became of its line (docs/records.md,
    "Delivery"): acknowledged on its first sending = delivered; only by the resend = its first copy
    recovered_by_resend and the resend's copy delivered; acknowledged nowhere = never_acknowledged
    on every copy. Counted as docs/schema.md says, in DuckDB too, they give the verdict."""
    line_of = {m: i for i, m in enumerate(killed.messages)}
    labels: dict[int, set[str]] = {}
    for e in kind(killed.records, "event"):
        labels.setdefault(line_of[e["event"]["message"]], set()).add(e["delivery"])
    want = {
        "delivered": {"delivered"},
        "resend": {"recovered_by_resend", "delivered"},
        "lost": {"never_acknowledged"},
    }
    fates = killed.delivery.fates()
    assert {"delivered", "resend", "lost"} <= set(fates.values())
    assert {line: want[fate] for line, fate in fates.items()} == labels
    assert assert_every_surface_agrees(killed.pcap, tmp_path)["courier"]["recovered_by_resend"] == sum(
        fate == "resend" for fate in fates.values()
    )


def test_killed_receiver_panel_says_sendings_and_resendings(killed: KilledRun) -> None:
    """The Log Courier panel names what it counts and agrees with the findings and the verdict:
    payload sendings (a resend is one more sending of a payload), and resendings, as many as the
    `courier.resend` findings (it said `resends: 0` beside them, and `payloads` for the sendings
    beside the verdict's distinct payloads)."""
    code, out, err = run_cli("inspect", str(killed.pcap), "--json")
    assert code == 0, err
    r = json.loads(out)
    panel, verdict = r["protocols"]["courier"], r["delivery"]["courier"]
    resends = findings(killed.records, "courier.resend")
    assert resends and panel["resendings"] == len(resends)
    assert panel["payload_sendings"] == len(kind(killed.records, "jdat") + kind(killed.records, "evnt"))
    assert verdict["payloads"] == 5 < panel["payload_sendings"]
    assert panel["payload_sendings"] - panel["resendings"] == verdict["payloads"]


@pytest.mark.parametrize("size", [4096, 1 << 20])
def test_killed_receiver_split_engine_gives_the_same_records_and_verdict(
    killed: KilledRun, size: int
) -> None:
    """The split engine (Spark's stages, in one process) groups every connection of the shipper to
    its receiver in one flow, whichever side of the receiver's random port the shipper's ports fall:
    same records, resends and verdict as the local engine."""
    from tests.test_splits import comparable, local_run, split_run
    from wirelog.engine.local import Options

    local = local_run(killed.pcap, Options())
    assert {f.code for f in local if getattr(f, "code", "")} >= {
        "courier.resend",
        "courier.never-acknowledged",
    }
    assert comparable(split_run(killed.pcap, size, Options())) == comparable(local)


# Captures with refused connections (SYN, RST): a copy that moves a SYN after its RST decodes
# differently (test_refused_connection_reset_before_syn), so their copies fail when the random
# reordering happens to do that.


@pytest.mark.parametrize(
    "name",
    [
        "small_batches",
        "multiline",
        "loadbalance",
        "killed",
        "refused",
    ],
)
def test_captures_decode_the_same_when_impaired(
    request: pytest.FixtureRequest, name: str, tmp_path: Path
) -> None:
    """Each capture with packets reordered or duplicated: the same events, ACKNs, `acked` flags,
    deliveries, findings and verdicts (impair.assert_same_when_impaired)."""
    from impair import assert_same_when_impaired

    run: Run = request.getfixturevalue(name)
    records = assert_same_when_impaired(run.pcap, tmp_path)
    events = kind([r for r in records if r["protocol"] == "courier"], "event")
    assert len(events) == len(run.delivery.events())


def test_refused_connection_reset_before_syn(refused: Run, tmp_path: Path) -> None:
    """The refused connections of the capture with each RST moved before its SYN: the same records,
    and still no mid-stream stream."""
    from impair import convert_json, impaired_copy, normalise, read_pcap

    order = refused_first(*read_pcap(refused.pcap))
    assert sum(i != o for i, o in enumerate(order)) >= 4  # two refused connections at least
    copy = tmp_path / "rst-first.pcap"
    frames = impaired_copy(refused.pcap, copy, order)
    assert normalise(convert_json(copy), frames) == normalise(convert_json(refused.pcap))
    code, out, err = run_cli("streams", str(copy), "--json")
    assert code == 0, err
    assert [(s["client"], s["midstream"]) for s in ndjson(out) if s["midstream"]] == []


def tshark_retransmissions(pcap: Path) -> set[int]:
    """The frames tshark's TCP analysis calls retransmissions."""
    out = subprocess.run(
        ["tshark", "-r", str(pcap), "-Y", "tcp.analysis.retransmission", "-T", "fields", "-e", "frame.number"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return {int(n) for n in out.split()}


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_retransmission_written_before_its_original_is_named_as_tshark_names_it(
    small_batches: Run, tmp_path: Path
) -> None:
    """One ACKN packet retransmitted 1 ms later (a real capture's retransmission), and a copy in
    which the retransmission is written before its original (time going backwards in the file).
    tshark, the reference, calls the later copy in the file the retransmission whatever the
    timestamps; wirelog names the other one as the ACKN's frame and the `ack_frame` of the events
    it acknowledged, and the records are otherwise the same."""
    from impair import convert_json, impaired_copy, normalise, read_pcap, shifted, write_pcap

    header, packets = read_pcap(small_batches.pcap)
    p = min(e["ack_frame"] for e in kind(small_batches.records, "event")) - 1
    base = tmp_path / "retransmitted.pcap"
    write_pcap(base, header, [*packets[: p + 1], shifted(header, packets[p], 1_000_000), *packets[p + 1 :]])
    order = list(range(len(packets) + 1))
    order[p], order[p + 1] = p + 1, p
    copy = tmp_path / "retransmission-first.pcap"
    frames = impaired_copy(base, copy, order)
    for pcap in (base, copy):
        records = convert_json(pcap)
        ackns = {a["frame"] for a in kind(records, "ackn")}
        retransmitted = tshark_retransmissions(pcap)
        assert p + 2 in retransmitted and p + 1 not in retransmitted  # the second copy in the file
        assert p + 1 in ackns and p + 2 not in ackns
        assert min(e["ack_frame"] for e in kind(records, "event")) == p + 1
    frames[p + 1] = p + 1  # either copy of the segment stands for the segment

    def untimed(lines: list[str]) -> list[dict[str, Any]]:
        """The records, without the time of the one segment whose two copies differ by 1 ms."""
        records = [json.loads(line) for line in lines]
        for r in records:
            if r.get("frame") == p + 1:
                r.pop("ts")
        return records

    assert untimed(normalise(convert_json(copy), frames)) == untimed(normalise(convert_json(base)))
