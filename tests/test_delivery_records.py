"""Every event record carries its fate: `event_id` (the same on every copy of an event) and `delivery`
(the verdict's class for that copy). Counted as docs/schema.md says — its queries run as written in
DuckDB over the Parquet output, and the same count over the NDJSON — they give `inspect --json`'s
verdict exactly, on crafted captures and on real ones."""

from __future__ import annotations

import pytest
from courier_helpers import ackn_frame, jdat_frame
from lumberjack_helpers import ack
from pcap_helpers import T0_NS, tcp_conversation, write_pcap

from tests.capture_tools import ndjson, run_cli
from tests.conftest import REPO
from tests.delivery_helpers import assert_every_surface_agrees, events, events_of, inspect_verdict
from tests.test_inspect_delivery import batch, connections, gate_retries, hercules_uuid

SHARED = REPO.parent / "shared" / "captures"
DATA = REPO / "tests" / "data"


def by_copy(records: list[dict]) -> dict[tuple[int, int], tuple[bool | None, str, str]]:
    """(stream, seq) -> (acked, delivery, event_id) of each Lumberjack event copy."""
    return {(r["stream"], r["seq"]): (r["acked"], r["delivery"], r["event_id"]) for r in records}


def test_each_copy_of_a_resent_window_says_its_fate(tmp_path):
    first = [("c", batch(1, 2)), ("s", ack(2)), ("c", batch(3, 2))]  # 3 and 4 get no ACK
    second = [("c", batch(1, 4)), ("s", ack(4))]  # all four resent and acknowledged
    path = connections(tmp_path / "resend.pcap", [first, second])
    copies = by_copy(events(path))
    assert {k: v[:2] for k, v in copies.items()} == {
        (0, 1): (True, "delivered"), (0, 2): (True, "delivered"),
        (0, 3): (False, "recovered_by_resend"), (0, 4): (False, "recovered_by_resend"),
        (1, 1): (True, "delivered_twice"), (1, 2): (True, "delivered_twice"),
        (1, 3): (True, "delivered"), (1, 4): (True, "delivered"),
    }  # fmt: skip
    for seq in range(1, 5):  # a resend carries its first copy's id; distinct events differ
        assert copies[(0, seq)][2] == copies[(1, seq)][2]
    assert len({v[2] for v in copies.values()}) == 4
    assert assert_every_surface_agrees(path, tmp_path)["lumberjack"] == {
        "distinct_events": 4, "delivered": 4, "recovered_by_resend": 2, "delivered_twice": 2,
        "never_acknowledged": 0, "ack_unknown": 0,
    }  # fmt: skip


def test_lost_and_unknown_events_say_so_and_the_spill_file_changes_nothing(tmp_path, monkeypatch):
    lost = [("c", batch(1, 3)), ("s", ack(3)), ("c", batch(4, 2))]  # 4 and 5 never acknowledged
    resent_unanswered = [("c", batch(4, 1))]  # 4 again: the capture ends before any ACK
    path = connections(tmp_path / "lost.pcap", [lost, resent_unanswered], last_open=True)
    records = events(path)
    copies = by_copy(records)
    assert [copies[(0, s)][1] for s in range(1, 6)] == ["delivered"] * 3 + ["unknown", "never_acknowledged"]
    assert copies[(1, 4)][1] == "unknown"  # the resend of 4, still open
    assert assert_every_surface_agrees(path, tmp_path)["lumberjack"] == {
        "distinct_events": 5, "delivered": 3, "recovered_by_resend": 0, "delivered_twice": 0,
        "never_acknowledged": 1, "ack_unknown": 1,
    }  # fmt: skip
    monkeypatch.setenv("WIRELOG_HELD_MEMORY", "1k")  # every waiting record through the spill file
    assert events(path) == records


def test_log_courier_events_keep_their_id_when_resent_renumbered(tmp_path):
    """Log Courier resends only a payload's unacknowledged tail, under its nonce, numbered from 1:
    each resent event keeps its id, and the copies say their fate (an ACKN lost on the way makes
    one event arrive twice)."""
    a, b = bytes([1]) * 16, bytes([2]) * 16
    events = [b'{"message":"line %d"}' % n for n in range(4)]
    first = [("c", jdat_frame(a, events)), ("s", ackn_frame(a, 1)), ("c", jdat_frame(b, events[:2]))]
    # a: events 1-3 resent, all acknowledged; b: resent whole (its ACKN never came), 1 acknowledged
    second = [("c", jdat_frame(a, events[1:])), ("s", ackn_frame(a, 3)), ("c", jdat_frame(b, events[:2]))]
    second += [("s", ackn_frame(b, 1))]
    path = connections(tmp_path / "courier.pcap", [first, second], port=12345)
    got = [
        (r["stream"], r["nonce"][:2], r["index"], r["acked"], r["delivery"], r["event_id"])
        for r in events_of(path)
    ]
    fates = {(s, n, i): (acked, d) for s, n, i, acked, d, _ in got}
    assert fates == {
        (0, "01", 0): (True, "delivered"), (0, "01", 1): (False, "recovered_by_resend"),
        (0, "01", 2): (False, "recovered_by_resend"), (0, "01", 3): (False, "recovered_by_resend"),
        (1, "01", 0): (True, "delivered"), (1, "01", 1): (True, "delivered"), (1, "01", 2): (True, "delivered"),
        (0, "02", 0): (False, "recovered_by_resend"), (0, "02", 1): (False, "never_acknowledged"),
        (1, "02", 0): (True, "delivered"), (1, "02", 1): (False, "never_acknowledged"),
    }  # fmt: skip
    ids = {(s, n, i): e for s, n, i, _, _, e in got}
    assert [ids[(0, "01", i)] for i in (1, 2, 3)] == [ids[(1, "01", i)] for i in (0, 1, 2)]
    assert ids[(0, "02", 0)] == ids[(1, "02", 0)] and len(set(ids.values())) == 6
    assert assert_every_surface_agrees(path, tmp_path)["courier"] == {
        "distinct_events": 6, "delivered": 5, "recovered_by_resend": 4, "delivered_twice": 0,
        "never_acknowledged": 1, "ack_unknown": 0,
    }  # fmt: skip


