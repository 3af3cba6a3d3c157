"""The stream fold of `inspect` and `report` (cli/fold.py, export/report/streams.py) folds a block of
streams as soon as their numbers are final, and gives what folding every stream at the end gives."""

from __future__ import annotations

import tracemalloc

import pytest

from wirelog.cli.fold import ROW_VALUES, InspectFold
from wirelog.export.report import streams
from wirelog.model import CaptureInfo, EventCounts, Finding, Severity, StreamInfo

SUMMARY = {"totals": {"findings": 0}, "protocols": {}}


def _info(capture: str, stream: int, settled: bool, **kw) -> StreamInfo:
    return StreamInfo(
        capture=capture,
        stream=stream,
        client=f"10.2.{stream >> 8 & 255}.{stream & 255}:{20000 + stream % 30000}",
        server="10.1.0.1:5044" if stream % 3 else "10.1.0.2:5044",
        client_port=20000 + stream % 30000,
        server_port=5044,
        protocol="lumberjack",
        settled=settled,
        fin_c2s=True,
        fin_s2c=stream % 11 != 0,
        reset=stream % 11 == 0,
        **kw,
    )


def _items(capture: str, n: int, waits: int = 7):
    """`n` connections in the order the core gives them: each one's records, then its summary.
    Stream 0 lives to the end (its records come throughout); every `waits`-th stream's events wait
    for their fate (not settled: its unacknowledged events are counted after its summary, at the end);
    every 13th has a finding."""
    late = []
    for s in range(1, n):
        if s % 1000 == 0:
            yield EventCounts(capture, [(0, "lumberjack", "2", True, 3)])
        yield EventCounts(capture, [(s, "lumberjack", "2", True, 2 + s % 5)])
        if s % 13 == 0:
            yield Finding(
                code="lumberjack.resync",
                severity=Severity.WARNING,
                message="m",
                protocol="lumberjack",
                capture=capture,
                stream=s,
            )
        waiting = bool(waits) and s % waits == 0
        yield _info(capture, s, settled=not waiting, bytes_c2s=500 + s % 17, bytes_s2c=40, gaps=s % 19 == 0)
        if waiting:
            late.append(EventCounts(capture, [(s, "lumberjack", "2", False, 1 + s % 3)]))
    yield _info(capture, 0, settled=True, bytes_c2s=10**6)
    yield from late
    yield CaptureInfo(capture)


def _fold(items, shift: int) -> tuple[dict, InspectFold]:
    fold = InspectFold()
    old, streams.SHIFT = streams.SHIFT, shift
    try:
        for item in items:
            fold.add(item)
        return fold.fold(SUMMARY, ["a.pcap", "b.pcap"]), fold
    finally:
        streams.SHIFT = old


@pytest.mark.parametrize("n", [5, 40_000])
def test_folding_blocks_early_gives_what_folding_at_the_end_gives(n):
    items = [*_items("a.pcap", n), *_items("b.pcap", n // 2 + 1)]
    early, _ = _fold(items, streams.SHIFT)
    at_the_end, _ = _fold(items, 62)  # one block: nothing is folded before its input ends
    assert early == at_the_end
    assert early["totals"]["streams"] == n + n // 2 + 1
    assert early["totals"]["unacked"] == sum(1 + s % 3 for s in range(7, n, 7)) + sum(
        1 + s % 3 for s in range(7, n // 2 + 1, 7)
    )


@pytest.mark.parametrize("waits", [0, 7])
def test_a_run_of_settled_streams_keeps_a_few_blocks_and_its_stragglers(waits):
    """120,000 connections: at most three blocks of columns and the streams not settled (the one
    that lives to the end, those whose events wait) are held; memory does not grow with the rest."""
    fold = InspectFold()
    n = 120_000
    held = []  # the fold's memory (tracemalloc's, of wirelog's own lines) after 30,000 and 120,000

    def fold_memory() -> int:
        snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, "*/wirelog/*")])
        return sum(stat.size for stat in snapshot.statistics("filename"))

    tracemalloc.start()
    try:
        for item in _items("a.pcap", n, waits):
            fold.add(item)
            if isinstance(item, StreamInfo) and item.stream in (30_000, n - 1):
                held.append(fold_memory())
                t = fold._inputs["a.pcap"]
                assert len(t.blocks) <= 3
                waiting = {
                    0,
                    *(range(waits, n, waits) if waits else ()),
                }  # the one that lives to the end, those whose events wait
                assert set(t.stragglers.ids) <= waiting
                assert len(t.stragglers.ids) >= len(
                    waiting & set(range(item.stream - 3 * (1 << streams.SHIFT)))
                )
    finally:
        tracemalloc.stop()
    # what grows is the stragglers (~350 bytes each, a client host of their own here), not the
    # settled streams (flat: 90,000 more of them hold less than a block)
    stragglers = len(range(30_000, n, waits)) if waits else 0
    assert held[1] - held[0] < stragglers * 400 + 1_000_000, held
    doc = fold.fold(SUMMARY)
    assert doc["totals"]["streams"] == n
    assert doc["streams"][0]["unacked"] == (3 if waits else 0)  # the worst first: 1 + s % 3 at most


