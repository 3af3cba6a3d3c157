"""`wirelog report`: the page's numbers are inspect's, the page is self-contained and bounded, a
real Chromium renders it offline, the timeline finds stalls, and the charts export as images."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench.gen_capture import generate, reorder
from tests.capture_tools import run_cli
from tests.conftest import REPO, shared_capture

EXAMPLE = REPO / "examples" / "lumberjack-pylogbeat.pcap"
SHARED = [
    "peers/courier-go2.12-client-ruby2.12-server.pcap",
    "public/cql-packetbeat/cassandra_trace_err.pcap",
    "public/arkime_cassandra1.pcap",
    "public/reassembly/sv_eve-payload-05-tcp-data-gap__tcp-simple-gap2.pcap",
]
MAX_PAGE = 5 * 1024 * 1024


def report(tmp_path: Path, *args: str, name: str = "report.html") -> tuple[str, dict[str, Any]]:
    """The page `wirelog report ARGS` writes, and the data it carries."""
    out = tmp_path / name
    code, stdout, err = run_cli("report", *args, "-o", str(out))
    assert code == 0, err
    assert stdout == b""  # the page is where -o says; its closing line is for a terminal (test_cli_progress)
    text = out.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="wirelog-data">(.*?)</script>', text, re.S)
    assert m
    return text, json.loads(m[1].replace("<\\/", "</"))


def rows(dataset: dict[str, Any]) -> list[dict[str, Any]]:
    """A dataset as the page's script rebuilds it from its columns."""
    cols = dataset["cols"]
    return [
        {k: (c["dict"][c["codes"][i]] if isinstance(c, dict) else c[i]) for k, c in cols.items()}
        for i in range(dataset["n"])
    ]


def inspect_json(*args: str) -> dict[str, Any]:
    code, out, err = run_cli("inspect", "--json", *args)
    assert code == 0, err
    return json.loads(out)


def _rank(stream: dict[str, Any]) -> tuple[int, int, int]:
    return (-stream["unacked"], -stream["findings"], -stream["gap_bytes"])


def assert_page_inspect(page: dict[str, Any], expected: dict[str, Any]) -> None:
    """The page carries `inspect --json`'s document with its stream list folded: the worst
    streams (never acknowledged, findings, bytes missing; stalls break ties), at most ROWS, the
    others counted in `streams_folded` with the command that lists them; every other key equal."""
    from wirelog.export.report.streams import ROWS, fold_highlights

    doc, expected = dict(page), dict(expected)
    shown, folded, protocols = doc.pop("streams"), doc.pop("streams_folded"), doc.pop("stream_protocols")
    streams = expected.pop("streams")
    assert doc == {**expected, "protocols": fold_highlights(expected["protocols"])}
    assert len(shown) == min(ROWS, len(streams)) and folded["streams"] == len(streams) - len(shown)
    assert all(row in streams for row in shown)
    assert [_rank(s) for s in shown] == sorted(_rank(s) for s in streams)[: len(shown)]
    for key in ("events", "unacked", "findings", "gap_bytes", "bytes_c2s", "messages"):
        assert folded[key] + sum(s[key] for s in shown) == sum(s[key] for s in streams), key
    assert protocols == dict(Counter(s["protocol"] or "unknown" for s in streams))
    assert folded["tls"] + sum(s["tls"] is not None for s in shown) == sum(
        s["tls"] is not None for s in streams
    )
    assert bool(folded["command"]) == bool(folded["streams"])


RESEND = REPO / "tests/data/lumberjack/pylogbeat-stalled-resend.pcap"
GATE = REPO / "tests/data/hercules/gate-session.pcap"


