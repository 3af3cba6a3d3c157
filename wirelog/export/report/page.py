"""The report as one offline HTML page, and its charts as SVG/PNG files (vl-convert: Vega and
Vega-Lite run in its embedded JavaScript engine, so no browser and no download is needed)."""

from __future__ import annotations

import html
import json
import os
import re
import tempfile
from collections.abc import Collection
from pathlib import Path
from typing import Any

from wirelog.export.atomic import AtomicFile
from wirelog.export.json import rfc3339
from wirelog.export.report import charts
from wirelog.export.report import data as data_module
from wirelog.model import capture_loss_text, tls_state

DATASETS = ("marks", "stalls", "links", "series")  # the big tables, shipped as columns


class ReportUnavailable(Exception):
    """vl-convert-python, which `wirelog report` draws with, is not installed."""


def vl_convert_module() -> Any:
    """The vl_convert module, or ReportUnavailable saying how to install it."""
    try:
        import vl_convert
    except ImportError:
        raise ReportUnavailable(
            "wirelog report needs vl-convert-python: pip install 'wirelog[report]'"
        ) from None
    return vl_convert


def vega_bundle() -> str:
    """vega, vega-lite and vega-embed as one script, from the vl-convert package installed.

    Bundling takes vl-convert ~4 s, so the result is kept in the user's cache directory, keyed by
    vl-convert's version (the bundle it ships changes only with it).
    """
    vl_convert = vl_convert_module()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "wirelog"
    path = cache / f"vega-bundle-{vl_convert.__version__}.js"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        pass
    text = vl_convert.javascript_bundle()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=cache, delete=False) as f:
            f.write(text)
        os.replace(f.name, path)  # concurrent runs each write whole files
    except OSError:
        pass  # no cache: the next run bundles again
    return text


