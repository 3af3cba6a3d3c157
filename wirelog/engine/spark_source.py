"""The `wirelog` PySpark data source: `spark.read.format("wirelog").load(paths)` → records as rows.

Planning (on the driver) expands the paths and packs whole capture files into bins the way Spark packs
small files (largest first, a bin closes before it would exceed the target size, every file also
costs `openCostBytes`); a capture is never split, because TCP reassembly needs all of it. Each task
runs the in-process pipeline (`wirelog.engine.local.run`) over its bin's files and yields Arrow record
batches of at most `batchRows` rows as the records come, so a worker never holds a whole capture.

Rows have exactly the Parquet schema of `convert` (wirelog.export.parquet.SCHEMA): `ts` a Spark
TimestampType (microseconds, truncated toward the past) and `ts_ns` the exact nanoseconds. The tasks
of `convert --engine spark --to json` take the same records as the core's NDJSON lines instead
(`capture_lines`): the local engine's bytes.

A capture that cannot be read at all becomes a `capture.unreadable` finding row (a damaged one keeps
the packets before the damage and reports it as `pcap.truncated`/`pcap.corrupt`) and one that breaks the
pipeline a `capture.internal-error` row (after the rows it produced): one bad file never fails the job.

This module imports pyspark; only the Spark engine imports it (see wirelog/engine/spark.py).
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType, TimestampType

from wirelog.engine import protocols
from wirelog.engine.filters import RecordFilter
from wirelog.engine.gc_tuning import tune_gc
from wirelog.engine.keylogs import KeyLogSource
from wirelog.engine.local import REORDER_WINDOW, Options, run
from wirelog.engine.protocols import Limits
from wirelog.export import parquet, tables
from wirelog.export.json import dumps
from wirelog.inputs import remote
from wirelog.inputs.errors import CaptureError
from wirelog.inputs.sources import files_under
from wirelog.model import CaptureInfo, Finding, Message, RecordLines, RecordRows, Severity, TableRows

if TYPE_CHECKING:
    from collections.abc import Buffer

ARROW_SCHEMA = parquet.SCHEMA  # `ts` in microseconds: Spark's TimestampType as it is
_SPARK_TYPES = {
    pa.string(): StringType(),
    pa.int64(): LongType(),
    pa.bool_(): BooleanType(),
    pa.timestamp("us", tz="UTC"): TimestampType(),
}

BATCH_ROWS = 10_000
# A quarter of Spark's spark.sql.files.maxPartitionBytes: decoding a capture costs about a hundred
# times more per byte than scanning a columnar file, and the cost per byte varies several-fold between
# protocols, so small tasks (each still many seconds of work) are what keeps all cores busy to the end.
MAX_PARTITION_BYTES = 32 * 1024 * 1024
OPEN_COST_BYTES = 4 * 1024 * 1024  # Spark's spark.sql.files.openCostInBytes default
FINDINGS = ("include", "exclude", "only")


def spark_schema(table: str = "") -> StructType:
    """The Spark schema of the rows: ARROW_SCHEMA, or a typed table's (docs/schema.md)."""
    schema = tables.schemas()[table] if table else ARROW_SCHEMA
    return StructType([StructField(f.name, _SPARK_TYPES[f.type], f.nullable) for f in schema])


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """The reader's options, parsed from Spark's string options (names are case-insensitive)."""

    engine: Options
    findings: str = "include"  # include | exclude | only
    batch_rows: int = BATCH_ROWS
    max_partition_bytes: int = MAX_PARTITION_BYTES
    open_cost_bytes: int = OPEN_COST_BYTES
    min_partitions: int = 1
    basedir: str = ""  # relative paths are resolved against it (default: the planner's cwd)
    table: str = ""  # a typed table's rows (docs/schema.md) instead of the records


def _bool(value: str, name: str) -> bool:
    low = value.strip().lower()
    if low not in ("true", "false", "1", "0", "yes", "no"):
        raise ValueError(f"option {name}: {value!r} is not true/false")
    return low in ("true", "1", "yes")


def _list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _decode_as(value: str) -> dict[int, str]:
    """`5044=lumberjack,9042=cql` → {5044: 'lumberjack', 9042: 'cql'}."""
    try:
        return dict(protocols.port_protocol(item) for item in _list(value))
    except ValueError as e:
        raise ValueError(f"option decodeAs: {e}") from None


