"""Options shared by the commands, input expansion and user-facing errors."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import click

from wirelog.decoders import registry
from wirelog.engine.local import Item, Options, run
from wirelog.model import CaptureInfo
from wirelog.pcap.errors import CaptureError
from wirelog.pcap.sources import expand_inputs


def error(message: str) -> None:
    """One clear line on stderr."""
    click.echo(f"wirelog: {message}", err=True)


def parse_decode_as(values: tuple[str, ...]) -> dict[int, str]:
    out: dict[int, str] = {}
    for value in values:
        port, sep, proto = value.partition("=")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise click.BadParameter(f"{value!r} is not PORT=PROTOCOL", param_hint="--decode-as")
        try:
            registry.spec(proto)
        except KeyError as e:
            raise click.BadParameter(str(e.args[0]), param_hint="--decode-as") from None
        out[int(port)] = proto
    return out


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
                help=f"Decode streams on PORT as PROTO ({', '.join(registry.names())}). Repeatable.",
            ),
            click.option(
                "--overlap",
                type=click.Choice(["first", "last"]),
                default="first",
                show_default=True,
                help="Which copy wins when TCP bytes are sent twice with different content.",
            ),
        ]
    ):
        f = deco(f)
    return f


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

    def __init__(self, captures: tuple[str, ...], raw: tuple[str, ...], options: Options) -> None:
        if not captures and not raw:
            raise click.UsageError("give at least one CAPTURE (or - for stdin) or --raw FILE")
        self.paths, self.failed = expand(captures)
        self.raw = list(raw)
        self.options = options
        self.captures: list[CaptureInfo] = []

    def items(self) -> Iterator[Item]:
        for item in run(self.paths, self.raw, self.options):
            if isinstance(item, CaptureInfo):
                self.captures.append(item)
                if item.error:
                    error(item.error)
                    if not item.packets:
                        self.failed += 1
            yield item


def exit_code(session: Session) -> int:
    """2 when no input could be read at all, else 0."""
    usable = [c for c in session.captures if not (c.error and not c.packets and not c.bytes)]
    return 2 if not usable else 0
