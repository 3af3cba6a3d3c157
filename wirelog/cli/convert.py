"""`wirelog convert`: every decoded record of the inputs, as NDJSON."""

from __future__ import annotations

import click

from wirelog.cli.common import Session, exit_code, input_options, parse_decode_as
from wirelog.cli.output import open_output
from wirelog.engine.local import Options
from wirelog.export.json import JsonWriter
from wirelog.model import Finding, Message


@click.command()
@input_options
@click.option(
    "--to", "fmt", type=click.Choice(["json"]), default="json", show_default=True, help="Output format."
)
@click.option("-o", "--output", default="-", show_default=True, help="Output file, - for stdout.")
@click.option("--show-secrets", is_flag=True, help="Keep credentials (SASL tokens, API keys) in the output.")
@click.pass_context
def convert(ctx, captures, raw, decode_as, overlap, fmt, output, show_secrets):
    """Decode CAPTURE... and write every message and finding."""
    opts = Options(decode_as=parse_decode_as(decode_as), overlap=overlap, show_secrets=show_secrets)
    session = Session(captures, raw, opts)
    with open_output(output) as out:
        writer = JsonWriter(out)
        for item in session.items():
            if isinstance(item, Message | Finding):
                writer.write(item)
        writer.close()
    ctx.exit(exit_code(session))
