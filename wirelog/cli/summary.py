"""The facts `wirelog inspect` shows, computed in one pass with bounded memory.

A `Summary` is fed every pipeline item and ends as one JSON-ready dict (`inspect --json` prints it
as is; the rich view renders it). It keeps counters and small top-N lists, never the records.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from wirelog.export.json import rfc3339
from wirelog.model import CaptureInfo, EventCounts, Finding, Message, Severity, StreamInfo, tls_state

# What an event's `acked` says about it on its own connection: the three add up to its events.
ACK_STATES = {True: "acked", False: "unacked", None: "ack_unknown"}

FIRST_FRAMES = 5  # frame numbers kept per finding code
TOP = 5  # slowest request/response pairs kept


@dataclass
class _StreamTally:
    messages: int = 0
    events: int = 0
    acked: int = 0
    unacked: int = 0
    ack_unknown: int = 0
    findings: int = 0
    # the stream's version: its own messages' (a Gate connection's HTTP), else its events' (a
    # Hercules event's format), not whichever kind a batch brings first (alike streams differed)
    version: str | None = None
    event_version: str | None = None

    def count_events(self, acked: bool | None, n: int) -> None:
        self.events += n
        setattr(self, ACK_STATES[acked], getattr(self, ACK_STATES[acked]) + n)


@dataclass
class CaptureLoss:
    """What one input's capture missed (bytes, gaps, on which streams), from its stream summaries
    and its `tcp.unseen-data` findings (a direction never captured is not among a summary's gaps)."""

    bytes: int = 0
    gaps: int = 0
    streams: set[int] = field(default_factory=set)

    def note(self, item: StreamInfo | Finding) -> None:
        if isinstance(item, StreamInfo) and item.gaps:
            self._add(item.stream, item.gaps, item.gap_bytes)
        elif isinstance(item, Finding) and item.code == "tcp.unseen-data" and item.stream is not None:
            self._add(item.stream, 1, int(item.fields.get("length") or 0))

    def _add(self, stream: int, gaps: int, length: int) -> None:
        self.bytes += length
        self.gaps += gaps
        self.streams.add(stream)

    def result(self) -> dict[str, int]:
        return {"bytes": self.bytes, "gaps": self.gaps, "streams": len(self.streams)}


@dataclass
class _CodeTally:
    severity: str
    protocol: str
    example: str
    count: int = 0
    frames: list[int] = field(default_factory=list)
    captures: list[str] = field(default_factory=list)  # the capture of each of `frames`


def _percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def describe_tls(tls: dict[str, Any]) -> str:
    """One line of what a TLS stream's handshake says (`inspect`, `streams`)."""
    said = ", ".join(f"{k} {tls[k]}" for k in ("sni", "alpn") if tls[k])
    return f"{tls['version'] or 'TLS'} {tls['cipher_suite'] or ''}{', ' + said if said else ''} ({tls_state(tls)})"


class Summary:
    """Accumulates a run's items; `result()` gives the dict."""

    def __init__(self, per_stream: bool = True) -> None:
        """`per_stream`: keep a row for every stream (inspect). Without, nothing is kept per stream
        and `result()` lists no stream: the report folds them itself (export/report/streams.py)."""
        self._per_stream = per_stream
        self.captures: list[CaptureInfo] = []
        self.streams: list[StreamInfo] = []
        self._tally: dict[tuple[str, int], _StreamTally] = defaultdict(_StreamTally)
        self._codes: dict[str, _CodeTally] = {}
        self._severities: Counter[Severity] = Counter()
        self._kinds: dict[str, Counter[str]] = defaultdict(Counter)
        self._lumberjack = _LumberjackHighlights()
        self._cql = _CqlHighlights()
        self._courier = _CourierHighlights()
        self._hercules = _HerculesHighlights()
        self._highlights = {
            "lumberjack": self._lumberjack,
            "cql": self._cql,
            "courier": self._courier,
            "hercules": self._hercules,
        }
        self._delivery: dict[str, dict[str, Any]] = {}
        self._events: dict[str, _StreamTally] = defaultdict(_StreamTally)  # by protocol
        self._loss: dict[str, CaptureLoss] = defaultdict(CaptureLoss)  # by capture

    def add(self, item: Any) -> None:
        kind = type(item)  # (the model's classes have no subclasses; one item per stream, finding, ...)
        if kind is StreamInfo:
            if self._per_stream:
                self.streams.append(item)
            if item.gaps:  # (what CaptureLoss notes of a stream)
                self._loss[item.capture].note(item)
        elif kind is Finding:
            self._finding(item)
        elif kind is Message:
            self._message(item)
        elif kind is EventCounts:
            self._event_counts(item)
        elif kind is CaptureInfo:
            self.captures.append(item)
            for name, numbers in item.delivery.items():
                self._delivery[name] = _merge_delivery(self._delivery.get(name), numbers)

    def _message(self, m: Message) -> None:
        self._kinds[m.protocol][m.kind] += 1
        if m.stream is not None and self._per_stream:
            t = self._tally[(m.capture, m.stream)]
            t.messages += 1
            if m.event is not None:
                t.count_events(m.acked, 1)
                t.event_version = t.event_version or m.version
            elif m.protocol != "tls":  # a TLS stream's version is that of the protocol inside
                t.version = t.version or m.version
        if m.event is not None:
            self._events[m.protocol].count_events(m.acked, 1)
        highlights = self._highlights.get(m.protocol)
        if highlights is not None:
            highlights.add(m)

    def _event_counts(self, c: EventCounts) -> None:
        """What `_message` notes of event messages with a document (no highlight reads them)."""
        for stream, protocol, version, acked, n in c.counts:
            self._kinds[protocol]["event"] += n
            self._events[protocol].count_events(acked, n)
            if stream is None or not self._per_stream:
                continue
            t = self._tally[(c.capture, stream)]
            t.messages += n
            t.event_version = t.event_version or version
            t.count_events(acked, n)
        for stream, protocol, version, kind, framing, n in c.messages:
            self._kinds[protocol][kind] += n
            if stream is not None and self._per_stream:
                t = self._tally[(c.capture, stream)]
                t.messages += n
                t.version = t.version or version
            if protocol == "cql":
                self._cql.count(kind, framing, n)
        for stream, code, severity, protocol, n in c.findings:
            self._severities[severity] += n
            if stream is not None and self._per_stream:
                self._tally[(c.capture, stream)].findings += n
            tally = self._codes.get(code)
            if tally is None:  # (its first findings, objects, may come after the count in a batch)
                tally = self._codes[code] = _CodeTally(severity.value, protocol, "")
            tally.count += n
            if protocol == "cql":
                self._cql.count_findings(code, n)
            elif protocol == "courier":
                self._courier.count_findings(code, n)

    def _finding(self, f: Finding) -> None:
        # counted by the member (a str): an enum's `.value` is a descriptor call, once a finding
        self._severities[f.severity] += 1
        if f.stream is not None and self._per_stream:
            self._tally[(f.capture, f.stream)].findings += 1
        tally = self._codes.get(f.code)
        if tally is None:
            tally = self._codes[f.code] = _CodeTally(f.severity.value, f.protocol, f.message)
        elif not tally.example:
            tally.example = f.message
        tally.count += 1
        if f.frame is not None and len(tally.frames) < FIRST_FRAMES:
            tally.frames.append(f.frame)
            tally.captures.append(f.capture)
        if f.protocol == "cql":
            self._cql.count_findings(f.code, 1)
        elif f.protocol == "courier":
            self._courier.count_findings(f.code, 1)
        elif f.protocol == "tcp":
            self._loss[f.capture].note(f)

    def result(self) -> dict[str, Any]:
        streams = []
        for s in sorted(self.streams, key=lambda s: (s.capture, s.stream)):
            t = self._tally.get((s.capture, s.stream), _StreamTally())
            streams.append(
                {
                    "capture": s.capture,
                    "stream": s.stream,
                    "protocol": s.protocol,
                    "version": t.version or t.event_version,
                    "tls": s.tls,
                    "client": s.client,
                    "server": s.server,
                    "messages": t.messages,
                    "events": t.events,
                    "acked": t.acked,
                    "unacked": t.unacked,
                    "ack_unknown": t.ack_unknown,
                    "bytes_c2s": s.bytes_c2s,
                    "bytes_s2c": s.bytes_s2c,
                    "gaps": s.gaps,
                    "gap_bytes": s.gap_bytes,
                    "findings": t.findings,
                    "flags": s.flags,
                }
            )
        order = {Severity.ERROR.value: 0, Severity.WARNING.value: 1, Severity.INFO.value: 2}
        findings = [
            {
                "code": code,
                "severity": t.severity,
                "protocol": t.protocol,
                "count": t.count,
                "first_frames": t.frames,
                # with several inputs a frame number alone does not say which capture it is in
                "first_at": [{"capture": c, "frame": n} for c, n in zip(t.captures, t.frames, strict=True)],
                "example": t.example,
            }
            for code, t in sorted(
                self._codes.items(), key=lambda kv: (order[kv[1].severity], -kv[1].count, kv[0])
            )
        ]
        highlights: dict[str, Any] = {}
        for name, h in (
            ("lumberjack", self._lumberjack),
            ("cql", self._cql),
            ("courier", self._courier),
            ("hercules", self._hercules),
        ):
            if self._kinds.get(name):
                highlights[name] = {"kinds": dict(sorted(self._kinds[name].items())), **h.result()}
        for name, kinds in sorted(self._kinds.items()):
            highlights.setdefault(name, {"kinds": dict(sorted(kinds.items()))})
        for name, e in self._events.items():
            highlights[name]["events"] = {k: getattr(e, k) for k in ("events", *ACK_STATES.values())}
        losses = [loss.result() for loss in self._loss.values()]
        return {
            "capture_loss": {k: sum(loss[k] for loss in losses) for k in ("bytes", "gaps", "streams")},
            "captures": [_capture_dict(c, self._loss.get(c.capture, CaptureLoss())) for c in self.captures],
            "streams": streams,
            "totals": {
                "streams": len(streams),
                "messages": sum(s["messages"] for s in streams),
                "events": sum(s["events"] for s in streams),
                "acked": sum(s["acked"] for s in streams),
                "unacked": sum(s["unacked"] for s in streams),
                "ack_unknown": sum(s["ack_unknown"] for s in streams),
                "findings": {s.value: n for s, n in sorted(self._severities.items())},
            },
            "delivery": dict(sorted(self._delivery.items())),
            "findings": findings,
            "protocols": highlights,
        }


FIRST_PLACES = 5  # never-acknowledged places listed (as each input's verdict lists them)


def _place_order(at: dict[str, Any]) -> tuple:
    return tuple((at.get(k) is None, at.get(k) or 0) for k in ("capture", "stream", "frame", "seq"))


def _merge_delivery(a: dict[str, Any] | None, b: dict[str, Any]) -> dict[str, Any]:
    """The verdict of two inputs together: counts add up (events of different inputs are never the
    same event), the first places are the first of both, a lower bound anywhere stays one."""
    if a is None:
        return b
    merged = {k: a[k] + b[k] if isinstance(v, int) and not isinstance(v, bool) else v for k, v in a.items()}
    if "never_acknowledged_at" in a:  # (CQL's requests by outcome are counts only)
        places = sorted(a["never_acknowledged_at"] + b["never_acknowledged_at"], key=_place_order)
        merged["never_acknowledged_at"] = places[:FIRST_PLACES]
        merged["lower_bounds"] = a["lower_bounds"] or b["lower_bounds"]
    return merged


def _capture_dict(c: CaptureInfo, loss: CaptureLoss) -> dict[str, Any]:
    span = (c.last_ts - c.first_ts) / 1e9 if c.first_ts is not None and c.last_ts is not None else None
    return {
        "capture": c.capture,
        "format": c.format,
        "compression": c.compression,
        "packets": c.packets,
        "tcp_packets": c.tcp_packets,
        "non_tcp_packets": c.non_tcp_packets,
        "bytes": c.bytes,
        "first_ts": rfc3339(c.first_ts),
        "last_ts": rfc3339(c.last_ts),
        "span_s": span,
        "link_types": c.link_types,
        "truncated": c.truncated,
        "error": c.error,
        "capture_loss": loss.result(),
    }


class _LumberjackHighlights:
    """Windows, server kind, keep-alives and window→ack latency."""

    def __init__(self) -> None:
        self.windows = 0
        self.server_kinds: Counter[str] = Counter()
        self.keepalives = 0
        self.keepalive_max_ms: float | None = None
        self._window_ts: dict[tuple[str, int | None, Any], int] = {}
        self.latencies_ms: list[float] = []

    def add(self, m: Message) -> None:
        if m.kind == "event":  # most messages: nothing to note
            return
        f = m.fields
        key = (m.capture, m.stream, f.get("window"))
        if m.kind == "window":
            self.windows += 1
            if m.ts is not None and len(self._window_ts) < 100_000:
                self._window_ts[key] = m.ts
        elif m.kind == "ack":
            interval = f.get("interval_ms")
            if f.get("keepalive") or (f.get("acked_events") == 0 and interval is not None):
                self.keepalives += 1
                if isinstance(interval, int | float):
                    self.keepalive_max_ms = max(self.keepalive_max_ms or 0.0, float(interval))
            elif m.ts is not None and key in self._window_ts and len(self.latencies_ms) < 1_000_000:
                self.latencies_ms.append((m.ts - self._window_ts[key]) / 1e6)
        elif m.kind == "connection" and f.get("server_kind"):
            self.server_kinds[str(f["server_kind"])] += 1

    def result(self) -> dict[str, Any]:
        return {
            "windows": self.windows,
            "server_kinds": dict(self.server_kinds),
            "keepalives": self.keepalives,
            "keepalive_max_interval_ms": self.keepalive_max_ms,
            "ack_latency_ms_p50": _percentile(self.latencies_ms, 50),
            "ack_latency_ms_p99": _percentile(self.latencies_ms, 99),
        }


class _CqlHighlights:
    """Statements by kind, the slowest request/response pairs, v5 frame CRC verdicts."""

    STATEMENTS = ("query", "prepare", "execute", "batch")

    def __init__(self) -> None:
        self.statements: Counter[str] = Counter()
        self.slowest: list[tuple[int, int, dict[str, Any]]] = []  # min-heap of (latency, tiebreak, pair)
        self._n = 0
        self.framed = Counter()
        self.crc_failures: Counter[str] = Counter()

    def add(self, m: Message) -> None:
        f = m.fields
        self.count(m.kind, f.get("framing"), 1)
        latency = f.get("latency_ns")
        if isinstance(latency, int):
            self._n += 1
            pair = {
                "capture": m.capture,
                "stream": m.stream,
                "cql_stream": f.get("stream_id"),
                "request": f.get("request_opcode"),
                "request_frame": f.get("request_frame"),
                "response": m.kind,
                "response_frame": m.frame,
                "latency_ms": latency / 1e6,
            }
            item = (latency, -self._n, pair)
            if len(self.slowest) < TOP:
                heapq.heappush(self.slowest, item)
            else:
                heapq.heappushpop(self.slowest, item)

    def count(self, kind: str, framing: Any, n: int) -> None:
        """`n` messages of a kind and framing (the core counts most of them: EventCounts)."""
        if kind in self.STATEMENTS:
            self.statements[kind] += n
        if framing:
            self.framed[str(framing)] += n

    def count_findings(self, code: str, n: int) -> None:
        if code in ("cql.crc24-mismatch", "cql.crc32-mismatch"):
            self.crc_failures[code.split(".")[1]] += n

    def result(self) -> dict[str, Any]:
        return {
            "statements": dict(self.statements),
            "slowest": [p for _, _, p in sorted(self.slowest, reverse=True)],
            "framed_envelopes": dict(self.framed),
            "crc_failures": dict(self.crc_failures),
            "crc_verdict": (
                "no v5 frames"
                if not self.framed and not self.crc_failures
                else ("all CRCs valid" if not self.crc_failures else "CRC failures")
            ),
        }


class _CourierHighlights:
    """Payload sendings (a resent payload is sent more than once: the verdict counts distinct
    payloads), how each sending was acknowledged on its connection, and the resendings."""

    def __init__(self) -> None:
        self.sendings = 0
        self.complete = 0
        self.incomplete = 0
        self.resendings = 0

    def add(self, m: Message) -> None:
        if m.kind in ("jdat", "evnt"):
            self.sendings += 1
        elif m.kind == "delivery":
            if m.fields.get("complete"):
                self.complete += 1
            else:
                self.incomplete += 1

    def count_findings(self, code: str, n: int) -> None:
        # a sending of a nonce sent before, on this connection or another (the delivery record's
        # `resend` knows only its own connection)
        if code == "courier.resend":
            self.resendings += n

    def result(self) -> dict[str, Any]:
        return {
            "payload_sendings": self.sendings,
            "sendings_fully_acked": self.complete,
            "sendings_not_fully_acked": self.incomplete,
            "resendings": self.resendings,
        }


class _HerculesHighlights:
    """Which streams were posted to and what the gateway answered."""

    def __init__(self) -> None:
        self.streams: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()

    def add(self, m: Message) -> None:
        if m.kind == "request":
            self.streams[str(m.fields.get("stream_name"))] += 1
        elif m.kind == "response":
            self.statuses[str(m.fields.get("status"))] += 1

    def result(self) -> dict[str, Any]:
        return {"gate_streams": dict(self.streams), "gate_statuses": dict(self.statuses)}
