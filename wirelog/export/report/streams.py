"""The report's streams, folded as `inspect` folds them: the worst first, a bounded number of rows,
the rest counted with the command that lists them.

A stream's numbers are final when nothing of it can come after its summary: the core says so
(`StreamInfo.settled`) unless events of it wait for their fate (docs/records.md, "Delivery": their
never-acknowledged count comes after the summary, at the end of the input). Each stream is a few
numbers in flat arrays (about 100 bytes, no Python object per stream) in blocks of consecutive
stream ids; a block two blocks behind the newest is folded — its settled streams ranked, the worst
`ROWS` of all inputs kept as rows, the others added up — and its other streams kept as
stragglers until their input ends. The page therefore holds at most `ROWS` streams and the run's
memory stays flat however many connections end (`wirelog report` at 200,000 connections:
bench/bench_report_streams.py).
"""

from __future__ import annotations

import heapq
import shlex
from array import array
from collections import Counter
from collections.abc import Iterable
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


MAX_SERVERS = 100_000  # server endpoints whose codes are looked up by their text (then forgotten)
SHIFT = 13  # a block holds the streams of 2^13 consecutive ids (~860 KB)
SEEN = 1 << 7  # in `flags`: the stream's summary came (filters may leave ids out)
SETTLED = 1 << 6  # in `flags`: nothing of the stream comes after its summary (StreamInfo.settled)


def endpoint(host: str | None, port: int) -> str:
    """A server's endpoint text from its host and port (`_split`'s inverse)."""
    return str(host) if port < 0 else f"{host}:{port}"


def _split(text: str) -> tuple[str, int]:
    """'10.0.0.1:5044' as ('10.0.0.1', 5044): a host repeats over connections, a port is a number."""
    host, _, port = text.rpartition(":")
    if host and port.isascii() and port.isdigit() and (port[0] != "0" or port == "0"):  # as str(int(port))
        return host, int(port)
    return text, -1


class _Block:
    """Streams of one input as columns: ids `base`..`base + 2^SHIFT` by slot, or (`base` None, the
    stragglers) any ids, in `ids` and `index`."""

    def __init__(self, base: int | None) -> None:
        self.base = base
        # counts and sizes 8 bytes; names 4 (codes into _Names, ports: -1 when the endpoint's text
        # has no port and is kept whole); FLAGS as bits, SEEN and SETTLED
        self.cols: dict[str, array] = {name: array("q") for name in (*COUNTS, *SIZES)}
        for name in ("protocol", "version", "client", "server", "server_port"):
            self.cols[name] = array("i")
        self.cols["flags"] = array("B")
        self.cols["own_version"] = array("B")  # 1: `version` is the stream's own messages' (`_version`)
        self.size = 0  # slots of a block of consecutive ids (its columns' length)
        # client endpoints are the block's own, by `client` (0: not known yet): nearly one per
        # connection, they are not worth a lookup each; forgotten with the block
        self.clients = [""]
        self.tls: dict[int, dict[str, Any]] = {}  # by slot
        self.ids = array("q")  # the stragglers' stream ids, by slot
        self.index: dict[int, int] = {}  # the stragglers' slots, by stream id

    def slot(self, stream: int) -> int:
        """A stream's slot in a block of consecutive ids."""
        i = stream - self.base  # type: ignore[operator]
        size = self.size
        if i >= size:
            grow = max(i + 1 - size, size >> 3, 64)  # ids come in order: ~1/8 spare at most
            for col in self.cols.values():
                col.frombytes(bytes(grow * col.itemsize))
            self.size += grow
        return i

    def stream(self, i: int) -> int:
        return self.base + i if self.base is not None else self.ids[i]

    def adopt(self, stream: int, other: _Block | None = None, j: int = 0) -> int:
        """A straggler's slot for `stream`, with its numbers so far from `other`'s slot `j`."""
        i = self.index.get(stream)
        if i is None:
            i = self.index[stream] = len(self.ids)
            self.ids.append(stream)
            for name, col in self.cols.items():
                col.append(other.cols[name][j] if other is not None else 0)
            if other is not None:
                self.cols["client"][i] = len(self.clients)
                self.clients.append(other.clients[other.cols["client"][j]])
                if j in other.tls:
                    self.tls[i] = other.tls[j]
        return i