def _columns(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rows as columns; text columns as a dictionary and codes (lane names repeat thousands of times)."""
    cols: dict[str, Any] = {}
    for key in rows[0] if rows else ():
        values = [r[key] for r in rows]
        if any(isinstance(v, str) for v in values):
            words = sorted({v for v in values if v is not None})
            code = {w: i for i, w in enumerate(words)}
            cols[key] = {"dict": [*words, None], "codes": [code.get(v, len(words)) for v in values]}
        else:
            cols[key] = values
    return {"n": len(rows), "cols": cols}


#: CQL's request outcomes in the verdict's order (docs/records.md, "Delivery"), as the page says them.
CQL_OUTCOMES = {
    "answered": "answered",
    "error": "answered with an error",
    "unanswered": "never answered",
    "unknown": "unknown",
}
#: The verdict's classes of distinct events, in its order (the delivery bar's parts).
EVENT_OUTCOMES = ("delivered", "only by a resend", "twice", "never acknowledged", "unknown")


def _delivery_parts(protocol: str, d: dict[str, Any]) -> dict[str, int]:
    """A protocol's verdict as the page says it, in the verdict's order, parts that add up to its
    distinct events (CQL: its requests). Resends and twice are parts of `delivered`; an event
    retried after a refusal and then accepted twice is both, so `delivered` alone is what neither
    takes."""
    if protocol == "cql":
        return {label: d[key] for key, label in CQL_OUTCOMES.items()}
    resend = d.get("recovered_by_resend", 0)
    twice = d.get("delivered_twice", 0)
    counts = (
        max(0, d["delivered"] - resend - twice),
        resend,
        twice,
        d["never_acknowledged"],
        d.get("ack_unknown", 0),
    )
    return dict(zip(EVENT_OUTCOMES, counts, strict=True))


def _delivery_rows(delivery: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each protocol's distinct events (CQL: requests) by outcome, for the delivery bar."""
    return [
        {
            "protocol": "cql requests" if protocol == "cql" else protocol,
            "outcome": outcome,
            "events": n,
            "order": order,
        }
        for protocol, d in delivery.items()
        for order, (outcome, n) in enumerate(_delivery_parts(protocol, d).items())
        if n
    ]


def chart_specs(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every chart the report draws, by name (the page's element ids and the exported files' names)."""
    summary = report["inspect"]
    specs: dict[str, dict[str, Any]] = {}
    if summary["delivery"]:
        specs["delivery"] = charts.delivery(_delivery_rows(summary["delivery"]))
    # An empty chart makes Vega draw infinite extents (errors in the console): charts without data
    # are left out.
    span, bin_s = report["span_s"], report["bin_s"]
    if report["marks"] or report["stalls"]:
        lanes = len(report["lanes"]) + bool(report["folded"].get("connections"))
        present = {n for n in ("marks", "stalls", "links") if report[n]}
        specs["timeline"] = charts.timeline(lanes, present, span)
    if report["series"]:
        answered = any(row["p50 ms"] is not None for row in report["series"])
        series = charts.over_time(span, bin_s).items()
        specs.update((k, v) for k, v in series if k != "latency" or answered)
    if report["latency_by"]:
        specs["latency_by_request"] = charts.latency_by(report["latency_by"])
    if any(row["error responses"] for row in report["series"]):
        specs["error_responses"] = charts.error_responses(span, bin_s)
    if report["window_sizes"]:
        specs["window_sizes"] = charts.bars(
            "Lumberjack windows by events received",
            report["window_sizes"],
            "events per window",
            "windows",
            "order",
        )
    hercules = summary["protocols"].get("hercules", {})
    for key, title, category in (
        ("gate_streams", "Hercules Gate requests by stream", "stream"),
        ("gate_statuses", "Hercules Gate answers by status", "status"),
    ):
        if hercules.get(key):
            rows = [{category: k, "requests": n} for k, n in hercules[key].items()]
            specs[key] = charts.bars(title, rows, category, "requests")
    return specs


def _with_data(spec: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    """A spec with the named datasets it draws filled in (for vl-convert)."""
    text = json.dumps(spec)
    return {**spec, "datasets": {n: report[n] for n in DATASETS if f'"name": "{n}"' in text}}


def write_images(report: dict[str, Any], directory: str, fmt: str) -> list[str]:
    """Each chart as `<name>.svg` or `<name>.png` in `directory`; returns the paths written."""
    vl_convert = vl_convert_module()
    os.makedirs(directory, exist_ok=True)
    written = []
    for name, spec in chart_specs(report).items():
        full = _with_data(spec, report)
        data = (
            vl_convert.vegalite_to_svg(full).encode()
            if fmt == "svg"
            else vl_convert.vegalite_to_png(full, scale=2)
        )
        path = os.path.join(directory, f"{name}.{fmt}")
        with AtomicFile(path) as f:
            f.write(data)
        written.append(path)
    return written


def _inline_script(js: str) -> str:
    """JavaScript text that cannot end its <script> element early."""
    return js.replace("</script", "<\\/script")


# Characters a JSON text may hold that HTML's script parser reads: `</script` ends the element,
# `<!--` then `<script` makes a later `</script>` not end it (the page's own script is swallowed),
# `&` and `>` for good measure; U+2028/U+2029 are line ends to older JavaScript. As \uXXXX they are
# the same JSON string and no HTML at all.
_SCRIPT_UNSAFE = str.maketrans({c: f"\\u{ord(c):04x}" for c in "<>&\u2028\u2029"})


def _script_json(obj: Any) -> str:
    """JSON that no text in `obj` can break out of inside a <script> element: ASCII only (so lone
    surrogates, from bytes that were not UTF-8, stay escapes rather than failing the page's
    encoding), NUL and every control character escaped by JSON itself, and `< > &` U+2028 U+2029
    as \\u escapes. The page reads it with JSON.parse (never eval) and inserts text with
    textContent."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True).translate(_SCRIPT_UNSAFE)


_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029]")


def _shown(m: re.Match[str]) -> str:
    o = ord(m[0])
    if 0xDC80 <= o <= 0xDCFF:  # surrogateescape: the byte that was not UTF-8
        return f"\\x{o - 0xDC00:02x}"
    return f"\\x{o:02x}" if o < 0xA0 else f"\\u{o:04x}"


def _visible(text: str) -> str:
    """Text from the wire or a file name as it may be shown: control characters (NUL, ESC, ...)
    and bytes that were not UTF-8 (lone surrogates) as \\xNN, U+2028/U+2029 as \\uXXXX."""
    return _INVISIBLE.sub(_shown, text)


def _esc(value: Any) -> str:
    """Any value as HTML text: shown as it is (`_visible`), never read as markup."""
    return html.escape(_visible(str(value)))


def _table(head: list[str], rows: list[list[Any]], numeric: Collection[int] = ()) -> str:
    def cell(i: int, v: Any, tag: str = "td") -> str:
        text = "" if v is None else (f"{v:,.3f}" if isinstance(v, float) else str(v))
        cls = ' class="n"' if i in numeric else ""
        return f"<{tag}{cls}>{_esc(text)}</{tag}>"

    out = ["<table><tr>", *(cell(i, h, "th") for i, h in enumerate(head)), "</tr>"]
    for row in rows:
        out += ["<tr>", *(cell(i, v) for i, v in enumerate(row)), "</tr>"]
    out.append("</table>")
    return "".join(out)


def _verdict(report: dict[str, Any]) -> str:
    s = report["inspect"]
    t = s["totals"]
    firsts = [c["first_ts"] for c in s["captures"] if c["first_ts"]]
    lasts = [c["last_ts"] for c in s["captures"] if c["last_ts"]]
    span = f"{min(firsts)} – {max(lasts)}" if firsts else "no timestamps"
    protocols = ", ".join(s["stream_protocols"]) or "none"
    findings = ", ".join(f"{n} {k}" for k, n in t["findings"].items()) or "none"
    loss = capture_loss_text(s["capture_loss"])
    parts = [
        "<h2>Verdict</h2>",
        # first: the numbers below are read knowing that the capture has holes
        f'<p class="loss"><b>Capture loss</b>: {_esc(loss)}</p>' if loss else "",
        _table(
            [
                "inputs",
                "time span (UTC)",
                "protocols",
                "streams",
                "messages",
                "events",
                "acked (on their connection)",
                "unacked",
                "ack unknown",
                "findings",
            ],
            [
                [
                    ", ".join(c["capture"] for c in s["captures"]),
                    span,
                    protocols,
                    t["streams"],
                    t["messages"],
                    t["events"],
                    t["acked"],
                    t["unacked"],
                    t["ack_unknown"],
                    findings,
                ]
            ],
            {3, 4, 5, 6, 7, 8},
        ),
    ]
    if s["delivery"]:
        parts += ["<h3>Delivery</h3>", _delivery_tables(s["delivery"])]
        parts += ['<div class="chart" id="chart-delivery"></div>', _where_lost(report)]
    if s["findings"]:
        parts += [
            "<h3>Findings</h3>",
            _table(
                ["severity", "code", "count", "first frames", "example"],
                [
                    [
                        f["severity"],
                        f["code"],
                        f["count"],
                        ", ".join(map(str, f["first_frames"])),
                        f["example"],
                    ]
                    for f in s["findings"]
                ],
                {2},
            ),
        ]
    return "".join(parts)


#: The delivery table's columns for protocols with acknowledgements, in the verdict's order:
#: (title, key of `inspect --json`'s delivery). Only by a resend and twice are among the delivered.
EVENT_COLUMNS = (
    ("distinct events", "distinct_events"),
    ("delivered", "delivered"),
    ("only by a resend", "recovered_by_resend"),
    ("twice", "delivered_twice"),
    ("never acknowledged", "never_acknowledged"),
    ("unknown", "ack_unknown"),
    ("resent copies", "resent"),
)


def _delivery_tables(delivery: dict[str, dict[str, Any]]) -> str:
    """The verdict in numbers with human labels in its order: one table for the protocols with
    acknowledgements, one for CQL's requests."""
    events = [(p, d) for p, d in delivery.items() if p != "cql"]
    out = []
    if events:
        rows = [[p, *(d.get(key, 0) for _, key in EVENT_COLUMNS)] for p, d in events]
        out.append(_table(["protocol", *(t for t, _ in EVENT_COLUMNS)], rows, range(1, 8)))
        out.append(
            '<p class="note">Only by a resend and twice are among the delivered; delivered, never '
            "acknowledged and unknown add up to the distinct events.</p>"
        )
        out += [
            f'<p class="note">{_esc(p)}: at least these many (more events than the verdict tracks).</p>'
            for p, d in events
            if d.get("lower_bounds")
        ]
    if "cql" in delivery:
        d = delivery["cql"]
        head = ["protocol", "requests", *CQL_OUTCOMES.values()]
        rows = [["cql", d["requests"], *(d[k] for k in CQL_OUTCOMES)]]
        out.append(_table(head, rows, range(1, 6)))
    return "".join(out)


#: "Where" lines shown before the rest are counted in one line.
WHERE_LINES = 10


def _where_lost(report: dict[str, Any]) -> str:
    """Where the never-acknowledged events are: one line per stream and window (the frame of its
    events) with its seq range, from the timeline's marks (one per frame, with count and seqs)."""
    windows: dict[tuple[str, int, Any], list[Any]] = {}
    for m in report["marks"]:
        if m["kind"] != "unacked":
            continue
        w = windows.setdefault((m["capture"], m["stream"], m["frame"]), [0, None, None])
        w[0] += m["count"]
        if m["first"] is not None:
            w[1] = m["first"] if w[1] is None else min(w[1], m["first"])
            last = m["last"] if m["last"] is not None else m["first"]
            w[2] = last if w[2] is None else max(w[2], last)
    multi = len(report["inspect"]["captures"]) > 1
    lines = []
    for (capture, stream, frame), (count, first, last) in sorted(
        windows.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0)
    )[:WHERE_LINES]:
        where = f"{Path(capture).name}:" if multi else ""
        seqs = "" if first is None else f": seq {first}" + ("" if last == first else f"–{last}")
        events = f" ({count:,} events)" if count > 1 else ""
        at = f", window at frame {frame}" if frame is not None else ""
        lines.append(f"<li>stream {_esc(where)}{stream}{at}{_esc(seqs)}{events}</li>")
    if not lines:
        return ""
    rest = len(windows) - len(lines)
    more = (
        f"<p>{rest:,} more windows with never-acknowledged events (the timeline marks them).</p>"
        if rest
        else ""
    )
    return f'<p class="bad">Never acknowledged, by stream and window:</p><ul class="bad">{"".join(lines)}</ul>{more}'


