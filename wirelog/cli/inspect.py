"""`wirelog inspect`: the answer on one screen, then drill-down by stream or frame."""

from __future__ import annotations

import heapq
import sys
from collections.abc import Iterator
from itertools import islice
from typing import Any

import click
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text
from rich.tree import Tree

from wirelog.cli.common import Session, error, exit_code, input_options, make_console
from wirelog.cli.fold import GROUP_LINES, ROW_VALUES, InspectFold, group_line
from wirelog.cli.params import FRAME_NUMBER
from wirelog.cli.progress import progress
from wirelog.cli.summary import Summary, describe_tls
from wirelog.cli.tables import BIG, Cell, Column, new_table, print_fitted, print_known, print_rows
from wirelog.cli.text import clean, human_value, label, literal, ms, unit_of
from wirelog.export.json import dumps_line, record_dict
from wirelog.model import REDACTED, CaptureInfo, Chunk, Finding, Message, capture_loss_text

EXAMPLES = """
\b
Examples:
  wirelog inspect capture.pcap
  wirelog inspect capture.pcap --json | jq '.findings[] | select(.severity=="error")'
  wirelog inspect capture.pcap --stream 2          every message of stream 2
  wirelog inspect capture.pcap --frame 1234        what frame 1234 carries, with a hex dump
  wirelog inspect capture.pcap --json | jq .delivery   was anything lost or delivered twice?
"""

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
HEX_CONTEXT = 256  # bytes of a frame's payload shown around the highlighted records


@click.command(epilog=EXAMPLES)
@input_options
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON document.")
@click.option(
    "--frame", "frame", type=FRAME_NUMBER, metavar="N", help="Show what frame N carries, as a tree plus hex."
)
@click.option(
    "--wide", is_flag=True, help="Every column of the tables, even wider than the terminal (for less -S)."
)
@click.option(
    "--plain", is_flag=True, help="Tables as plain aligned text, no box drawing or colour (as in a pipe)."
)
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="List every stream (by default the worst are listed and the others folded by behaviour).",
)
@click.pass_context
def inspect(ctx, as_json, frame, wide, plain, every, **params):
    """Summarise CAPTURE...: streams, protocols, messages, events, findings."""
    console = make_console(plain)
    if frame is not None:
        session = Session(params, chunks=True)
        with progress(session, "inspect"):
            _show_frame(console, session, frame)
    elif params["streams"] and not as_json:
        session = Session(params)
        with progress(session, "inspect", stdout_busy=True):  # its rows are written as they come
            _show_streams(console, session)
    else:
        session = Session(params, records="summary")  # counts events, never reads them
        # --json lists every stream (scripts); the screen gets the worst and the others folded,
        # a few numbers a stream until its input ends (cli/fold.py)
        summary = Summary(per_stream=as_json)
        fold = None if as_json else InspectFold(keep_all=every)
        with progress(session, "inspect"):
            for item in session.items():
                summary.add(item)
                if fold is not None:
                    fold.add(item)
        result = summary.result()
        if fold is None:
            sys.stdout.buffer.write(dumps_line(result))
            sys.stdout.buffer.flush()
        else:
            doc = fold.fold(result, params["captures"])
            rows = fold if every else None
            _render(console, doc, wide, filtered=session.options.keep.active, every=rows)
    session.tell_unmatched()
    ctx.exit(exit_code(session))


# Essential columns (drop 0) are what a user reads a row for; the others are left out, in `drop`
# order, when the table does not fit the terminal, and then the server goes under the client
# (cli/tables.py).
CAPTURE_COLUMNS = (
    Column("capture"),
    Column("format", drop=4),
    Column("packets", "right"),
    Column("tcp", "right", drop=3),
    Column("non-tcp", "right", drop=2),
    Column("first", drop=7),
    Column("last", drop=6),
    Column("span ms", "right", drop=5),
    Column("link types", drop=1),
    Column("notes"),
)
STREAM_COLUMNS = (
    Column("id", "right"),
    Column("protocol"),
    Column("ver", "right", drop=3),
    Column("client"),
    Column("server", under="client"),
    Column("msgs", "right", drop=4),
    # events = acked + unacked + unknown: all essential, so that the row adds up at any width
    Column("events", "right"),
    Column("acked", "right", under="events"),
    Column("unacked", "right"),
    Column("unknown", "right", under="unacked"),
    Column("bytes c→s", "right", drop=2),
    Column("bytes s→c", "right", drop=1),
    Column("gaps", "right", drop=7),
    Column("findings", "right"),
    Column("flags", drop=6),
)
ACK_NOTE = (
    "acked / unacked / unknown: each event's ACK on its own connection (unknown: the ACK would be "
    "in a capture gap, or the capture ended first); the delivery verdict counts resent events once "
    "across connections"
)


