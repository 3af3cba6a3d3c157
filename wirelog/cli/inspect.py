"""`wirelog inspect`: the answer on one screen, then drill-down by stream or frame."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from wirelog.cli.common import Session, error, exit_code, input_options, make_console
from wirelog.cli.params import FRAME_NUMBER
from wirelog.cli.progress import progress
from wirelog.cli.summary import Summary, describe_tls
from wirelog.cli.tables import Column, print_fitted
from wirelog.export.json import dumps_line, record_dict, rfc3339
from wirelog.model import REDACTED, Chunk, Finding, Message, capture_loss_text

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
@click.pass_context
def inspect(ctx, as_json, frame, wide, **params):
    """Summarise CAPTURE...: streams, protocols, messages, events, findings."""
    console = make_console()
    if frame is not None:
        session = Session(params, chunks=True)
        _show_frame(console, session, frame)
    elif params["streams"] and not as_json:
        session = Session(params)
        _show_streams(console, session)
    else:
        session = Session(params, records="summary")  # counts events, never reads them
        summary = Summary()
        with progress(console) as tick:
            for item in session.items():
                summary.add(item)
                tick(item)
        result = summary.result()
        if as_json:
            sys.stdout.buffer.write(dumps_line(result))
            sys.stdout.buffer.flush()
        else:
            _render(console, result, wide, filtered=session.options.keep.active)
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
    Column("span s", "right", drop=5),
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


def _render(console: Console, r: dict[str, Any], wide: bool = False, filtered: bool = False) -> None:
    """The summary; `filtered`: the records were filtered, which the core's delivery verdict is not."""
    loss = capture_loss_text(r["capture_loss"])
    if loss:  # first: what follows is read knowing that the capture has holes
        console.print(f"[bold yellow]capture loss[/]: {loss}")
    captures = []
    for c in r["captures"]:
        notes = ", ".join(
            x for x in (c["compression"], "truncated" if c["truncated"] else "", c["error"] or "") if x
        )
        span = f"{c['span_s']:.3f}" if c["span_s"] is not None else ""
        captures.append((
            c["capture"], c["format"], str(c["packets"]), str(c["tcp_packets"]), str(c["non_tcp_packets"]),
            c["first_ts"] or "", c["last_ts"] or "", span, ",".join(map(str, c["link_types"])), notes,
        ))  # fmt: skip
    print_fitted(console, "Captures", CAPTURE_COLUMNS, captures, wide)

    streams = []
    multi = len(r["captures"]) > 1
    for s in r["streams"]:
        ident = f"{Path(s['capture']).name}:{s['stream']}" if multi else str(s["stream"])
        unacked = Text(str(s["unacked"]), style="bold red" if s["unacked"] else "")
        streams.append((
            ident, s["protocol"] or "", s["version"] or "", s["client"], s["server"], str(s["messages"]),
            str(s["events"]), str(s["acked"]), unacked, str(s["ack_unknown"]), str(s["bytes_c2s"]),
            str(s["bytes_s2c"]), str(s["gaps"]), str(s["findings"]), ",".join(s["flags"]),
        ))  # fmt: skip
    print_fitted(console, "Streams", STREAM_COLUMNS, streams, wide)
    if any(s["events"] for s in r["streams"]):
        console.print(ACK_NOTE, style="dim")
    for s in r["streams"]:
        if s["tls"]:
            console.print(f"stream {s['stream']}: {describe_tls(s['tls'])}")
    t = r["totals"]
    sev = ", ".join(f"{n} {k}" for k, n in t["findings"].items()) or "none"
    console.print(
        f"[bold]{t['streams']}[/] streams, [bold]{t['messages']}[/] messages, [bold]{t['events']}[/] events "
        f"(on their connections: [green]{t['acked']} acked[/], [red]{t['unacked']} unacked[/], "
        f"{t['ack_unknown']} unknown); findings: {sev}"
    )
    for name, d in r["delivery"].items():
        console.print(_delivery_line(name, d, filtered))
    if r["findings"]:
        table = Table(title="Findings", title_justify="left", header_style="bold")
        for col in ("severity", "code", "count", "first frames", "example"):
            table.add_column(col, no_wrap=col in ("severity", "code", "count"))  # the example wraps
        for f in r["findings"]:
            table.add_row(
                Text(f["severity"], style=SEVERITY_STYLE[f["severity"]]),
                f["code"],
                str(f["count"]),
                ", ".join(map(str, f["first_frames"])),
                f["example"],
            )
        console.print(table)
    for name, h in r["protocols"].items():
        console.print(Panel(_highlights(h), title=name, title_align="left", expand=False))


