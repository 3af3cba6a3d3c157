"""`wirelog streams`: the TCP streams of captures, or the raw bytes of one direction."""

from __future__ import annotations

import sys

import click

from wirelog.cli import exits
from wirelog.cli.common import Session, error, exit_code, input_options, make_console
from wirelog.cli.params import STREAM_ID
from wirelog.cli.summary import describe_tls
from wirelog.cli.tables import new_table
from wirelog.cli.text import literal
from wirelog.cli.unmatched import ids
from wirelog.export.json import dumps_line, rfc3339, stream_dict
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
    # --json: the core writes the summaries (no Python object per stream) unless a filter picks some
    session = Session(params, decode=False, chunks=dump is not None, stream_lines=as_json and not wanted)
    if dump is not None:
        if len(session.paths) + (1 if session.raw else 0) > 1:
            raise click.UsageError("--dump takes exactly one capture")
        ctx.exit(_dump(session, dump, Direction(direction)))
    if as_json:
        _json(session, frozenset(wanted))
    else:
        found = [
            i for i in session.items() if isinstance(i, StreamInfo) and (not wanted or i.stream in wanted)
        ]
        found.sort(key=lambda i: (i.capture, i.stream))
        _table(found, len({i.capture for i in found}) > 1, plain)
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


def _table(found: list[StreamInfo], show_capture: bool, plain: bool = False) -> None:
    """The streams as a table; a `tls` column when some stream is TLS (its handshake, `describe_tls`).
    The capture (as given), the endpoints and the TLS names are shown literally (cli/text.py)."""
    console = make_console(plain)
    tls = any(i.tls for i in found)
    table = new_table(console, box=None)
    if show_capture:
        table.add_column("capture")
    for name, justify in (
        ("id", "right"),
        ("client", "left"),
        ("server", "left"),
        ("first", "left"),
        ("last", "left"),
        ("pkts c→s", "right"),
        ("pkts s→c", "right"),
        ("bytes c→s", "right"),
        ("bytes s→c", "right"),
        ("gaps", "right"),
        ("flags", "left"),
    ):
        table.add_column(name, justify=justify)
    if tls:
        table.add_column("tls")
    for i in found:
        row = [
            str(i.stream),
            literal(i.client),
            literal(i.server),
            rfc3339(i.first_ts) or "",
            rfc3339(i.last_ts) or "",
            str(i.packets_c2s),
            str(i.packets_s2c),
            str(i.bytes_c2s),
            str(i.bytes_s2c),
            f"{i.gaps} ({i.gap_bytes} B)" if i.gaps else "0",
            ",".join(i.flags),
            *([literal(describe_tls(i.tls)) if i.tls else ""] if tls else []),
        ]
        table.add_row(*([literal(i.capture)] if show_capture else []), *row)
    console.print(table)
