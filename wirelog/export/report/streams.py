"""The report's streams, folded as `inspect` folds them: the worst first, a bounded number of rows,
the rest counted with the command that lists them.

A stream's numbers are final only when its input ends: its events wait for their fate until then
(docs/records.md, "Delivery"), so its never-acknowledged count comes after its summary. Until its
input ends each stream is a few numbers in flat arrays (about 100 bytes, no Python object per
stream); then the input's streams are ranked and only the worst `ROWS` of all inputs stay rows.
The page therefore holds at most `ROWS` streams and the run's memory does not keep one object per
connection (`wirelog report` at 200,000 connections: bench/bench_report_streams.py).
"""

from __future__ import annotations

import heapq
import shlex
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import compress
from typing import Any

from wirelog.model import CaptureInfo, EventCounts, Finding, Message, StreamInfo

ROWS = 100  # streams shown, all inputs together
NAMES = 30  # categories of a per-protocol highlight shown (Gate stream names come from the wire)
# Worst first: never acknowledged, then findings, bytes missing, stalls (as `inspect` orders them).
RANK = ("unacked", "findings", "gap_bytes", "stalls")
COUNTS = ("messages", "events", "acked", "unacked", "ack_unknown", "findings")
SIZES = ("bytes_c2s", "bytes_s2c", "gaps", "gap_bytes")
FLAGS = ("handshake", "midstream", "fin_c2s", "fin_s2c", "reset", "port_reuse")  # StreamInfo.flags
ACK_STATES = {True: "acked", False: "unacked", None: "ack_unknown"}
TOTALS = ("messages", "events", "acked", "unacked", "ack_unknown")  # inspect's totals from streams


class _Names:
    """Strings that repeat (hosts, protocols, versions) kept once, by index."""

    def __init__(self) -> None:
        self.index: dict[str | None, int] = {None: 0}
        self.names: list[str | None] = [None]

    def code(self, name: str | None) -> int:
        i = self.index.get(name)
        if i is None:  # (a new name: rare)
            i = self.index[name] = len(self.names)
            self.names.append(name)
        return i


class _Input:
    """One input's streams, by stream id (ids are dense: 0-based per input in order of first packet)."""

    def __init__(self) -> None:
        # counts and sizes 8 bytes; names 4 (codes into _Names, ports: -1 when the endpoint's text
        # has no port and is kept whole); FLAGS as bits, SEEN when the stream's summary came
        self.cols: dict[str, array] = {name: array("q") for name in (*COUNTS, *SIZES)}
        for name in ("protocol", "version", "client", "server", "client_port", "server_port"):
            self.cols[name] = array("i")
        self.cols["flags"] = array("B")
        self.tls: dict[int, dict[str, Any]] = {}
        self.stalls: dict[int, int] = {}  # the timeline's lanes say (the core's top lanes only)

    def slot(self, stream: int) -> int:
        size = len(self.cols["flags"])
        if stream >= size:
            grow = max(stream + 1 - size, size >> 3, 64)  # ids come in order: ~1/8 spare at most
            for col in self.cols.values():
                col.frombytes(bytes(grow * col.itemsize))
        return stream


SEEN = 1 << 7  # in `flags`: the stream's summary came (filters may leave ids out)


def _split(endpoint: str) -> tuple[str, int]:
    """'10.0.0.1:5044' as ('10.0.0.1', 5044): a host repeats over connections, a port is a number."""
    host, _, port = endpoint.rpartition(":")
    if host and port.isascii() and port.isdigit() and (port[0] != "0" or port == "0"):  # as str(int(port))
        return host, int(port)
    return endpoint, -1