def _render(
    console: Console,
    r: dict[str, Any],
    wide: bool = False,
    filtered: bool = False,
    every: InspectFold | None = None,
) -> None:
    """The summary; `filtered`: the records were filtered, which the core's delivery verdict is not.
    Its `streams` are listed; `stream_groups` (cli/fold.py) are the others, a line each; `every`:
    the fold that kept every stream (--all): all of them listed, in fixed-width form past `BIG`.

    Every text from the capture (its name, endpoints, TLS names, finding sentences, stream names)
    is printed literally (cli/text.py); with several captures a stream or frame is `capture:N`."""
    loss = capture_loss_text(r["capture_loss"])
    if loss:  # first: what follows is read knowing that the capture has holes
        console.print(Text.assemble(("capture loss", "bold yellow"), ": ", literal(loss)))
    captures = []
    for c in r["captures"]:
        if c["error"] and not c["packets"]:
            continue  # an input that could not be read: its one error line on stderr says it all
        notes = ", ".join(
            x for x in (c["compression"], "truncated" if c["truncated"] else "", c["error"] or "") if x
        )
        span = f"{c['span_s'] * 1000:.3f}" if c["span_s"] is not None else ""
        captures.append((
            c["capture"], c["format"], str(c["packets"]), str(c["tcp_packets"]), str(c["non_tcp_packets"]),
            c["first_ts"] or "", c["last_ts"] or "", span, ",".join(map(str, c["link_types"])), notes,
        ))  # fmt: skip
    print_fitted(console, "Captures", CAPTURE_COLUMNS, captures, wide)

    multi = len(r["captures"]) > 1
    _streams(console, r, wide, multi, every)
    t = r["totals"]
    sev = ", ".join(f"{n} {k}" for k, n in t["findings"].items()) or "none"
    console.print(
        f"[bold]{t['streams']}[/] streams, [bold]{t['messages']}[/] messages, [bold]{t['events']}[/] events "
        f"(on their connections: [green]{t['acked']} acked[/], [red]{t['unacked']} unacked[/], "
        f"{t['ack_unknown']} unknown); findings: {sev}"
    )
    for name, d in r["delivery"].items():
        console.print(_delivery_line(name, d, filtered, multi))
    if r["findings"]:
        table = new_table(console, "Findings")
        for col in ("severity", "code", "count", "first frames", "example"):
            table.add_column(col, no_wrap=col in ("severity", "code", "count"))  # the example wraps
        for f in r["findings"]:
            places = f.get("first_at") or [{"capture": "", "frame": n} for n in f["first_frames"]]
            table.add_row(
                Text(f["severity"], style=SEVERITY_STYLE[f["severity"]]),
                literal(f["code"]),
                str(f["count"]),
                literal(", ".join(_at(p["capture"], p["frame"], multi) for p in places)),
                literal(f["example"]),
            )
        console.print(table)
    for name, h in r["protocols"].items():
        lines = _highlights(h, multi)
        if getattr(console, "plain", False):
            console.print(literal(name, style="bold"))
            console.print(Group(*(Text("  ").append_text(line) for line in lines)))
        else:
            console.print(Panel(Group(*lines), title=literal(name), title_align="left", expand=False))


def _stream_cells(s: dict[str, Any], multi: bool) -> tuple[Cell, ...]:
    cells: list[Cell] = list(_stream_texts(tuple(s[name] for name in ROW_VALUES), multi))
    cells[8] = Text(cells[8], style="bold red" if s["unacked"] else "")  # the unacked column
    return tuple(cells)