STREAM_COLUMNS = (
    ("stream", "stream"),
    ("protocol", "protocol"),
    ("client", "client"),
    ("server", "server"),
    ("events", "events"),
    ("unacked", "never acked"),
    ("findings", "findings"),
    ("gap_bytes", "bytes missing"),
    ("bytes_c2s", "bytes c→s"),
    ("bytes_s2c", "bytes s→c"),
)


def _streams(report: dict[str, Any]) -> str:
    """The worst streams (export/report/streams.py folds them), the others in one line with the
    command that lists every one."""
    s = report["inspect"]
    rows, folded = s["streams"], s["streams_folded"]
    if not rows:
        return ""
    multi = len(s["captures"]) > 1
    body = [
        [
            f"{Path(st['capture']).name}:{st['stream']}" if multi else st["stream"],
            *(st[key] for key, _ in STREAM_COLUMNS[1:]),
        ]
        for st in rows
    ]
    parts = [
        "<h2>Streams</h2>",
        f'<p class="note">The {len(rows)} worst first: never acknowledged events, then findings, '
        "bytes the capture missed, stalls.</p>",
        _table([title for _, title in STREAM_COLUMNS], body, {0, 4, 5, 6, 7, 8, 9}),
    ]
    if folded["streams"]:
        protocols = ", ".join(f"{n:,} {p}" for p, n in folded["protocols"].items())
        parts.append(
            f'<p class="folded">{folded["streams"]:,} more streams ({_esc(protocols)}): '
            f"{folded['events']:,} events, {folded['unacked']:,} never acknowledged, "
            f"{folded['findings']:,} findings, {folded['gap_bytes']:,} bytes missing. "
            f"Every stream: <code>{_esc(folded['command'])}</code></p>"
        )
    return "".join(parts)