def _every(captures: list[str], n: int) -> InspectFold:
    """A fold keeping every stream of `captures`, `n` streams each: a mix of protocols (one unknown),
    versions, flags, findings and TLS streams."""
    fold = InspectFold(keep_all=True)
    tls = {"version": "TLS 1.3", "cipher_suite": "TLS_AES_128_GCM_SHA256", "sni": "[bold]x", "alpn": None}
    for capture in captures:
        for s in range(n):
            if s % 5:
                fold.add(EventCounts(capture, [(s, "lumberjack", str(1 + s % 2), s % 3 == 0, 10 * s)]))
            if s % 9 == 0:
                fold.add(Finding("x.y", Severity.INFO, "m", protocol="tcp", capture=capture, stream=s))
            extra = {"tls": dict(tls)} if s % 17 == 0 else {}
            fold.add(_info(capture, s, settled=True, bytes_c2s=s * 1000, **extra))
        fold.add(CaptureInfo(capture))
    return fold


@pytest.mark.parametrize("width", [80, 400])
@pytest.mark.parametrize("captures", [["a.pcap"], ["b.pcap", "a [x]\x1b.pcap"]])
def test_every_stream_laid_out_from_columns_reads_as_laid_out_row_by_row(captures, width):
    """`inspect --all` past a few hundred streams formats the fold's columns at C speed
    (`every_table` + `print_known`); its lines are those of the row-by-row layout (`every_row` +
    `print_rows`), with the capture escaped in every id and secondary columns left out alike."""
    from io import StringIO

    from rich.console import Console

    from wirelog.cli.inspect import STREAM_COLUMNS, _stream_texts
    from wirelog.cli.tables import print_known, print_rows

    fold = _every(captures, 700)
    multi = len(captures) > 1
    fast, slow = StringIO(), StringIO()
    table = fold.every_table(multi)
    assert table is not None
    widths, cells = table
    n = print_known(Console(file=fast, width=width), "Streams", STREAM_COLUMNS, widths, cells)
    rows = (_stream_texts(tuple(r[k] for k in ROW_VALUES), multi) for r in fold.every_row())
    print_rows(Console(file=slow, width=width), "Streams", STREAM_COLUMNS, rows, escaped=True)
    assert n == 700 * len(captures)
    assert fast.getvalue() == slow.getvalue()
    lines = fast.getvalue().splitlines()
    assert all(not line.endswith(" ") for line in lines)
    if multi:
        assert lines[2].lstrip().startswith("a [x]\\x1b.pcap:0 ")  # inputs by name, ESC escaped
    assert [r["stream"] for r in fold.every_tls()][:3] == [0, 17, 34]


def test_every_stream_of_a_capture_named_in_wide_characters_is_laid_out_row_by_row():
    """A text wider on a terminal than its length cannot be padded by a %-format: `every_table`
    says so (None) and `inspect --all` lays its rows out one by one."""
    fold = _every(["日本.pcap", "a.pcap"], 3)
    assert fold.every_table(multi=True) is None
    assert fold.every_table(multi=False) is not None  # (one input: its name is in no cell)