class _Input:
    """One input's streams not folded yet: blocks of consecutive ids (ids are dense: 0-based per
    input in order of first packet), and the stragglers of blocks folded early — streams still open
    or whose events wait for their fate when the streams around them were folded."""

    def __init__(self) -> None:
        self.blocks: dict[int, _Block] = {}
        self.newest = -1  # the highest block number begun
        self.stragglers = _Block(None)
        self.stalls: dict[int, int] = {}  # the timeline's lanes say (the core's top lanes only)


class StreamFold:
    """Fed every pipeline item of a report run; `fold(summary)` gives inspect's document with its
    stream list folded. A stream is a few numbers in a block of columns until it is folded: when
    its block is two blocks behind the newest and the stream is settled, else when its input ends.
    `keep_all` keeps every block to list every stream (then none is ranked: no rows are kept)."""

    def __init__(self, rows: int = ROWS, keep_all: bool = False) -> None:
        self.rows = rows
        self.keep_all = keep_all
        self._names = _Names()
        self._inputs: dict[str, _Input] = {}
        self._kept: list[tuple[tuple, dict[str, Any]]] = []  # (rank key, row), the worst so far
        self._order: dict[str, int] = {}  # inputs in the order they came (a rank's tie-break)
        self.totals: Counter[str] = Counter()
        self.protocols: Counter[str] = Counter()  # every stream's, by protocol
        self.tls = 0  # TLS streams
        self.sums: Counter[str] = Counter()  # every stream's counts and sizes added up
        self._servers: dict[str, tuple[int, int]] = {}  # server endpoint → (host code, port)

    def _input(self, capture: str) -> _Input:
        got = self._inputs.get(capture)
        if got is None:
            got = self._inputs[capture] = _Input()
            self._order.setdefault(capture, len(self._order))
        return got

    def _at(self, capture: str, stream: int) -> tuple[_Block, int]:
        """The block and slot of an input's stream (twice a connection: spelled out)."""
        t = self._inputs.get(capture) or self._input(capture)
        n = stream >> SHIFT
        b = t.blocks.get(n)
        if b is not None:
            i = stream - b.base  # type: ignore[operator]
            return (b, i) if i < b.size else (b, b.slot(stream))
        if n <= t.newest:  # its block was folded: a straggler
            return t.stragglers, t.stragglers.adopt(stream)
        b = t.blocks[n] = _Block(n << SHIFT)
        t.newest = n
        if not self.keep_all:
            for old in [k for k in t.blocks if k < n - 1]:  # streams of ids long begun
                self._fold(capture, t, t.blocks.pop(old), final=False)
        return b, b.slot(stream)

    def add(self, item: object) -> None:
        kind = type(item)  # (the model's classes have no subclasses)
        if kind is StreamInfo:  # the one item of every connection: first
            self._stream(item)
        elif kind is Finding:
            if item.stream is not None:
                b, i = self._at(item.capture, item.stream)
                b.cols["findings"][i] += 1
        elif kind is Message:
            if item.stream is None:
                return
            b, i = self._at(item.capture, item.stream)
            b.cols["messages"][i] += 1
            if item.event is not None:
                b.cols["events"][i] += 1
                b.cols[ACK_STATES[item.acked]][i] += 1
                self._version(b, i, item.version, own=False)
            elif item.protocol != "tls":  # a TLS stream's version is that of the protocol inside
                self._version(b, i, item.version, own=True)
        elif kind is EventCounts:
            for stream, _, version, acked, n in item.counts:
                if stream is not None:
                    b, i = self._at(item.capture, stream)
                    for name in ("messages", "events", ACK_STATES[acked]):
                        b.cols[name][i] += n
                    self._version(b, i, version, own=False)
            for stream, _, version, _, _, n in item.messages:
                if stream is not None:
                    b, i = self._at(item.capture, stream)
                    b.cols["messages"][i] += n
                    self._version(b, i, version, own=True)
            for stream, _, _, _, n in item.findings:
                if stream is not None:
                    b, i = self._at(item.capture, stream)
                    b.cols["findings"][i] += n
        elif kind is CaptureInfo:
            self._end(item)

    def _version(self, b: _Block, i: int, version: str | None, own: bool) -> None:
        """A stream's version is its own messages' (a Gate connection's HTTP), else its events' (a
        Hercules event's format), as `Summary`'s, not whichever kind a batch brings first."""
        cols = b.cols
        if version is None or cols["own_version"][i] or (cols["version"][i] and not own):
            return
        cols["version"][i] = self._names.code(version)
        cols["own_version"][i] = own

    def _stream(self, s: StreamInfo) -> None:
        # once per connection (200,000 times at 200,000 connections): spelled out, no loops
        b, i = self._at(s.capture, s.stream)
        cols = b.cols
        cols["bytes_c2s"][i] = s.bytes_c2s
        cols["bytes_s2c"][i] = s.bytes_s2c
        cols["gaps"][i] = s.gaps
        cols["gap_bytes"][i] = s.gap_bytes
        cols["flags"][i] = (
            SEEN
            | s.settled << 6
            | s.handshake
            | s.midstream << 1
            | s.fin_c2s << 2
            | s.fin_s2c << 3
            | s.reset << 4
            | s.port_reuse << 5
        )  # FLAGS' order, then SETTLED and SEEN
        protocol = self._names.index.get(s.protocol)
        cols["protocol"][i] = self._names.code(s.protocol) if protocol is None else protocol
        cols["client"][i] = len(b.clients)
        b.clients.append(s.client)
        server = self._servers.get(s.server)
        if server is None:  # (a server not seen yet: rare)
            if len(self._servers) > MAX_SERVERS:
                self._servers.clear()
            host, port = _split(s.server)
            server = self._servers[s.server] = (self._names.code(host), port)
        cols["server"][i], cols["server_port"][i] = server
        if s.tls is not None:
            b.tls[i] = s.tls

    def _end(self, info: CaptureInfo) -> None:
        """An input ended: its streams' numbers are final; fold every stream not folded yet."""
        t = self._inputs.pop(info.capture, None)
        if t is None:
            return
        for lane in (info.timeline or {}).get("lanes", ()):
            t.stalls[lane["stream"]] = lane.get("stalls", 0)
        for n in sorted(t.blocks):
            self._fold(info.capture, t, t.blocks[n], final=True)
        self._fold(info.capture, t, t.stragglers, final=True)

    def _fold(self, capture: str, t: _Input, b: _Block, final: bool) -> None:
        """Rank the block's streams whose numbers are final (every one seen when `final`, else the
        settled ones), keep the worst as rows, add up the rest; the others become stragglers."""
        cols = b.cols
        flags = cols["flags"]
        done = SEEN if final else SEEN | SETTLED
        mask = bytes(v & done == done for v in flags)  # the streams folded now
        if not final:
            for i, v in enumerate(flags):  # still open, or waiting for their events' fate
                if not mask[i] and (v or any(cols[name][i] for name in COUNTS)):
                    t.stragglers.adopt(b.stream(i), b, i)
        names = self._names.names
        for name in (*COUNTS, *SIZES):
            self.sums[name] += sum(compress(cols[name], mask))
        self.totals["streams"] += sum(mask)
        self.protocols.update(names[p] or "unknown" for p in compress(cols["protocol"], mask))
        self.tls += sum(1 for i in b.tls if mask[i])
        order = self._order[capture]
        stalls = t.stalls

        def key(i: int) -> tuple:
            stream = b.stream(i)
            return (
                -cols["unacked"][i],
                -cols["findings"][i],
                -cols["gap_bytes"][i],
                -stalls.get(stream, 0),
                order,
                stream,
            )

        candidates = () if self.keep_all else compress(range(len(mask)), mask)  # (keep_all lists them all)
        worst = heapq.nsmallest(self.rows, ((key(i), i) for i in candidates))
        before = self._kept
        kept = before + [(k, self._row(capture, b, i)) for k, i in worst]
        kept.sort(key=lambda kr: kr[0])
        self._kept = kept[: self.rows]
        self._folded(capture, b, mask, before, worst)

    def _folded(
        self, capture: str, b: _Block, mask: bytes, before: list[tuple[tuple, dict[str, Any]]], worst: list
    ) -> None:
        """A block's streams were folded (`mask`): `before` the rows kept until then, `worst` the
        block's best candidates (rank key, slot). For subclasses that count the streams not shown."""

    def _row(self, capture: str, b: _Block, i: int) -> dict[str, Any]:
        """The stream as `inspect --json` lists it."""
        cols, names = b.cols, self._names.names

        host, port = names[cols["server"][i]], cols["server_port"][i]

        flags = cols["flags"][i]
        return {
            "capture": capture,
            "stream": b.stream(i),
            "protocol": names[cols["protocol"][i]],
            "version": names[cols["version"][i]],
            "tls": b.tls.get(i),
            "client": b.clients[cols["client"][i]],
            "server": endpoint(host, port),
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
