"""The report's charts as Vega-Lite specs (plain dicts: docs/architecture.md, Report, says why not
altair). Big tables are named datasets (`data: {"name": ...}`): the page ships them as columns
and rebuilds the rows in the browser; static export fills them in from Python."""

from __future__ import annotations

from typing import Any

WIDTH = 900
KIND_COLOURS = {
    "send": "#4c78a8",
    "answer": "#54a24b",
    "keepalive": "#b7d7a8",
    "unacked": "#e45756",
    "recovered": "#72b7b2",
    "resend": "#f58518",
    "finding": "#b279a2",
    "gap": "#000000",
    "close": "#9d755d",
    "reset": "#d62728",
}
KIND_SHAPES = {
    "send": "triangle-right",
    "answer": "triangle-left",
    "keepalive": "circle",
    "unacked": "cross",
    "recovered": "cross",
    "resend": "diamond",
    "finding": "square",
    "gap": "stroke",
    "close": "wedge",
    "reset": "wedge",
}
SEVERITY_COLOURS = {"error": "#d62728", "warning": "#ff9f1a", "info": "#4c78a8"}
OUTCOME_COLOURS = {
    "delivered": "#54a24b",
    "only by a resend": "#f58518",
    "twice": "#eeca3b",
    "never acknowledged": "#e45756",
    "unknown": "#bab0ac",
}
WHEN = {"field": "t", "type": "quantitative", "format": ",.6f", "title": "s"}
# Every time chart zooms and pans its x scale with this parameter; the page links them through its
# signal `zoom_t` (page.py RENDER), so zooming one zooms all.
ZOOM = {"name": "zoom", "select": {"type": "interval", "encodings": ["x"]}, "bind": "scales"}
# The y axis takes the same room on every time chart, so their x axes line up on the page.
Y_AXIS = {"minExtent": 250, "maxExtent": 250, "labelLimit": 240}
#: The page's time charts (one shared x axis).
TIME_CHARTS = ("timeline", "events", "bytes", "latency", "findings", "error_responses")


def time_axis(span_s: float) -> dict[str, Any]:
    """x: seconds since the report's start (`t0`, said on the page in UTC), the same domain on every
    time chart: the capture's span."""
    return {
        "field": "t",
        "type": "quantitative",
        "title": "seconds since the start",
        "scale": {"domain": [0, span_s or 1e-3], "nice": False, "zero": False, "padding": 0},
        "axis": {"labelAngle": 0},
    }


def interval_text(seconds: float) -> str:
    """A bin width as the page says it: 50 ms, 2 s."""
    return f"{seconds:g} s" if seconds >= 1 else f"{seconds * 1000:g} ms"


def _folded(
    title: str,
    columns: list[str],
    mark: dict[str, Any],
    span_s: float,
    colours: dict | None = None,
) -> dict:
    """One series chart: the columns of the `series` dataset folded into a colour per column. A line
    breaks where a bin has no value (no answer: no latency) instead of joining its neighbours; bars
    cover their bin. The unit is in the title: a y axis title would shift this chart's x axis."""
    colour: dict[str, Any] = {
        "field": "series",
        "type": "nominal",
        "title": None,
        "legend": {"labelLimit": 200},
    }
    if colours:
        colour["scale"] = {"domain": list(colours), "range": list(colours.values())}
    encoding: dict[str, Any] = {
        "x": time_axis(span_s),
        "y": {"field": "value", "type": "quantitative", "title": None, "axis": Y_AXIS},
        "color": colour,
        "tooltip": [
            {**WHEN, "title": "bin start"},
            {"field": "series", "type": "nominal"},
            {"field": "value", "type": "quantitative", "format": ",.3~f"},
        ],
    }
    fold: list[dict[str, Any]] = [{"fold": columns, "as": ["series", "value"]}]
    if mark["type"] == "bar":
        # a bar covers its bin (x to x2) and stacks up from zero (a ranged x would make y a position)
        encoding["x2"] = {"field": "t2"}
        encoding["y"]["stack"] = "zero"
        mark = {**mark, "orient": "vertical"}
        fold.append({"filter": "datum.value > 0"})  # an empty bin: no bar, not a sliver
    return {
        "title": title,
        "width": WIDTH,
        "height": 160,
        "data": {"name": "series"},
        "transform": fold,
        "params": [ZOOM],
        "mark": {**mark, "clip": True, "invalid": "break-paths-filter-domains"},
        "encoding": encoding,
    }