def _protocols(report: dict[str, Any], specs: dict[str, Any]) -> str:
    s = report["inspect"]
    parts = ["<h2>Per protocol</h2>"]
    for name, h in s["protocols"].items():
        lines = []
        for key, value in h.items():
            if isinstance(value, dict):
                value = ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
            elif isinstance(value, list):
                value = "; ".join(", ".join(f"{k} {v}" for k, v in item.items()) for item in value) or "-"
            lines.append([key, value])
        parts += [f"<h3>{_esc(name)}</h3>", _table(["", ""], lines)]
    tls = [st for st in s["streams"] if st["tls"]]
    if tls:
        multi = len({st["capture"] for st in tls}) > 1
        rows = [
            [
                f"{Path(st['capture']).name}:{st['stream']}" if multi else st["stream"],
                st["client"],
                st["server"],
                st["tls"]["version"],
                st["tls"]["cipher_suite"],
                st["tls"]["sni"],
                tls_state(st["tls"]),
            ]
            for st in tls
        ]
        parts += [
            "<h3>TLS streams</h3>",
            _table(["stream", "client", "server", "version", "cipher", "sni", ""], rows),
        ]
    more_tls = s["streams_folded"]["tls"]
    if more_tls:
        parts.append(f"<p>{more_tls:,} more TLS streams among the streams folded above.</p>")
    for name in ("latency_by_request", "error_responses", "window_sizes", "gate_streams", "gate_statuses"):
        if name in specs:
            parts.append(f'<div class="chart" id="chart-{name}"></div>')
    return "".join(parts)