def _stream_texts(v: tuple, multi: bool) -> list[str]:
    """A stream's values (`ROW_VALUES`) as the escaped text of its cells, for `print_rows` (every
    stream, no colour) and `_stream_cells`: numbers need no escaping, texts from the capture go
    through `clean` (200,000 rows of 15 cells)."""
    # by index, not unpacked: this runs for every stream
    return [
        clean(_at(v[0], v[1], multi)), clean(v[2] or ""), clean(v[3] or ""), clean(v[4]), clean(v[5]),
        *map(str, v[6:15]), ",".join(v[15]),
    ]  # fmt: skip


def _streams(console: Console, r: dict[str, Any], wide: bool, multi: bool, every: InspectFold | None) -> None:
    """The Streams table: the listed streams (every one with `every`), then a line per group of
    the others (cli/fold.py), then the TLS streams listed."""
    listed: list[dict[str, Any]] = r["streams"]
    table = every.every_table(multi) if every is not None and r["totals"]["streams"] > BIG else None
    if table is not None:  # --all at any size: laid out once, from the fold's columns (cli/tables.py)
        widths, cells = table
        print_known(console, "Streams", STREAM_COLUMNS, widths, cells, wide)
        listed = list(islice(every.every_tls(), BIG))  # for the lines under the table
    elif every is not None and r["totals"]["streams"] > BIG:  # (wide characters in a capture's name)
        rows = (_stream_texts(tuple(s[n] for n in ROW_VALUES), multi) for s in every.every_row())
        print_rows(console, "Streams", STREAM_COLUMNS, rows, wide, escaped=True)
        listed = list(islice(every.every_tls(), BIG))
    elif every is not None:
        listed = list(every.every_row())
        print_fitted(console, "Streams", STREAM_COLUMNS, [_stream_cells(s, multi) for s in listed], wide)
    else:
        print_fitted(console, "Streams", STREAM_COLUMNS, [_stream_cells(s, multi) for s in listed], wide)
    groups = r.get("stream_groups") or []
    for g in groups[:GROUP_LINES]:
        console.print(literal(group_line(g, more=bool(listed))))
    rest = groups[GROUP_LINES:]
    if rest:
        n = sum(g["streams"] for g in rest)
        console.print(literal(f"{n:,} more streams in {len(rest):,} other groups"))
    if groups:
        total = r["totals"]["streams"]
        console.print(
            f"({len(listed)} of {total:,} streams listed, the worst first; --all lists every stream)",
            style="dim",
            markup=False,
        )
    if r["totals"]["events"]:
        console.print(ACK_NOTE, style="dim", markup=False)
    for s in listed:
        if s["tls"]:
            where = _at(s["capture"], s["stream"], multi)
            console.print(Text.assemble(f"stream {clean(where)}: ", literal(describe_tls(s["tls"]))))
    folded_tls = (r.get("streams_folded") or {}).get("tls", 0) if groups else 0
    if folded_tls:
        console.print(literal(f"{folded_tls:,} more TLS streams (--all, or --json, lists them)"))


def _at(capture: str, number: int | None, multi: bool) -> str:
    """A stream id or frame number as a user finds it again: `capture:N` when several captures were
    read (the capture as given on the command line), else `N`."""
    if number is None:
        return ""
    return f"{capture}:{number}" if multi else str(number)


