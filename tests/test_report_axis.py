"""`wirelog report` reads like an I/O graph (issue 44, item 6), checked in a real Chromium where it
is drawn: every time chart on one shared x axis whose zoom and pan follow each other, the series in
100–300 bins of a round interval the page states, rates per second of that interval, lines broken
where a bin has no value, each stall over its own window, and the verdict in human labels."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.pcap_helpers import T0_NS, tcp_conversation, write_pcap
from tests.test_report import CHROMIUM, EXAMPLE, OFFLINE, RESEND, data_bin_s, report, rows

pytest.importorskip("vl_convert")
chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (make test installs it where apt-get can)"
)

# Run after the page's own script: waits for every chart, then writes what it measured into the
# body's data attributes, which --dump-dom prints. `ACTIONS` is the body of an async function.
PROBE = """<script>
const after = (ms) => new Promise((r) => setTimeout(r, ms));
const domains = () => JSON.stringify(Object.fromEntries(
  Object.entries(window.wirelogViews).map(([n, v]) => [n, v.scale('x').domain()])));
function wheel(name) {  // the pointer moved over a chart's plot, then a scroll there, as a user's
  const el = document.querySelector('#chart-' + name + ' svg, #chart-' + name + ' canvas');
  const v = window.wirelogViews[name], [left, top] = v.origin(), r = el.getBoundingClientRect();
  const x = r.left + left + v.width() * 0.6, y = r.top + top + v.height() * 0.5;
  const at = document.elementFromPoint(x, y) || el, where = {clientX: x, clientY: y, bubbles: true};
  for (const type of ['pointermove', 'mousemove']) at.dispatchEvent(new PointerEvent(type, where));
  at.dispatchEvent(new WheelEvent('wheel', {...where, deltaY: -400, cancelable: true}));
}
(async () => {
  while (!document.body.dataset.renderedMs) await after(50);
  const out = document.body.dataset;
  try { ACTIONS } catch (e) { out.error = String(e); }
  out.probed = 'true';
})();
</script>"""


def in_chromium(tmp_path: Path, text: str, actions: str) -> dict[str, Any]:
    """Load the page with a probe running `actions` in Chromium; what it wrote, JSON-decoded."""
    page = tmp_path / "probed.html"
    head, end, tail = text.rpartition("</body></html>")  # the last: the Vega bundle holds one too
    page.write_text(head + PROBE.replace("ACTIONS", actions) + end + tail, encoding="utf-8")
    dom = subprocess.run(
        [
            CHROMIUM,
            *OFFLINE,
            "--window-size=1400,3000",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert [line for line in dom.stderr.splitlines() if ":CONSOLE" in line] == []
    body = re.search(r"<body ([^>]*)>", dom.stdout)
    assert body, "no body"
    found = {
        k: v.replace("&quot;", '"').replace("&amp;", "&")
        for k, v in re.findall(r'data-([\w-]+)="([^"]*)"', body[1])
    }
    assert found.get("probed") == "true" and "error" not in found, found
    return {k: json.loads(v) if v[:1] in "[{" else v for k, v in found.items()}


@chromium
@pytest.mark.parametrize("zoomed", ["events", "timeline"])
def test_every_time_chart_shares_one_x_axis_and_zooms_with_the_others(tmp_path, zoomed):
    text, data = report(tmp_path, str(RESEND))
    assert {"timeline", "events", "bytes", "latency", "findings"} <= set(data["time_charts"])
    actions = f"""
      out.before = domains();
      wheel('{zoomed}'); await after(300); out.zoomed = domains();
      document.getElementById('zoom-reset').click(); await after(300); out.reset = domains();
    """
    seen = in_chromium(tmp_path, text, actions)
    span = data["inspect"]["captures"][0]
    before, zoom, reset = seen["before"], seen["zoomed"], seen["reset"]
    assert set(before) == set(data["time_charts"])
    # one x domain on every chart: the capture, seconds from its first packet to its last
    (domain,) = {tuple(d) for d in before.values()}
    assert domain[0] == 0 and domain[1] == pytest.approx(
        _seconds(span["last_ts"]) - _seconds(span["first_ts"]), abs=1e-6
    )
    # a scroll over one chart zooms every chart to the same narrower domain; reset puts it back
    (narrow,) = {tuple(d) for d in zoom.values()}
    assert domain[0] < narrow[0] < narrow[1] < domain[1]
    assert {tuple(d) for d in reset.values()} == {domain}


def _seconds(rfc3339: str) -> float:
    """Seconds of an inspect timestamp (RFC 3339, nanoseconds), since the epoch's day."""
    hms = rfc3339.split("T")[1].rstrip("Z")
    h, m, s = hms.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