class StreamFold:
    """Fed every pipeline item of a report run; `fold(summary)` gives inspect's document with its
    stream list folded. Keeps nothing per stream once the stream's input has ended."""

    def __init__(self, rows: int = ROWS) -> None:
        self.rows = rows
        self._names = _Names()
        self._inputs: dict[str, _Input] = {}
        self._kept: list[tuple[tuple, dict[str, Any]]] = []  # (rank key, row), the worst so far
        self._order: dict[str, int] = {}  # inputs in the order they came (a rank's tie-break)
        self.totals: Counter[str] = Counter()
        self.protocols: Counter[str] = Counter()  # every stream's, by protocol
        self.tls = 0  # TLS streams
        self.sums: Counter[str] = Counter()  # every stream's counts and sizes added up

    def _input(self, capture: str) -> _Input:
        got = self._inputs.get(capture)
        if got is None:
            got = self._inputs[capture] = _Input()
            self._order.setdefault(capture, len(self._order))
        return got

    def add(self, item: object) -> None:
        if type(item) is StreamInfo:  # the one item of every connection: first
            self._stream(item)
        elif isinstance(item, Message):
            if item.stream is None:
                return
            t = self._input(item.capture)
            i = t.slot(item.stream)
            t.cols["messages"][i] += 1
            if item.protocol != "tls":  # a TLS stream's version is that of the protocol inside
                self._version(t, i, item.version)
            if item.event is not None:
                t.cols["events"][i] += 1
                t.cols[ACK_STATES[item.acked]][i] += 1
        elif isinstance(item, EventCounts):
            t = self._input(item.capture)
            for stream, _, version, acked, n in item.counts:
                if stream is not None:
                    i = t.slot(stream)
                    for name in ("messages", "events", ACK_STATES[acked]):
                        t.cols[name][i] += n
                    self._version(t, i, version)
            for stream, _, version, _, _, n in item.messages:
                if stream is not None:
                    i = t.slot(stream)
                    t.cols["messages"][i] += n
                    self._version(t, i, version)
        elif isinstance(item, Finding):
            if item.stream is not None:
                t = self._input(item.capture)
                t.cols["findings"][t.slot(item.stream)] += 1
        elif isinstance(item, CaptureInfo):
            self._end(item)

    def _version(self, t: _Input, i: int, version: str | None) -> None:
        if not t.cols["version"][i] and version is not None:
            t.cols["version"][i] = self._names.code(version)

    def _stream(self, s: StreamInfo) -> None:
        # once per connection (200,000 times at 200,000 connections): spelled out, no loops
        t = self._input(s.capture)
        i = t.slot(s.stream)
        cols = t.cols
        cols["bytes_c2s"][i] = s.bytes_c2s
        cols["bytes_s2c"][i] = s.bytes_s2c
        cols["gaps"][i] = s.gaps
        cols["gap_bytes"][i] = s.gap_bytes
        cols["flags"][i] = (
            SEEN
            | s.handshake
            | s.midstream << 1
            | s.fin_c2s << 2
            | s.fin_s2c << 3
            | s.reset << 4
            | s.port_reuse << 5
        )  # FLAGS' order
        code = self._names.code
        cols["protocol"][i] = code(s.protocol)
        host, port = _split(s.client)
        cols["client"][i] = code(host)
        cols["client_port"][i] = port
        host, port = _split(s.server)
        cols["server"][i] = code(host)
        cols["server_port"][i] = port
        if s.tls is not None:
            t.tls[i] = s.tls

    def _end(self, info: CaptureInfo) -> None:
        """An input ended: its streams' numbers are final; rank them, keep the worst as rows."""
        t = self._inputs.pop(info.capture, None)
        if t is None:
            return
        for lane in (info.timeline or {}).get("lanes", ()):
            t.stalls[lane["stream"]] = lane.get("stalls", 0)
        cols = t.cols
        flags = cols["flags"]
        names = self._names.names

        def seen() -> Iterator[int]:
            """The ids whose summary came (not spare slots nor ids the filters left out), without a
            list of them: this runs once for all of an input's streams."""
            return (i for i, v in enumerate(flags) if v & SEEN)

        for name in (*COUNTS, *SIZES):
            self.sums[name] += sum(compress(cols[name], (v & SEEN for v in flags)))
        self.totals["streams"] += sum(v >> 7 for v in flags)  # SEEN is bit 7
        self.protocols.update(
            names[p] or "unknown" for p in compress(cols["protocol"], (v & SEEN for v in flags))
        )
        self.tls += len(t.tls)
        order = self._order[info.capture]

        def key(i: int) -> tuple:
            return (
                -cols["unacked"][i],
                -cols["findings"][i],
                -cols["gap_bytes"][i],
                -t.stalls.get(i, 0),
                order,
                i,
            )

        worst = heapq.nsmallest(self.rows, ((key(i), i) for i in seen()))
        kept = self._kept + [(k, self._row(info.capture, t, i)) for k, i in worst]
        kept.sort(key=lambda kr: kr[0])
        self._kept = kept[: self.rows]

    def _row(self, capture: str, t: _Input, i: int) -> dict[str, Any]:
        """The stream as `inspect --json` lists it."""
        cols, names = t.cols, self._names.names

        def endpoint(side: str) -> str:
            host, port = names[cols[side][i]], cols[f"{side}_port"][i]
            return str(host) if port < 0 else f"{host}:{port}"

        flags = cols["flags"][i]
        return {
            "capture": capture,
            "stream": i,
            "protocol": names[cols["protocol"][i]],
            "version": names[cols["version"][i]],
            "tls": t.tls.get(i),
            "client": endpoint("client"),
            "server": endpoint("server"),
            **{name: cols[name][i] for name in ("messages", "events", "acked", "unacked", "ack_unknown")},
            **{name: cols[name][i] for name in SIZES},
            "findings": cols["findings"][i],
            "flags": [name for k, name in enumerate(FLAGS) if flags >> k & 1],  # SEEN is bit 7
        }

    def fold(self, summary: dict[str, Any], captures: Iterable[str] = ()) -> dict[str, Any]:
        """`summary` (a `Summary(per_stream=False)`'s result) with the worst streams as its stream
        list, `streams_folded` counting the others, and the totals of every stream. `captures`:
        the inputs as given (words of a command line), for the command that lists every stream."""
        for capture in list(self._inputs):  # an input cut short still shows its streams
            self._end(CaptureInfo(capture))
        rows = [row for _, row in self._kept]
        shown: Counter[str] = Counter()
        for row in rows:
            shown.update({name: row[name] for name in (*COUNTS, *SIZES)})
        by_protocol = self.protocols - Counter(row["protocol"] or "unknown" for row in rows)
        more = self.totals["streams"] - len(rows)
        command = ["wirelog", "streams", "--json", *captures] if more else []
        folded = {
            "streams": more,
            "protocols": dict(sorted(by_protocol.items())),
            "tls": self.tls - sum(row["tls"] is not None for row in rows),
            **{name: self.sums[name] - shown[name] for name in (*COUNTS, *SIZES)},
            "command": " ".join(shlex.quote(word) for word in command),
        }
        doc = dict(summary)
        doc["streams"] = rows
        doc["streams_folded"] = folded
        doc["stream_protocols"] = dict(sorted(self.protocols.items()))
        doc["totals"] = {
            "streams": self.totals["streams"],
            **{name: self.sums[name] for name in TOTALS},
            "findings": summary["totals"]["findings"],
        }
        doc["protocols"] = fold_highlights(summary["protocols"])
        return doc


def fold_highlights(protocols: dict[str, Any], limit: int = NAMES) -> dict[str, Any]:
    """Per-protocol highlights with each category count (Gate stream names, statuses, server kinds:
    names from the wire, as many as the peers chose) cut to the `limit` largest, the rest one entry."""
    out = {}
    for name, h in protocols.items():
        h = dict(h)
        for key, value in h.items():
            if (
                isinstance(value, dict)
                and len(value) > limit
                and all(isinstance(v, int) for v in value.values())
            ):
                top = heapq.nsmallest(limit, value.items(), key=lambda kv: (-kv[1], kv[0]))
                rest = len(value) - limit
                h[key] = {**dict(top), f"({rest} more)": sum(value.values()) - sum(n for _, n in top)}
        out[name] = h
    return out