STYLE = """
body{font:14px system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}.n{text-align:right}.bad{color:#c00}.loss{color:#a60}.note{color:#666}.chart{margin:12px 0}
.chart-error{color:#c00}
"""

# In a function: the bundle's own top-level names (it declares a `D`) must not clash with ours.
# The timeline draws on a canvas: its 20,000 marks as SVG elements took Chromium seconds.
RENDER = """(() => {
// The data island is JSON with every `<`, `>`, `&`, U+2028, U+2029 and non-ASCII character as a
// \\u escape (page.py `_script_json`): no text in it can end it early or be read as markup. Text
// reaches the DOM through textContent only.
const D = JSON.parse(document.getElementById('wirelog-data').textContent);
function rows(c) {
  const keys = Object.keys(c.cols), out = new Array(c.n);
  for (let i = 0; i < c.n; i++) {
    const r = {};
    for (const k of keys) { const col = c.cols[k]; r[k] = col.dict ? col.dict[col.codes[i]] : col[i]; }
    out[i] = r;
  }
  return out;
}
// The time charts share one x axis: each zooms and pans its x scale with the parameter `zoom`
// (charts.py ZOOM), whose signal `zoom_t` holds the domain zoomed to (null: the whole capture).
// A change in one view is set in the others, synchronously, so the others' own changes (the same
// domain) are not sent back.
const linked = {};
let syncing = false;
function link(name, view) {
  linked[name] = view;
  view.addSignalListener('zoom_t', (_, domain) => {
    if (syncing) return;
    syncing = true;
    try {
      for (const [other, v] of Object.entries(linked)) if (other !== name) v.signal('zoom_t', domain).run();
    } finally { syncing = false; }
  });
}
document.getElementById('zoom-reset').addEventListener('click', () => {
  syncing = true;
  try { for (const v of Object.values(linked)) v.signal('zoom_t', null).run(); } finally { syncing = false; }
});
window.wirelogViews = linked; // the time charts' Vega views, for tests and the console
const drawn = [];
for (const [name, spec] of Object.entries(D.charts)) {
  const el = document.getElementById('chart-' + name);
  spec.datasets = {};
  for (const d of D.uses[name]) spec.datasets[d] = rows(D.datasets[d]);
  drawn.push(vegaEmbed(el, spec, {renderer: name === 'timeline' ? 'canvas' : 'svg', actions: false})
    .then((r) => { if (D.time_charts.includes(name)) link(name, r.view); el.dataset.rendered = 'true'; })
    .catch((e) => { el.className = 'chart-error'; el.textContent = 'chart failed: ' + e; console.error(e); }));
}
// ms from navigation to every chart drawn, for bench/bench_report.py
Promise.all(drawn).then(() => { document.body.dataset.renderedMs = performance.now().toFixed(0); });
})();
"""


