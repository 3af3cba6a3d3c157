"""One huge uncompressed capture on many Spark tasks: byte-range splits, records routed by hosts.

1. Plan (engine/splits.py): each byte range is scanned by a task (record boundaries, frame counts);
   the driver makes the plan exact and numbers frames.
2. Route: a task per split reads its packets (making the packet layer's findings) and notes, per
   group of connections (the two IP hosts hashed, native/src/capture/route.rs), where its records
   lie in the file: 28 bytes per packet, handed on as a few rows per split and group.
3. Shuffle: the routes (not the packets: a few percent of the bytes) go to their group's task.
4. Streams: each group's records are read back from the file and reassembled, without decoding,
   for the frames that open its streams; the driver sorts them all: a stream's id in the capture
   is its frame's rank (the local engine numbers streams in the order they open).
5. Decode: each group's records are read again and decoded by one core pipeline (exactly as the
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
from typing import TYPE_CHECKING

import pyarrow as pa

from wirelog import _core
from wirelog.engine import spark_output
from wirelog.engine.gc_tuning import tune_gc
from wirelog.engine.local import Options
from wirelog.engine.spark_source import spark_batch, spark_schema
from wirelog.engine.splits import (
    Split,
    decode_group,
    flow_options,
    opening_frames,
    plan,
    route_split,
    routed_segments,
)
from wirelog.export import parquet
from wirelog.model import Finding, Message, RecordRows, Severity

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# What the routing tasks hand the shuffle: a row per split, group and flush of routes (the group is
# the row's partition), or a finding of the packet layer. A group's rows sort by (split, chunk):
# record order.
ROUTED = pa.schema(
    [
        ("group", pa.int64()),
        ("split", pa.int64()),
        ("chunk", pa.int64()),  # within the split: the routing task's flush number
        ("finding", pa.string()),  # a finding of the packet layer (JSON), or null
        ("routes", pa.binary()),  # the group's routes (capture/route.rs), or null
    ]
)
# Rows per Arrow batch handed to the Python workers (Spark's default is 10,000): a row of routes is
# up to ~1.5 MB (28 bytes per packet of 16 MiB of a split).
ROWS_PER_BATCH = 16
OPENED = pa.schema([("frame", pa.int64())])  # stage 4: the frames that opened streams
# stage 5 when the tasks write: a row per file written (spark_output.MANIFEST) and, with `delivery`
# set, a row per flow with its delivery verdict numbers (JSON)
RESULTS = spark_output.MANIFEST.append(pa.field("delivery", pa.string()))
# stage 5 when Spark gets the rows: record batches (Arrow IPC, kept until the verdict is known) and
# the flows' verdict numbers
RECORDS, DELIVERY = "records", "delivery"
BLOB_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")
DECODED = pa.schema([("kind", pa.string()), ("text", pa.string()), ("batch", pa.binary())])
CACHE_BATCH_CONF = "spark.sql.inMemoryColumnarStorage.batchSize"
# Rows per column batch of a kept DataFrame: a batch is built in the heap, and a record blob of
# `read()` is up to a few MB.
ROWS_PER_CACHED_BATCH = 64


def _spark_types(schema: pa.Schema) -> str:
    names = {pa.int64(): "bigint", pa.int32(): "int", pa.binary(): "binary", pa.string(): "string"}
    return ", ".join(f"`{f.name}` {names[f.type]}" for f in schema)


def _finding_text(f: Finding) -> str:
    return json.dumps(
        {
            "code": f.code,
            "severity": f.severity.value,
            "message": f.message,
            "protocol": f.protocol,
            "frame": f.frame,
            "ts": f.ts,
            "fields": f.fields,
        }
    )


def route_splits(path: str, name: str, groups: int, rows: Iterable[tuple]) -> Iterator[tuple]:
    """Stage 2 (a task): the routes of the splits in `rows` (Split fields), as (group, (split,
    chunk, finding, routes)) pairs; the packet layer's findings go to group 0."""
    tune_gc()  # each stage runs in a Python worker, which the CLI's settings do not reach
    for row in rows:
        split = Split(*row)
        chunk = 0
        for item in route_split(path, split, groups, name):
            if isinstance(item, Finding):
                yield 0, (split.index, chunk, _finding_text(item), None)
                continue
            for group, routes in enumerate(item):
                if routes:
                    yield group, (split.index, chunk, None, routes)
            chunk += 1


