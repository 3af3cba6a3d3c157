"""`inspect`'s streams on one screen at any size: the worst listed, the others folded by behaviour.

The report's `StreamFold` (export/report/streams.py) keeps each input's streams as a few numbers in
flat arrays until their numbers are final, then ranks them (never acknowledged, findings, bytes missing in
the capture, stalls) and keeps the worst as rows. `InspectFold` adds what `inspect` prints in place
of the others: streams that behave alike — same protocol, same server, same kind of trouble (some
or all events not acknowledged, ACKs unknown, findings, gaps, reset) — are one group, counted with
the least, the most and the sum of each number, so that a group's line says "2000 events, 1750 not
acked each" or gives the range and the total. The shown rows plus the groups' counts are every
stream, and their numbers add up to the totals. With `keep_all` (`inspect --all`) every input's
arrays are kept to the end to list every stream (about 100 bytes a stream, no Python object per stream).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import chain, compress
from typing import Any

from rich.cells import cell_len

from wirelog.cli.text import clean
from wirelog.export.report.streams import FLAGS, SEEN, StreamFold, _Block, endpoint

WORST = 8  # streams listed when they are folded
SHOW_ALL = 20  # up to this many streams, every one is listed (nothing to fold)
GROUP_LINES = 8  # groups printed, most streams first; the rest in one line
MAX_GROUPS = 10_000  # past it, new groups are kept per protocol and kind of trouble, any server
VALUES = (
    "messages", "events", "acked", "unacked", "ack_unknown", "findings",
    "bytes_c2s", "bytes_s2c", "gaps", "gap_bytes",
)  # fmt: skip
_N = len(VALUES)
RESET = 1 << FLAGS.index("reset")
# A stream's values in the order of inspect's Streams columns, then its TLS description
ROW_VALUES = (
    "capture", "stream", "protocol", "version", "client", "server", "messages", "events", "acked",
    "unacked", "ack_unknown", "bytes_c2s", "bytes_s2c", "gaps", "findings", "flags", "tls",
)  # fmt: skip
_NUMBERS = ROW_VALUES[6:-2]
STREAM_CELLS = ("stream", *ROW_VALUES[2:-1])  # `every_table`'s cells: the capture is in the id


def _trouble(v: dict[str, int], reset: bool) -> tuple[bool, ...]:
    """What kind of trouble a stream has: the part of its group key that is not who it talked to."""
    return (
        v["unacked"] > 0,
        v["unacked"] > 0 and v["unacked"] == v["events"],
        v["ack_unknown"] > 0,
        v["findings"] > 0,
        v["gaps"] > 0,
        reset,
    )


class InspectFold(StreamFold):
    def __init__(self, keep_all: bool = False) -> None:
        super().__init__(rows=SHOW_ALL, keep_all=keep_all)
        self.all: list[tuple[str, _Block]] = []  # (capture, a block of its streams) with keep_all
        # group key (protocol, server, trouble) → [count, sums..., mins..., maxs...]
        self.groups: dict[tuple, list[int]] = {}

    def _folded(
        self, capture: str, b: _Block, mask: bytes, before: list[tuple[tuple, dict[str, Any]]], worst: list
    ) -> None:
        if self.keep_all:
            self.all.append((capture, b))
            return
        kept = {(r["capture"], r["stream"]) for _, r in self._kept}
        for _, row in before:  # pushed out by worse streams of this block
            if (row["capture"], row["stream"]) not in kept:
                self._group(row["protocol"], row["server"], row, "reset" in row["flags"])
        # Streams that are alike in every number are counted as one (zip and Counter run in C:
        # ~0.3 µs a stream), then each distinct one is added to its group.
        cols, names = b.cols, self._names.names
        parts = ("protocol", "server", "server_port", *VALUES)
        alike = Counter(
            zip(
                (v & RESET for v in compress(cols["flags"], mask)),
                *(compress(cols[n], mask) for n in parts),
                strict=True,
            )
        )
        for _, i in worst:
            if (capture, b.stream(i)) in kept:
                alike[(cols["flags"][i] & RESET, *(cols[n][i] for n in parts))] -= 1
        for (reset, protocol, host, port, *values), n in alike.items():
            if n > 0:
                server = endpoint(names[host], port)
                v = dict(zip(VALUES, values, strict=True))
                self._group(names[protocol], server, v, bool(reset), n)

    def _group(self, protocol: str | None, server: str, v: dict[str, Any], reset: bool, n: int = 1) -> None:
        """Add `n` streams whose numbers are `v` to their group."""
        key = (protocol or "unknown", server, _trouble(v, reset))
        g = self.groups.get(key)
        if g is None:
            if len(self.groups) >= MAX_GROUPS:
                key = (key[0], None, key[2])  # any server
                g = self.groups.get(key)
            if g is None:
                g = self.groups[key] = [0, *([0] * _N), *(v[n] for n in VALUES), *(v[n] for n in VALUES)]
        g[0] += n
        for k, name in enumerate(VALUES):
            x = v[name]
            g[1 + k] += x * n
            if x < g[1 + _N + k]:
                g[1 + _N + k] = x
            if x > g[1 + 2 * _N + k]:
                g[1 + 2 * _N + k] = x

    def fold(self, summary: dict[str, Any], captures=()) -> dict[str, Any]:  # type: ignore[override]
        """inspect's document: `streams` the rows to list (every stream when there are at most
        SHOW_ALL, else the WORST, worst first), `stream_groups` the others by behaviour."""
        doc = super().fold(summary, captures)
        rows = doc["streams"]
        if self.keep_all:
            doc["stream_groups"] = []
            return doc
        if doc["totals"]["streams"] <= SHOW_ALL:
            rows.sort(key=lambda r: (self._order.get(r["capture"], 0), r["stream"]))
        else:
            for row in rows[WORST:]:
                self._group(row["protocol"], row["server"], row, "reset" in row["flags"])
            del rows[WORST:]
            folded = doc["streams_folded"]
            folded["streams"] = doc["totals"]["streams"] - len(rows)
            folded["tls"] = self.tls - sum(r["tls"] is not None for r in rows)
        shown = {(r["protocol"] or "unknown", r["server"], _trouble(r, "reset" in r["flags"])) for r in rows}
        groups = []
        for (protocol, server, trouble), g in self.groups.items():
            group = {
                "protocol": protocol,
                "server": server,
                "streams": g[0],
                "like_shown": (protocol, server, trouble) in shown,
            }
            for k, name in enumerate(VALUES):
                group[name] = {"sum": g[1 + k], "min": g[1 + _N + k], "max": g[1 + 2 * _N + k]}
            groups.append(group)
        groups.sort(
            key=lambda g: (
                -g["streams"],
                -g["unacked"]["sum"],
                -g["findings"]["sum"],
                g["protocol"],
                str(g["server"]),
            )
        )
        doc["stream_groups"] = groups
        return doc

    def _every(self) -> Iterator[tuple[str, _Block]]:
        """With keep_all: every input's blocks, inputs by name, blocks in stream order."""
        return iter(sorted(self.all, key=lambda cb: cb[0]))

    def every_row(self) -> Iterator[dict[str, Any]]:
        """With keep_all: every stream's row, inputs by name, streams by id."""
        for capture, b in self._every():
            for i, flags in enumerate(b.cols["flags"]):
                if flags & SEEN:
                    yield self._row(capture, b, i)

    def every_table(self, multi: bool) -> tuple[list[int], Iterator[tuple]] | None:
        """With keep_all: every stream's cells in `STREAM_CELLS` order (inputs by name, streams by
        id) and each column's width, for `print_known`: texts escaped (`clean`) and numbers as ints,
        made by iterators over the fold's columns that run in C — no Python call a stream (`inspect
        --all` at 200,000 connections). None when a text's width on a terminal is not its length
        (wide characters in a capture's name): the caller lays those rows out the slow way."""
        names = [clean(n or "") for n in self._names.names]
        flag_texts = [",".join(n for k, n in enumerate(FLAGS) if f >> k & 1) for f in range(256)]
        blocks = []
        widths = [0] * len(STREAM_CELLS)
        narrow = True
        for capture, b in self._every():
            cols = b.cols
            mask = bytes(map(SEEN.__and__, cols["flags"]))  # the streams whose summary came
            ids = list(compress(range(b.base, b.base + b.size) if b.base is not None else b.ids, mask))
            if not ids:
                continue
            prefix = clean(capture) + ":" if multi else ""
            # (printable texts are their own escaped form: one test of them all, in C)
            clients = b.clients if "".join(b.clients).isprintable() else [clean(c) for c in b.clients]
            servers = {
                hp: clean(endpoint(self._names.names[hp[0]], hp[1]))
                for hp in set(
                    zip(compress(cols["server"], mask), compress(cols["server_port"], mask), strict=True)
                )
            }
            used = {n: {names[c] for c in set(compress(cols[n], mask))} for n in ("protocol", "version")}
            flags = {flag_texts[f] for f in set(compress(cols["flags"], mask))}
            for k, group in enumerate(
                ({prefix + str(max(ids))}, used["protocol"], used["version"], clients, servers.values())
            ):
                widths[k] = max(widths[k], *map(len, group))
                narrow = narrow and _narrow(group)
            for k, n in enumerate(_NUMBERS, 5):
                widths[k] = max(widths[k], len(str(max(compress(cols[n], mask)))))  # (counts: >= 0)
            widths[-1] = max(widths[-1], *map(len, flags))
            blocks.append((b, mask, ids, prefix, clients, servers))
        if not narrow:
            return None
        return widths, chain.from_iterable(self._block_cells(names, flag_texts, *block) for block in blocks)

    @staticmethod
    def _block_cells(
        names: list[str],
        flag_texts: list[str],
        b: _Block,
        mask: bytes,
        ids: list[int],
        prefix: str,
        clients: list[str],
        servers: dict[tuple[int, int], str],
    ) -> Iterator[tuple]:
        cols = b.cols
        return zip(
            map(prefix.__add__, map(str, ids)) if prefix else ids,
            map(names.__getitem__, compress(cols["protocol"], mask)),
            map(names.__getitem__, compress(cols["version"], mask)),
            map(clients.__getitem__, compress(cols["client"], mask)),
            map(
                servers.__getitem__,
                zip(compress(cols["server"], mask), compress(cols["server_port"], mask), strict=True),
            ),
            *(compress(cols[n], mask) for n in _NUMBERS),
            map(flag_texts.__getitem__, compress(cols["flags"], mask)),
            strict=True,
        )

    def every_tls(self) -> Iterator[dict[str, Any]]:
        """With keep_all: the rows of every TLS stream, as `every_row`."""
        for capture, b in self._every():
            for i in sorted(b.tls):
                if b.cols["flags"][i] & SEEN:
                    yield self._row(capture, b, i)