def _delivery_line(protocol: str, d: dict[str, Any], filtered: bool = False, multi: bool = False) -> str:
    """One line answering "was anything lost?" for a protocol with acknowledgements; under a filter
    it says that it covers the whole capture (the verdict is made of every event, unfiltered)."""
    scope = ", whole capture: the filters do not apply" if filtered else ""
    if protocol == "cql":
        return _requests_line(d, scope)
    at_least = "at least " if d["lower_bounds"] else ""
    if protocol == "courier":
        resent = (
            f"{d['payloads_recovered_by_resend']} payloads delivered only by a resend, "
            f"{d['payloads_delivered_twice']} delivered twice"
        )
    else:
        resent = f"{d['recovered_by_resend']} only by a resend, {d['delivered_twice']} twice"
    events = f"{d['distinct_events']} distinct events"
    if protocol == "courier":  # sendings of a payload are counted once (the panel counts sendings)
        events += f" in {d['payloads']} distinct payloads"
    line = f"[bold]delivery ({protocol}{scope})[/]: {events}, {d['delivered']} delivered ({resent})"
    unknown = d.get("ack_unknown", 0)
    if unknown:
        line += f", [yellow]{unknown} with no ACK in the capture[/]"
    if d["never_acknowledged"]:
        where = ", ".join(
            f"stream {w['stream']} frame {_at(w.get('capture', ''), w['frame'], multi)}"
            + "".join(f" {k} {w[k]}" for k in ("seq", "uuid") if k in w)
            for w in d["never_acknowledged_at"]
        )
        where = escape(clean(where))  # (capture names are the user's, not markup)
        return line + f"; [bold red]{at_least}{d['never_acknowledged']} never acknowledged[/] ({where})"
    return line + "; [green]every event acknowledged[/]" if not unknown else line


def _requests_line(d: dict[str, Any], scope: str) -> str:
    """CQL's answer to "was anything lost?": its requests by outcome (docs/records.md, "Delivery")."""
    line = (
        f"[bold]requests (cql{scope})[/]: {d['requests']} requests, {d['answered']} answered, "
        f"{d['error']} answered with an error"
    )
    if d["unknown"]:
        line += f", [yellow]{d['unknown']} whose response may lie beyond the capture[/]"
    if d["unanswered"]:
        return line + f"; [bold red]{d['unanswered']} never answered[/]"
    return line + "; [green]every request answered[/]" if not d["unknown"] else line


def _highlights(h: dict[str, Any], multi: bool = False) -> list[Text]:
    """A protocol's highlights, one line each, in words; a duration with its unit (ms); maps of
    names from the wire (gate streams) escaped; an empty map or an absent value left out."""
    lines = []
    for key, value in h.items():
        if key == "slowest":
            if value:
                lines.append(Text("slowest:"))
            for p in value:
                lines.append(
                    literal(
                        f"  {ms(float(p['latency_ms']))}  stream {_at(p['capture'], p['stream'], multi)} "
                        f"id {p['cql_stream']}  {p['request']} (frame {_at(p['capture'], p['request_frame'], multi)})"
                        f" → {p['response']} (frame {_at(p['capture'], p['response_frame'], multi)})"
                    )
                )
        elif key == "events":
            lines.append(
                Text(
                    f"events: {value['events']} = {value['acked']} acked + {value['unacked']} unacked + "
                    f"{value['ack_unknown']} unknown, on their own connections"
                )
            )
        elif isinstance(value, dict):
            if value:
                lines.append(literal(f"{label(key)}: " + ", ".join(f"{k} {v}" for k, v in value.items())))
        elif value is not None:
            unit = unit_of(key)
            if unit:
                text = ms(value)
            else:
                shown = human_value(key, value)
                text = shown[1] if shown else ""
            lines.append(literal(f"{label(key)}: {text}"))
    return lines


def _key_fields(rec: Message | Finding) -> Text:
    """A record's details on one line: a finding's sentence, or a message's scalar fields in human
    form (cli/text.py), absent ones left out."""
    if isinstance(rec, Finding):
        return literal(f"{rec.code}: {rec.message}")
    parts = [f"{k}={v}" for k, v in _human_scalars(rec.fields, rec.protocol)][:6]
    if rec.event is not None:
        parts.append(f"acked={_acked(rec.acked)}")
    return literal(" ".join(parts))


def _acked(acked: bool | None) -> str:
    return "unknown" if acked is None else "yes" if acked else "no"


def _human_scalars(fields: dict[str, Any], protocol: str | None) -> Iterator[tuple[str, str]]:
    for key, value in fields.items():
        if not isinstance(value, dict | list):
            shown = human_value(key, value, protocol)
            if shown is not None:
                yield shown


REORDER_ROWS = 10_000  # rows of --stream held to print them in frame order
INFO_TEXT = 80  # characters of an event's message or a query in the Info column


