"""Parquet written by the Spark tasks themselves, to any file system pyarrow reaches, with a commit.

Why not Spark's writer: it turns every converted row into a JVM row and encodes it again — 131 s of a
293 s split job on a 2 GB capture, more than the decoding. The tasks already hold the records as Arrow
batches in the Parquet schema; pyarrow writes them as the local engine does (same schema, `ts` in
microseconds and `ts_ns` exact, same encodings), one file per task and protocol under Hive-style
`protocol=<name>/` directories. NDJSON the same way: the tasks write the core's lines, the local
engine's bytes (Spark's JSON writer would write the Parquet columns, JSON text as strings), one
`part-<task>-<job>.json` per task at the top of the output.

The commit protocol (Hadoop's FileOutputCommitter in spirit, with a manifest instead of task-side
renames):
- a job has a fresh id; each task attempt writes under `OUT/_temporary/<job>/<task>-<attempt>/`,
  where `<attempt>` is Spark's task attempt id (unique in the application, retries and speculative
  copies included);
- a task's result is its manifest (the files it wrote and their rows). Spark hands the driver the
  result of exactly one successful attempt per task: a failed attempt returns nothing and the
  result of a speculative duplicate is dropped;
- the driver commits: it moves the manifests' files to `OUT/protocol=<name>/part-<task>-<job>.zstd.parquet`,
  removes `OUT/_temporary` (with whatever failed, retried or speculative attempts wrote) and writes
  `_SUCCESS`. A job that fails leaves no part file.

This module imports pyspark only inside its functions; it runs on the driver and in the tasks.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from wirelog.export import parquet
from wirelog.inputs import remote
from wirelog.model import Finding, TableRows

if TYPE_CHECKING:
    from collections.abc import Buffer

    from pyspark.sql import SparkSession

PARTITION = "protocol"
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # Hive's (Spark's, DuckDB's, pyarrow's) null value
LINES = ""  # the `protocol` of an NDJSON part file: not partitioned
FILE_SCHEMA = parquet.SCHEMA.remove(parquet.COLUMNS.index(PARTITION))  # the column is in the path
TEMPORARY = "_temporary"
SUCCESS = "_SUCCESS"
# a task's result: one row per file it wrote (Spark's DDL, for mapInArrow)
MANIFEST = pa.schema(
    [("task", pa.string()), ("file", pa.string()), ("protocol", pa.string()), ("rows", pa.int64())]
)
MANIFEST_DDL = "task string, file string, protocol string, rows bigint"


class OutputError(Exception):
    """The output directory cannot be used (occupied, unreachable); one line for the user."""


@dataclass(frozen=True, slots=True)
class Job:
    """One conversion's output: where (a local directory or a URI pyarrow reaches) and its id."""

    output: str
    id: str

    def filesystem(self) -> tuple[pafs.FileSystem, str]:
        if remote.is_uri(self.output):
            return remote.filesystem(self.output)
        return pafs.LocalFileSystem(), os.path.abspath(remote.local_path(self.output))


@dataclass(frozen=True, slots=True)
class Written:
    """One file a task attempt wrote: its place under the attempt's directory, and what it holds."""

    task: str
    file: str  # path in the job's file system
    protocol: str  # its partition; LINES for an NDJSON file
    rows: int
    unreadable: int = 0  # NDJSON, tables: its `capture.unreadable` rows (the driver counts Parquet's)
    table: str = ""  # a typed table's file (`--tables`): it goes to `OUT/<table>/`


def check(output: str) -> bool:
    """Whether `output` holds an earlier output to replace (a directory with `_SUCCESS`); raises
    OutputError for a file, or a non-empty directory that is not an earlier output."""
    fs, path = Job(output, "").filesystem()
    try:
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.File:
            raise OutputError(
                f"{output}: exists and is not a directory (the Spark engine writes a directory)"
            )
        if info.type != pafs.FileType.Directory:
            return False
        listed = fs.get_file_info(pafs.FileSelector(path))
    except (OSError, pa.ArrowException) as e:
        raise OutputError(f"{output}: cannot write there: {remote.first_line(e)}") from e
    if listed and not any(os.path.basename(i.path) == SUCCESS for i in listed):
        raise OutputError(f"{output}: directory is not empty and not an earlier output; choose another")
    return bool(listed)


def start(output: str) -> Job:
    """A new job writing to `output`, an earlier output there removed (see `check`)."""
    job = Job(output, uuid.uuid4().hex)
    earlier = check(output)
    fs, path = job.filesystem()
    try:
        if earlier:
            fs.delete_dir_contents(path)
        fs.create_dir(path, recursive=True)
    except (OSError, pa.ArrowException) as e:
        raise OutputError(f"{output}: cannot write there: {remote.first_line(e)}") from e
    return job


def _attempt() -> str:
    """This task attempt's id, unique in the application (the driver's own writes: `driver`)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return "driver" if ctx is None else str(ctx.taskAttemptId())


def _close(files: Iterable[tuple[str, parquet.RowGroups, pa.NativeFile]]) -> None:
    """Write the files' last row groups and footers, then close them."""
    for _, groups, sink in files:
        groups.close()
        sink.close()