@pytest.mark.parametrize("capture", [EXAMPLE, RESEND, GATE, *SHARED])
def test_numbers_equal_inspect_json(tmp_path, capture):
    path = str(capture if isinstance(capture, Path) else shared_capture(capture))
    text, data = report(tmp_path, path)
    expected = inspect_json(path)
    assert_page_inspect(data["inspect"], expected)
    t = expected["totals"]
    verdict = text[text.index("<h2>Verdict") : text.index("<h2>Timeline")]
    for n in (t["streams"], t["messages"], t["events"], t["acked"], t["unacked"]):
        assert f'<td class="n">{n}</td>' in verdict
    for f in expected["findings"]:
        assert f'<td>{f["code"]}</td><td class="n">{f["count"]}</td>' in verdict
    for protocol, d in expected["delivery"].items():
        row = re.search(rf"<tr><td>{protocol}</td>(.*?)</tr>", verdict)
        if protocol == "cql":  # requests by outcome
            assert row and f">{d['requests']}<" in row[1] and f">{d['unanswered']}<" in row[1]
            continue
        assert row and f">{d['delivered']}<" in row[1] and f">{d['never_acknowledged']}<" in row[1]


def test_filters_and_several_inputs_match_inspect(tmp_path):
    courier = str(shared_capture(SHARED[0]))
    args = (str(EXAMPLE), courier, "--kind", "window", "--kind", "ack")
    _, data = report(tmp_path, *args)
    assert_page_inspect(data["inspect"], inspect_json(*args))


def test_page_is_self_contained(tmp_path):
    text, data = report(tmp_path, str(EXAMPLE))
    markup = re.sub(
        r"(<script[^>]*>).*?</script>", r"\1</script>", text, flags=re.S
    )  # the page, not its code
    assert markup.count("<script") == 3 and "<style>" in markup
    for fetch in (r"<script[^>]+src=", r"<link\b", r"<iframe", r"<img\b", r"@import", r"url\(", r"https?://"):
        assert not re.search(fetch, markup, re.I), fetch
    assert "default-src 'none'" in text  # the browser itself refuses any request the page makes
    assert "vegaEmbed" in text and len(data["charts"]) >= 6


def test_the_demo_stall_is_on_the_timeline(tmp_path):
    """pylogbeat's second window waits 2.3 s for its ACK while the server sends keep-alives."""
    _, data = report(tmp_path, str(EXAMPLE))
    (stall,) = rows(data["datasets"]["stalls"])
    assert (stall["stream"], stall["sent_frame"], stall["answer_frame"]) == (0, 10, 18)
    assert stall["answered"] and 2.3 < stall["seconds"] < 2.4
    marks = rows(data["datasets"]["marks"])
    keepalives = [m for m in marks if m["kind"] == "keepalive"]
    assert len(keepalives) == 2 and all(stall["t"] < m["t"] < stall["t2"] for m in keepalives)
    assert {m["kind"] for m in marks} >= {"send", "answer", "keepalive", "close"}


def test_resends_and_recovered_events_are_marked(tmp_path):
    """pylogbeat gives up on a stalled connection and resends its window on a new one: the first
    copies are drawn as recovered by the resend, not as lost."""
    _, data = report(tmp_path, str(RESEND))
    marks = rows(data["datasets"]["marks"])
    assert not [m for m in marks if m["kind"] == "unacked"]
    (unacked,) = [m for m in marks if m["kind"] == "recovered"]
    assert (unacked["stream"], unacked["frame"], unacked["count"], unacked["first"], unacked["last"]) == (
        0,
        12,
        3,
        5,
        7,
    )
    (resent,) = [m for m in marks if m["kind"] == "resend" and m["what"] == "event"]
    assert (resent["stream"], resent["count"], resent["first_copy_frame"]) == (1, 3, 12)
    (link,) = rows(data["datasets"]["links"])  # drawn from the first copy to the resend
    assert (link["t"], link["lane"], link["t2"], link["lane2"]) == (
        unacked["t"],
        unacked["lane"],
        resent["t"],
        resent["lane"],
    )
    (stall,) = rows(data["datasets"]["stalls"])
    closed = max(m["t"] for m in marks if m["kind"] == "close" and m["stream"] == 0)
    assert not stall["answered"] and stall["stream"] == 0 and stall["t2"] == pytest.approx(closed)


