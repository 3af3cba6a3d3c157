"""`wirelog validate`: findings only, and an exit status for CI and cron."""

from __future__ import annotations

import sys
from typing import BinaryIO

import click

from wirelog.cli.common import Session, exit_code, input_options
from wirelog.cli.output import silence_stdout
from wirelog.cli.progress import progress
from wirelog.cli.summary import CaptureLoss
from wirelog.cli.text import clean
from wirelog.export.json import dumps
from wirelog.model import CaptureInfo, Finding, Severity, StreamInfo, capture_loss_text

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

    Exit status: 0 no finding at or above --fail-on, 1 some, 2 no input could be read. The verdict
    covers every input even when the reader of stdout stops early (`| head`).
    """
    if params["kinds"] or params["events"]:
        raise click.UsageError(
            "validate lists findings, which --kind and --events drop: use convert with them"
        )
    session = Session(params, findings_only=True)  # no object is made for a message
    threshold = Severity(fail_on).rank
    out: BinaryIO | None = sys.stdout.buffer
    with progress(session, "validate", records="findings"):
        out, failing = _check(session, out, as_json, threshold)
    if out is not None:
        _write(out, b"", flush=True)  # what is still buffered
    session.tell_unmatched()
    code = exit_code(session)
    ctx.exit(code if code else (1 if failing else 0))


def _check(
    session: Session, out: BinaryIO | None, as_json: bool, threshold: int
) -> tuple[BinaryIO | None, int]:
    """Read the inputs and write their findings, each input's when it ends (with the bar, if any,
    off the screen meanwhile); returns stdout (None once its reader has gone) and the number of
    findings at or above `threshold`.

    An input's findings wait for its end, where its stream summaries say what the capture missed:
    that comes first, so that findings the capture's holes explain are read as such."""
    failing = 0
    held: list[Finding] = []
    loss = CaptureLoss()
    for item in session.items():
        if isinstance(item, Finding | StreamInfo):
            loss.note(item)
        if isinstance(item, Finding):
            failing += item.severity.rank >= threshold
            held.append(item)
        elif isinstance(item, CaptureInfo):
            text = capture_loss_text(loss.result())
            with session.paused():
                if text and as_json:  # stdout is the records' (docs/records.md)
                    click.echo(f"{clean(item.capture)}: {text}", err=True)
                elif text and out is not None:
                    out = _write(out, f"{'loss':7} {clean(item.capture)}: {text}\n".encode())
                for f in held:
                    if out is not None:
                        out = _write(out, dumps(f) if as_json else _line(f))
                if out is not None:
                    out = _write(out, b"", flush=True)  # on the screen before the bar comes back
            held, loss = [], CaptureLoss()
    return out, failing


def _line(f: Finding) -> bytes:
    """One finding on one line; the capture's name and the sentence (which may quote the wire)
    escaped: no control character or ESC from a capture reaches the terminal (cli/text.py)."""
    where = f"{clean(f.capture)}" + (f" stream {f.stream}" if f.stream is not None else "")
    where += f" frame {f.frame}" if f.frame is not None else ""
    where += f" {f.direction.value}@{f.offset}" if f.direction and f.offset is not None else ""
    return f"{f.severity.value:7} {f.code}  {where}: {clean(f.message)}\n".encode()


def _write(out: BinaryIO, data: bytes, flush: bool = False) -> BinaryIO | None:
    """`out`, or None once its reader has gone (EPIPE): the exit status is the verdict on every
    input, so the check goes on, silently, to the end (`validate x | head` fails as it should)."""
    try:
        out.write(data)
        if flush:
            out.flush()
    except BrokenPipeError:
        silence_stdout()
        return None
    return out
