"""One huge uncompressed capture on many Spark tasks: byte-range splits, segments shuffled by flow.

1. Plan (engine/splits.py): each byte range is scanned by a task (record boundaries, frame counts);
   the driver makes the plan exact and numbers frames.
2. Read: a task per split turns its packets into TCP segments (Arrow, no Python object per packet),
   each with its flow key (records/segments.rs: both hosts and the service port, so that a client
   reconnecting to the same service stays in the same group), and hands them on as a row per flow
   and chunk of the split (CHUNKS), not a row per segment.
3. Shuffle: the rows are repartitioned by flow and sorted by (flow, split, chunk): frame order. They
   are kept on the executors' disks for the two passes over them.
4. Streams: each flow is reassembled alone, without decoding, for the frames that open its streams;
   the driver sorts them all: a stream's id in the capture is its frame's rank (the local engine
   numbers streams in the order they open).
5. Decode: each flow is reassembled and decoded by its own core pipeline (exactly as the local engine
   decodes it), its streams numbered by those ranks, so its records are final as they are made: the
   tasks write them (Parquet, engine/spark_output.py) or hand them to Spark. Each flow's delivery
   verdict numbers leave beside them, and the driver turns their sum into the capture's delivery
   findings.

This module imports pyspark; only the Spark engine imports it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from wirelog import _core
from wirelog.engine import spark_output
from wirelog.engine.gc_tuning import tune_gc
from wirelog.engine.local import Options
from wirelog.engine.spark_source import spark_batch, spark_schema
from wirelog.engine.splits import Split, decode_flow, flow_options, opening_frames, plan, segment_batches
from wirelog.export import parquet
from wirelog.model import Finding, Message, RecordRows, Severity

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# What the read tasks hand the shuffle: a row per flow and chunk of a split, its segments one Arrow
# IPC stream in the core's segment schema (records/segments.rs). A row per segment made the JVM turn
# every packet into a row, shuffle, sort and turn it back into Arrow: on 309 MB that alone took as
# long as the local engine's whole conversion. Rows of a flow sort by (split, part): frame order.
CHUNKS = pa.schema(
    [
        ("flow", pa.binary()),  # both hosts and the service port; b"" for the packet layer's findings
        ("split", pa.int64()),
        ("part", pa.int64()),  # within the split: flush number * PIECES + the piece of the flow's segments
        ("finding", pa.string()),  # a finding of the packet layer (JSON), or null
        ("segments", pa.binary()),  # Arrow IPC stream of the flow's segments of this chunk, or null
    ]
)
# A read task hands on what it has gathered of a split every FLUSH_BYTES, so its memory is bounded by
# that, not by the split. Spark hands the Python workers CHUNKS_PER_BATCH rows per Arrow batch (rows
# of about PIECE_BYTES, below: ~64 MiB a batch); 8 a batch made the decode stage 1.2x slower (21-22 s
# against 18 s wall on 300 MB, back to back).
FLUSH_BYTES = 16 << 20
CHUNKS_PER_BATCH = 64
# A flow's segments of one flush are cut into pieces of about PIECE_BYTES, each its own row: the cache
# of the shuffled rows gathers ROWS_PER_CACHED_BATCH rows at a time in the JVM's heap (at most ~64 MB)
PIECE_BYTES = 1 << 20
PIECES = 1 << 16  # more pieces than a flush can make (FLUSH_BYTES / PIECE_BYTES, plus one per flow)
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
# Rows per column batch of a kept DataFrame. Reading many small cached batches back is slow (4 rows
# each made the decode stage 1.55x slower than 64 on a 309 MB capture), and a batch is built in the
# heap, so rows are kept small (PIECE_BYTES; a record blob of `read()` is up to a few MB).
ROWS_PER_CACHED_BATCH = 64


def _spark_types(schema: pa.Schema) -> str:
    names = {pa.int64(): "bigint", pa.int32(): "int", pa.binary(): "binary", pa.string(): "string"}
    return ", ".join(f"`{f.name}` {names[f.type]}" for f in schema)


def _finding_row(f: Finding, split: int, part: int) -> pa.RecordBatch:
    payload = json.dumps(
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
    return pa.RecordBatch.from_pylist(
        [{"flow": b"", "split": split, "part": part, "finding": payload}], schema=CHUNKS
    )


def _chunks(batches: list[pa.RecordBatch], split: int, part: int) -> pa.RecordBatch:
    """CHUNKS rows of a split's gathered segments: per flow, its segments in their order (a stable
    sort by flow) as IPC streams of about PIECE_BYTES each (uncompressed: Spark compresses its
    shuffle blocks)."""
    table = pa.Table.from_batches(batches)
    ordered = table.take(pc.sort_indices(table, sort_keys=[("flow", "ascending")])).combine_chunks()
    keys = ordered.column("flow")
    ends = pc.indices_nonzero(pc.not_equal(keys[1:], keys[:-1])).to_pylist() if len(keys) > 1 else []
    per_row = ordered.nbytes / max(1, len(keys))
    flows, parts, blobs, start = [], [], [], 0
    for end in [*(e + 1 for e in ends), len(keys)]:  # a step per flow and piece, not per segment
        step = max(1, int(PIECE_BYTES / per_row))
        for piece, lo in enumerate(range(start, end, step)):
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, ordered.schema) as writer:
                writer.write_table(ordered.slice(lo, min(step, end - lo)))
            flows.append(keys[start].as_py())
            parts.append(part * PIECES + piece)
            blobs.append(sink.getvalue().to_pybytes())
        start = end
    n = len(blobs)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(flows, pa.binary()),
            pa.array([split] * n, pa.int64()),
            pa.array(parts, pa.int64()),
            pa.nulls(n, pa.string()),
            pa.array(blobs, pa.binary()),
        ],
        schema=CHUNKS,
    )


def read_splits(
    path: str, name: str, opts: Options, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Stage 2 (a task): the segments of the splits in `batches` (rows of Split fields), as CHUNKS."""
    tune_gc()  # each stage runs in a Python worker, which the CLI's settings do not reach
    for rows in batches:
        for s in rows.to_pylist():
            split = Split(**s)
            gathered: list[pa.RecordBatch] = []
            size = part = 0
            for item in segment_batches(path, split, opts, name):
                if not isinstance(item, pa.RecordBatch):
                    yield _finding_row(item, split.index, part * PIECES)
                    continue
                gathered.append(item)
                size += item.nbytes
                if size >= FLUSH_BYTES:
                    yield _chunks(gathered, split.index, part)
                    gathered, size, part = [], 0, part + 1
            if gathered:
                yield _chunks(gathered, split.index, part)


