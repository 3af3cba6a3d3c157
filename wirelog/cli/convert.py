"""`wirelog convert`: every decoded record of the inputs as NDJSON, Parquet or Hercules events."""

from __future__ import annotations

import os
import stat

import click

from wirelog.cli.common import Session, build_options, error, exit_code, input_options
from wirelog.cli.params import ByteSize
from wirelog.cli.progress import closing_line, progress
from wirelog.cli.writing import RECORDS, SUFFIX, usable_cpus, write_records, write_tables
from wirelog.inputs import remote

EXAMPLES = """
\b
Examples:
  wirelog convert beats.pcap --to json | jq 'select(.record=="finding")'
  wirelog convert cql.pcapng.gz --to parquet -o cql.parquet
  wirelog convert 'captures/*.pcap' --to parquet -o out/      # one file per capture
  wirelog convert 'ring-*.pcap' --to parquet -o out/ -j 0    # all CPUs, one file per capture
  wirelog convert beats.pcap cql.pcap --to parquet --tables -o tables/   # typed tables
  wirelog convert 's3://bucket/incident/*.pcap.gz' --to json   # captures in S3 (gs://, hdfs://)
  tcpdump -w - port 5044 | wirelog convert - --events --to json
  wirelog convert beats.pcap --to hercules -o events.bin
  wirelog convert captures/ --engine spark --master 'local[2]' --to parquet -o dataset/
"""
MAX_JOBS = 1024  # worker processes; more than the CPUs only costs memory


@click.command(epilog=EXAMPLES)
@input_options
@click.option(
    "--to", "fmt", type=click.Choice(["json", "parquet", "hercules"]), default="json", show_default=True
)
@click.option(
    "-o",
    "--output",
    default="-",
    show_default=True,
    help="Output file, - for stdout, or a directory (one file per input).",
)
@click.option(
    "--tables",
    is_flag=True,
    help="With --to parquet: typed tables in -o DIR/ (connections, events, batches, cql, findings; "
    "docs/schema.md) instead of one file per input.",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(0, MAX_JOBS),
    default=1,
    show_default=True,
    help=f"Convert this many capture files at once (0: one per CPU; at most {MAX_JOBS}); output as with "
    "one job.",
)
@click.option(
    "--engine",
    type=click.Choice(["local", "spark"]),
    default="local",
    show_default=True,
    help="local: in this process. spark: Spark tasks through PySpark (docs/spark.md); -o is a directory.",
)
@click.option(
    "--master", metavar="URL", help="With --engine spark: local[N] or spark://... (not under spark-submit)."
)
@click.option(
    "--conf", "conf", multiple=True, metavar="KEY=VALUE", help="With --engine spark: a Spark setting."
)
@click.option(
    "--split-size",
    type=ByteSize(min=1 << 20),
    default="128m",
    show_default=True,
    metavar="SIZE",
    help="With --engine spark: an uncompressed capture larger than this is read by several tasks "
    "(bytes, or k, m, g: 64m, 1g; 1m to 1 PiB).",
)
@click.pass_context
def convert(ctx, fmt, output, tables, jobs, engine, master, conf, split_size, **params):
    """Decode CAPTURE... and write every message and finding.

    JSON: one record per line (docs/records.md). Parquet: one schema for all protocols, findings as
    rows with record='finding', or with --tables one typed table per subject (docs/schema.md). Hercules: messages as Hercules events (docs/hercules.md).
    """
    if tables and (fmt != "parquet" or output == "-"):
        raise click.UsageError("--tables writes Parquet files into a directory: --to parquet -o DIR/")
    if tables and engine == "local" and os.path.exists(output) and not os.path.isdir(output):
        raise click.UsageError(f"{output}: exists and is not a directory (--tables writes a directory)")
    if engine == "spark":
        ctx.exit(_convert_spark(fmt, output, master, conf, split_size, params, tables))
    if remote.is_uri(output):
        raise click.UsageError(
            f"{output}: the local engine writes local files; write here and copy it, or use --engine spark"
        )
    if _is_socket(output):
        raise click.UsageError(f"{output}: is a socket; give a file, a directory, a device or a FIFO")
    session = Session(params, records="tables" if tables else RECORDS[fmt])
    is_dir = output.endswith(os.sep) or os.path.isdir(output)
    if fmt == "parquet" and output == "-":
        raise click.UsageError("Parquet needs a file or directory: -o FILE.parquet or -o DIR/")
    jobs = jobs or usable_cpus()
    parallel = jobs > 1 and len(session.paths) > 1
    if parallel and ("-" in session.paths or session.raw):
        raise click.UsageError("--jobs converts capture files: read stdin or --raw dumps without it")
    if parallel and tables:
        raise click.UsageError("--tables writes one set of files for all inputs: without --jobs")
    if parallel and fmt == "hercules" and not is_dir:
        # events without a timestamp take the previous event's: one writer must see every input in order
        raise click.UsageError("--jobs with --to hercules writes one file per input: -o DIR/")
    with progress(session, "convert", stdout_busy=output == "-") as meter:
        if tables:
            written = write_tables(output, session.items())
        else:
            written = _write(session, fmt, output, is_dir, parallel, jobs)
    session.tell_unmatched()
    code = exit_code(session)
    if not code:  # else no input could be read, and its lines say why
        where = "stdout" if output == "-" else output
        closing_line(f"{written:,} records written to {where} ({meter.read_note()})")
    ctx.exit(code)