def _show_streams(console: Console, session: Session) -> None:
    """`--stream N`: its records as lines, as they come, in frame order, with bounded memory.

    Records do not come in frame order: an event (and its window) waits in the core for its ACK,
    a CQL request for its response (docs/records.md, "Delivery"). The lines wait in a heap by frame
    of at most REORDER_ROWS and the lowest frame goes out when it is full, so the output is in
    frame order whenever no record comes more than REORDER_ROWS lines late (a record later than
    that is printed where it falls, marked `late`; none is dropped), and memory stays bounded on
    a stream of any length. Time is in seconds from the stream's first record, like tshark's
    relative time; Info says each message in one line (cli/inspect.py `_info`)."""
    multi = len(session.paths) + bool(session.raw) > 1
    out = console.file
    heap: list[tuple[int, int, list]] = []
    requests: dict[str, list] = {}  # CQL request rows waiting for their response, by event_id
    state = {"start": None, "last": -1, "key": 0, "n": 0}
    out.write(f"{'frame':>{12 if multi else 7}}  {'time s':>11}  dir  {'kind':<12}  info\n")

    def emit(row: list) -> None:
        key, ts = row[0], row[1]
        if state["start"] is None and ts is not None:
            state["start"] = ts
        rel = f"{(ts - state['start']) / 1e9:.6f}" if ts is not None and state["start"] is not None else ""
        info = row[5] if key >= state["last"] else f"(late) {row[5]}"
        state["last"] = max(state["last"], key)
        out.write(
            f"{row[2]:>{12 if multi else 7}}  {rel:>11}  {row[3]:<3}  {row[4]:<12}  {info}".rstrip() + "\n"
        )

    for item in session.items():
        if isinstance(item, Message | Finding):
            key = item.frame if item.frame is not None else state["key"]
            state["key"] = key
            if isinstance(item, Finding):
                kind, info = item.severity.value, f"{item.code}: {item.message}"
            else:
                kind, info = item.kind, _info(item)
            row = [
                key,
                item.ts,
                _at(item.capture, item.frame, multi),
                item.direction.value if item.direction else "",
                kind,
                clean(info),
            ]
            if isinstance(item, Message) and item.protocol == "cql":
                _pair(item, row, requests)
            state["n"] += 1
            heapq.heappush(heap, (key, state["n"], row))
            if len(heap) > REORDER_ROWS:
                emit(heapq.heappop(heap)[2])
        elif isinstance(item, CaptureInfo):  # an input ended: nothing of it is still to come
            while heap:
                emit(heapq.heappop(heap)[2])
            requests.clear()
            state.update(start=None, last=-1)
    while heap:
        emit(heapq.heappop(heap)[2])
    out.flush()


def _pair(m: Message, row: list, requests: dict[str, list]) -> None:
    """A CQL request's line says its outcome once its response comes (it comes just after it:
    the request waits in the core for it): "QUERY SELECT … [ONE] → Rows 3, 0.360 ms"."""
    event_id = m.event_id
    if m.fields.get("request_opcode") is None:  # a request
        if event_id is not None and m.delivery in ("answered", "error"):
            requests[event_id] = row
            if len(requests) > REORDER_ROWS:
                requests.pop(next(iter(requests)))
        return
    request = requests.pop(event_id, None) if event_id is not None else None
    if request is not None:
        latency = m.fields.get("latency_ns")
        took = f", {ms(latency / 1e6)}" if isinstance(latency, int) else ""
        request[5] += clean(f" → {_cql_outcome(m)}{took}")


def _short(text: object, n: int = INFO_TEXT) -> str:
    t = clean(" ".join(str(text).split()))
    return t if len(t) <= n else t[: n - 1] + "…"


def _cql_outcome(m: Message) -> str:
    f = m.fields
    if m.kind == "error":
        return f"ERROR {f.get('error_name') or f.get('error_code')}"
    if f.get("result_kind") == "rows":
        return f"Rows {f.get('rows_count')}"
    kind = f.get("result_kind")
    return f"{m.kind.upper()}{' ' + str(kind) if kind else ''}"