def _abandon(
    files: Iterable[tuple[str, parquet.RowGroups, pa.NativeFile]], fs: pafs.FileSystem, base: str
) -> None:
    """A task attempt failed: close what it opened and remove what it wrote (the commit would skip
    it anyway)."""
    for _, _, sink in files:
        with contextlib.suppress(Exception):
            sink.close()
    with contextlib.suppress(Exception):
        fs.delete_dir(base)


def write_task(job: Job, task: str, batches: Iterable[pa.RecordBatch]) -> list[Written]:
    """A task attempt's files: `batches` (the Parquet schema) written per protocol under
    the attempt's own directory. On failure what it wrote is removed (the commit would skip it)."""
    fs, path = job.filesystem()
    base = f"{path}/{TEMPORARY}/{job.id}/{task}-{_attempt()}"
    files: dict[str, tuple[str, parquet.RowGroups, pa.NativeFile]] = {}
    counts: dict[str, int] = {}
    try:
        for batch in batches:
            for name, rows in _partitions(batch):
                if rows.num_rows == 0:
                    continue
                if name not in files:
                    fs.create_dir(f"{base}/{PARTITION}={name}", recursive=True)
                    file = f"{base}/{PARTITION}={name}/part-{task}-{job.id}.zstd.parquet"
                    sink = fs.open_output_stream(file)
                    files[name] = (file, parquet.RowGroups(parquet.file_writer(sink, FILE_SCHEMA)), sink)
                    counts[name] = 0
                files[name][1].add(rows)
                counts[name] += rows.num_rows
        _close(files.values())
    except BaseException:
        _abandon(files.values(), fs, base)
        raise
    return [Written(task, file, name, counts[name]) for name, (file, _, _) in files.items()]


def write_lines(job: Job, task: str, chunks: Iterable[tuple[Buffer, int, int]]) -> list[Written]:
    """A task attempt's NDJSON part file: `chunks` of lines (bytes, their count, how many are
    `capture.unreadable` rows) written in order under the attempt's own directory; no file when
    there is no line. On failure what it wrote is removed."""
    fs, path = job.filesystem()
    base = f"{path}/{TEMPORARY}/{job.id}/{task}-{_attempt()}"
    file = f"{base}/part-{task}-{job.id}.json"
    sink = None
    rows = unreadable = 0
    try:
        for data, count, bad in chunks:
            if sink is None:
                fs.create_dir(base, recursive=True)
                sink = fs.open_output_stream(file)
            sink.write(data)
            rows += count
            unreadable += bad
        if sink is not None:
            sink.close()
    except BaseException:
        if sink is not None:
            with contextlib.suppress(Exception):
                sink.close()
        with contextlib.suppress(Exception):
            fs.delete_dir(base)
        raise
    return [Written(task, file, LINES, rows, unreadable)] if sink is not None else []


def _partitions(batch: pa.RecordBatch) -> Iterator[tuple[str, pa.RecordBatch]]:
    """The rows of `batch` per protocol, in their order, without the column; a typed table of one
    protocol (`cql`: no such column) whole, as LINES."""
    at = batch.schema.get_field_index(PARTITION)
    if at < 0:
        yield LINES, batch
        return
    column = batch.column(at)
    rest = batch.remove_column(at)
    names = pc.unique(column).to_pylist()
    if len(names) == 1:
        yield names[0], rest
        return
    for name in names:
        yield name, rest.filter(pc.equal(column, name))


