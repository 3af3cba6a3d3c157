"""Tables at any size (issue 44, items 1 and 2): `streams` past a few hundred rows is laid out once in
plain fixed-width form (Rich measured every cell: 38 s for 50,000 rows); `inspect` folds streams that
behave alike and lists the worst first, so that it fits one screen; `--all` lists every stream."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.test_cli_terminal import assert_plain, piped

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from gen_capture import short


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
