"""Capture loss is the capture's (issue 41): copies of genuine-peer captures with packets dropped
(at random and in bursts) are read as the same traffic seen less, not as peers that misbehaved.

The verdict of a lossy copy may only move events from acknowledged to unknown (their ACK is in a
gap), never to unacknowledged; no error is raised against peers that behaved (`validate --fail-on
error` passes), while a real violation in the same lossy capture still fails it; and `inspect`,
`validate` and the report say first what the capture missed.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from capture_tools import ndjson, run_cli
from conftest import REPO
from impair import impaired_copy, losses, read_pcap, write_pcap

PYLOGBEAT = REPO / "tests" / "data" / "lumberjack" / "pylogbeat-logstash.pcap"  # Logstash, 3 windows
ACK_FRAME = 8  # the server's ACK 4 of the first window (32 41 00000004)


def inspect_json(path: Path) -> dict[str, Any]:
    code, out, err = run_cli("inspect", "--json", str(path))
    assert code == 0, err
    return json.loads(out)


def validate(path: Path, *extra: str) -> tuple[int, list[dict[str, Any]]]:
    code, out, err = run_cli("validate", "--json", str(path), *extra)
    assert code in (0, 1), err
    return code, ndjson(out)


def errors(findings: list[dict[str, Any]]) -> Counter[str]:
    return Counter(f["code"] for f in findings if f["severity"] == "error")


def events_acked(path: Path) -> dict[Any, bool | None]:
    code, out, err = run_cli("convert", str(path), "--to", "json", "--events")
    assert code == 0, err
    return {(r["client"], r["seq"]): r["acked"] for r in ndjson(out)}


def lossy_copies(path: Path, tmp: Path) -> list[tuple[str, Path]]:
    """Every copy missing one packet (past the handshake), and the random and burst losses."""
    n = len(read_pcap(path)[1])
    orders = [(f"without-{i + 1}", [j for j in range(n) if j != i]) for i in range(3, n)] + losses(n)
    out = []
    for name, order in orders:
        copy = tmp / f"{path.stem}.{name}.pcap"
        impaired_copy(path, copy, order)
        out.append((name, copy))
    return out


def assert_seen_less(complete: Path, copy: Path, name: str) -> dict[str, Any]:
    """`copy` is `complete` with packets missing: no error, and every event it still holds is
    acknowledged as in the complete capture or unknown, never unacknowledged."""
    code, findings = validate(copy)
    assert code == 0 and not errors(findings), f"{name}: {errors(findings)}"
    want = events_acked(complete)
    got = events_acked(copy)
    assert all(want[k] is True and acked in (True, None) for k, acked in got.items()), name
    r = inspect_json(copy)
    for protocol, d in r["delivery"].items():
        assert d["never_acknowledged"] == 0, (name, protocol, d)
    return r


def test_lossy_copies_of_a_behaving_lumberjack_capture_are_not_the_peers_fault(tmp_path: Path) -> None:
    """pylogbeat to Logstash, every packet acknowledged: before, a missing ACK made the next ones
    `lumberjack.ack-too-high` errors, a missing window's bytes `window-exceeded` and
    `event-without-window` errors."""
    assert all(events_acked(PYLOGBEAT).values())
    lossy = 0
    for name, copy in lossy_copies(PYLOGBEAT, tmp_path):
        r = assert_seen_less(PYLOGBEAT, copy, name)
        lossy += r["capture_loss"]["gaps"] > 0
    assert lossy >= 15  # copies without payload-less packets only (pure ACKs) are complete


def test_a_real_violation_in_a_lossy_capture_still_fails(tmp_path: Path) -> None:
    """The same lossy copy, once with the server's first ACK raised above its window (4 → 9, all
    of the window's events captured): that ACK is still the server's error."""
    header, records = read_pcap(PYLOGBEAT)
    lossy = [r for i, r in enumerate(records) if i != 21]  # frame 22: the last window's events
    clean = tmp_path / "lossy.pcap"
    write_pcap(clean, header, lossy)
    assert validate(clean)[0] == 0
    old, new = b"2A\x00\x00\x00\x04", b"2A\x00\x00\x00\x09"
    assert lossy[ACK_FRAME - 1].count(old) == 1
    lossy[ACK_FRAME - 1] = lossy[ACK_FRAME - 1].replace(old, new)
    bad = tmp_path / "lossy-bad-ack.pcap"
    write_pcap(bad, header, lossy)
    code, findings = validate(bad)
    assert code == 1 and errors(findings)["lumberjack.ack-too-high"] >= 1
    assert inspect_json(bad)["capture_loss"]["gaps"] >= 1


def test_inspect_validate_and_the_report_say_first_what_the_capture_missed(tmp_path: Path) -> None:
    n = len(read_pcap(PYLOGBEAT)[1])
    copy = tmp_path / "ack-dropped.pcap"
    impaired_copy(PYLOGBEAT, copy, [i for i in range(n) if i != ACK_FRAME - 1])
    said = "the capture missed 6 bytes in 1 gap on 1 stream"

    code, out, err = run_cli("inspect", str(copy))
    assert code == 0, err
    assert said in out.decode().splitlines()[0]
    code, out, err = run_cli("validate", str(copy))
    lines = out.decode().splitlines()
    assert code == 0 and said in lines[0] and lines[0].startswith("loss")
    assert any("tcp.gap" in line for line in lines[1:])
    code, out, err = run_cli("validate", "--json", str(copy))
    assert code == 0 and said in err and all(r["record"] == "finding" for r in ndjson(out))
    page = tmp_path / "report.html"
    code, _, err = run_cli("report", str(copy), "-o", str(page))
    assert code == 0, err
    html = page.read_text()
    verdict = html[html.index("<h2>Verdict") :]
    assert said in verdict and verdict.index(said) < verdict.index("<table")

    code, out, err = run_cli("inspect", str(PYLOGBEAT))  # a complete capture says nothing of it
    assert "capture missed" not in out.decode()


# genuine go-lumber peers, a larger capture: windows of 200 events spread over several segments


@pytest.fixture(scope="module")
def golumber_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from go_peer_helpers import GoServer, require_golumber, run_client
    from lumberjack_helpers import capture

    require_golumber()
    pcap = tmp_path_factory.mktemp("golumber") / "golumber.pcap"
    with GoServer() as server, capture(pcap, server.port):
        run = run_client(server.port, mode="async", level=0, batches=40, batch=200, size=1000)
    assert all(run.acked(b) for b in run.results)
    return pcap


def keep_for_diagnosis(*captures: Path) -> None:
    """Copy the captures of a failing run where pytest's rotation of its temporary directories
    does not reach: each run records a new live capture, so a rare failure cannot be re-run."""
    kept = Path(tempfile.gettempdir()) / "wirelog-capture-loss-failures" / time.strftime("%Y%m%dT%H%M%S")
    kept.mkdir(parents=True, exist_ok=True)
    for c in captures:
        shutil.copy2(c, kept / c.name)
    print(f"failing captures kept in {kept}", file=sys.stderr)


def test_lossy_copies_of_a_golumber_capture_are_not_the_peers_fault(
    golumber_capture: Path, tmp_path: Path
) -> None:
    """Before, the first ACK of a window whose tail fell in a client→server gap was `ack-too-high`,
    and so was every later ACK (FIFO pairing stuck on that window): dozens of errors per copy and
    thousands of events "never acknowledged"."""
    complete = inspect_json(golumber_capture)["delivery"]["lumberjack"]
    assert complete["delivered"] == complete["distinct_events"] == 8000
    explained: Counter[str] = Counter()
    n = len(read_pcap(golumber_capture)[1])
    for name, order in losses(n):
        copy = tmp_path / f"{name}.pcap"
        impaired_copy(golumber_capture, copy, order)
        try:
            r = assert_seen_less(golumber_capture, copy, name)
        except AssertionError:
            keep_for_diagnosis(golumber_capture, copy)
            raise
        explained.update({f["code"]: f["count"] for f in r["findings"] if f["severity"] != "error"})
    assert explained["tcp.gap"] > 0
    assert explained["lumberjack.ack-beyond-capture"] > 0  # ACKs of events the capture missed


def test_a_resend_the_capture_missed_leaves_the_first_copies_unknown_not_lost(tmp_path: Path) -> None:
    """pylogbeat resends its stalled window on a new connection; with the packet carrying that resend
    missing from the capture, the first copies' fate is unknown (the resend may be in the gap, and
    the server ACKed something there), not never acknowledged: validate passes, and every surface
    says so. Without the gap the same events are recovered by the resend."""
    from delivery_helpers import assert_every_surface_agrees

    source = REPO / "tests" / "data" / "lumberjack" / "pylogbeat-stalled-resend.pcap"
    n = len(read_pcap(source)[1])
    assert inspect_json(source)["delivery"]["lumberjack"]["recovered_by_resend"] == 3
    copy = tmp_path / "resend-missed.pcap"
    impaired_copy(source, copy, [i for i in range(n) if i != 25])  # frame 26: the resent window
    code, findings = validate(copy, "--fail-on", "error")
    assert code == 0 and not errors(findings)
    lj = assert_every_surface_agrees(copy, tmp_path)["lumberjack"]
    assert (lj["never_acknowledged"], lj["ack_unknown"], lj["recovered_by_resend"]) == (0, 3, 0)


@pytest.mark.parametrize(
    "name",
    [
        "peers/courier-go2.12-client-ruby2.12-server.pcap",
        "peers/courier-ruby2.12-client-server.pcap",
        "peers/courier-go2.0.6-legacy-client-ruby-server.pcap",
    ],
)
def test_a_courier_capture_missing_any_one_packet_blames_no_peer(tmp_path: Path, name: str) -> None:
    """Real Log Courier sessions with each packet in turn missing (an ACKN among them: its payload's
    fate is then unknown, not lost): validate --fail-on error passes every time."""
    from conftest import shared_capture

    source = shared_capture(name)
    n = len(read_pcap(source)[1])
    for drop in range(n):
        copy = tmp_path / f"drop-{drop}.pcap"
        impaired_copy(source, copy, [i for i in range(n) if i != drop])
        code, findings = validate(copy, "--fail-on", "error")
        assert code == 0 and not errors(findings), (drop + 1, errors(findings))