def _int(value: str | None) -> int | None:
    return None if value in (None, "") else int(value)


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """SourceOptions from the data source's options (keys already lower-cased by Spark)."""
    o = {k.lower(): v for k, v in options.items()}
    findings = o.get("findings", "include").lower()
    if findings not in FINDINGS:
        raise ValueError(f"option findings: {findings!r} is not one of {', '.join(FINDINGS)}")
    table = o.get("table", "").strip().lower()
    if table and table not in tables.TABLES:
        raise ValueError(f"option table: {table!r} is not one of {', '.join(tables.TABLES)}")
    overlap = o.get("overlap", "first")
    if overlap not in ("first", "last"):
        raise ValueError(f"option overlap: {overlap!r} is not first or last")
    keep = RecordFilter(
        protocols=frozenset(_list(o.get("protocols", ""))),
        streams=frozenset(int(s) for s in _list(o.get("streams", ""))),
        kinds=frozenset(_list(o.get("kinds", ""))),
        events=_bool(o.get("eventsonly", "false"), "eventsOnly"),
        since=_int(o.get("since")),
        until=_int(o.get("until")),
    )
    _bool(o.get("exacttime", "false"), "exactTime")  # accepted as before: `ts_ns` is always there
    limits = Limits(**json.loads(o["limits"])) if o.get("limits") else Limits()
    engine = Options(
        decode_as=_decode_as(o.get("decodeas", "")),
        overlap=overlap,
        reorder_window=int(o.get("reorderwindow", REORDER_WINDOW)),
        show_secrets=_bool(o.get("showsecrets", "false"), "showSecrets"),
        tls_keylogs=tuple(
            KeyLogSource(name, text=text) for name, text in json.loads(o.get("tlskeylogs") or "[]")
        ),
        limits=limits,
        keep=keep,
    )
    return SourceOptions(
        engine=engine,
        findings=findings,
        batch_rows=max(1, int(o.get("batchrows", BATCH_ROWS))),
        max_partition_bytes=int(o.get("maxpartitionbytes", MAX_PARTITION_BYTES)),
        open_cost_bytes=int(o.get("opencostbytes", OPEN_COST_BYTES)),
        min_partitions=max(1, int(o.get("minpartitions", 1))),
        basedir=o.get("basedir", ""),
        table=table,
    )


def option_strings(opts: Options, findings: str = "include", **extra: object) -> dict[str, str]:
    """The reader options that reproduce `opts` (the inverse of parse_options), plus `extra`."""
    keep = opts.keep
    out = {
        "decodeAs": ",".join(f"{p}={n}" for p, n in sorted(opts.decode_as.items())),
        "overlap": opts.overlap,
        "reorderWindow": str(opts.reorder_window),
        "showSecrets": str(opts.show_secrets).lower(),
        "eventsOnly": str(keep.events).lower(),
        "findings": findings,
        "protocols": ",".join(sorted(keep.protocols)),
        "streams": ",".join(str(s) for s in sorted(keep.streams)),
        "kinds": ",".join(sorted(keep.kinds)),
        "since": "" if keep.since is None else str(keep.since),
        "until": "" if keep.until is None else str(keep.until),
    }
    if opts.limits != Limits():
        out["limits"] = json.dumps(dataclasses.asdict(opts.limits))
    if opts.tls_keylogs:  # the key logs' text travels with the options to every task
        out["tlsKeylogs"] = json.dumps([(s.name, s.read_text()) for s in opts.tls_keylogs])
    out.update({k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in extra.items()})
    return out


@dataclass(frozen=True, slots=True)
class Capture:
    name: str  # the `capture` column
    path: str  # what a task opens: an absolute path or a URI
    size: int