def _delivery_line(protocol: str, d: dict[str, Any], filtered: bool = False) -> str:
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
            f"stream {w['stream']} frame {w['frame']}"
            + "".join(f" {k} {w[k]}" for k in ("seq", "uuid") if k in w)
            for w in d["never_acknowledged_at"]
        )
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


def _highlights(h: dict[str, Any]) -> Group:
    lines = []
    for key, value in h.items():
        if key == "slowest":
            lines.append(Text(f"{key}:"))
            for p in value:
                lines.append(
                    Text(
                        f"  {p['latency_ms']:.3f} ms  stream {p['stream']} id {p['cql_stream']}  {p['request']} (frame "
                        f"{p['request_frame']}) → {p['response']} (frame {p['response_frame']})"
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
            text = ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
            lines.append(Text(f"{key}: {text}"))
        elif value is not None:
            lines.append(Text(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}"))
    return Group(*lines)


def _key_fields(rec: Message | Finding) -> str:
    if isinstance(rec, Finding):
        return f"{rec.code}: {rec.message}"
    parts = [f"{k}={v}" for k, v in rec.fields.items() if not isinstance(v, dict | list)][:6]
    if rec.event is not None:
        parts.append(f"acked={rec.acked}")
    return " ".join(parts)


def _show_streams(console: Console, session: Session) -> None:
    table = Table(header_style="bold")
    for col in ("stream", "frame", "time", "dir", "offset", "kind", "details"):
        table.add_column(col)
    for item in session.items():
        if isinstance(item, Message | Finding):
            kind = (
                item.kind
                if isinstance(item, Message)
                else Text(item.severity.value, SEVERITY_STYLE[item.severity.value])
            )
            table.add_row(
                str(item.stream), str(item.frame or ""), rfc3339(item.ts) or "",
                item.direction.value if item.direction else "", str(item.offset if item.offset is not None else ""),
                kind, _key_fields(item),
            )  # fmt: skip
    console.print(table)


def _show_frame(console: Console, session: Session, frame: int) -> None:
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
    packets = max((c.packets for c in session.captures), default=0)
    if frame > packets and not exit_code(session):  # else no input could be read: its line says why
        error(f"frame {frame} is not in the input (it has {packets} packets)")
        return
    if not records and not chunks:
        console.print(f"frame {frame}: no TCP payload and no records")
        return
    for rec in records:
        d = record_dict(rec)
        label = (
            f"{d['protocol']} {d.get('kind') or d.get('code')}  stream {d['stream']} {d['direction'] or ''}"
        )
        tree = Tree(
            Text(label, style="bold" if isinstance(rec, Message) else SEVERITY_STYLE[rec.severity.value])
        )
        _tree(tree, {k: v for k, v in d.items() if k not in ("record", "capture")})
        console.print(tree)
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
            )
        )


def _tree(node: Tree, value: Any) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, dict | list) and v:
                _tree(node.add(str(k)), v)
            else:
                node.add(f"{k}: {v!r}" if isinstance(v, str) else f"{k}: {v}")
    else:
        for i, v in enumerate(value):
            if isinstance(v, dict | list) and v:
                _tree(node.add(f"[{i}]"), v)
            else:
                node.add(f"[{i}] {v}")


def _hexdump(chunk: Chunk, records: list[Message | Finding], masked: set[int]) -> Text:
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
    out = Text(
        f"stream {chunk.stream} {chunk.direction.value} bytes {chunk.offset}..{chunk.offset + len(chunk.data)}\n"
    )
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