def _write(session: Session, fmt: str, output: str, is_dir: bool, parallel: bool, jobs: int) -> int:
    """The conversion proper; returns the number of records written."""
    if parallel:
        from wirelog.cli.parallel import convert_parallel  # multiprocessing: only when asked for
    if not is_dir:
        if parallel:
            return convert_parallel(session, fmt, output, jobs)
        return write_records(fmt, output, session.items(), threaded=True)
    os.makedirs(output, exist_ok=True)
    used: set[str] = set()
    outputs = [os.path.join(output, _output_name(path, fmt, used)) for path in session.paths]
    written = 0
    if parallel:
        written += convert_parallel(session, fmt, outputs, jobs)
    else:
        for path, out in zip(session.paths, outputs, strict=True):
            written += write_records(fmt, out, session.items([path], False), threaded=True)
    if session.raw:
        written += write_records(
            fmt, os.path.join(output, "raw" + SUFFIX[fmt]), session.items([]), threaded=True
        )
    return written


def _convert_spark(
    fmt: str,
    output: str,
    master: str | None,
    conf: tuple[str, ...],
    split_size: int,
    params: dict,
    tables: bool = False,
) -> int:
    """The same conversion as Spark tasks; inputs are expanded by the engine (directories too)."""
    import logging  # imported here, as pathlib below: start-up that only some conversions need

    from wirelog.engine.spark import SparkEngineError, convert_spark  # pyspark itself loads only here
    from wirelog.inputs.errors import CaptureError

    if not params["captures"] or "-" in params["captures"] or params["raw"]:
        raise click.UsageError("--engine spark reads capture files or directories (no stdin, no --raw)")
    if output == "-":
        raise click.UsageError("--engine spark writes a directory: -o DIR")
    settings = {}
    for item in conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--conf")
        settings[key] = value
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("wirelog: %(message)s"))
    engine_log = logging.getLogger("wirelog.engine")
    engine_log.addHandler(handler)
    engine_log.setLevel(logging.INFO)
    try:
        rows = convert_spark(
            list(params["captures"]),
            fmt,
            output,
            build_options(params),
            master,
            settings,
            split_size,
            tables=tables,
        )
    except (SparkEngineError, CaptureError) as e:
        error(str(e))
        return 2
    error(f"spark: {rows} rows written to {output}")
    return 0


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:  # no such file yet: a new output
        return False


CAPTURE_SUFFIXES = (".gz", ".zst", ".lz4", ".bz2", ".xz", ".pcapng", ".pcap", ".cap")


def _output_name(path: str, fmt: str, used: set[str]) -> str:
    """`dir/x.pcap.gz` → `x.parquet`; a name already taken in this run gets `-2`, `-3`, ..."""
    from pathlib import Path

    stem = "stdin" if path == "-" else Path(remote.without_query(path) if remote.is_uri(path) else path).name
    for suffix in CAPTURE_SUFFIXES:
        stem = stem.removesuffix(suffix)
    name, n = stem + SUFFIX[fmt], 1
    while name in used:
        n += 1
        name = f"{stem}-{n}{SUFFIX[fmt]}"
    used.add(name)
    return name