def timeline(lanes: int, present: set[str], span_s: float) -> dict[str, Any]:
    """One lane per connection: stalls as bars behind (each over its own window's wait), resends
    linked to their first copies, marks on top; zoom and pan on x. `present`: the datasets with
    rows (an empty layer makes Vega warn of infinite extents)."""
    command = "datum.frame == null ? null : 'wirelog inspect ' + datum.capture + ' --frame ' + datum.frame"
    seq = "datum.first == null ? null : (datum.last == null || datum.last == datum.first ? '' + datum.first : datum.first + '–' + datum.last)"
    y = {"field": "lane", "type": "nominal", "title": None, "sort": None, "axis": Y_AXIS}
    x = time_axis(span_s)
    window = (
        "(datum.request || 'request') + (datum.sent_frame == null ? '' : ' at frame ' + datum.sent_frame)"
        " + (datum.seq_first == null ? '' : ': seq ' + datum.seq_first"
        " + (datum.seq_last == null || datum.seq_last == datum.seq_first ? '' : '–' + datum.seq_last))"
    )
    stall_command = "datum.sent_frame == null ? null : 'wirelog inspect ' + datum.capture + ' --frame ' + datum.sent_frame"
    layers = [
        layer
        for layer in (
            {
                "data": {"name": "stalls"},
                "transform": [
                    {"calculate": stall_command, "as": "command"},
                    {"calculate": window, "as": "window"},
                ],
                "mark": {
                    "type": "bar",
                    "color": "#ff9f1a",
                    "opacity": 0.4,
                    "height": 10,
                    "stroke": "#c66a00",
                    "strokeWidth": 1,
                    "clip": True,
                },
                "encoding": {
                    "x": x,
                    "x2": {"field": "t2"},
                    "y": y,
                    "tooltip": [
                        {"field": "lane", "title": "stall on"},
                        {"field": "window", "title": "waiting"},
                        {"field": "seconds", "type": "quantitative", "format": ".3f"},
                        {"field": "answered", "type": "nominal"},
                        {"field": "sent_frame", "type": "quantitative", "title": "sent in frame"},
                        {"field": "answer_frame", "type": "quantitative", "title": "answered in frame"},
                        {"field": "command", "type": "nominal"},
                    ],
                },
            },
            {
                "data": {"name": "links"},  # a resent event back to its first copy
                "mark": {"type": "rule", "color": "#f58518", "strokeDash": [4, 3], "clip": True},
                "encoding": {"x": x, "x2": {"field": "t2"}, "y": y, "y2": {"field": "lane2"}},
            },
            {
                "data": {"name": "marks"},
                "transform": [
                    {"calculate": command, "as": "command"},
                    {"calculate": seq, "as": "seq"},
                ],
                "mark": {"type": "point", "filled": True, "size": 70, "opacity": 0.85, "clip": True},
                "encoding": {
                    "x": x,
                    "y": y,
                    "color": {
                        "field": "kind",
                        "type": "nominal",
                        "scale": {"domain": list(KIND_COLOURS), "range": list(KIND_COLOURS.values())},
                    },
                    "shape": {
                        "field": "kind",
                        "type": "nominal",
                        "scale": {"domain": list(KIND_SHAPES), "range": list(KIND_SHAPES.values())},
                    },
                    "tooltip": [
                        {**WHEN, "title": "time"},
                        {"field": "lane", "title": "connection"},
                        {"field": "stream", "type": "quantitative"},
                        {"field": "kind", "type": "nominal"},
                        {"field": "what", "type": "nominal"},
                        {"field": "frame", "type": "quantitative"},
                        {"field": "seq", "type": "nominal", "title": "seq / value"},
                        {"field": "count", "type": "quantitative"},
                        {
                            "field": "latency_ms",
                            "type": "quantitative",
                            "format": ".3f",
                            "title": "latency ms",
                        },
                        {
                            "field": "first_copy_frame",
                            "type": "quantitative",
                            "title": "first copy in frame",
                        },
                        {"field": "command", "type": "nominal"},
                    ],
                },
            },
        )
        if layer["data"]["name"] in present
    ]
    layers[0]["params"] = [ZOOM]  # (one layer holds the zoom: it is the chart's x scale's)
    return {
        "title": "Connections over time",
        "width": WIDTH,
        "height": {"step": 26} if lanes else 60,
        "layer": layers,
    }


