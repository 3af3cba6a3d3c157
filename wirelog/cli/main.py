"""Entry point: `wirelog COMMAND ...`; turns anything unexpected into one line (and a traceback with --debug)."""

from __future__ import annotations

import importlib
import sys

import click

from wirelog import __version__, _core
from wirelog.cli import exits
from wirelog.cli.address_space import reserve_less
from wirelog.cli.output import silence_stdout, stand_in_for_closed_stdout
from wirelog.cli.signals import Stopped, die_by, stopping_on_signals
from wirelog.engine.gc_tuning import tune_gc

LIBRARIES = (
    "click",
    "rich",
    "pyarrow",
    "lz4",
    "zstandard",
    "orjson",
    "pyspark",
)


def version_text() -> str:
    """wirelog's version and those of the libraries that decide its behaviour and speed."""
    from importlib import metadata  # imported here: ~20 ms of start-up that only --version needs

    lines = [f"wirelog {__version__} (Python {sys.version.split()[0]})"]
    for name in LIBRARIES:
        try:
            lines.append(f"  {name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            lines.append(f"  {name} not installed")
    return "\n".join(lines)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(version_text())
        ctx.exit()


EXAMPLES = """
\b
Examples:
  wirelog inspect capture.pcap                 what is in here, what is wrong
  wirelog validate capture.pcap --fail-on warning
  wirelog convert capture.pcap --to parquet -o events.parquet
  tcpdump -w - port 5044 | wirelog convert - --to json | jq .
"""


# command name → module defining it: a command's imports (rich tables for inspect, pyarrow for
# Parquet...) are paid only when that command runs, not by every `wirelog convert`.
COMMANDS = {
    "convert": "wirelog.cli.convert",
    "inspect": "wirelog.cli.inspect",
    "replay": "wirelog.cli.replay",
    "report": "wirelog.cli.report",
    "streams": "wirelog.cli.streams",
    "validate": "wirelog.cli.validate",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        return None if module is None else getattr(importlib.import_module(module), cmd_name)

    def invoke(self, ctx: click.Context) -> object:
        """The reader of stdout stopped reading (EPIPE): the command is done, quietly (cli/exits.py).
        Caught here, where click would turn it into status 1."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            silence_stdout()
            ctx.exit(exits.OK)


def _core_debug(_ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """With --debug, an internal.panic finding of the native core carries its Rust backtrace."""
    if value:
        _core.set_debug(True)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXAMPLES)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show versions.",
)
@click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    callback=_core_debug,
    help="Show a Python traceback for unexpected errors (and the core's Rust backtrace).",
)  # also read by main(), which is where unexpected errors are caught
def cli() -> None:
    """Forensics and conversion for log wire protocols in packet captures.

    Lumberjack v1/v2 (Beats, logstash-forwarder), Log Courier, Cassandra CQL v3-v5 and Vostok Hercules:
    reassemble TCP, decode every message, report what is wrong, export the data.
    """


def _run(args: list[str], debug: bool) -> tuple[int, str | None]:
    """The exit status and the line to print, returned once the failed run's frames are gone (an
    out-of-memory message needs the memory they held)."""
    try:
        code = cli.main(args, prog_name="wirelog", standalone_mode=False)
    except click.ClickException as e:
        e.show()
        return e.exit_code, None
    except Stopped as e:  # the writers have removed their temporary files on the way here
        die_by(e.signum)
        return 128 + e.signum, None  # if the signal is blocked
    except BaseException as e:
        # besides errors: PyO3's PanicException, a BaseException (a panic of the core outside the
        # guard that makes panics findings: memory ran out while it made Python objects)
        if not isinstance(e, Exception) and not exits.is_core_panic(e):
            raise
        if debug:
            import traceback  # already imported by main(): no memory needed here

            traceback.print_exc()
        return exits.outcome(e)
    return code or exits.OK, None


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: every way a run ends has a documented status (cli/exits.py)."""
    tune_gc()
    reserve_less()
    stand_in_for_closed_stdout()
    args = sys.argv[1:] if argv is None else argv
    debug = "--debug" in args
    if debug:
        # ~5 ms of start-up that only --debug needs; imported now, as importing it when memory has
        # run out fails too (a MemoryError in the handler ends the run with status 1)
        import traceback  # noqa: F401  (kept in sys.modules for _run)
    hooks = sys.unraisablehook, sys.excepthook
    if not debug:
        sys.unraisablehook = sys.excepthook = exits.quiet
        # memory the machine refuses to the core: the one line, not Rust's abort (two lines, a
        # backtrace with RUST_BACKTRACE, a core dump), which --debug keeps
        _core.on_out_of_memory(f"wirelog: {exits.OUT_OF_MEMORY_MESSAGE}", exits.OUT_OF_MEMORY)
    try:
        with stopping_on_signals():
            code, message = _run(args, debug)
    finally:
        sys.unraisablehook, sys.excepthook = hooks
        _core.on_out_of_memory(None)
    if message:
        click.echo(f"wirelog: {message}", err=True)
    sys.exit(code)