def _info(m: Message) -> str:
    """One line saying what a message is, like tshark's Info column."""
    f = m.fields
    if m.event is not None:  # a log event: its sequence, the start of its message, its ACK
        doc = m.event
        text = doc.get("message") if isinstance(doc, dict) else None
        if text is None:
            text = dumps_line(doc).decode("utf-8", "replace").strip()
        seq = f"seq {f['seq']} " if f.get("seq") is not None else ""
        if m.acked:
            ack = f"acked at frame {f['ack_frame']}" if f.get("ack_frame") is not None else "acked"
        else:
            ack = "not acked" if m.acked is False else "ACK unknown"
        return f"{seq}{_short(text)}  [{ack}]"
    if m.protocol == "cql":
        if f.get("request_opcode") is not None:
            latency = f.get("latency_ns")
            took = f", {ms(latency / 1e6)}" if isinstance(latency, int) else ""
            return f"{_cql_outcome(m)} to {str(f['request_opcode']).upper()} at frame {f.get('request_frame')}{took}"
        what = f.get("query") or f.get("prepared_id") or ""
        consistency = f" [{f['consistency']}]" if f.get("consistency") else ""
        line = f"{m.kind.upper()} {_short(what)}".rstrip() + consistency
        if m.delivery in ("unanswered", "unknown"):
            line += " → never answered" if m.delivery == "unanswered" else " → answer not in the capture"
        return line
    if m.protocol == "lumberjack":
        if m.kind == "window":
            first, last = f.get("seq_first"), f.get("seq_last")
            seqs = f" (seq {first}–{last})" if first is not None else ""
            ack = f", acked at frame {f['ack_frame']}" if f.get("ack_frame") is not None else ", not acked"
            return f"window {f.get('window')}: {f.get('count')} events{seqs}{ack}"
        if m.kind == "ack":
            if f.get("keepalive"):
                interval = f.get("interval_ms")
                return "keep-alive ACK" + (f", {ms(interval)} after the last" if interval is not None else "")
            return f"ACK {f.get('value')} (window {f.get('window')}, {f.get('acked_events')} events)"
        if m.kind == "compressed":
            return f"compressed window {f.get('window')}: {f.get('compressed_length')} → {f.get('inflated_length')} bytes"
    return " ".join(f"{k}={v}" for k, v in _human_scalars(f, m.protocol))[:200]


def _show_frame(console: Console, session: Session, frame: int) -> None:
    """What frame N carries, in each input: with several, each capture is named (`capture:N`), as
    frame N of one file has nothing to do with frame N of another."""
    multi = len(session.paths) + bool(session.raw) > 1
    records: list[Message | Finding] = []
    chunks: list[Chunk] = []
    secrets: list[tuple] = []  # (stream, direction, start, end) of records holding a redacted credential
    hide = not session.options.show_secrets
    for item in session.items():
        if isinstance(item, Chunk) and item.frame == frame:
            chunks.append(item)
        elif isinstance(item, Message | Finding):
            if item.frame == frame:
                records.append(item)
            if hide and chunks and isinstance(item, Message) and REDACTED in item.fields.values():
                secrets.append((item.stream, item.direction, item.offset, item.offset + item.length))
        elif isinstance(item, CaptureInfo) and multi:  # an input's items end with its summary
            with session.paused():
                if frame <= item.packets:
                    _frame_of_one(console, f"{item.capture}:{frame}", records, chunks, secrets)
                elif not item.error:
                    console.print(
                        literal(f"{item.capture}: no frame {frame} (it has {item.packets} packets)")
                    )
            records, chunks, secrets = [], [], []
    packets = max((c.packets for c in session.captures), default=0)
    if frame > packets and not exit_code(session):  # else no input could be read: its line says why
        error(f"frame {frame} is not in the input (it has {packets} packets)")
        return
    if not multi:
        _frame_of_one(console, f"frame {frame}", records, chunks, secrets)