def _flows(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[list[pa.RecordBatch], list[str]]]:
    """A partition's CHUNKS, sorted by (flow, split, part), flow by flow: its segments in frame order
    (Arrow batches of the segment schema) and the packet layer's findings (JSON texts, flow b"")."""
    segments: list[pa.RecordBatch] = []
    findings: list[str] = []
    key = None
    for rows in batches:
        flows, texts, blobs = (rows.column(c) for c in ("flow", "finding", "segments"))
        for i in range(rows.num_rows):  # a row per flow and chunk of a split, not per segment
            k = flows[i].as_py()
            if k != key:
                if segments or findings:
                    yield segments, findings
                segments, findings, key = [], [], k
            if blobs[i].is_valid:
                segments.extend(pa.ipc.open_stream(blobs[i].as_buffer()))
            else:
                findings.append(texts[i].as_py())
    if segments or findings:
        yield segments, findings


def opened_streams(name: str, opts: Options, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Stage 4 (a task): the frames that opened the streams of a partition's flows (OPENED rows)."""
    tune_gc()
    for segments, _ in _flows(batches):
        if segments:
            frames = opening_frames(name, segments, opts)
            yield pa.RecordBatch.from_arrays([pa.array(frames, pa.int64())], schema=OPENED)


def flow_records(
    name: str, opts: Options, frames: pa.Array, batches: Iterator[pa.RecordBatch], deliveries: list[dict]
) -> Iterator[pa.RecordBatch]:
    """Stage 5 (a task): the records of a partition's flows in the Parquet schema, their streams
    numbered by the rank of their opening frame among `frames` (all of the capture's, sorted); each
    flow's delivery verdict numbers go to `deliveries` as its records are done."""
    tune_gc()
    ranks = _core.StreamRanks(frames.to_pylist())  # once per task, shared by its flows' pipelines
    arrow = replace(opts, records="arrow")
    for segments, findings in _flows(batches):
        if findings:
            yield parquet.batch([parquet.row(_packet_finding(name, json.loads(t))) for t in findings])
        if not segments:
            continue
        delivery: dict = {}
        for item in decode_flow(name, segments, arrow, ranks, delivery):
            if isinstance(item, RecordRows):
                yield item.batch
            elif isinstance(item, Message | Finding):  # made in Python (a protocol only Python decodes)
                item.capture = name
                yield parquet.batch([parquet.row(item)])
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


def shuffled_segments(
    spark: SparkSession, path: str, name: str, opts: Options, splits: list[Split], partitions: int
) -> DataFrame:
    """Stages 2-3: the capture's TCP segments, read in splits, grouped by flow in frame order (as
    CHUNKS rows)."""
    # a row holds up to FLUSH_BYTES: Spark's default 10,000 rows per Arrow batch would be far too many
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(CHUNKS_PER_BATCH))
    rows = [(s.index, s.start, s.next, s.first_frame, s.frames, s.context, list(s.holes)) for s in splits]
    plan_df = spark.createDataFrame(
        rows,
        "index bigint, start bigint, next bigint, first_frame bigint, frames bigint, context binary,"
        " holes array<bigint>",
    ).repartition(max(1, len(splits)))
    chunks = plan_df.mapInArrow(lambda b: read_splits(path, name, opts, b), _spark_types(CHUNKS))
    return chunks.repartition(partitions, "flow").sortWithinPartitions("flow", "split", "part")