def write_tables(job: Job, task: str, items: Iterable[TableRows | Finding]) -> list[Written]:
    """A task attempt's typed tables (`--tables`), each Hive-partitioned as the records are:
    `<table>/protocol=<name>/part-...` with the table's fixed schema but the protocol column, which
    is in the path (`cql`, one protocol, has no such column: `cql/part-...`). A table the task has no row of gets an empty file in the null partition
    (`protocol=__HIVE_DEFAULT_PARTITION__`: no row), so every table's directory holds its schema
    whatever the input. On failure what it wrote is removed."""
    from wirelog.engine.spark_source import UNREADABLE
    from wirelog.export.tables import (
        BATCH_ROWS,
        DICTIONARY_COLUMNS,
        TABLES,
        TEXT_COLUMNS,
        findings_batch,
        schemas,
    )

    fs, path = job.filesystem()
    base = f"{path}/{TEMPORARY}/{job.id}/{task}-{_attempt()}"
    tables = schemas()
    files: dict[tuple[str, str], tuple[str, parquet.RowGroups, pa.NativeFile]] = {}
    counts: dict[tuple[str, str], int] = {}
    unreadable = 0

    def in_file(table: str) -> pa.Schema:
        at = tables[table].get_field_index(PARTITION)
        return tables[table] if at < 0 else tables[table].remove(at)

    def add(table: str, rows: pa.RecordBatch, name: str) -> None:
        key = (table, name)
        if key not in files:
            directory = f"{base}/{table}" + (f"/{PARTITION}={name}" if name != LINES else "")
            fs.create_dir(directory, recursive=True)
            file = f"{directory}/part-{task}-{job.id}.zstd.parquet"
            sink = fs.open_output_stream(file)
            writer = parquet.file_writer(sink, in_file(table), DICTIONARY_COLUMNS, TEXT_COLUMNS)
            files[key] = (file, parquet.RowGroups(writer), sink)
            counts[key] = 0
        files[key][1].add(rows)
        counts[key] += rows.num_rows

    def write(table: str, batch: pa.RecordBatch) -> None:
        for name, rows in _partitions(batch):
            add(table, rows, name)

    findings: list[Finding] = []
    try:
        for item in items:
            if isinstance(item, TableRows):
                for table, batch in item.batches.items():
                    if batch.num_rows:
                        write(table, batch)
            else:
                findings.append(item)
                unreadable += item.code == UNREADABLE
                if len(findings) >= BATCH_ROWS:
                    write("findings", findings_batch(findings, tables["findings"]))
                    findings = []
        if findings:
            write("findings", findings_batch(findings, tables["findings"]))
        for table in TABLES:
            if not any(t == table for t, _ in files):
                partition = NULL_PARTITION if PARTITION in tables[table].names else LINES
                add(table, pa.RecordBatch.from_pylist([], schema=in_file(table)), partition)
        _close(files.values())
    except BaseException:
        _abandon(files.values(), fs, base)
        raise
    capture_findings = ("findings", "capture")  # where the `capture.unreadable` rows are
    return [
        Written(task, file, key[1], counts[key], unreadable if key == capture_findings else 0, key[0])
        for key, (file, _, _) in files.items()
    ]


def manifest_batch(written: list[Written]) -> pa.RecordBatch:
    """A task's result as rows of MANIFEST (for mapInArrow)."""
    return pa.RecordBatch.from_pylist(
        [{"task": w.task, "file": w.file, "protocol": w.protocol, "rows": w.rows} for w in written],
        schema=MANIFEST,
    )


def from_rows(rows: Iterable) -> list[Written]:
    """Manifest rows collected by Spark (dicts) as Written."""
    return [Written(r["task"], r["file"], r["protocol"], r["rows"], r.get("unreadable", 0)) for r in rows]


def _destination(path: str, w: Written) -> str:
    """Where a committed file goes: its table's directory, its protocol's partition, or the top
    for NDJSON."""
    name = os.path.basename(w.file)
    if w.table:
        partition = f"/{PARTITION}={w.protocol}" if w.protocol != LINES else ""
        return f"{path}/{w.table}{partition}/{name}"
    return f"{path}/{PARTITION}={w.protocol}/{name}" if w.protocol != LINES else f"{path}/{name}"


def commit(job: Job, written: list[Written]) -> int:
    """Publish the files of the successful attempts (one manifest per task) and nothing else; the
    rows written. Each task must appear in one attempt only: Spark's results guarantee it."""
    fs, path = job.filesystem()
    attempts: dict[str, str] = {}
    for w in written:
        attempt = w.file.split(f"/{TEMPORARY}/{job.id}/", 1)[-1].split("/", 1)[0]  # <task>-<attempt>
        if attempts.setdefault(w.task, attempt) != attempt:
            raise ValueError(f"task {w.task} has two committed attempts")
    for name in sorted({w.protocol for w in written if not w.table} - {LINES}):
        fs.create_dir(f"{path}/{PARTITION}={name}", recursive=True)
    for w in written:
        if w.table:
            fs.create_dir(os.path.dirname(_destination(path, w)), recursive=True)
    for w in written:
        fs.move(w.file, _destination(path, w))
    discard(job)
    with fs.open_output_stream(f"{path}/{SUCCESS}"):
        pass
    return sum(w.rows for w in written)


def codes(job: Job, written: list[Written], protocol: str) -> list[str]:
    """The `code` of every committed row of `protocol` (a small partition: the capture-level
    findings the driver counts)."""
    fs, path = job.filesystem()
    found: list[str] = []
    for w in written:
        if w.protocol == protocol:
            file = _destination(path, w)
            found += pq.read_table(file, columns=["code"], filesystem=fs)["code"].to_pylist()
    return found


def discard(job: Job) -> None:
    """Remove every attempt's files (after a commit: the failed, retried and speculative ones)."""
    fs, path = job.filesystem()
    with contextlib.suppress(FileNotFoundError):
        fs.delete_dir(f"{path}/{TEMPORARY}")


def run_tasks(
    spark: SparkSession, job: Job, work: list, task: Callable[[Job, int, object], list[Written]]
) -> list[Written]:
    """`task(job, index, item)` → Written list, run by one Spark task per item of `work`."""
    if not work:
        return []
    sc = spark.sparkContext
    rdd = sc.parallelize(list(enumerate(work)), len(work))
    return rdd.mapPartitions(lambda items: [w for i, item in items for w in task(job, i, item)]).collect()