def test_gate_events_by_uuid_say_their_fate(tmp_path):
    path = gate_retries(tmp_path / "gate.pcap")
    got = [(r["stream"], r["uuid"], r["delivery"]) for r in events(path) if r["event_id"] is not None]
    assert all(r["uuid"] == r["event_id"] for r in events(path) if r["event_id"] is not None)
    u = hercules_uuid
    assert sorted(got) == sorted([
        (0, u(1), "recovered_by_resend"), (0, u(2), "recovered_by_resend"), (0, u(3), "never_acknowledged"),
        (0, u(4), "delivered"), (0, u(5), "never_acknowledged"),
        (1, u(1), "delivered"), (1, u(2), "delivered"), (1, u(4), "delivered_twice"),
        (1, u(6), "never_acknowledged"), (2, u(7), "unknown"),
    ])  # fmt: skip
    assert_every_surface_agrees(path, tmp_path)


def horizon_capture(path, minutes: int):
    """A window never acknowledged, then on a new connection `minutes` later other traffic (so that
    the reassembler, which ends closed connections every 8192 packets, ends the first one before
    the resend) and the window resent and acknowledged."""
    first = [("c", batch(50, 1)), ("s", ack(50)), ("c", batch(1, 2))]
    a = tcp_conversation(first, client=("10.1.0.5", 41000), server=("10.1.0.9", 5044))
    others = [t for n in range(4200) for t in (("c", batch(100 + n, 1)), ("s", ack(100 + n)))]
    b = tcp_conversation(
        [*others, ("c", batch(1, 2)), ("s", ack(2))], client=("10.1.0.5", 41001), server=("10.1.0.9", 5044)
    )
    late = T0_NS + minutes * 60 * 10**9
    frames = [(T0_NS + i * 10**6, f) for i, f in enumerate(a)] + [
        (late + i * 10**6, f) for i, f in enumerate(b)
    ]
    return write_pcap(path, frames)


def test_a_file_holds_unacknowledged_records_until_it_ends_whatever_the_delay(tmp_path):
    path = horizon_capture(tmp_path / "late.pcap", minutes=60)
    copies = by_copy(events(path))
    assert (copies[(0, 1)][1], copies[(1, 1)][1]) == ("recovered_by_resend", "delivered")
    assert_every_surface_agrees(path, tmp_path)


def test_on_stdin_records_wait_ten_minutes_of_capture_time_at_most(tmp_path):
    """A live input never ends: an unacknowledged copy's record goes out once the capture is 10 minutes
    past it (docs/records.md). A resend 5 minutes later still recovers it; one 11 minutes later
    finds the record already written, before the resend's window."""
    for minutes, first_fate in ((5, "recovered_by_resend"), (11, "never_acknowledged")):
        data = horizon_capture(tmp_path / f"late-{minutes}.pcap", minutes).read_bytes()
        code, out, err = run_cli("convert", "-", "--to", "json", input=data)
        assert code == 0, err
        records = ndjson(out)
        copies = by_copy([r for r in records if r.get("kind") == "event"])
        assert (copies[(0, 1)][1], copies[(1, 1)][1]) == (first_fate, "delivered"), minutes
        first_at = next(i for i, r in enumerate(records) if r["stream"] == 0 and r.get("seq") == 1)
        resent_at = next(
            i for i, r in enumerate(records) if r["stream"] == 1 and r.get("seq_first") == 1
        )  # the resend's window record, written when its ACK came (its events wait, as resends do)
        assert (first_at < resent_at) == (minutes == 11)


REAL = [
    *sorted((DATA / "lumberjack").glob("*.pcap*")),
    *sorted((DATA / "hercules").glob("*.pcap*")),
    *sorted(SHARED.glob("**/*.pcap*")),
]


@pytest.mark.parametrize("path", sorted(set(REAL)), ids=lambda p: p.name)
def test_real_captures_give_the_verdict_on_every_surface(path, tmp_path):
    assert_every_surface_agrees(path, tmp_path)


def test_impaired_copies_of_a_real_resend_capture_agree_everywhere(tmp_path):
    """Reordered and duplicated copies of a real resend capture give its verdict on every surface;
    copies that missed packets give other numbers (the capture saw less), but the records, DuckDB
    and `inspect` still agree with each other."""
    from tests.impair import impaired_copy, impairments, losses, read_pcap

    source = DATA / "lumberjack" / "pylogbeat-stalled-resend.pcap"
    want = inspect_verdict(source)
    assert want["lumberjack"]["recovered_by_resend"] > 0
    n = len(read_pcap(source)[1])
    for name, order in impairments(n) + losses(n):
        copy = tmp_path / f"{name}.pcap"
        impaired_copy(source, copy, order)
        got = assert_every_surface_agrees(copy, tmp_path)
        if not name.startswith(("drop", "bursts")):
            assert got == want, name


def test_the_held_memory_budget_does_not_change_the_records(monkeypatch):
    path = DATA / "lumberjack" / "pylogbeat-stalled-resend.pcap"
    want = events(path)
    monkeypatch.setenv("WIRELOG_HELD_MEMORY", "1k")  # every waiting record through the spill file
    assert events(path) == want
