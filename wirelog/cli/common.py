"""Options shared by the commands, input expansion and user-facing errors."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

import click

from wirelog.cli.output import flush_if_stdin_waits
from wirelog.cli.params import REORDER_WINDOW, STREAM_ID, ByteSize, check_kinds, check_protocols, parse_time
from wirelog.cli.text import clean
from wirelog.cli.unmatched import Seen
from wirelog.engine import protocols
from wirelog.engine.filters import RecordFilter
from wirelog.engine.keylogs import KeyLogSource
from wirelog.engine.local import Item, Options, run
from wirelog.inputs.errors import CaptureError
from wirelog.inputs.sources import expand_inputs
from wirelog.model import CaptureInfo

if TYPE_CHECKING:
    from rich.console import Console

    from wirelog.cli.progress import Meter


def make_console(plain: bool = False) -> Console:
    """Rich console for stdout. On a terminal: its width (COLUMNS when set), colour, boxed tables.
    Elsewhere (a pipe, a file), or with `plain`: tables as plain aligned text, no box drawing, no
    colour, no spaces at the end of a line, and as wide as COLUMNS says (else 400 columns: whole
    lines instead of a table wrapped at 80). `console.plain` tells the printers which it is."""
    from rich.console import Console  # imported here: `convert` and `validate` print no tables

    class _Console(Console):
        plain = False

        def on_broken_pipe(self) -> None:
            """Raise EPIPE to main(), which ends every command alike (rich would exit 1)."""
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    console = _Console()
    if console.is_terminal and not plain:
        return console
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else None
    if width is None:
        width = console.width if console.is_terminal else PIPE_WIDTH
    console = _Console(file=Unpadded(sys.stdout), width=width, color_system=None, force_terminal=False)
    console.plain = True
    return console


PIPE_WIDTH = 400  # columns of output that is not a terminal, when COLUMNS does not say


class Unpadded:
    """A text stream that writes `out`'s lines without the spaces at their end (rich pads every
    line of a table to its width)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.pending = ""

    @property
    def encoding(self) -> str:
        return getattr(self.out, "encoding", None) or "utf-8"

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.out.fileno()

    def write(self, text: str) -> int:
        lines = (self.pending + text).split("\n")
        self.pending = lines.pop()
        if lines:
            self.out.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.out.write(self.pending.rstrip(" "))
            self.pending = ""
        self.out.flush()


def error(message: str) -> None:
    """One clear line on stderr (a file name or a reader's message escaped: cli/text.py)."""
    click.echo(f"wirelog: {clean(message)}", err=True)


def parse_decode_as(values: tuple[str, ...]) -> dict[int, str]:
    try:
        return dict(protocols.port_protocol(value) for value in values)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--decode-as") from None


def input_options(f: Callable) -> Callable:
    """CAPTURE... plus the options every command that reads captures takes."""
    for deco in reversed(
        [
            click.argument("captures", nargs=-1, metavar="CAPTURE..."),
            click.option(
                "--raw",
                "raw",
                multiple=True,
                type=click.Path(dir_okay=False),
                help="File of raw stream bytes (one direction); tcpflow-named pairs form one stream.",
            ),
            click.option(
                "--decode-as",
                "decode_as",
                multiple=True,
                metavar="PORT=PROTO",
                help=f"Decode streams on PORT as PROTO ({', '.join(protocols.names())}). Repeatable.",
            ),
            click.option(
                "--overlap",
                type=click.Choice(["first", "last"]),
                default="first",
                show_default=True,
                help="Which copy wins when TCP bytes are sent twice with different content.",
            ),
            click.option(
                "--reorder-window",
                "reorder_window",
                type=REORDER_WINDOW,
                default=2048,
                show_default=True,
                metavar="PACKETS",
                help="Packets a late TCP segment may come after the ACK that covers it before its "
                "bytes count as missing.",
            ),
            click.option(
                "--format",
                "input_format",
                type=click.Choice(["auto", "pcap", *protocols.names()]),
                default="auto",
                show_default=True,
                help="Input format: auto (captures; other files decoded by content as raw streams), "
                "pcap (captures only), or a protocol (every input is a raw stream of it).",
            ),
            click.option("--show-secrets", is_flag=True, help="Keep credentials (SASL tokens, API keys)."),
            click.option(
                "--held-memory",
                "held_memory",
                type=ByteSize(min=0),
                default="128m",
                show_default=True,
                envvar="WIRELOG_HELD_MEMORY",
                metavar="SIZE",
                help="Memory for events waiting for their ACK, all connections together; past it they "
                "wait in an unnamed temporary file in TMPDIR. Never changes the output. "
                "WIRELOG_HELD_MEMORY sets it too.",
            ),
            click.option(
                "--tls-keylog",
                "tls_keylogs",
                multiple=True,
                envvar="WIRELOG_TLS_KEYLOG",
                type=click.Path(exists=True, dir_okay=False),
                metavar="FILE",
                help="NSS key log (SSLKEYLOGFILE format) to decrypt TLS streams with. Repeatable; "
                "WIRELOG_TLS_KEYLOG holds a list like PATH. Key logs inside a pcapng are used anyway.",
            ),
            click.option(
                "--protocol",
                "protocols",
                multiple=True,
                metavar="NAME",
                callback=check_protocols,
                help=f"Only these protocols ({', '.join(protocols.record_protocols())}).",
            ),
            click.option(
                "--stream", "streams", multiple=True, type=STREAM_ID, metavar="ID", help="Only these streams."
            ),
            click.option(
                "--kind",
                "kinds",
                multiple=True,
                metavar="KIND",
                callback=check_kinds,
                help="Only messages of these kinds (docs/protocols/).",
            ),
            click.option("--events", is_flag=True, help="Only log events (messages carrying a document)."),
            click.option(
                "--since", metavar="TIME", help="Only records at or after TIME (RFC 3339 or epoch s)."
            ),
            click.option("--until", metavar="TIME", help="Only records before TIME (RFC 3339 or epoch s)."),
        ]
    ):
        f = deco(f)
    return f