def _local_names(name: str, part: str, basedir: str) -> list[str]:
    full = os.path.join(basedir, name)
    if os.path.isfile(full):  # a file as it is named, even with `[` or `*` in its name
        return [name]
    if glob.has_magic(name):
        hits = sorted(glob.glob(name, root_dir=basedir or None, recursive=True))
        files = [
            f
            for hit in hits
            for f in (files_under(hit, basedir) if os.path.isdir(os.path.join(basedir, hit)) else [hit])
        ]
        if not files:
            raise CaptureError(f"{part}: no file matches this pattern")
        return files
    if os.path.isdir(full):
        return files_under(name, basedir)
    if os.path.exists(full):
        return [name]
    raise CaptureError(f"{part}: no such file or directory")


def expand(paths: list[str], basedir: str = "") -> list[Capture]:
    """Capture files named by `paths`: files, directories (recursive), globs, comma-separated lists,
    local or URIs (s3a://, gs://, hdfs://, ... through wirelog.inputs.remote).

    Names stay as given (relative names are resolved against `basedir` only to look at them), so the
    `capture` column matches the local engine's for the same arguments. Duplicates are dropped.
    """
    found: dict[str, Capture] = {}
    for given in paths:
        parts = [given] if os.path.exists(os.path.join(basedir, given)) else given.split(",")
        for part in (p.strip() for p in parts):
            if not part:
                continue
            name = remote.local_path(part)
            if remote.is_uri(name):
                for f in remote.expand(name, directories=True):
                    found.setdefault(f.uri, Capture(f.uri, f.uri, f.size))
                continue
            for local in _local_names(name, part, basedir):
                full = os.path.abspath(os.path.join(basedir, local))
                found.setdefault(local, Capture(local, full, os.path.getsize(full)))
    return list(found.values())


class Bin(InputPartition):
    """One task's captures, read in this order."""

    def __init__(self, index: int, captures: list[Capture]) -> None:
        super().__init__(index)
        self.captures = captures


