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
# Times are seconds since the report's start (`t0`, said on the page in UTC).
TIME = {"field": "t", "type": "quantitative", "title": "seconds", "axis": {"labelAngle": 0}}
WHEN = {"field": "t", "type": "quantitative", "format": ",.6f", "title": "s"}
ZOOM = {"name": "zoom", "select": {"type": "interval", "encodings": ["x"]}, "bind": "scales"}


def _folded(title: str, columns: list[str], mark: dict[str, Any], colours: dict | None = None) -> dict:
    """One series chart: the columns of the `series` dataset folded into a colour per column."""
    colour: dict[str, Any] = {"field": "series", "type": "nominal", "title": None}
    if colours:
        colour["scale"] = {"domain": list(colours), "range": list(colours.values())}
    return {
        "title": title,
        "width": WIDTH,
        "height": 160,
        "data": {"name": "series"},
        "transform": [{"fold": columns, "as": ["series", "value"]}, {"filter": "datum.value != null"}],
        "params": [ZOOM],
        "mark": mark,
        "encoding": {
            "x": TIME,
            "y": {"field": "value", "type": "quantitative", "title": None},
            "color": colour,
            "tooltip": [
                {**WHEN, "title": "bin start"},
                {"field": "series", "type": "nominal"},
                {"field": "value", "type": "quantitative", "format": ",.3~f"},
            ],
        },
    }


def timeline(lanes: int, present: set[str]) -> dict[str, Any]:
    """One lane per connection: stalls as bars behind, resends linked to their first copies, marks
    on top; zoom and pan on x. `present`: the datasets with rows (an empty layer makes Vega warn
    of infinite extents)."""
    command = "datum.frame == null ? null : 'wirelog inspect ' + datum.capture + ' --frame ' + datum.frame"
    seq = "datum.first == null ? null : (datum.last == null || datum.last == datum.first ? '' + datum.first : datum.first + '–' + datum.last)"
    y = {"field": "lane", "type": "nominal", "title": None, "sort": None, "axis": {"labelLimit": 320}}
    stall_command = "datum.sent_frame == null ? null : 'wirelog inspect ' + datum.capture + ' --frame ' + datum.sent_frame"
    return {
        "title": "Connections over time",
        "width": WIDTH,
        "height": {"step": 26} if lanes else 60,
        "layer": [
            layer
            for layer in (
                {
                    "data": {"name": "stalls"},
                    "transform": [{"calculate": stall_command, "as": "command"}],
                    "mark": {"type": "bar", "color": "#ff9f1a", "opacity": 0.35, "height": 18},
                    "encoding": {
                        "x": TIME,
                        "x2": {"field": "t2"},
                        "y": y,
                        "tooltip": [
                            {"field": "lane", "title": "stall on"},
                            {"field": "seconds", "type": "quantitative", "format": ".3f"},
                            {"field": "answered", "type": "nominal"},
                            {"field": "requests", "type": "quantitative", "title": "requests waiting"},
                            {"field": "sent_frame", "type": "quantitative", "title": "sent in frame"},
                            {"field": "answer_frame", "type": "quantitative", "title": "answered in frame"},
                            {"field": "command", "type": "nominal"},
                        ],
                    },
                },
                {
                    "data": {"name": "links"},  # a resent event back to its first copy
                    "mark": {"type": "rule", "color": "#f58518", "strokeDash": [4, 3]},
                    "encoding": {"x": TIME, "x2": {"field": "t2"}, "y": y, "y2": {"field": "lane2"}},
                },
                {
                    "data": {"name": "marks"},
                    "transform": [
                        {"calculate": command, "as": "command"},
                        {"calculate": seq, "as": "seq"},
                    ],
                    "params": [ZOOM],
                    "mark": {"type": "point", "filled": True, "size": 70, "opacity": 0.85},
                    "encoding": {
                        "x": TIME,
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
        ],
    }


def over_time() -> dict[str, dict[str, Any]]:
    line = {"type": "line", "interpolate": "step-after", "point": False}
    return {
        "events": _folded(
            "Events per second (the verdict's lost and resent events at their first copy's time)",
            ["events/s", "never acknowledged/s", "only by a resend/s"],
            line,
        ),
        "bytes": _folded("Bytes per second by direction", ["bytes/s c→s", "bytes/s s→c"], line),
        "latency": _folded(
            "ACK / response latency (ms, by the answer's time)",
            ["p50 ms", "p99 ms"],
            {"type": "line", "point": True},
        ),
        "findings": _folded(
            "Findings by severity", list(SEVERITY_COLOURS), {"type": "bar"}, SEVERITY_COLOURS
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


def error_responses() -> dict[str, Any]:
    return _folded("Error responses (CQL ERROR, Gate 4xx/5xx)", ["error responses"], {"type": "bar"})