def _flows_of_capture(
    spark: SparkSession, path: str, name: str, opts: Options, split_size: int, partitions: int
) -> tuple[DataFrame, Options, pa.Array]:
    """Stages 1-4: the capture's segments grouped by flow (kept), the options of its flows, and the
    frames that opened its streams, sorted."""
    with phase(spark, f"wirelog: plan the splits of {name}"):
        splits = spark_plan(spark, path, split_size)
    opts = flow_options(opts, splits)
    flows = _kept(shuffled_segments(spark, path, name, opts, splits, partitions))
    with phase(spark, f"wirelog: read, shuffle and find the streams of {name}"):
        opened = flows.mapInArrow(lambda b: opened_streams(name, opts, b), _spark_types(OPENED)).collect()
    return flows, opts, pa.array(sorted(r["frame"] for r in opened), pa.int64())


def read_split_capture(
    spark: SparkSession, path: str, name: str, opts: Options, split_size: int, partitions: int
) -> DataFrame:
    """The records of one uncompressed capture, read by many tasks (see the module docstring)."""
    from pyspark.sql import functions as F

    flows, opts, frames = _flows_of_capture(spark, path, name, opts, split_size, partitions)
    decoded = _kept(
        flows.mapInArrow(
            lambda b: _blobs(lambda d: flow_records(name, opts, frames, b, d)), _spark_types(DECODED)
        )
    )
    with phase(spark, f"wirelog: decode {name}"):
        marks = decoded.filter(F.col("kind") == DELIVERY).select("text").collect()
    flows.unpersist()
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
    flows, opts, frames = _flows_of_capture(spark, path, name, opts, split_size, partitions)
    results = flows.mapInArrow(
        lambda b: _written(job, task, lambda d: flow_records(name, opts, frames, b, d)),
        _spark_types(RESULTS),
    )
    try:
        with phase(spark, f"wirelog: decode and write {name}"):
            rows = results.collect()
    finally:
        flows.unpersist()
    written = spark_output.from_rows(r for r in rows if r["delivery"] is None)
    verdict = verdict_findings(name, [json.loads(r["delivery"]) for r in rows if r["delivery"] is not None])
    if verdict:
        written += spark_output.write_task(
            job, f"{task}-verdict", [parquet.batch([parquet.row(f) for f in verdict])]
        )
    return written