def pack(captures: list[Capture], max_bytes: int, open_cost: int, min_partitions: int) -> list[list[Capture]]:
    """Spark's file packing: target = min(max_bytes, max(open_cost, total / min_partitions)).

    Largest files first; a bin closes when the next file would take it past the target; every file
    also counts `open_cost` bytes, so thousands of tiny captures do not become thousands of tasks.
    Within a bin the captures are in name order.
    """
    total = sum(c.size + open_cost for c in captures)
    target = min(max_bytes, max(open_cost, total // min_partitions))
    bins: list[list[Capture]] = []
    current: list[Capture] = []
    size = 0
    for c in sorted(captures, key=lambda c: (-c.size, c.name)):
        if current and size + c.size > target:
            bins.append(current)
            current, size = [], 0
        current.append(c)
        size += c.size + open_cost
    if current:
        bins.append(current)
    return [sorted(b, key=lambda c: c.name) for b in bins]


UNREADABLE = "capture.unreadable"  # the row of an input that is not a capture (docs/records.md)


def _finding(code: str, message: str, name: str) -> Finding:
    return Finding(code, Severity.ERROR, message, "capture", capture=name)


def capture_records(captures: list[Capture], opts: SourceOptions) -> Iterator[Message | Finding | RecordRows]:
    """The records of each capture in order, stamped with its name: the core's as Arrow rows
    (RecordRows), the few made in Python as objects; failures become finding rows."""
    yield from _records(captures, dataclasses.replace(opts.engine, records="arrow"))


def _records(
    captures: list[Capture], engine: Options
) -> Iterator[Message | Finding | RecordRows | RecordLines | TableRows]:
    """`capture_records` with the core's records in the form `engine.records` names."""
    for cap in captures:
        try:
            for item in run([cap.path], (), engine, names={cap.path: cap.name}):
                if isinstance(item, RecordRows | RecordLines | TableRows | Message | Finding):
                    yield item
                elif isinstance(item, CaptureInfo) and item.error and not item.packets:
                    yield _finding(UNREADABLE, item.error.replace(cap.path, cap.name), cap.name)
        except Exception as e:
            yield _finding(
                "capture.internal-error",
                f"{cap.name}: processing failed ({type(e).__name__}: {e}); records before this one were kept",
                cap.name,
            )


def capture_lines(captures: list[Capture], opts: SourceOptions) -> Iterator[tuple[Buffer, int, int]]:
    """The records of each capture in order as NDJSON (lines, their count, how many are
    `capture.unreadable`): the core's lines, the local engine's bytes (docs/records.md), and a line
    for each record made in Python. Findings are kept (the `findings` option is the reader's)."""
    for rec in _records(captures, dataclasses.replace(opts.engine, records="ndjson")):
        if isinstance(rec, RecordLines):
            yield rec.data, rec.count, 0
        else:
            yield dumps(rec), 1, int(isinstance(rec, Finding) and rec.code == UNREADABLE)


def batches(captures: list[Capture], opts: SourceOptions) -> Iterator[pa.RecordBatch]:
    """Record batches of ARROW_SCHEMA of at most `opts.batch_rows` rows, as the records come, in
    record order: what Spark gets, and what the tasks that write Parquet themselves write
    (engine/spark_output.py)."""
    keep_messages = opts.findings != "only"
    keep_findings = opts.findings != "exclude"
    rows: list[tuple] = []
    for rec in capture_records(captures, opts):
        if isinstance(rec, RecordRows):
            if rows:
                yield parquet.batch(rows)
                rows = []
            batch = rec.batch
            if not (keep_messages and keep_findings):
                batch = batch.filter(
                    pc.equal(batch.column("record"), "message" if keep_messages else "finding")
                )
            for start in range(0, batch.num_rows, opts.batch_rows):
                yield batch.slice(start, opts.batch_rows)
        elif keep_findings if isinstance(rec, Finding) else keep_messages:
            rows.append(parquet.row(rec))
            if len(rows) >= opts.batch_rows:
                yield parquet.batch(rows)
                rows = []
    if rows:
        yield parquet.batch(rows)


def table_items(captures: list[Capture], opts: SourceOptions) -> Iterator[TableRows | Finding]:
    """The typed tables' rows of each capture in order (TableRows), and the findings Python holds
    as objects (TCP, capture; failures as finding rows)."""
    for rec in _records(captures, dataclasses.replace(opts.engine, records="tables")):
        if isinstance(rec, TableRows | Finding):
            yield rec


def table_batches(captures: list[Capture], opts: SourceOptions) -> Iterator[pa.RecordBatch]:
    """Batches of the typed table `opts.table` of at most `opts.batch_rows` rows, as the core fills
    it (the findings Python holds as objects a batch at a time, in their place)."""
    schema = tables.schemas()[opts.table]
    found: list[Finding] = []
    for rec in table_items(captures, opts):
        if isinstance(rec, Finding):
            if opts.table == "findings":
                found.append(rec)
            continue
        if found:
            yield tables.findings_batch(found, schema)
            found = []
        batch = rec.batches[opts.table]
        for start in range(0, batch.num_rows, opts.batch_rows):
            yield batch.slice(start, opts.batch_rows)
    if found:
        yield tables.findings_batch(found, schema)


class WirelogReader(DataSourceReader):
    def __init__(self, paths: list[str], opts: SourceOptions) -> None:
        self.paths = paths
        self.opts = opts

    def partitions(self) -> list[Bin]:
        caps = expand(self.paths, self.opts.basedir or os.getcwd())
        o = self.opts
        bins = pack(caps, o.max_partition_bytes, o.open_cost_bytes, o.min_partitions)
        return [Bin(i, b) for i, b in enumerate(bins)] or [Bin(0, [])]  # Spark wants one partition

    def read(self, partition: Bin) -> Iterator[pa.RecordBatch]:
        tune_gc()  # this runs in a Python worker, which the CLI's settings do not reach
        if self.opts.table:
            return table_batches(partition.captures, self.opts)
        return batches(partition.captures, self.opts)


class WirelogDataSource(DataSource):
    """`spark.read.format("wirelog").option(...).load(path or [paths])`; see docs/spark.md."""

    @classmethod
    def name(cls) -> str:
        return "wirelog"

    def _paths(self) -> list[str]:
        if "paths" in self.options:
            return list(json.loads(self.options["paths"]))
        if "path" in self.options:
            return [self.options["path"]]
        raise ValueError("wirelog data source: give the captures to load(), e.g. load('captures/')")

    def schema(self) -> StructType:
        opts = parse_options(self.options)  # a bad option fails here, on the driver
        return spark_schema(opts.table)

    def reader(self, schema: StructType) -> WirelogReader:
        return WirelogReader(self._paths(), parse_options(self.options))