class _Group:
    """A partition of ROUTED rows (one group, sorted by split and chunk): its routes, read lazily,
    and the packet layer's findings met on the way."""

    def __init__(self, batches: Iterator[pa.RecordBatch]) -> None:
        self.batches = batches
        self.findings: list[str] = []

    def routes(self) -> Iterator[bytes]:
        for rows in self.batches:  # a row per split, group and flush: a few per split
            texts, blobs = rows.column("finding").to_pylist(), rows.column("routes").to_pylist()
            for text, blob in zip(texts, blobs, strict=True):
                if text is not None:
                    self.findings.append(text)
                elif blob:
                    yield blob


def opened_streams(
    path: str, name: str, opts: Options, context: bytes, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Stage 4 (a task): the frames that opened the streams of a group (OPENED rows)."""
    tune_gc()
    segments = routed_segments(path, name, context, _Group(batches).routes())
    frames = opening_frames(name, segments, opts)
    yield pa.RecordBatch.from_arrays([pa.array(frames, pa.int64())], schema=OPENED)


def group_records(
    path: str,
    name: str,
    opts: Options,
    context: bytes,
    frames: pa.Array,
    batches: Iterator[pa.RecordBatch],
    deliveries: list[dict],
) -> Iterator[pa.RecordBatch]:
    """Stage 5 (a task): the records of a group in the Parquet schema, their streams numbered by the
    rank of their opening frame among `frames` (all of the capture's, sorted), then the packet
    layer's findings its rows carried; the group's delivery verdict numbers go to `deliveries`."""
    tune_gc()
    ranks = _core.StreamRanks(frames.to_pylist())
    group = _Group(batches)
    segments = routed_segments(path, name, context, group.routes())
    delivery: dict = {}
    for item in decode_group(name, segments, replace(opts, records="arrow"), ranks, delivery):
        if isinstance(item, RecordRows):
            yield item.batch
        elif isinstance(item, Message | Finding):  # made in Python (a protocol only Python decodes)
            item.capture = name
            yield parquet.batch([parquet.row(item)])
    if group.findings:
        yield parquet.batch([parquet.row(_packet_finding(name, json.loads(t))) for t in group.findings])
    if delivery:
        deliveries.append(delivery)


def _written(
    job: spark_output.Job, task: str, records: Callable[[list[dict]], Iterator[pa.RecordBatch]]
) -> Iterator[pa.RecordBatch]:
    """Stage 5 when the tasks write Parquet: this task's records written; its manifest and its flows'
    delivery numbers as the result (RESULTS rows)."""
    from pyspark import TaskContext

    deliveries: list[dict] = []
    part = f"{task}-{TaskContext.get().partitionId():05d}"
    manifest = spark_output.manifest_batch(spark_output.write_task(job, part, records(deliveries)))
    yield pa.RecordBatch.from_arrays(
        [*manifest.columns, pa.nulls(manifest.num_rows, pa.string())], schema=RESULTS
    )
    yield pa.RecordBatch.from_pylist([{"delivery": json.dumps(d)} for d in deliveries], schema=RESULTS)


def _blobs(records: Callable[[list[dict]], Iterator[pa.RecordBatch]]) -> Iterator[pa.RecordBatch]:
    """Stage 5 when Spark gets the rows: the task's record batches, each as an Arrow IPC blob (a row
    per batch, not per record, until the verdict is known), then its flows' delivery numbers."""
    deliveries: list[dict] = []
    for batch in records(deliveries):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema, options=BLOB_OPTIONS) as writer:
            writer.write_batch(batch)
        yield pa.RecordBatch.from_pylist(
            [{"kind": RECORDS, "batch": sink.getvalue().to_pybytes()}], schema=DECODED
        )
    yield pa.RecordBatch.from_pylist(
        [{"kind": DELIVERY, "text": json.dumps(d)} for d in deliveries], schema=DECODED
    )


def _unblobbed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The record batches of RECORDS rows of DECODED, as Spark rows."""
    for rows in batches:
        for blob in rows.column("batch").to_pylist():
            for batch in pa.ipc.open_stream(blob):
                yield spark_batch(batch, False)


def _packet_finding(name: str, d: dict) -> Finding:
    return Finding(
        d["code"], Severity(d["severity"]), d["message"], d["protocol"], None, None, d["frame"], d["ts"],
        d["fields"], capture=name,
    )  # fmt: skip


def combine_delivery(results: list[dict]) -> dict:
    """The sum of flows' delivery numbers per protocol (of places, the earliest kept)."""
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
    """The capture's delivery findings, from every flow's numbers."""
    found = _core.delivery_findings(json.dumps(combine_delivery(deliveries)))
    for f in found:
        f.capture = name
    return found


