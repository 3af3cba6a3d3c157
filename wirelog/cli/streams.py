"""`wirelog streams`: the TCP streams of captures, or the raw bytes of one direction."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import click
import orjson
from rich.console import Console

from wirelog.cli import exits
from wirelog.cli.common import Session, error, exit_code, input_options, make_console
from wirelog.cli.params import STREAM_ID
from wirelog.cli.progress import progress
from wirelog.cli.summary import describe_tls
from wirelog.cli.tables import BIG, Cell, Column, cell, new_table, print_rows
from wirelog.cli.text import clean
from wirelog.cli.unmatched import ids
from wirelog.engine.local import Item
from wirelog.export.json import dumps_line, stream_dict
from wirelog.model import Chunk, Direction, Gap, StreamInfo, StreamLines

EXAMPLES = """
\b
Examples:
  wirelog streams capture.pcap
  wirelog streams 'captures/*.pcapng' --json | jq 'select(.gaps > 0)'
  wirelog streams capture.pcap --dump 3 --direction s2c > reply.bin
"""


@click.command(epilog=EXAMPLES)
@input_options
@click.option("--json", "as_json", is_flag=True, help="One JSON object per stream (NDJSON).")
@click.option(
    "--dump", "dump", type=STREAM_ID, metavar="ID", help="Write the reassembled bytes of stream ID to stdout."
)
@click.option(
    "--direction",
    type=click.Choice(["c2s", "s2c"]),
    default="c2s",
    show_default=True,
    help="With --dump: which direction.",
)
@click.option("--plain", is_flag=True, help="The table as plain aligned text, no colour (as in a pipe).")
@click.pass_context
def streams(ctx, as_json, dump, direction, plain, **params):
    """List the TCP streams in CAPTURE... (files, globs, - for stdin)."""
    wanted = params["streams"]
    # the core writes the summaries (no Python object per stream) unless a filter picks some
    session = Session(params, decode=False, chunks=dump is not None, stream_lines=dump is None and not wanted)
    if dump is not None:
        if len(session.paths) + (1 if session.raw else 0) > 1:
            raise click.UsageError("--dump takes exactly one capture")
        with progress(session, "streams", records="", stdout_busy=True):
            code = _dump(session, dump, Direction(direction))
        ctx.exit(code)
    with progress(session, "streams", records="", stdout_busy=as_json):
        if as_json:
            _json(session, frozenset(wanted))
        else:
            _table(session, frozenset(wanted), plain)
    session.tell_unmatched()
    ctx.exit(exit_code(session))


def _json(session: Session, wanted: frozenset[int]) -> None:
    """One NDJSON line per stream, captures in name order (each read in turn, so its lines are
    written as its streams end), streams in id order."""
    out = sys.stdout.buffer
    inputs = sorted(
        [(path, [path], False) for path in session.paths] + ([("raw", [], True)] if session.raw else [])
    )
    for _, paths, raw in inputs:
        infos: list[StreamInfo] = []  # raw dumps, and captures when a filter is given
        for item in session.items(paths, raw=raw):
            if isinstance(item, StreamLines):
                out.write(item.data)
            elif isinstance(item, StreamInfo) and (not wanted or item.stream in wanted):
                infos.append(item)
        for info in sorted(infos, key=lambda i: i.stream):
            out.write(dumps_line(stream_dict(info)))
    out.flush()


def _dump(session: Session, stream: int, direction: Direction) -> int:
    """Follow TCP Stream (raw): the bytes in order; gaps are reported on stderr, not filled."""
    out = sys.stdout.buffer
    seen = False
    for item in session.items():
        if isinstance(item, Chunk | Gap) and item.stream == stream and item.direction is direction:
            if isinstance(item, Chunk):
                out.write(item.data)
            else:
                error(
                    f"stream {stream} {direction.value}: {item.length} bytes missing at offset {item.offset}"
                )
        elif isinstance(item, StreamInfo) and item.stream == stream:
            seen = True
    out.flush()
    if not seen and not exit_code(session):  # else no input could be read: its line says why
        # the one thing asked for is not there: a usage error, as a missing input is
        error(
            f"--dump {stream}: no stream {stream} in the input (its streams: {ids(sorted(session.seen.streams))})"
        )
        return exits.UNUSABLE
    return exit_code(session)


COLUMNS = (
    Column("capture", hide_if="same"),  # with several inputs
    Column("id", "right"),
    Column("client"),
    Column("server"),
    Column("first", drop=4),
    Column("last", drop=3),
    Column("pkts c→s", "right", drop=2),
    Column("pkts s→c", "right", drop=1),
    Column("bytes c→s", "right"),
    Column("bytes s→c", "right"),
    Column("gaps", "right"),
    Column("flags", drop=5),
    Column("tls", drop=6, hide_if="empty"),  # when some stream is TLS
)


def _row(d: dict[str, Any]) -> list[str]:
    """A stream's cells, escaped (cli/text.py), from its JSON object (`stream_dict`, or the line the
    core wrote)."""
    return [
        clean(d["capture"]),
        str(d["stream"]),
        clean(d["client"]),
        clean(d["server"]),
        d["first_ts"] or "",
        d["last_ts"] or "",
        str(d["packets_c2s"]),
        str(d["packets_s2c"]),
        str(d["bytes_c2s"]),
        str(d["bytes_s2c"]),
        f"{d['gaps']} ({d['gap_bytes']} B)" if d["gaps"] else "0",
        ",".join(d["flags"]),
        clean(describe_tls(d["tls"])) if d["tls"] else "",
    ]


def _stream_rows(
    items: Iterable[Item], wanted: frozenset[int]
) -> Iterator[tuple[tuple[str, int], list[str]]]:
    """((capture, id), cells) of every stream: from the lines the core wrote (no Python object per
    stream but the parsed line), or from the summaries (a --stream filter, raw dumps)."""
    for item in items:
        if isinstance(item, StreamLines):
            for line in item.data.splitlines():
                d = orjson.loads(line)
                yield (d["capture"], d["stream"]), _row(d)
        elif isinstance(item, StreamInfo) and (not wanted or item.stream in wanted):
            yield (item.capture, item.stream), _row(stream_dict(item))


def _table(session: Session, wanted: frozenset[int], plain: bool = False) -> None:
    """The streams as a table, in (capture, id) order; the capture column when several inputs have
    streams, a `tls` column when some stream is TLS (its handshake, `describe_tls`). The capture
    (as given), the endpoints and the TLS names are shown literally (cli/text.py).

    Each stream is one row of text as soon as its summary comes (no StreamInfo is kept: at 200,000
    connections they would be ~300 MB); up to `BIG` rows are a Rich table, more are printed in
    fixed-width form (cli/tables.py: Rich took 38 s for 50,000 rows)."""
    console = make_console(plain)
    rows = _stream_rows(session.items(), wanted)
    first = list(itertools.islice(rows, BIG + 1))
    if session.meter is not None:
        session.meter.give_way()  # the rows from here on are printed as their streams end
    if len(first) <= BIG:
        first.sort(key=lambda kr: kr[0])
        values = [{r[i] for _, r in first} for i in range(len(COLUMNS))]
        shown = [
            c
            for c, v in zip(COLUMNS, values, strict=True)
            if c.hide_if is None or (len(v) > 1 if c.hide_if == "same" else v != {""})
        ]
        _rich_table(console, shown, [cells for _, cells in first])
        return
    print_rows(
        console,
        None,
        COLUMNS,
        itertools.chain(first, rows),
        keyed=True,
        escaped=True,
        hint="--json has every value",
    )


def _rich_table(console: Console, columns: Sequence[Column], rows: list[list[Cell]]) -> None:
    table = new_table(console, box=None)
    for column in columns:
        table.add_column(column.name, justify=column.justify)
    for row in rows:
        table.add_row(*(cell(row[COLUMNS.index(column)]) for column in columns))
    console.print(table)
