"""`wirelog validate`: findings only, and an exit status for CI and cron."""

from __future__ import annotations

import sys

import click

from wirelog.cli.common import Session, exit_code, input_options
from wirelog.export.json import dumps
from wirelog.model import Finding, Severity

EXAMPLES = """
\b
Examples:
  wirelog validate capture.pcap                      exit 1 when any error-level finding exists
                                                     (events never acknowledged = data loss included)
  wirelog validate 'night/*.pcap.gz' --fail-on warning --json > findings.ndjson
"""


@click.command(epilog=EXAMPLES)
@input_options
@click.option(
    "--fail-on",
    type=click.Choice([s.value for s in Severity]),
    default="error",
    show_default=True,
    help="Exit 1 when a finding at or above this severity exists.",
)
@click.option("--json", "as_json", is_flag=True, help="Findings as NDJSON records (docs/records.md).")
@click.pass_context
def validate(ctx, fail_on, as_json, **params):
    """Check CAPTURE... and print its findings.

    Exit status: 0 no finding at or above --fail-on, 1 some, 2 no input could be read.
    """
    session = Session(params)
    threshold = Severity(fail_on).rank
    failing = 0
    out = sys.stdout.buffer
    for item in session.items():
        if not isinstance(item, Finding):
            continue
        failing += item.severity.rank >= threshold
        if as_json:
            out.write(dumps(item))
        else:
            where = f"{item.capture}" + (f" stream {item.stream}" if item.stream is not None else "")
            where += f" frame {item.frame}" if item.frame is not None else ""
            where += (
                f" {item.direction.value}@{item.offset}" if item.direction and item.offset is not None else ""
            )
            out.write(f"{item.severity.value:7} {item.code}  {where}: {item.message}\n".encode())
    out.flush()
    code = exit_code(session)
    ctx.exit(code if code else (1 if failing else 0))