def _kept(df: DataFrame) -> DataFrame:
    """`df` computed once and kept on the executors' disks for its two readings. Spark's cache, not a
    local checkpoint: a cached block lost with its executor is computed again from its lineage, where
    a checkpoint's is gone and fails the job (CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND). The cache gathers
    rows into column batches in the heap first: a few rows each, as a row holds up to a few MB (the
    setting is read when the cache is planned, so it is put back at once)."""
    from pyspark import StorageLevel

    conf = df.sparkSession.conf
    before = conf.get(CACHE_BATCH_CONF)
    conf.set(CACHE_BATCH_CONF, str(ROWS_PER_CACHED_BATCH))
    try:
        return df.persist(StorageLevel.DISK_ONLY)
    finally:
        conf.set(CACHE_BATCH_CONF, before)


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


def routed(spark: SparkSession, path: str, name: str, splits: list[Split], groups: int) -> DataFrame:
    """Stages 2-3: the capture's routes, a partition per group of connections, in record order (as
    ROUTED rows)."""
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(ROWS_PER_BATCH))
    rows = [(s.index, s.start, s.next, s.first_frame, s.frames, s.context, b"", s.holes) for s in splits]
    pairs = spark.sparkContext.parallelize(rows, max(1, len(rows))).mapPartitions(
        lambda it: route_splits(path, name, groups, it)
    )
    # the group is the partition (a hash of the group's number would put two groups in one task)
    by_group = pairs.partitionBy(groups, lambda group: group).map(lambda kv: (kv[0], *kv[1]))
    return spark.createDataFrame(by_group, _spark_types(ROUTED)).sortWithinPartitions("split", "chunk")


def _groups_of_capture(
    spark: SparkSession, path: str, name: str, opts: Options, split_size: int, groups: int
) -> tuple[DataFrame, Options, bytes, pa.Array]:
    """Stages 1-4: the capture's routes by group (kept), the options of its groups, what a reader
    of its records is fed first, and the frames that opened its streams, sorted."""
    with phase(spark, f"wirelog: plan the splits of {name}"):
        splits = spark_plan(spark, path, split_size)
    opts = flow_options(opts, splits)
    context = splits[0].context if splits else b""
    kept = _kept(routed(spark, path, name, splits, groups))
    with phase(spark, f"wirelog: route and find the streams of {name}"):
        opened = kept.mapInArrow(
            lambda b: opened_streams(path, name, opts, context, b), _spark_types(OPENED)
        ).collect()
    return kept, opts, context, pa.array(sorted(r["frame"] for r in opened), pa.int64())


def read_split_capture(
    spark: SparkSession, path: str, name: str, opts: Options, split_size: int, partitions: int
) -> DataFrame:
    """The records of one uncompressed capture, read by many tasks (see the module docstring)."""
    from pyspark.sql import functions as F

    kept, opts, context, frames = _groups_of_capture(spark, path, name, opts, split_size, partitions)
    decoded = _kept(
        kept.mapInArrow(
            lambda b: _blobs(lambda d: group_records(path, name, opts, context, frames, b, d)),
            _spark_types(DECODED),
        )
    )
    with phase(spark, f"wirelog: decode {name}"):
        marks = decoded.filter(F.col("kind") == DELIVERY).select("text").collect()
    kept.unpersist()
    verdict = verdict_findings(name, [json.loads(r["text"]) for r in marks])
    rows = decoded.filter(F.col("kind") == RECORDS).mapInArrow(_unblobbed, spark_schema())
    if verdict:
        found = spark_batch(parquet.batch([parquet.row(f) for f in verdict]), False).to_pylist()
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
) -> list[spark_output.Written]:
    """The records of one uncompressed capture written by the tasks that decode them (engine/
    spark_output.py), the delivery findings by the driver; their manifests."""
    kept, opts, context, frames = _groups_of_capture(spark, path, name, opts, split_size, partitions)
    results = kept.mapInArrow(
        lambda b: _written(job, task, lambda d: group_records(path, name, opts, context, frames, b, d)),
        _spark_types(RESULTS),
    )
    try:
        with phase(spark, f"wirelog: decode and write {name}"):
            rows = results.collect()
    finally:
        kept.unpersist()
    written = spark_output.from_rows(r for r in rows if r["delivery"] is None)
    verdict = verdict_findings(name, [json.loads(r["delivery"]) for r in rows if r["delivery"] is not None])
    if verdict:
        written += spark_output.write_task(
            job, f"{task}-verdict", [parquet.batch([parquet.row(f) for f in verdict])]
        )
    return written