def read_keylogs(paths: tuple[str, ...]) -> tuple[KeyLogSource, ...]:
    """The key logs, each read by the engine (in pieces); one that cannot be read is a usage error."""
    for path in paths:
        try:
            with open(path, "rb"):
                pass
        except OSError as e:
            raise click.BadParameter(f"{path}: {e.strerror}", param_hint="--tls-keylog") from None
    return tuple(KeyLogSource(path, path=path) for path in paths)


def build_options(params: dict, findings_only: bool = False, **overrides) -> Options:
    """Engine options from the shared command-line parameters (`findings_only`: the records kept
    are findings only, as `validate` reads them)."""
    keep = RecordFilter(
        protocols=frozenset(params["protocols"]),
        streams=frozenset(params["streams"]),
        kinds=frozenset(params["kinds"]),
        events=params["events"],
        since=parse_time(params["since"], "--since"),
        until=parse_time(params["until"], "--until"),
        findings=findings_only,
    )
    return Options(
        decode_as=parse_decode_as(params["decode_as"]),
        overlap=params["overlap"],
        reorder_window=params["reorder_window"],
        show_secrets=params["show_secrets"],
        tls_keylogs=read_keylogs(params["tls_keylogs"]),
        keep=keep,
        input_format=params["input_format"],
        limits=protocols.Limits(held_memory=params["held_memory"]),
        **overrides,
    )


def expand(captures: tuple[str, ...]) -> tuple[list[str], int]:
    """Expanded inputs and how many patterns failed (each failure printed)."""
    paths: list[str] = []
    failed = 0
    for pattern in captures:
        try:
            paths.extend(expand_inputs([pattern]))
        except CaptureError as e:
            error(str(e))
            failed += 1
    return paths, failed


class Session:
    """One command run over its inputs: yields pipeline items, prints input errors, keeps the tally."""

    def __init__(self, params: dict, **overrides) -> None:
        if not params["captures"] and not params["raw"]:
            raise click.UsageError("give at least one CAPTURE (or - for stdin) or --raw FILE")
        self.options = build_options(params, **overrides)
        self.paths, self.failed = expand(params["captures"])
        self.raw = list(params["raw"])
        self.captures: list[CaptureInfo] = []
        self.seen: Seen | None = None  # what items() saw (None: the inputs were read elsewhere)
        self.meter: Meter | None = None  # progress on a terminal (cli/progress.py) while it is shown

    def items(self, paths: list[str] | None = None, raw: bool = True) -> Iterator[Item]:
        """Pipeline items of `paths` (default: all inputs) and of the raw dumps when `raw`."""
        todo = self.paths if paths is None else paths
        seen = self.seen = self.seen or Seen()
        meter = self.meter
        watch = meter.watch if meter is not None else None
        for item in run(todo, self.raw if raw else (), self.options, flush_if_stdin_waits, watch=watch):
            if meter is not None:
                meter.tick(item)
            if isinstance(item, CaptureInfo):
                self.account(item)
            else:
                seen.add(item)
            yield item

    def paused(self) -> contextlib.AbstractContextManager:
        """The progress bar, if one is shown, off the screen while the command writes there."""
        return self.meter.paused() if self.meter is not None else contextlib.nullcontext()

    def tell_unmatched(self) -> None:
        """One line on stderr when a filter matched nothing in inputs that could be read (the
        status stays that of the inputs: cli/unmatched.py)."""
        if self.seen is None or exit_code(self):
            return
        line = self.seen.unmatched(self.options.keep, self.options.decode, not self.options.keep.findings)
        if line:
            error(line)

    def account(self, info: CaptureInfo) -> None:
        """An input is done: keep it for the exit code, print its error line if any."""
        self.captures.append(info)
        if info.error:  # named: a reader's message may not say which of several inputs it is about
            named = info.error.startswith(f"{info.capture}: ")
            error(info.error if named else f"{info.capture}: {info.error}")
            if not info.packets:
                self.failed += 1


def exit_code(session: Session) -> int:
    """2 when no input could be read at all, else 0."""
    usable = [c for c in session.captures if not (c.error and not c.packets and not c.bytes)]
    return 2 if not usable else 0