def _narrow(texts: Iterable[str]) -> bool:
    """Whether every one of `texts` takes one terminal cell per character (what a %-format's
    padding assumes): one test in C when they are all ASCII, as nearly always."""
    texts = list(texts)
    return "".join(texts).isascii() or all(cell_len(t) == len(t) for t in texts)


def group_line(g: dict[str, Any], more: bool) -> str:
    """One group in words: "1,245 more lumberjack streams to 10.255.0.1:5044 like these: 2000
    events, 1750 not acked each" (ranges and totals when its streams' numbers differ)."""

    def span(name: str, unit: str) -> str:
        lo, hi = g[name]["min"], g[name]["max"]
        if hi == 1 and unit in ("findings", "gaps"):
            unit = unit[:-1]
        return f"{lo:,} {unit}" if lo == hi else f"{lo:,}–{hi:,} {unit}"

    def nonzero(name: str) -> bool:
        return g[name]["max"] > 0

    parts = []
    if nonzero("events"):
        parts.append(span("events", "events"))
        if g["unacked"]["sum"] == g["events"]["sum"]:
            parts.append("none acked")
        elif g["acked"]["sum"] == g["events"]["sum"]:
            parts.append("all acked")
        elif nonzero("unacked"):
            parts.append(span("unacked", "not acked"))
        if nonzero("ack_unknown"):
            parts.append(span("ack_unknown", "ACK unknown"))
    else:  # no events: what was sent says more
        if nonzero("messages"):
            parts.append(span("messages", "messages"))
        parts.append(span("bytes_c2s", "bytes c→s"))
        parts.append(span("bytes_s2c", "bytes s→c"))
    if nonzero("findings"):
        parts.append(span("findings", "findings"))
    if nonzero("gaps"):
        parts.append(span("gaps", "gaps") + f" ({span('gap_bytes', 'bytes missing')})")
    alike = all(g[name]["min"] == g[name]["max"] for name in VALUES)
    n = g["streams"]
    head = f"{n:,} {'more ' if more else ''}{g['protocol']} stream{'s' if n != 1 else ''}"
    head += f" to {g['server']}" if g["server"] is not None else " to other servers"
    head += " like these" if g["like_shown"] else ""
    text = f"{head}: {', '.join(parts)}"
    if n > 1 and alike:
        return text + " each"
    if n > 1 and nonzero("events"):
        total = f"{g['events']['sum']:,} events"
        if 0 < g["unacked"]["sum"] < g["events"]["sum"]:
            total += f", {g['unacked']['sum']:,} not acked"
        return text + f" ({total} in all)"
    return text