@pytest.mark.parametrize("capture", [EXAMPLE, RESEND])
def test_series_bins_are_round_100_to_300_and_rates_are_per_second_of_the_bin(tmp_path, capture):
    text, data = report(tmp_path, str(capture))
    width = data_bin_s(text)  # as the page says it
    mantissa = round(width * 1e3 / 10 ** int(f"{width * 1e3:e}".split("e")[1]), 6)
    assert mantissa in (1, 2, 5), width
    series = rows(data["datasets"]["series"])
    assert 100 <= len(series) <= 300
    assert all(round(r["t2"] - r["t"], 9) == width for r in series)
    assert f"Events per second (bins of {width * 1e3:g} ms" in json.dumps(data["charts"]["events"])
    events = data["inspect"]["totals"]["events"]
    assert round(sum(r["events/s"] for r in series) * width) == events
    # 9 events in 2.3 s: the highest rate is a bin's count over its 10 ms, not over 1 or 2 ms
    assert max(r["events/s"] for r in series) * width <= events
    if capture == EXAMPLE:
        assert width == 0.01 and max(r["events/s"] for r in series) < 2000


@chromium
def test_no_line_is_drawn_across_bins_without_an_answer(tmp_path):
    text, data = report(tmp_path, str(RESEND))
    series = rows(data["datasets"]["series"])
    answered = [r["p50 ms"] is not None for r in series]
    runs = sum(1 for i, a in enumerate(answered) if a and (i == 0 or not answered[i - 1]))
    assert runs > 1, "the capture has answers in bins apart"
    seen = in_chromium(
        tmp_path,
        text,
        """out.paths = JSON.stringify([...document.querySelectorAll('#chart-latency path.mark-line, '
             + '#chart-latency .mark-line path')].map((p) => p.getAttribute('d')));""",
    )
    paths = [p for p in seen["paths"] if p]
    assert len(paths) == 2  # p50 and p99
    for d in paths:  # one sub-path ("M") per run of answered bins: broken at every gap
        assert d.count("M") == runs, d


def two_windows(path: Path) -> Path:
    """One Lumberjack connection: window 1 at 1 s, ACKed at 1.1 s; window 2 at 3 s, never ACKed; the
    client closes at 9 s."""
    from lumberjack_helpers import ack

    from tests.test_inspect_delivery import batch

    frames = tcp_conversation([("c", batch(1, 2)), ("s", ack(2)), ("c", batch(3, 2))])
    at = [0.0, 0.001, 1.0, 1.1, 3.0, 9.0, 9.001]  # SYN, SYN-ACK, window 1, ACK, window 2, FINs
    assert len(at) == len(frames)
    return write_pcap(path, [(T0_NS + int(s * 1e9), f) for s, f in zip(at, frames, strict=True)])


