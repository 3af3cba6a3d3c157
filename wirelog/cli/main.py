"""Entry point: `wirelog COMMAND ...`."""

from __future__ import annotations

import click

from wirelog import __version__
from wirelog.cli.convert import convert
from wirelog.cli.streams import streams


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="wirelog")
def cli() -> None:
    """Forensics and conversion for log wire protocols in packet captures.

    Lumberjack v1/v2 (Beats, logstash-forwarder), Log Courier, Cassandra CQL v3-v5 and Vostok Hercules:
    reassemble TCP, decode every message, report what is wrong, export the data.
    """


cli.add_command(streams)
cli.add_command(convert)


def main() -> None:
    """Console-script entry point (click turns a closed stdout pipe into a quiet exit)."""
    cli()