def over_time(span_s: float, bin_s: float) -> dict[str, dict[str, Any]]:
    """The series charts: rates per second computed from the bins' width, said in each title."""
    line = {"type": "line", "interpolate": "step-after", "point": False}
    per_bin = f"bins of {interval_text(bin_s)}"
    return {
        "events": _folded(
            f"Events per second ({per_bin}; the verdict's lost and resent events at their first copy's time)",
            ["events/s", "never acknowledged/s", "only by a resend/s"],
            line,
            span_s,
        ),
        "bytes": _folded(
            f"Bytes per second by direction ({per_bin})", ["bytes/s c→s", "bytes/s s→c"], line, span_s
        ),
        "latency": _folded(
            f"ACK / response latency in ms ({per_bin}, by the answer's time; no line where nothing was answered)",
            ["p50 ms", "p99 ms"],
            {"type": "line", "point": True},
            span_s,
        ),
        "findings": _folded(
            f"Findings by severity, per bin of {interval_text(bin_s)}",
            list(SEVERITY_COLOURS),
            {"type": "bar"},
            span_s,
            SEVERITY_COLOURS,
        ),
    }


def delivery(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per protocol, its distinct events by outcome, as one stacked bar."""
    return {
        "title": "Delivery verdict (distinct events)",
        "width": WIDTH,
        "data": {"values": rows},
        "mark": "bar",
        "encoding": {
            "y": {"field": "protocol", "type": "nominal", "title": None},
            "x": {"field": "events", "type": "quantitative", "stack": "zero"},
            "color": {
                "field": "outcome",
                "type": "nominal",
                "scale": {"domain": list(OUTCOME_COLOURS), "range": list(OUTCOME_COLOURS.values())},
                "sort": list(OUTCOME_COLOURS),
            },
            "order": {"field": "order"},
            "tooltip": [
                {"field": "protocol"},
                {"field": "outcome"},
                {"field": "events", "type": "quantitative"},
            ],
        },
    }


def bars(title: str, rows: list[dict[str, Any]], category: str, value: str, sort: str | None = None) -> dict:
    """A plain bar chart of a few categories (per-protocol breakdowns)."""
    return {
        "title": title,
        "width": WIDTH // 2,
        "data": {"values": rows},
        "mark": "bar",
        "encoding": {
            "y": {"field": category, "type": "nominal", "title": None, "sort": sort and {"field": sort}},
            "x": {"field": value, "type": "quantitative"},
            "tooltip": [{"field": category}, {"field": value, "type": "quantitative"}],
        },
    }


def latency_by(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "title": "Latency by request kind (ms)",
        "width": WIDTH // 2,
        "data": {"values": rows},
        "transform": [{"fold": ["p50 ms", "p99 ms"], "as": ["percentile", "ms"]}],
        "mark": "bar",
        "encoding": {
            "y": {"field": "request", "type": "nominal", "title": None},
            "yOffset": {"field": "percentile"},
            "x": {"field": "ms", "type": "quantitative"},
            "color": {"field": "percentile", "type": "nominal"},
            "tooltip": [
                {"field": "request"},
                {"field": "percentile"},
                {"field": "ms", "type": "quantitative", "format": ".3f"},
                {"field": "answers", "type": "quantitative"},
            ],
        },
    }


def error_responses(span_s: float, bin_s: float) -> dict[str, Any]:
    return _folded(
        f"Error responses (CQL ERROR, Gate 4xx/5xx), per bin of {interval_text(bin_s)}",
        ["error responses"],
        {"type": "bar"},
        span_s,
    )