def _frame_of_one(
    console: Console, name: str, records: list[Message | Finding], chunks: list[Chunk], secrets: list[tuple]
) -> None:
    """One capture's frame: its records as trees, then the hex of its TCP payload."""
    if not records and not chunks:
        console.print(literal(f"{name}: no TCP payload and no records"))
        return
    plain = getattr(console, "plain", False)
    for rec in records:
        d = record_dict(rec)
        head = literal(
            f"{name} {d['protocol']} {d.get('kind') or d.get('code')}  stream {d['stream']} "
            f"{rec.direction.value if rec.direction else ''}".rstrip(),
            style="bold" if isinstance(rec, Message) else SEVERITY_STYLE[rec.severity.value],
        )
        skip = ("record", "capture", "protocol", "kind", "code")
        fields = {k: v for k, v in d.items() if k not in skip}
        if isinstance(rec, Message) and rec.event is not None:
            fields["acked"] = _acked(rec.acked)  # an event's unknown ACK is a fact, not an absence
        tree = Tree(head)
        _tree(tree, fields, rec.protocol)
        console.print(_indented(tree) if plain else tree)
    for chunk in chunks:
        masked = {
            i
            for st, d, lo, hi in secrets
            if st == chunk.stream and d is chunk.direction
            for i in range(lo, hi)
        }
        console.print(
            _hexdump(
                chunk,
                [r for r in records if r.stream == chunk.stream and r.direction is chunk.direction],
                masked,
                name,
            )
        )


def _tree(node: Tree, value: Any, protocol: str | None = None) -> None:
    """A record's fields under `node`: in human form (cli/text.py), absent ones left out; keys and
    values from the wire (an event's document) shown literally."""
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, dict | list) and v:  # an event's document is data, not record fields
                _tree(node.add(literal(k)), v, None if k == "event" else protocol)
                continue
            shown = human_value(str(k), v, protocol) if protocol is not None else _document_value(k, v)
            if shown is not None:
                node.add(literal(f"{shown[0]}: {shown[1]}"))
    else:
        for i, v in enumerate(value):
            if isinstance(v, dict | list) and v:
                _tree(node.add(literal(f"[{i}]")), v, protocol)
            else:
                node.add(literal(f"[{i}] {_document_value(i, v)[1]}"))


def _document_value(key: object, value: Any) -> tuple[str, str]:
    """A value inside an event's document: its JSON literal for null, true and false."""
    if value is None or isinstance(value, bool):
        return str(key), "null" if value is None else "true" if value else "false"
    if isinstance(value, str):
        return str(key), clean(value) if value else '""'
    if isinstance(value, dict | list):
        return str(key), "{}" if isinstance(value, dict) else "[]"
    return str(key), str(value)


def _indented(tree: Tree) -> Text:
    """A tree as indented lines, no guide lines: the plain form."""
    out = Text()

    def walk(node: Tree, depth: int) -> None:
        out.append("  " * depth)
        out.append_text(node.label if isinstance(node.label, Text) else Text(str(node.label)))
        out.append("\n")
        for child in node.children:
            walk(child, depth + 1)

    walk(tree, 0)
    out.rstrip()
    return out


def _hexdump(chunk: Chunk, records: list[Message | Finding], masked: set[int], name: str = "") -> Text:
    """The frame's payload, 16 bytes a line, offsets in stream terms; record bytes highlighted.

    Bytes of records whose credentials are redacted (`masked` stream offsets) print as `**`, so the
    dump does not leak what the decoded view hides; --show-secrets shows them.
    """
    marks: set[int] = set()
    for r in records:
        if r.offset is None:
            continue
        length = r.length if isinstance(r, Message) and r.length else 1
        marks.update(range(r.offset, r.offset + length))
    where = f"stream {chunk.stream} {chunk.direction.value} bytes {chunk.offset}..{chunk.offset + len(chunk.data)}"
    out = literal(f"{name}: {where}\n" if name else f"{where}\n")
    data = chunk.data[:HEX_CONTEXT]
    for line in range(0, len(data), 16):
        row = data[line : line + 16]
        out.append(f"{chunk.offset + line:10d}  ")
        at = chunk.offset + line
        for i, b in enumerate(row):
            text = "** " if at + i in masked else f"{b:02x} "
            out.append(text, style="reverse" if at + i in marks else "")
        out.append("   " * (16 - len(row)) + " ")
        out.append(
            "".join("*" if at + i in masked else chr(b) if 32 <= b < 127 else "." for i, b in enumerate(row))
        )
        out.append("\n")
    if len(chunk.data) > HEX_CONTEXT:
        out.append(f"... {len(chunk.data) - HEX_CONTEXT} more bytes\n")
    return out