@chromium
def test_a_stall_is_drawn_over_its_own_window_only(tmp_path):
    pcap = two_windows(tmp_path / "two-windows.pcap")
    text, data = report(tmp_path, str(pcap), "--stall", "1")
    (stall,) = rows(data["datasets"]["stalls"])
    assert (stall["t"], stall["t2"], stall["answered"]) == (3.0, 9.001, False)
    assert (stall["seq_first"], stall["seq_last"]) == (3, 4)
    # in the drawing: the stall's bar spans x(3 s) to x(9.001 s), not window 1 nor the lane's start
    seen = in_chromium(
        tmp_path,
        text,
        """const v = window.wirelogViews.timeline, x = v.scale('x'), bars = [];
           (function walk(node) {
             for (const item of node.items || []) {
               if (item.datum && item.datum.seconds !== undefined && item.mark && item.mark.marktype === 'rect')
                 bars.push([item.x, item.x + item.width]);
               walk(item);
             }
           })(v.scenegraph().root);
           out.bars = JSON.stringify(bars);
           out.ticks = JSON.stringify([x(0), x(1), x(3), x(9.001)]);""",
    )
    (bar,) = seen["bars"]
    _, x1, x3, x9 = seen["ticks"]
    assert bar[0] == pytest.approx(x3, abs=0.5) and bar[1] == pytest.approx(x9, abs=0.5)
    assert bar[0] > x1 + 50  # window 1 (answered in 0.1 s) is not under it


def test_the_verdict_speaks_human_labels_in_its_order(tmp_path):
    text, data = report(tmp_path, str(RESEND))
    verdict = text[text.index("<h2>Verdict") : text.index("<h2>Streams")]
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", verdict[verdict.index("<h3>Delivery") :])
    labels = heads[: heads.index("resent copies") + 1]
    assert labels == [
        "protocol",
        "distinct events",
        "delivered",
        "only by a resend",
        "twice",
        "never acknowledged",
        "unknown",
        "resent copies",
    ]
    for key in (
        "ack_unknown",
        "lower_bounds",
        "recovered_by_resend",
        "never_acknowledged",
        "distinct_events",
    ):
        assert key not in re.sub(r"<[^>]+>", " ", verdict), key
    d = data["inspect"]["delivery"]["lumberjack"]
    row = re.search(r"<tr><td>lumberjack</td>(.*?)</tr>", verdict)
    assert row and re.findall(r">(\d+)<", row[1]) == [
        str(d[k])
        for k in (
            "distinct_events",
            "delivered",
            "recovered_by_resend",
            "delivered_twice",
            "never_acknowledged",
            "ack_unknown",
            "resent",
        )
    ]
    bar = data["charts"]["delivery"]["encoding"]["color"]["scale"]["domain"]
    assert bar == ["delivered", "only by a resend", "twice", "never acknowledged", "unknown"]


def test_never_acknowledged_events_are_listed_by_stream_and_window_with_seq_ranges(tmp_path):
    from lumberjack_helpers import ack

    from tests.test_inspect_delivery import batch, connections

    lost = connections(
        tmp_path / "lost.pcap",
        [
            [("c", batch(1, 2)), ("s", ack(2)), ("c", batch(3, 200))],
            [("c", batch(301, 5)), ("s", ack(305)), ("c", batch(306, 3)), ("c", batch(309, 4))],
        ],
    )
    text, _ = report(tmp_path, str(lost))
    where = re.findall(r"<li>(stream [^<]*)</li>", text)
    assert where == [
        "stream 0, window at frame 5: seq 3–202 (200 events)",
        "stream 1, window at frame 12: seq 306–308 (3 events)",
        "stream 1, window at frame 13: seq 309–312 (4 events)",
    ]


def test_lanes_are_the_connections_with_problems_and_the_rest_are_counted(tmp_path):
    from lumberjack_helpers import ack

    from tests.test_inspect_delivery import batch, connections

    fine = [("c", batch(1, 50)), ("s", ack(50))]
    lossy = [("c", batch(1, 2)), ("s", ack(2)), ("c", batch(3, 1))]
    pcap = connections(tmp_path / "mixed.pcap", [fine, fine, lossy, fine])
    text, data = report(tmp_path, str(pcap), "--top", "1")
    (lane,) = data["inspect"]["streams"][:1]
    lanes = re.findall(r"<li>(\d+) lumberjack [^:]*:(\d+):", text)
    assert [int(s) for s, _ in lanes] == [2] and lane["stream"] == 2  # the lossy one, not the biggest
    assert "3 more connections share the lane 'other connections': 150 events" in text
