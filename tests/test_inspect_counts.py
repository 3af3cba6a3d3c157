"""`inspect --json`'s counts add up (issue 41): per stream, per protocol and in the totals, events =
acked + unacked + unknown on their connections; the panels, the findings and the delivery verdict
say the same thing; what the capture missed is the sum of its streams' gaps.

Walked on every capture of ../shared/captures and the bundled ones, and on their impaired copies
(packets reordered, duplicated, dropped at random or in bursts: tests/impair.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from capture_tools import run_cli
from conftest import CAPTURES, REPO
from impair import impaired_copy, impairments, losses, read_pcap

ACK_STATES = ("acked", "unacked", "ack_unknown")
BUNDLED = [
    REPO / "examples" / "lumberjack-pylogbeat.pcap",
    *sorted((REPO / "tests" / "data").rglob("*.pcap")),
]


def shared_captures() -> list[Path]:
    return sorted(CAPTURES.rglob("*.pcap")) if CAPTURES.is_dir() else []


def inspect_json(path: Path) -> dict[str, Any]:
    code, out, err = run_cli("inspect", "--json", str(path))
    assert code == 0, err
    return json.loads(out)


def adds_up(counts: dict[str, int]) -> bool:
    return counts["events"] == sum(counts[k] for k in ACK_STATES)


def check_counts(r: dict[str, Any]) -> None:
    """The identities every `inspect --json` must hold."""
    streams, totals = r["streams"], r["totals"]
    assert all(adds_up(s) for s in streams), [s for s in streams if not adds_up(s)]
    assert adds_up(totals)
    for key in ("events", *ACK_STATES):
        assert totals[key] == sum(s[key] for s in streams), key
    by_protocol = {p: h["events"] for p, h in r["protocols"].items() if "events" in h}
    assert all(adds_up(e) for e in by_protocol.values()), by_protocol
    assert sum(e["events"] for e in by_protocol.values()) >= totals["events"]  # + events of no stream
    counts = {f["code"]: f["count"] for f in r["findings"]}
    assert sum(totals["findings"].values()) == sum(counts.values())
    cql = r["delivery"].get("cql")
    if cql:  # requests by outcome; each one never answered is a finding of its own
        assert cql["requests"] == cql["answered"] + cql["error"] + cql["unanswered"] + cql["unknown"]
        silent = counts.get("cql.unanswered-request", 0) + counts.get("cql.stream-id-reused", 0)
        assert cql["unanswered"] + cql["unknown"] == silent or silent > 100  # (findings capped at 101)
    for protocol, d in r["delivery"].items():
        if protocol == "cql":
            continue
        assert d["distinct_events"] == d["delivered"] + d["never_acknowledged"] + d["ack_unknown"], protocol
        # the verdict and its findings agree
        assert (d["never_acknowledged"] > 0) == (f"{protocol}.never-acknowledged" in counts), protocol
    courier = r["protocols"].get("courier")
    if courier and "payload_sendings" in courier:
        sendings = courier["payload_sendings"]
        assert courier["resendings"] == counts.get("courier.resend", 0)
        assert courier["sendings_fully_acked"] + courier["sendings_not_fully_acked"] <= sendings
        if "courier" in r["delivery"]:
            assert r["delivery"]["courier"]["payloads"] <= sendings
    unseen = counts.get("tcp.unseen-data", 0)
    loss = r["capture_loss"]
    assert loss["gaps"] == sum(s["gaps"] for s in streams) + unseen
    assert loss["bytes"] >= sum(s["gap_bytes"] for s in streams)
    assert loss["streams"] <= len(streams)
    assert r["captures"][0]["capture_loss"] == loss  # one input


def copies(path: Path, tmp: Path) -> list[Path]:
    """`path` reordered, duplicated (the first of each kind of impairments) and dropped (all
    `losses`)."""
    n = len(read_pcap(path)[1])
    kinds = {name.split("-")[0]: (name, order) for name, order in reversed(impairments(n))}
    out = []
    for name, order in [*kinds.values(), *losses(n)]:
        copy = tmp / f"{path.stem}.{name}.pcap"
        impaired_copy(path, copy, order)
        out.append(copy)
    return out


@pytest.mark.parametrize("path", BUNDLED + shared_captures(), ids=lambda p: p.name)
def test_counts_add_up_on_captures_and_their_impaired_copies(path: Path, tmp_path: Path) -> None:
    for capture in [path, *copies(path, tmp_path)]:
        r = inspect_json(capture)
        try:
            check_counts(r)
        except AssertionError as e:
            raise AssertionError(f"{capture.name}: {e}") from e


def test_the_shared_corpus_is_walked() -> None:
    if not CAPTURES.is_dir():
        pytest.skip("../shared/captures not available")
    assert len(shared_captures()) >= 20


def test_a_stream_whose_acks_fell_in_a_gap_counts_them_unknown(tmp_path: Path) -> None:
    """The server's ACK of the bundled pylogbeat capture's first window is dropped: its 4 events
    are neither acked nor unacked on the connection, and say so."""
    path = REPO / "examples" / "lumberjack-pylogbeat.pcap"
    n = len(read_pcap(path)[1])
    copy = tmp_path / "ack-dropped.pcap"
    impaired_copy(path, copy, [i for i in range(n) if i != 7])  # frame 8: ACK 4
    r = inspect_json(copy)
    check_counts(r)
    (s,) = r["streams"]
    assert (s["events"], s["acked"], s["unacked"], s["ack_unknown"]) == (9, 5, 0, 4)
    assert r["protocols"]["lumberjack"]["events"] == {"events": 9, "acked": 5, "unacked": 0, "ack_unknown": 4}
    assert r["capture_loss"] == {"bytes": 6, "gaps": 1, "streams": 1}