def test_no_page_when_no_input_can_be_read_and_an_empty_capture_draws_nothing(tmp_path):
    junk, out = tmp_path / "junk.bin", tmp_path / "junk.html"
    junk.write_bytes(b"hello")
    code, _, err = run_cli("report", str(junk), "-o", str(out))
    assert code == 2 and "not a pcap" in err and not out.exists()
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000"))
    text, data = report(tmp_path, str(empty))
    assert data["charts"] == {} and "Nothing to draw." in text


def test_stall_threshold_and_unanswered_windows(tmp_path):
    """A server that never ACKs: every connection's first window stalls to the end of the capture."""
    pcap = tmp_path / "stalled.pcap"
    generate(str(pcap), 4000, connections=6, payload="lumberjack", ack_every=0, close=False)
    _, data = report(tmp_path, str(pcap), "--stall", "0.01")
    stalls = rows(data["datasets"]["stalls"])
    assert {s["stream"] for s in stalls} == set(range(6))
    assert all(not s["answered"] and s["answer_frame"] is None for s in stalls)
    _, data = report(tmp_path, str(pcap), "--stall", "1000")
    assert rows(data["datasets"]["stalls"]) == []


def _comparable(data: dict[str, Any]) -> dict[str, Any]:
    """What a reordering of packets must not change. It does change frame numbers, the capture's
    own `pcap.time-backwards` notes (info) and which packet is a connection's last (its close, and
    the end of its unanswered stall)."""
    marks = rows(data["datasets"]["marks"])
    stalls = rows(data["datasets"]["stalls"])
    series = [{k: v for k, v in r.items() if k != "info"} for r in rows(data["datasets"]["series"])]
    totals = {k: v for k, v in data["inspect"]["totals"].items() if k != "findings"}
    delivery = {
        p: {k: v for k, v in d.items() if k != "never_acknowledged_at"}
        for p, d in data["inspect"]["delivery"].items()
    }
    return {
        "series": series,
        "marks": sorted(
            (m["t"] if m["kind"] != "close" else -1.0, m["lane"], m["kind"], m["what"], m["count"])
            for m in marks
        ),
        # an unanswered stall of a closed connection ends at its last packet, as its close
        "stalls": sorted(
            (s["t"], s["t2"] if s["answered"] else -1.0, s["lane"], s["seq_first"], s["seq_last"])
            for s in stalls
        ),
        "totals": totals,
        "delivery": delivery,
        "findings": {k: n for k, n in data["inspect"]["totals"]["findings"].items() if k != "info"},
    }


def test_reordered_capture_gives_the_same_report(tmp_path):
    pcap, moved = tmp_path / "ordered.pcap", tmp_path / "reordered.pcap"
    generate(str(pcap), 6000, connections=8, payload="lumberjack", ack_every=2)
    reorder(str(pcap), str(moved), fraction=0.05, most=3)
    _, a = report(tmp_path, str(pcap), "--stall", "0.05", name="a.html")
    _, b = report(tmp_path, str(moved), "--stall", "0.05", name="b.html")
    assert _comparable(a) == _comparable(b)
    assert rows(a["datasets"]["stalls"])  # half the connections are never acknowledged


@pytest.mark.slow
def test_page_stays_small_on_a_big_capture(tmp_path):
    """Marks are capped and thinned, lanes folded: the page stays under 5 MB."""
    pcap = tmp_path / "big.pcap"
    # ~1.7M events in ~40,000 windows and their ACKs: well past the core's 15,000 routine marks
    # (400,000 packets gave the same page size and mark count, in twice the time)
    generate(str(pcap), 200_000, connections=600, payload="lumberjack", ack_every=3)
    text, data = report(tmp_path, str(pcap), "--top", "30", "--stall", "0.001")
    assert len(text.encode()) <= MAX_PAGE
    marks = data["datasets"]["marks"]["n"]
    assert 5000 < marks <= 20_000
    assert data["inspect"]["totals"]["streams"] == 600 and data["inspect"]["streams_folded"]["streams"] == 500
    lanes = {r["lane"] for r in rows(data["datasets"]["marks"])}
    assert len(lanes) == 31 and "other connections" in lanes
    events = sum(r["events/s"] for r in rows(data["datasets"]["series"])) * data_bin_s(text)
    assert round(events) == data["inspect"]["totals"]["events"]


