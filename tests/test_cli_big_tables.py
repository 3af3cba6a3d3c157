"""Tables at any size (issue 44, items 1 and 2): `streams` past a few hundred rows is laid out once in
plain fixed-width form (Rich measured every cell: 38 s for 50,000 rows); `inspect` folds streams that
behave alike and lists the worst first, so that it fits one screen; `--all` lists every stream."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest

from tests.capture_tools import run_cli
from tests.fault_helpers import EXAMPLE
from tests.pty_tools import ANSI
from tests.test_cli_escaping import _in_a_terminal
from tests.test_cli_terminal import assert_plain, piped
from wirelog.cli.fold import WORST

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from gen_capture import generate, short


@pytest.fixture(scope="module")
def many(tmp_path_factory) -> Path:
    """300 short connections (handshake, a request, a reply, FINs) to one server: all alike."""
    path = tmp_path_factory.mktemp("many") / "many.pcap"
    short(str(path), 300)
    return path


def test_streams_past_a_few_hundred_rows_is_one_aligned_line_each(many):
    out = piped("streams", str(many))
    assert_plain(out)
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["id", "client", "server"]
    ids = [int(line.split()[0]) for line in lines[1:]]
    assert ids == list(range(300))  # every stream, in id order
    assert len({len(line) for line in lines[1:]}) == 1  # fixed width: these rows are alike
    head = lines[0]
    for row in lines[1:]:  # numbers end under the end of their header
        assert row[: head.index("id") + 2].strip().isdigit()
        end = head.index("bytes s→c") + len("bytes s→c")
        assert row[:end].endswith("300")


def test_streams_big_table_leaves_out_secondary_columns_to_fit(many):
    out = piped("streams", str(many), columns=80)
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    assert lines[301].startswith("(not shown at 80 columns: ")
    assert "client" in lines[0] and "server" in lines[0] and "bytes c→s" in lines[0]
    assert len(lines) == 303


def test_streams_table_costs_about_what_json_costs(tmp_path):
    """The table form is linear and cheap: at 5,000 connections it took 4 s (Rich measured every
    cell), 13x `streams --json`; laid out once it is within 3x (bench/bench_tables.py at 50,000
    and 200,000)."""
    path = tmp_path / "short5k.pcap"
    short(str(path), 5000)
    table = _seconds("streams", str(path))
    json = _seconds("streams", "--json", str(path))
    assert table <= 3 * json + 0.5, (table, json)


def _seconds(*args: str) -> float:
    start = time.perf_counter()
    piped(*args)
    return time.perf_counter() - start


@pytest.fixture(scope="module")
def lumberjack_many(tmp_path_factory) -> Path:
    """1,265 Lumberjack connections to one server (the size of the issue's capture), 7 of 8 never
    acknowledged (the server never answers them), each with its own number of events."""
    path = tmp_path_factory.mktemp("lj") / "lj1265.pcap"
    generate(str(path), 1265 * 40, 1265, 1, "lumberjack", 8, True)
    return path


def _terminal(args: list[str], width: int) -> list[str]:
    raw = _in_a_terminal(args, width, stderr=False)
    return ANSI.sub(b"", raw).decode().replace("\r\n", "\n").splitlines()


def _json(path: Path) -> dict:
    code, out, err = run_cli("inspect", "--json", str(path))
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("width", [80, 120])
def test_inspect_of_1265_connections_fits_one_screen(lumberjack_many, width):
    lines = _terminal(["inspect", str(lumberjack_many)], width)
    assert all(len(line) <= width for line in lines)
    if width == 120:
        assert len(lines) <= 60, "\n".join(lines)  # was 1,307 lines: one row per stream
    rows = [line for line in lines if re.match(r"│ +\d+ │ lumberjack", line)]
    assert len(rows) == WORST
    unacked = [int(row.split("│")[7 if width == 120 else 5].split()[0]) for row in rows]
    assert unacked == sorted(unacked, reverse=True) and unacked[0] > 0  # the worst first
    text = " ".join(lines)
    assert "more lumberjack streams to 10.1.0.1:5044 like these:" in text
    assert f"({WORST} of 1,265 streams listed, the worst first; --all lists every stream)" in text


def test_inspect_folded_counts_add_up_to_the_totals(lumberjack_many):
    r = _json(lumberjack_many)
    out = piped("inspect", str(lumberjack_many))
    lines = out.splitlines()
    head = lines.index("Streams") + 1
    listed = [line.split() for line in lines[head + 1 : head + 1 + WORST]]
    by_id = {s["stream"]: s for s in r["streams"]}
    assert len(listed) == WORST and all(int(row[0]) in by_id for row in listed)
    worst = sorted(r["streams"], key=lambda s: (-s["unacked"], -s["findings"], -s["gap_bytes"], s["stream"]))
    assert [int(row[0]) for row in listed] == [s["stream"] for s in worst[:WORST]]
    groups = [
        re.match(r"([\d,]+) more lumberjack streams to 10\.1\.0\.1:5044( like these)?: (.*)", line)
        for line in lines
    ]
    groups = [g for g in groups if g]
    assert groups
    streams = sum(int(g.group(1).replace(",", "")) for g in groups)
    assert streams + WORST == r["totals"]["streams"] == 1265
    events = sum(int(row[6]) for row in listed)
    unacked = sum(int(row[8]) for row in listed)
    for g in groups:
        m = re.search(r"\(([\d,]+) events(?:, ([\d,]+) not acked)? in all\)", g.group(3))
        n = int(g.group(1).replace(",", ""))
        if m:
            group_events = int(m.group(1).replace(",", ""))
        else:  # "... each"
            assert g.group(3).endswith(" each")
            group_events = n * int(re.match(r"([\d,]+) events", g.group(3)).group(1).replace(",", ""))
        events += group_events
        if "none acked" in g.group(3):
            unacked += group_events
        elif m and m.group(2):
            unacked += int(m.group(2).replace(",", ""))
    assert events == r["totals"]["events"]
    assert unacked == r["totals"]["unacked"]


def test_fold_groups_hold_every_stream_not_listed(lumberjack_many):
    """Each stream not listed is in exactly the group of its protocol, server and kind of trouble,
    between its least and its most; the groups' sums and the listed rows add up to every total."""
    from wirelog.cli.fold import VALUES, InspectFold, _trouble
    from wirelog.cli.summary import Summary
    from wirelog.engine.local import Options, run

    summary, fold = Summary(per_stream=False), InspectFold()
    for item in run([str(lumberjack_many)], options=Options(records="summary")):
        summary.add(item)
        fold.add(item)
    doc = fold.fold(summary.result())
    r = _json(lumberjack_many)
    listed = {s["stream"] for s in doc["streams"]}
    assert len(listed) == WORST
    groups = {}
    for g in doc["stream_groups"]:
        groups.setdefault((g["protocol"], g["server"]), []).append(g)
    counted = {id(g): 0 for gs in groups.values() for g in gs}
    for s in r["streams"]:
        if s["stream"] in listed:
            continue
        matching = [
            g
            for g in groups[(s["protocol"], s["server"])]
            if all(g[n]["min"] <= s[n] <= g[n]["max"] for n in VALUES)
            and ((g["unacked"]["min"] > 0) == (s["unacked"] > 0))
        ]
        assert matching, s
        counted[id(matching[0])] += 1
        assert _trouble(s, False)[0] == (s["unacked"] > 0)
    assert sum(counted.values()) == sum(g["streams"] for g in doc["stream_groups"]) == 1265 - WORST
    for name in VALUES:
        total = sum(s[name] for s in r["streams"])
        assert (
            sum(g[name]["sum"] for g in doc["stream_groups"]) + sum(s[name] for s in doc["streams"]) == total
        )


def test_inspect_all_lists_every_stream(lumberjack_many):
    out = piped("inspect", "--all", str(lumberjack_many))
    lines = out.splitlines()
    head = lines.index("Streams") + 1
    ids = [int(line.split()[0]) for line in lines[head + 1 : head + 1 + 1265]]
    assert ids == list(range(1265))
    assert "more lumberjack streams" not in out and "--all lists" not in out


def test_inspect_of_many_short_connections_is_one_screen_and_cheap(tmp_path):
    """5,000 connections alike: one group line; the run costs about what the core's decoding
    costs (it took 4 s in Rich), and fits 60 lines at 120 columns."""
    path = tmp_path / "short5k.pcap"
    short(str(path), 5000)
    lines = _terminal(["inspect", str(path)], 120)
    assert len(lines) <= 60
    assert any(line.startswith("4,992 more unknown streams to 10.1.0.1:9042 like these: ") for line in lines)
    assert any("200 bytes c→s, 300 bytes s→c, 1 finding each" in line for line in lines)
    table = _seconds("inspect", str(path))
    json_ = _seconds("streams", "--json", str(path))
    assert table <= 4 * json_ + 0.5, (table, json_)


def test_stream_drill_down_is_in_frame_order_with_relative_time_and_info():
    """--stream N: frame order although events (and their window) come when their ACK does; time
    in seconds from the stream's first record; one Info line a message (was: frame 6 before 4, an
    absolute time, key=value fields without the event's message)."""
    out = piped("inspect", str(EXAMPLE), "--stream", "0")
    lines = out.splitlines()
    assert lines[0].split() == ["frame", "time", "s", "dir", "kind", "info"]
    rows = [line.split(None, 4) for line in lines[1:] if line.split()[0].isdigit()]
    frames = [int(r[0]) for r in rows]
    assert frames == sorted(frames) and frames[0] == 4
    times = [float(r[1]) for r in rows]
    assert times[0] == 0.0 and times == sorted(times) and 2.3 < times[-1] < 2.4
    events = [r[4] for r in rows if r[3] == "event"]
    assert len(events) == 9
    assert events[0].startswith("seq 1 10.0.4.17 - - [21/Nov/2026:06:00:01 +0000]")
    assert all(e.endswith("[acked at frame 8]") for e in events[:4])
    assert "window 1: 4 events (seq 1–4), acked at frame 8" in out
    assert "ACK 4 (window 1, 4 events)" in out


def test_stream_drill_down_holds_a_bounded_number_of_rows(monkeypatch):
    """Rows wait in a heap of at most REORDER_ROWS; past it the lowest frame goes out."""
    import io

    from rich.console import Console

    from wirelog.cli import inspect as cli_inspect
    from wirelog.cli.common import Session
    from wirelog.model import Direction, Message

    monkeypatch.setattr(cli_inspect, "REORDER_ROWS", 3)
    held = []
    original = cli_inspect.heapq.heappush

    def push(heap, item):
        original(heap, item)
        held.append(len(heap))

    monkeypatch.setattr(cli_inspect.heapq, "heappush", push)

    def show(frames: list[int]) -> list[str]:
        items = [Message("x", "m", Direction.C2S, 0, 1, frame=f, ts=f * 10**9, stream=0) for f in frames]

        class Fake(Session):
            def __init__(self):
                self.paths, self.raw = ["a"], []

            def items(self, paths=None, raw=True):
                yield from items

        console = Console(file=io.StringIO(), width=120)
        cli_inspect._show_streams(console, Fake())
        return console.file.getvalue().splitlines()[1:]

    out = show([5, 3, 4, 1, 2, 9, 8, 7, 6, 10])  # never more than 3 rows late: in frame order
    assert [int(line.split()[0]) for line in out] == list(range(1, 11))
    assert max(held) == 4  # never more than REORDER_ROWS + the one being placed
    assert not any("(late)" in line for line in out)
    assert out[0].split()[1] == "0.000000" and out[-1].split()[1] == "9.000000"  # from the first
    out = show([5, 6, 7, 8, 9, 1])  # frame 1 comes 5 rows late: printed, marked, never dropped
    assert [int(line.split()[0]) for line in out] == [5, 6, 1, 7, 8, 9]
    assert "(late)" in out[2] and not any("(late)" in line for line in out[:2] + out[3:])
