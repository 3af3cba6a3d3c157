"""One huge uncompressed capture on many Spark tasks: byte-range splits, packets routed by hosts.

1. Plan (engine/splits.py): each byte range is scanned by a task (record boundaries, frame counts);
   the driver makes the plan exact and numbers frames.
2. Route: a task per split reads its packets (making the packet layer's findings) and notes, per
   group of connections (the two IP hosts hashed, native/src/capture/route.rs), where its packets
   lie in the file: 36 bytes per packet, handed on as a few pairs per split and group.
3. Shuffle: the routes (not the packets: about a tenth of the bytes) go to their group's task.
4. Streams: each group's packets are read back from the file and reassembled, without decoding,
   for the frames that open its streams; the driver sorts them all: a stream's id in the capture
   is its frame's rank (the local engine numbers streams in the order they open).
5. Decode: each group's packets are read again and decoded by one core pipeline (exactly as the
   local engine decodes them), its streams numbered by those ranks, so its records are final as
   they are made: the tasks write them (Parquet, engine/spark_output.py) or hand them to Spark.
   Each group's delivery verdict numbers leave beside them, and the driver turns their sum into
   the capture's delivery findings.

This module imports pyspark; only the Spark engine imports it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from wirelog import _core
from wirelog.engine import spark_output
from wirelog.engine.gc_tuning import tune_gc
from wirelog.engine.local import Options
from wirelog.engine.spark_source import spark_schema
from wirelog.engine.splits import (
    Split,
    decode_group,
    group_options,
    opening_frames,
    plan,
    route_split,
    routed_segments,
)
from wirelog.export import parquet
from wirelog.export.json import dumps
from wirelog.model import Finding, Message, RecordLines, RecordRows, Severity

if TYPE_CHECKING:
    from collections.abc import Buffer

    from pyspark import RDD
    from pyspark.sql import DataFrame, SparkSession

# Stage 5 when Spark gets the rows: record batches (Arrow IPC, kept until the verdict is known) and
# the groups' verdict numbers.
RECORDS, DELIVERY = "records", "delivery"
BLOB_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")
DECODED = "kind string, text string, batch binary"  # a row per batch or per group's verdict

# The stages between routing and decoding are plain RDDs of pickled pairs: the JVM only moves them
# (a few rows per split and group), where a DataFrame made it convert, sort and cache them as rows,
# code it compiles on first use (2-3 s of the first conversion of 1 GB).
Routed = tuple[tuple[int, int, int], tuple[str | None, bytes | None]]


def _finding_text(f: Finding) -> str:
    fields = ("code", "message", "protocol", "frame", "ts", "fields")
    return json.dumps({"severity": f.severity.value, **{k: getattr(f, k) for k in fields}})


def route_splits(path: str, name: str, groups: int, rows: Iterable[tuple]) -> Iterator[Routed]:
    """Stage 2 (a task): the routes of the splits in `rows` (Split fields), as ((group, split,
    chunk), (None, routes)) pairs, a chunk per flush of the routing reader; the packet layer's
    findings as ((0, split, chunk), (JSON text, None)). A group's pairs sorted by key are in record
    order."""
    tune_gc()  # each stage runs in a Python worker, which the CLI's settings do not reach
    for row in rows:
        split = Split(*row)
        chunk = 0
        for item in route_split(path, split, groups, name):
            if isinstance(item, Finding):
                yield (0, split.index, chunk), (_finding_text(item), None)
                continue
            for group, routes in enumerate(item):
                if routes:
                    yield (group, split.index, chunk), (None, routes)
            chunk += 1


class _Group:
    """A partition of routed pairs (one group's, sorted): its routes, read lazily, and the packet
    layer's findings met on the way."""

    def __init__(self, pairs: Iterator[Routed]) -> None:
        self.pairs = pairs
        self.findings: list[str] = []

    def routes(self) -> Iterator[bytes]:
        for _, (text, blob) in self.pairs:  # a pair per split, group and flush: a few per split
            if text is not None:
                self.findings.append(text)
            elif blob:
                yield blob


def opened_streams(path: str, name: str, opts: Options, pairs: Iterator[Routed]) -> Iterator[list[int]]:
    """Stage 4 (a task): the frames that opened the streams of a group (one list)."""
    tune_gc()
    yield opening_frames(name, routed_segments(path, name, _Group(pairs).routes()), opts)


def group_records(
    path: str,
    name: str,
    opts: Options,
    frames: pa.Array,
    pairs: Iterator[Routed],
    deliveries: list[dict],
) -> Iterator[pa.RecordBatch]:
    """Stage 5 (a task): the records of a group in the Parquet schema, their streams numbered by the
    rank of their opening frame among `frames` (all of the capture's, sorted), then the packet
    layer's findings its pairs carried; the group's delivery verdict numbers go to `deliveries`."""
    for item in _group_items(path, name, replace(opts, records="arrow"), frames, pairs, deliveries):
        if isinstance(item, RecordRows):
            yield item.batch
        elif isinstance(item, Message | Finding):  # made in Python, or the packet layer's
            yield parquet.batch([parquet.row(item)])


def group_lines(
    path: str,
    name: str,
    opts: Options,
    frames: pa.Array,
    pairs: Iterator[Routed],
    deliveries: list[dict],
) -> Iterator[tuple[Buffer, int, int]]:
    """`group_records` as NDJSON (lines, their count, none unreadable): the core's lines, as the
    local engine writes them."""
    for item in _group_items(path, name, replace(opts, records="ndjson"), frames, pairs, deliveries):
        if isinstance(item, RecordLines):
            yield item.data, item.count, 0
        elif isinstance(item, Message | Finding):
            yield dumps(item), 1, 0


def _group_items(
    path: str, name: str, opts: Options, frames: pa.Array, pairs: Iterator[Routed], deliveries: list[dict]
) -> Iterator[Any]:
    """A group decoded in the core (`opts.records`' form), then the packet layer's findings its pairs
    carried; records made in Python carry the capture's name."""
    tune_gc()
    ranks = _core.StreamRanks(frames.to_pylist())
    group = _Group(pairs)
    segments = routed_segments(path, name, group.routes())
    delivery: dict = {}
    for item in decode_group(name, segments, opts, ranks, delivery):
        if isinstance(item, Message | Finding):  # made in Python (a protocol only Python decodes)
            item.capture = name
        yield item
    for text in group.findings:
        yield _packet_finding(name, json.loads(text))
    if delivery:
        deliveries.append(delivery)


def _written(
    job: spark_output.Job, task: str, records: Callable[[list[dict]], Iterator], fmt: str = "parquet"
) -> Iterator[dict]:
    """Stage 5 when the tasks write Parquet (`records` gives batches) or NDJSON (lines): this task's
    records written; its manifest (a dict per file) and its groups' delivery numbers
    (`{"delivery": JSON}`) as the result."""
    from pyspark import TaskContext

    deliveries: list[dict] = []
    part = f"{task}-{TaskContext.get().partitionId():05d}"
    write = spark_output.write_task if fmt == "parquet" else spark_output.write_lines
    for w in write(job, part, records(deliveries)):
        yield {"task": w.task, "file": w.file, "protocol": w.protocol, "rows": w.rows}
    for d in deliveries:
        yield {"delivery": json.dumps(d)}


def _blobs(records: Callable[[list[dict]], Iterator[pa.RecordBatch]]) -> Iterator[tuple]:
    """Stage 5 when Spark gets the rows: the task's record batches, each as an Arrow IPC blob (a row
    of DECODED per batch, not per record, until the verdict is known), then its groups' delivery
    numbers."""
    deliveries: list[dict] = []
    for batch in records(deliveries):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema, options=BLOB_OPTIONS) as writer:
            writer.write_batch(batch)
        yield RECORDS, None, sink.getvalue().to_pybytes()
    for d in deliveries:
        yield DELIVERY, json.dumps(d), None