def data_bin_s(text: str) -> float:
    """The series' bin width, as the page says it ("Series in bins of 50 ms")."""
    m = re.search(r'Series in bins of <b id="bin-interval">([0-9.]+) (ms|s)</b>', text)
    assert m
    return float(m[1]) / (1000 if m[2] == "ms" else 1)


def test_svg_and_png_export(tmp_path):
    svg, png = tmp_path / "svg", tmp_path / "png"
    code, _, err = run_cli(
        "report", str(EXAMPLE), "-o", str(tmp_path / "r.html"), "--svg", str(svg), "--png", str(png)
    )
    assert code == 0, err
    names = {p.stem for p in svg.iterdir()}
    assert {"timeline", "events", "bytes", "latency", "findings", "delivery"} <= names
    assert names == {p.stem for p in png.iterdir()}
    for p in svg.iterdir():
        root = ET.parse(p).getroot()
        assert root.tag.endswith("svg") and p.stat().st_size > 3000
    for p in png.iterdir():
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OFFLINE = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # no name resolves
    "--proxy-server=127.0.0.1:9",  # and nothing gets out through a proxy either
    "--virtual-time-budget=20000",
]


def _png_pixels(data: bytes) -> bytes:
    """The decompressed scanlines of a PNG (enough to tell a blank screenshot from a drawn one)."""
    pos, idat = 8, b""
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return zlib.decompress(idat)


@pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (make test installs it where apt-get can)"
)
@pytest.mark.parametrize("capture", [EXAMPLE, RESEND, GATE])
def test_chromium_renders_the_page_offline(tmp_path, capture):
    _, data = report(tmp_path, str(capture))
    page = (tmp_path / "report.html").as_uri()
    dom = subprocess.run(
        [CHROMIUM, *OFFLINE, "--enable-logging=stderr", "--v=0", "--dump-dom", page],
        capture_output=True,
        text=True,
        timeout=120,
    )
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
    rendered = re.findall(r'id="chart-(\w+)"[^>]*data-rendered="true"', dom.stdout)
    assert sorted(rendered) == sorted(data["charts"])
    assert dom.stdout.count("<svg") >= len(data["charts"]) - 1  # every chart but the timeline
    assert re.search(r'id="chart-timeline"[^>]*>.*?<canvas', dom.stdout, re.S)  # its marks: a canvas
    shot = tmp_path / "shot.png"
    subprocess.run(
        [CHROMIUM, *OFFLINE, "--window-size=1200,2000", f"--screenshot={shot}", page],
        capture_output=True,
        timeout=120,
        check=True,
    )
    pixels = _png_pixels(shot.read_bytes())
    mean = sum(pixels) / len(pixels)
    variance = sum((b - mean) ** 2 for b in pixels[::97]) / len(pixels[::97])
    assert variance > 100, "the screenshot is blank"


@pytest.mark.parametrize(
    "capture",
    ["bench-cql", "public/cql-packetbeat/cassandra_mixed_frame.pcap", "public/ndpi_cassandra.pcap"],
)
def test_cql_summary_from_counts_equals_the_one_from_objects(tmp_path, capture):
    """inspect and report have the core count CQL messages (all but each batch's five slowest
    answers): the summary is the one made from an object per message, slowest pairs and ties included."""
    from bench.bench_cql import write_capture
    from wirelog.cli.summary import Summary
    from wirelog.engine.local import Options, run
    from wirelog.model import Message

    if capture == "bench-cql":
        path = tmp_path / "cql.pcap"
        write_capture(path, 4, 30, 400)  # equal latencies abound: ties must go to the earlier pair
    else:
        path = shared_capture(capture)
    results, objects = [], []
    for records in ("objects", "summary"):
        summary = Summary()
        items = list(run([str(path)], options=Options(records=records)))
        for item in items:
            summary.add(item)
        results.append(summary.result())
        objects.append(sum(isinstance(i, Message) for i in items))
    assert results[0] == results[1] and results[0]["protocols"]["cql"]["slowest"]
    if capture == "bench-cql":
        assert objects[1] * 20 < objects[0]


