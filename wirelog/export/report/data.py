"""The report's data: `inspect`'s summary plus the inputs' timelines (native/src/report/) merged
into the small tables the charts draw. Everything here is bounded by the core's caps, never by the
number of messages."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

MARKS = 20_000  # marks drawn on the timeline, all inputs together
ROUTINE = ("send", "answer", "keepalive")  # thinned first when the inputs together have too many
OTHER_LANE = "other connections"
MAX_BINS = 300  # the series' bins over the page's span: the round interval that gives at most this
RANK = ("unacked", "stalls", "findings", "events", "messages")  # the worst lanes first (lanes.rs `rank`)
LANE_COUNTS = ("events", "unacked", "messages", "sends", "answers", "keepalives", "findings", "stalls")


def _bucket_ms(bucket: int, first_octave: float, per_octave: float) -> float:
    """The middle of a latency bucket (native/src/report/mod.rs `bucket`), in ms."""
    return 2 ** (first_octave + (bucket + 0.5) / per_octave) / 1e6


def _percentile_ms(hist: Counter[int], p: float, layout: tuple[float, float]) -> float | None:
    total = sum(hist.values())
    if not total:
        return None
    rank = math.ceil(p / 100 * total)
    seen = 0
    for bucket in sorted(hist):
        seen += hist[bucket]
        if seen >= rank:
            return _bucket_ms(bucket, *layout)
    return None


def _ns_ms(ns: int | None) -> float | None:
    return None if ns is None else ns / 1e6


def build(
    summary: dict[str, Any], timelines: list[tuple[str, dict[str, Any]]], top: int, stall_s: float
) -> dict[str, Any]:
    """Everything the page shows: `summary` is `inspect --json`'s dict, `timelines` each input's
    (capture, timeline); `top` connections get a lane each, the others share one; `stall_s` is
    the threshold the stalls were found with."""
    multi = len(timelines) > 1
    lanes, folded = _lanes(timelines, top, multi)
    names = {(lane["capture"], lane["stream"]): lane["lane"] for lane in lanes}
    layout = (10.0, 4.0)
    for _, t in timelines:
        first, per, _ = t["latency_buckets"]
        layout = (first, per)
    # Times are seconds since the earliest timestamp, as Wireshark shows them by default; every
    # time chart spans the same [0, span_s].
    t0 = min((t["first_ts"] for _, t in timelines if t["first_ts"] is not None), default=0)
    t1 = max((t["last_ts"] for _, t in timelines if t["last_ts"] is not None), default=t0)
    width = interval_ns(max((t["bin_ns"] for _, t in timelines), default=1_000_000), t1 - t0)
    return {
        "t0_ns": t0,
        "span_s": (t1 - t0) / 1e9,
        "inspect": summary,
        "lanes": lanes,
        "folded": folded,
        "marks": (marks := _marks(timelines, names, t0)),
        "links": _links(marks),
        "stalls": _stalls(timelines, names, t0),
        "series": _series(timelines, width, layout, t0),
        "bin_s": width / 1e9,
        "stall_s": stall_s,
        "latency_by": _latency_by(timelines, layout),
        "window_sizes": _window_sizes(timelines),
        "notes": _notes(timelines),
    }


def _lanes(
    timelines: list[tuple[str, dict[str, Any]]], top: int, multi: bool
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Each input's core ranks its own top lanes, so the top of all inputs is among them."""
    candidates = [dict(lane, capture=capture) for capture, t in timelines for lane in t["lanes"]]
    candidates.sort(key=lambda lane: (*(-lane[k] for k in RANK), lane["capture"], lane["stream"]))
    kept, rest = candidates[:top], candidates[top:]
    for lane in kept:
        where = f"{Path(lane['capture']).name}:" if multi else ""  # as inspect names them
        lane["lane"] = f"{where}{lane['stream']} {lane['protocol'] or ''} {lane['client']}".strip()
    folded: Counter[str] = Counter()
    for _, t in timelines:
        folded.update(t["folded"])
    for lane in rest:
        folded["connections"] += 1
        folded.update({k: lane[k] for k in LANE_COUNTS})
    return kept, dict(folded)


def _lane(names: dict[tuple[str, int], str], capture: str, stream: int) -> str:
    return names.get((capture, stream), OTHER_LANE)


def _marks(
    timelines: list[tuple[str, dict[str, Any]]], names: dict[tuple[str, int], str], t0: int
) -> list[dict]:
    rows: list[dict[str, Any]] = []
    for capture, t in timelines:
        m = t["marks"]
        for i, ts in enumerate(m["ts"]):
            rows.append(
                {
                    "t": (ts - t0) / 1e9,
                    "capture": capture,
                    "lane": _lane(names, capture, m["stream"][i]),
                    "stream": m["stream"][i],
                    "kind": m["kind"][i],
                    "what": m["label"][i],
                    "frame": m["frame"][i],
                    "count": m["count"][i],
                    "first": m["first"][i],
                    "last": m["last"][i],
                    "latency_ms": _ns_ms(m["latency"][i]),
                    "first_copy_frame": m["of_frame"][i],
                }
            )
    if len(rows) <= MARKS:
        return rows
    notable = [r for r in rows if r["kind"] not in ROUTINE][:MARKS]
    routine = [r for r in rows if r["kind"] in ROUTINE]
    room = MARKS - len(notable)
    step = math.ceil(len(routine) / room) if room else 0
    return notable + (routine[::step] if step else [])