def _unblobbed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The record batches of RECORDS rows of DECODED, as Spark rows."""
    for rows in batches:
        for blob in rows.column("batch").to_pylist():
            yield from pa.ipc.open_stream(blob)


def _packet_finding(name: str, d: dict) -> Finding:
    return Finding(
        d["code"], Severity(d["severity"]), d["message"], d["protocol"], None, None, d["frame"], d["ts"],
        d["fields"], capture=name,
    )  # fmt: skip


def combine_delivery(results: list[dict]) -> dict:
    """The sum of groups' delivery numbers per protocol (of places, the earliest kept)."""
    out: dict[str, dict] = {}
    for result in results:
        for protocol, numbers in result.items():
            total = out.setdefault(protocol, {})
            for k, v in numbers.items():
                if isinstance(v, bool):
                    total[k] = total.get(k, False) or v
                elif isinstance(v, int):
                    total[k] = total.get(k, 0) + v
                elif isinstance(v, list):
                    places = sorted(total.get(k, []) + v, key=lambda p: p.get("frame") or 0)
                    total[k] = places[: len(v) or 1]
                else:
                    total.setdefault(k, v)
    return out


def verdict_findings(name: str, deliveries: list[dict]) -> list[Finding]:
    """The capture's delivery findings, from every group's numbers."""
    found = _core.delivery_findings(json.dumps(combine_delivery(deliveries)))
    for f in found:
        f.capture = name
    return found


def _kept(rdd: RDD) -> RDD:
    """`rdd` computed once and kept on the executors' disks for its two readings. Spark's cache, not
    a local checkpoint: a cached block lost with its executor is computed again from its lineage,
    where a checkpoint's is gone and fails the job (CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND)."""
    from pyspark import StorageLevel

    return rdd.persist(StorageLevel.DISK_ONLY)