def _lane_list(report: dict[str, Any]) -> str:
    """Which connections have a lane (the worst: never acknowledged, stalls, findings, then the
    most events), and the others folded with their counts."""
    lanes = "".join(f"<li>{_esc(lane['lane'])}: {_lane_counts(lane)}</li>" for lane in report["lanes"])
    folded = report["folded"]
    other = (
        f"<p>{folded['connections']:,} more connections share the lane '{_esc(data_module.OTHER_LANE)}': "
        f"{_lane_counts(folded)}.</p>"
        if folded.get("connections")
        else ""
    )
    title = (
        f'<p class="note">One lane per connection for the {len(report["lanes"])} worst (never acknowledged '
        "events, stalls, findings, then the most events):</p>"
    )
    return f"{title}<ul>{lanes}</ul>{other}"


def _lane_counts(counts: dict[str, Any]) -> str:
    parts = [f"{counts.get('events', 0):,} events", f"{counts.get('messages', 0):,} messages"]
    for key, label in (("unacked", "unacknowledged on it"), ("stalls", "stalls"), ("findings", "findings")):
        if counts.get(key):
            n = counts[key]
            parts.append(f"{n:,} {label[:-1] if n == 1 and label.endswith('s') else label}")
    return ", ".join(parts)


def page(report: dict[str, Any]) -> str:
    """The whole report: every script, style and datum inline."""
    specs = chart_specs(report)
    uses = {
        name: [n for n in DATASETS if f'"name": "{n}"' in json.dumps(spec)] for name, spec in specs.items()
    }
    data = {
        "inspect": report["inspect"],
        "charts": specs,
        "time_charts": [n for n in charts.TIME_CHARTS if n in specs],
        "uses": uses,
        "datasets": {n: _columns(report[n]) for n in DATASETS},
    }
    notes = "".join(f'<p class="note">{_esc(n)}</p>' for n in report["notes"])
    over_time = "".join(
        f'<div class="chart" id="chart-{n}"></div>' for n in charts.TIME_CHARTS[1:5] if n in specs
    )
    timeline = (
        '<div class="chart" id="chart-timeline"></div>' if "timeline" in specs else "<p>Nothing to draw.</p>"
    )
    stall_s = report["stall_s"]
    bin_text = charts.interval_text(report["bin_s"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>wirelog report</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data:">
<style>{STYLE}</style>
<script>{_inline_script(vega_bundle())}</script>
</head><body>
<h1>wirelog report</h1>
{_verdict(report)}
{_streams(report)}
<h2>Timeline</h2>
<p class="note">Every time chart below shares one x axis: seconds since
{_esc(rfc3339(report["t0_ns"]) or "")}, the capture's {report["span_s"]:,.3f} s. Drag to pan, scroll to zoom
(all charts follow), double-click or <button type="button" id="zoom-reset">reset zoom</button>.
Hover a mark for its frames and the <code>wirelog inspect --frame</code> command. Orange bars: stalls,
each over its own window or request, answered later than {stall_s:g} s or not at all.
Series in bins of <b id="bin-interval">{bin_text}</b>, rates per second of those bins.</p>
{_lane_list(report)}{notes}
{timeline}
<h2>Over time</h2>
{over_time}
{_protocols(report, specs)}
<script type="application/json" id="wirelog-data">{_script_json(data)}</script>
<script>{RENDER}</script>
</body></html>
"""