def _links(marks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A resent event's mark to the mark of its first copy (same input, by frame), when drawn."""
    first = {(m["capture"], m["frame"]): m for m in marks if m["kind"] != "resend"}
    links = []
    for m in marks:
        copy = first.get((m["capture"], m["first_copy_frame"])) if m["kind"] == "resend" else None
        if copy is not None:
            links.append({"t": copy["t"], "t2": m["t"], "lane": copy["lane"], "lane2": m["lane"]})
    return links


def _stalls(
    timelines: list[tuple[str, dict[str, Any]]], names: dict[tuple[str, int], str], t0: int
) -> list[dict]:
    out = []
    for capture, t in timelines:
        for s in t["stalls"]:
            end = s["until"]  # an unanswered stall: to its connection's last packet
            out.append(
                {
                    "t": (s["start"] - t0) / 1e9,
                    "t2": (end - t0) / 1e9,
                    "capture": capture,
                    "lane": _lane(names, capture, s["stream"]),
                    "stream": s["stream"],
                    "seconds": (end - s["start"]) / 1e9,
                    "answered": s["end"] is not None,
                    "request": s["request"],
                    "seq_first": s["seq_first"],
                    "seq_last": s["seq_last"],
                    "sent_frame": s["sent_frame"],
                    "answer_frame": s["answer_frame"],
                }
            )
    return out


def _next_round(ns: int) -> int:
    """The round interval after `ns`: 1 → 2 → 5 → 10 → 20 → 50 ... (× 10^k)."""
    digits = ns
    while digits % 10 == 0:
        digits //= 10
    return ns * 5 // 2 if digits == 2 else ns * 2


def interval_ns(core_ns: int, span_ns: int) -> int:
    """The series' bin width on the page: the smallest round interval (1, 2 or 5 × 10^k ms) that is
    a multiple of the core's width (1 or 2 × 10^k ms: native/src/report/mod.rs `coarser`, so the
    core's bins nest in it) and spans the capture in at most MAX_BINS bins (however they align)."""
    width = core_ns
    while span_ns // width >= MAX_BINS - 1:
        width = _next_round(width)
        while width % core_ns:
            width = _next_round(width)
    return width


def _series(
    timelines: list[tuple[str, dict[str, Any]]], width: int, layout: tuple[float, float], t0: int
) -> list[dict[str, Any]]:
    """Bins of every input summed into bins of the page's round `width` (every core width divides
    it, and all are aligned to the epoch, so bins nest), one row per bin from the capture's start
    to its end: a bin with nothing in it counts zero and has no latency (the line breaks there).
    Rates are per second: a bin's count over its width."""
    counts: dict[int, Counter[str]] = {}
    latency: dict[int, Counter[int]] = {}
    for _, t in timelines:
        s = t["series"]
        keys = [k * t["bin_ns"] // width for k in s["bin"]]
        for name in (
            "events", "unacked", "recovered", "bytes_c2s", "bytes_s2c", "info", "warning", "error", "errors"
        ):  # fmt: skip
            for key, n in zip(keys, s[name], strict=True):
                counts.setdefault(key, Counter())[name] += n
        for i, bucket, n in s["latency"]:
            latency.setdefault(keys[i], Counter())[bucket] += n
    if not counts:
        return []
    per_s = 1e9 / width
    rows = []
    for key in range(min(counts), max(counts) + 1):
        c = counts.get(key, Counter())
        hist = latency.get(key, Counter())
        rows.append(
            {
                "t": (key * width - t0) / 1e9,
                "t2": ((key + 1) * width - t0) / 1e9,
                "events/s": c["events"] * per_s,
                "never acknowledged/s": c["unacked"] * per_s,
                "only by a resend/s": c["recovered"] * per_s,
                "bytes/s c→s": c["bytes_c2s"] * per_s,
                "bytes/s s→c": c["bytes_s2c"] * per_s,
                "info": c["info"],
                "warning": c["warning"],
                "error": c["error"],
                "error responses": c["errors"],
                "p50 ms": _percentile_ms(hist, 50, layout),
                "p99 ms": _percentile_ms(hist, 99, layout),
            }
        )
    return rows


def _latency_by(timelines: list[tuple[str, dict[str, Any]]], layout: tuple[float, float]) -> list[dict]:
    hists: dict[str, Counter[int]] = {}
    for _, t in timelines:
        for name, hist in t["latency_by"].items():
            c = hists.setdefault(name, Counter())
            for bucket, n in enumerate(hist):
                if n:
                    c[bucket] += n
    return [
        {
            "request": name,
            "answers": sum(h.values()),
            "p50 ms": _percentile_ms(h, 50, layout),
            "p99 ms": _percentile_ms(h, 99, layout),
        }
        for name, h in sorted(hists.items())
    ]


def _window_sizes(timelines: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    total = [sum(col) for col in zip(*(t["window_sizes"] for _, t in timelines), strict=True)]
    rows = []
    for i, n in enumerate(total):
        if n:
            label = "0" if i == 0 else f"{1 << (i - 1)}–{(1 << i) - 1}"
            rows.append({"events per window": label, "order": i, "windows": n})
    return rows


def _notes(timelines: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """What the caps left out, said on the page."""
    notes = []
    for capture, t in timelines:
        if t["mark_stride"] > 1:
            notes.append(
                f"{capture}: one window/request/answer in {t['mark_stride']} drawn (the series count all)"
            )
        if t["notable_dropped"]:
            notes.append(
                f"{capture}: {t['notable_dropped']} more findings/never-acknowledged marks not drawn"
            )
        if t["stalls_dropped"]:
            notes.append(f"{capture}: {t['stalls_dropped']} more late answers not drawn as stalls")
        if t["unpaired"]:
            notes.append(f"{capture}: {t['unpaired']} requests past the pairing cap (no latency)")
    return notes