@contextlib.contextmanager
def phase(spark: SparkSession, description: str) -> Iterator[None]:
    """The Spark jobs started inside are described so (the UI, its REST API: bench_spark.py's
    per-stage times)."""
    sc = spark.sparkContext
    sc.setJobDescription(description)
    try:
        yield
    finally:
        sc.setJobDescription(None)


def spark_plan(spark: SparkSession, path: str, split_size: int) -> list[Split]:
    """Stage 1: the splits of the capture, its byte ranges scanned by Spark tasks."""
    sc = spark.sparkContext
    return plan(
        path, split_size, run=lambda fn, ranges: sc.parallelize(ranges, len(ranges)).map(fn).collect()
    )


def routed(spark: SparkSession, path: str, name: str, splits: list[Split], groups: int) -> RDD:
    """Stages 2-3: the capture's routed pairs (`route_splits`), a partition per group of
    connections (its number: a hash of it would put two groups in one task), sorted: record
    order."""
    rows = [(s.index, s.start, s.next, s.first_frame, s.frames, s.context, b"", s.holes) for s in splits]
    pairs = spark.sparkContext.parallelize(rows, max(1, len(rows))).mapPartitions(
        lambda it: route_splits(path, name, groups, it)
    )
    return pairs.repartitionAndSortWithinPartitions(groups, lambda key: key[0])


def _groups_of_capture(
    spark: SparkSession, path: str, name: str, opts: Options, split_size: int, groups: int
) -> tuple[RDD, Options, pa.Array]:
    """Stages 1-4: the capture's routes by group (kept), the options of its groups, and the frames
    that opened its streams, sorted."""
    with phase(spark, f"wirelog: plan the splits of {name}"):
        splits = spark_plan(spark, path, split_size)
    opts = group_options(opts, splits)
    kept = _kept(routed(spark, path, name, splits, groups))
    with phase(spark, f"wirelog: route and find the streams of {name}"):
        opened = kept.mapPartitions(lambda it: opened_streams(path, name, opts, it)).collect()
    frames = pa.concat_arrays([pa.array(f, pa.int64()) for f in opened] or [pa.array([], pa.int64())])
    return kept, opts, frames.sort()


def read_split_capture(
    spark: SparkSession, path: str, name: str, opts: Options, split_size: int, partitions: int
) -> DataFrame:
    """The records of one uncompressed capture, read by many tasks (see the module docstring)."""
    kept, opts, frames = _groups_of_capture(spark, path, name, opts, split_size, partitions)
    decoded = _kept(
        kept.mapPartitions(lambda it: _blobs(lambda d: group_records(path, name, opts, frames, it, d)))
    )
    with phase(spark, f"wirelog: decode {name}"):
        marks = decoded.filter(lambda r: r[0] == DELIVERY).map(lambda r: r[1]).collect()
    kept.unpersist()
    verdict = verdict_findings(name, [json.loads(text) for text in marks])
    blobs = spark.createDataFrame(decoded.filter(lambda r: r[0] == RECORDS), DECODED)
    rows = blobs.mapInArrow(_unblobbed, spark_schema())
    if verdict:
        found = parquet.batch([parquet.row(f) for f in verdict]).to_pylist()
        rows = rows.unionByName(spark.createDataFrame(found, spark_schema()))
    return rows


def write_split_capture(
    spark: SparkSession,
    path: str,
    name: str,
    opts: Options,
    split_size: int,
    partitions: int,
    job: spark_output.Job,
    task: str,
    fmt: str = "parquet",
) -> list[spark_output.Written]:
    """The records of one uncompressed capture written by the tasks that decode them (engine/
    spark_output.py) as Parquet or NDJSON (`fmt`), the delivery findings by the driver; their
    manifests."""
    kept, opts, frames = _groups_of_capture(spark, path, name, opts, split_size, partitions)
    records = group_records if fmt == "parquet" else group_lines
    results = kept.mapPartitions(
        lambda it: _written(job, task, lambda d: records(path, name, opts, frames, it, d), fmt)
    )
    try:
        with phase(spark, f"wirelog: decode and write {name}"):
            rows = results.collect()
    finally:
        kept.unpersist()
    written = spark_output.from_rows(r for r in rows if "delivery" not in r)
    verdict = verdict_findings(name, [json.loads(r["delivery"]) for r in rows if "delivery" in r])
    if verdict and fmt == "parquet":
        written += spark_output.write_task(
            job, f"{task}-verdict", [parquet.batch([parquet.row(f) for f in verdict])]
        )
    elif verdict:
        lines = b"".join(dumps(f) for f in verdict)
        written += spark_output.write_lines(job, f"{task}-verdict", [(lines, len(verdict), 0)])
    return written