def test_without_vl_convert_report_says_how_to_install_it(tmp_path):
    """vl-convert is the `report` extra (Spark executors get the runtime dependencies shipped)."""
    code = (
        "import sys\n"
        "sys.modules['vl_convert'] = None\n"
        "from wirelog.cli.main import main\n"
        "main(sys.argv[1:])\n"
    )
    out = tmp_path / "r.html"
    proc = subprocess.run(
        [sys.executable, "-c", code, "report", str(EXAMPLE), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 2 and "pip install 'wirelog[report]'" in proc.stderr and not out.exists()


def test_filters_hold_for_the_timeline_too(tmp_path):
    """TCP-level events (bytes, gaps, TCP findings, closes) of streams a filter leaves out are not
    drawn: with `--stream`, every mark and lane is that stream's, the bytes series adds up to its
    bytes and the findings series to inspect's findings; `--kind` drops the gaps (they are findings)."""
    from tests.impair import impaired_copy, read_pcap

    whole, cut = tmp_path / "whole.pcap", tmp_path / "cut.pcap"
    generate(str(whole), 3000, connections=6, payload="lumberjack", ack_every=2)
    _, packets = read_pcap(whole)
    impaired_copy(whole, cut, [i for i in range(len(packets)) if i % 97 != 50])  # gaps in every stream
    everything = inspect_json(str(cut))
    assert {s["stream"] for s in everything["streams"] if s["gaps"]} == set(range(6))
    for stream in (2, 5):
        args = (str(cut), "--stream", str(stream))
        text, data = report(tmp_path, *args)
        expected = inspect_json(*args)
        assert_page_inspect(data["inspect"], expected)
        marks = rows(data["datasets"]["marks"])
        assert {m["stream"] for m in marks} == {stream}
        assert {m["kind"] for m in marks} >= {"gap", "close", "send"}
        assert len({m["lane"] for m in marks}) == 1 and "more connections share" not in text
        series = rows(data["datasets"]["series"])
        (info,) = [s for s in expected["streams"] if s["stream"] == stream]
        sent = sum(r["bytes/s c→s"] + r["bytes/s s→c"] for r in series) * data_bin_s(text)
        assert round(sent) == info["bytes_c2s"] + info["bytes_s2c"]
        found = sum(r["info"] + r["warning"] + r["error"] for r in series)
        assert found == sum(expected["totals"]["findings"].values())
    _, data = report(tmp_path, str(cut), "--kind", "window")
    assert not [m for m in rows(data["datasets"]["marks"]) if m["kind"] in ("gap", "finding")]
    assert sum(r["warning"] + r["error"] for r in rows(data["datasets"]["series"])) == 0


def test_the_series_and_marks_count_what_the_verdict_counts(tmp_path):
    """A window unacknowledged on a stalled connection and resent on the next is drawn as recovered,
    not lost (pylogbeat's real stall); a window never resent is lost: the series' never-acknowledged
    and only-by-a-resend events add up to the verdict's numbers, and the marks are the lost ones."""
    from lumberjack_helpers import ack

    from tests.test_inspect_delivery import batch, connections

    lost = connections(tmp_path / "lost.pcap", [[("c", batch(1, 2)), ("s", ack(2)), ("c", batch(3, 4))]])
    for path, recovered, never in ((RESEND, 3, 0), (lost, 0, 4)):
        text, data = report(tmp_path, str(path), name=f"{Path(path).stem}.html")
        d = data["inspect"]["delivery"]["lumberjack"]
        assert (d["recovered_by_resend"], d["never_acknowledged"]) == (recovered, never)
        series = rows(data["datasets"]["series"])
        width = data_bin_s(text)
        assert round(sum(r["never acknowledged/s"] for r in series) * width) == never
        assert round(sum(r["only by a resend/s"] for r in series) * width) == recovered
        marks = [m for m in rows(data["datasets"]["marks"]) if m["kind"] == "unacked"]
        assert sum(m["count"] for m in marks) == never
