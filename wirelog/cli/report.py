"""`wirelog report`: one self-contained HTML page of what happened, when and where."""

from __future__ import annotations

import click

from wirelog.cli.common import Session, error, exit_code, input_options, make_console
from wirelog.cli.params import FiniteRange
from wirelog.cli.progress import closing_line, progress
from wirelog.cli.summary import Summary
from wirelog.cli.text import literal
from wirelog.export.atomic import AtomicFile
from wirelog.export.report import data
from wirelog.export.report.page import ReportUnavailable, page, vl_convert_module, write_images
from wirelog.export.report.streams import StreamFold
from wirelog.model import CaptureInfo

EXAMPLES = """
\b
Examples:
  wirelog report capture.pcap -o report.html          open report.html in any browser, offline
  wirelog report 'night/*.pcap.gz' --top 50 -o night.html
  wirelog report capture.pcap -o r.html --svg charts/  the charts as SVG files too, for a ticket
"""
MAX_TOP = 10_000  # lanes: past a few hundred the timeline is unreadable anyway
MAX_STALL_S = 1e9  # about 31 years: the core holds it in i64 nanoseconds


@click.command(epilog=EXAMPLES)
@input_options
@click.option("-o", "--output", required=True, metavar="FILE", help="The HTML page to write.")
@click.option(
    "--top",
    type=click.IntRange(1, MAX_TOP),
    default=20,
    show_default=True,
    metavar="N",
    help=f"Connections with a lane of their own on the timeline (most events first; at most {MAX_TOP}); "
    "the rest share one.",
)
@click.option(
    "--stall",
    "stall_s",
    type=FiniteRange(0, MAX_STALL_S),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help=f"A request or window answered later than this (or never) is drawn as a stall (0 to {MAX_STALL_S:g}).",
)
@click.option("--svg", "svg_dir", metavar="DIR", help="Also write each chart as DIR/<chart>.svg.")
@click.option("--png", "png_dir", metavar="DIR", help="Also write each chart as DIR/<chart>.png.")
@click.pass_context
def report(ctx, output, top, stall_s, svg_dir, png_dir, **params):
    """Write a report of CAPTURE...: the verdict, a timeline of every connection, charts over time.

    The numbers are those of `wirelog inspect --json` for the same inputs and options.
    """
    console = make_console()
    try:
        vl_convert_module()  # before reading the inputs: say at once that it cannot draw
    except ReportUnavailable as e:
        raise click.UsageError(str(e)) from None
    session = Session(params, records="report", stall_ns=round(stall_s * 1e9), report_top=top)
    summary = Summary(per_stream=False)  # the streams are folded: the worst first, the rest counted
    streams = StreamFold()
    timelines: list[tuple[str, dict]] = []
    with progress(session, "report") as meter:
        for item in session.items():
            summary.add(item)
            streams.add(item)
            if isinstance(item, CaptureInfo) and item.timeline is not None:
                timelines.append((item.capture, item.timeline))
    session.tell_unmatched()
    code = exit_code(session)
    if code:  # no input could be read: no page (the errors are said)
        ctx.exit(code)
    inputs = [*params["captures"], *(word for r in params["raw"] for word in ("--raw", r))]
    result = data.build(streams.fold(summary.result(), inputs), timelines, top, stall_s)
    with AtomicFile(output) as f:
        f.write(page(result).encode())
    closing_line(
        f"report of {meter.records:,} records ({meter.streams:,} streams) written to {output} ({meter.read_note()})"
    )
    for fmt, directory in (("svg", svg_dir), ("png", png_dir)):
        if directory:
            try:
                paths = write_images(result, directory, fmt)
            except OSError as e:
                error(f"{directory}: {e.strerror or e}")
                ctx.exit(2)
            console.print(literal(f"{fmt}: {len(paths)} charts in {directory}"))
    ctx.exit(code)
