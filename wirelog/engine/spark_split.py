"""One huge uncompressed capture on many Spark tasks: byte-range splits, segments shuffled by flow.

1. Plan (engine/splits.py): each byte range is scanned by a task (record boundaries, frame counts);
   the driver makes the plan exact and numbers frames.
2. Read: a task per split turns its packets into TCP segments (Arrow, no Python object per packet),
   each with its flow key (records/segments.rs: both hosts and the service port, so that a client
   reconnecting to the same service stays in the same group), and hands them on as a row per flow
   and chunk of the split (CHUNKS), not a row per segment.
3. Shuffle: the rows are repartitioned by flow and sorted by (flow, split, chunk): frame order.
4. Decode: each flow is reassembled and decoded by its own core pipeline (exactly as the local engine
   decodes it). Stream ids are the frames that opened the streams. The records leave as Arrow IPC
   blobs, a row per batch, and are kept on disk: turning every record into a Spark row to keep it,
   and back to Arrow to renumber it, cost four times the decoding. Each opened stream and each
   flow's delivery verdict numbers leave as a small row beside them.
5. Aggregate: the driver ranks the opening frames (a stream's id in the capture is its rank, as the
   local engine numbers streams as they open) and turns the sum of the flows' verdict numbers into
   the capture's delivery findings; the blobs are opened, renumbered and become rows once.

This module imports pyspark; only the Spark engine imports it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from wirelog import _core
from wirelog.engine import spark_output
from wirelog.engine.local import Options
from wirelog.engine.spark_source import spark_batch, spark_schema
from wirelog.engine.splits import STREAM_FIELDS, Split, decode_flow, flow_options, plan, segment_batches
from wirelog.export import parquet
from wirelog.model import Finding, Message, RecordRows, Severity, StreamInfo

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
        ("part", pa.int64()),  # the read task's flush number within its split
        ("finding", pa.string()),  # a finding of the packet layer (JSON), or null
        ("segments", pa.binary()),  # Arrow IPC stream of the flow's segments of this chunk, or null
    ]
)
# A read task hands on what it has gathered of a split every FLUSH_BYTES, so its memory is bounded by
# that, not by the split; Spark gets CHUNKS_PER_BATCH rows per Arrow batch (each up to FLUSH_BYTES).
FLUSH_BYTES = 16 << 20
CHUNKS_PER_BATCH = 8
# what the decode stage hands the aggregation: record batches (Arrow IPC), opened streams, verdicts
RECORDS, OPENED, DELIVERY = "records", "opened", "delivery"
BLOB_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")  # records are kept on disk until written
CACHE_BATCH_CONF = "spark.sql.inMemoryColumnarStorage.batchSize"
BLOBS_PER_CACHED_BATCH = 16
DECODED = pa.schema(
    [("kind", pa.string()), ("frame", pa.int64()), ("text", pa.string()), ("batch", pa.binary())]
)


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
    sort by flow) as one IPC stream (uncompressed: Spark compresses its shuffle blocks)."""
    table = pa.Table.from_batches(batches)
    ordered = table.take(pc.sort_indices(table, sort_keys=[("flow", "ascending")])).combine_chunks()
    keys = ordered.column("flow")
    ends = pc.indices_nonzero(pc.not_equal(keys[1:], keys[:-1])).to_pylist() if len(keys) > 1 else []
    flows, blobs, start = [], [], 0
    for end in [*(e + 1 for e in ends), len(keys)]:  # a step per flow, not per segment
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, ordered.schema) as writer:
            writer.write_table(ordered.slice(start, end - start))
        flows.append(keys[start].as_py())
        blobs.append(sink.getvalue().to_pybytes())
        start = end
    n = len(blobs)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(flows, pa.binary()),
            pa.array([split] * n, pa.int64()),
            pa.array([part] * n, pa.int64()),
            pa.nulls(n, pa.string()),
            pa.array(blobs, pa.binary()),
        ],
        schema=CHUNKS,
    )


def read_splits(path: str, name: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Stage 2 (a task): the segments of the splits in `batches` (rows of Split fields), as CHUNKS."""
    for rows in batches:
        for s in rows.to_pylist():
            split = Split(**s)
            gathered: list[pa.RecordBatch] = []
            size = part = 0
            for item in segment_batches(path, split, name):
                if not isinstance(item, pa.RecordBatch):
                    yield _finding_row(item, split.index, part)
                    continue
                gathered.append(item)
                size += item.nbytes
                if size >= FLUSH_BYTES:
                    yield _chunks(gathered, split.index, part)
                    gathered, size, part = [], 0, part + 1
            if gathered:
                yield _chunks(gathered, split.index, part)


def _decoded(
    name: str, segments: list[pa.RecordBatch], findings: list[str], opts: Options
) -> Iterator[pa.RecordBatch]:
    """One flow's records (rows of DECODED, each an Arrow IPC batch of the Parquet schema), its opened
    streams and its verdict numbers; or the packet layer's `findings` (JSON texts)."""
    if findings:
        records = [_packet_finding(name, json.loads(text)) for text in findings]
        yield _records(parquet.batch([parquet.row(r) for r in records]))
    if not segments:
        return
    opened: list[int] = []
    delivery = {}
    for item in decode_flow(name, segments, replace(opts, records="arrow"), delivery):
        if isinstance(item, RecordRows):
            yield _records(item.batch)
        elif isinstance(item, StreamInfo):
            opened.append(item.stream)
        elif isinstance(item, Message | Finding):  # made in Python (a protocol only Python decodes)
            item.capture = name
            yield _records(parquet.batch([parquet.row(item)]))
    if opened or delivery:
        yield _marks(opened, json.dumps(delivery) if delivery else None)


def _records(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A DECODED row holding `batch` as an Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=BLOB_OPTIONS) as writer:
        writer.write_batch(batch)
    return pa.RecordBatch.from_pylist(
        [{"kind": RECORDS, "batch": sink.getvalue().to_pybytes()}], schema=DECODED
    )


def _marks(opened: list[int], delivery: str | None) -> pa.RecordBatch:
    """DECODED rows for the aggregation: one per opened stream (its opening frame), one with the verdict."""
    rows = [{"kind": OPENED, "frame": frame} for frame in opened]
    if delivery is not None:
        rows.append({"kind": DELIVERY, "text": delivery})
    return pa.RecordBatch.from_pylist(rows, schema=DECODED)


def opened_records(batches: Iterator[pa.RecordBatch], opened: pa.Array) -> Iterator[pa.RecordBatch]:
    """Stage 5 (a task): the records of DECODED rows, with the capture's stream ids (Parquet schema)."""
    for rows in batches:
        for blob in rows.column("batch").to_pylist():
            for batch in pa.ipc.open_stream(blob):
                yield renumber_batch(batch, opened)


def _written(
    job: spark_output.Job, task: str, batches: Iterator[pa.RecordBatch], opened: pa.Array
) -> Iterator[pa.RecordBatch]:
    """Stage 5 when the tasks write Parquet: this task's records written, its manifest as the result."""
    from pyspark import TaskContext

    part = f"{task}-{TaskContext.get().partitionId():05d}"
    yield spark_output.manifest_batch(spark_output.write_task(job, part, opened_records(batches, opened)))


def _packet_finding(name: str, d: dict) -> Finding:
    return Finding(
        d["code"], Severity(d["severity"]), d["message"], d["protocol"], None, None, d["frame"], d["ts"],
        d["fields"], capture=name,
    )  # fmt: skip


def decode_flows(name: str, opts: Options, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Stage 4 (a task): a partition's CHUNKS, sorted by (flow, split, part), decoded flow by flow."""
    segments: list[pa.RecordBatch] = []
    findings: list[str] = []
    key = None
    for rows in batches:
        flows, texts, blobs = (rows.column(c) for c in ("flow", "finding", "segments"))
        for i in range(rows.num_rows):  # a row per flow and chunk of a split, not per segment
            k = flows[i].as_py()
            if k != key:
                yield from _decoded(name, segments, findings, opts)
                segments, findings, key = [], [], k
            if blobs[i].is_valid:
                segments.extend(pa.ipc.open_stream(blobs[i].as_buffer()))
            else:
                findings.append(texts[i].as_py())
    yield from _decoded(name, segments, findings, opts)


def combine_delivery(results: list[dict], rank: dict[int, int]) -> dict:
    """The sum of flows' delivery numbers per protocol (places renumbered, the earliest kept)."""
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
                    places = [{**p, "stream": rank.get(p.get("stream"), p.get("stream"))} for p in v]
                    total[k] = sorted(total.get(k, []) + places, key=lambda p: p.get("frame") or 0)[
                        : len(v) or 1
                    ]
                else:
                    total.setdefault(k, v)
    return out


def renumber_batch(batch: pa.RecordBatch, opened: pa.Array) -> pa.RecordBatch:
    """A batch with the capture's stream ids: the rank of each stream's opening frame among all."""
    columns = batch.columns
    at = parquet.COLUMNS.index("stream")
    columns[at] = pc.index_in(columns[at], value_set=opened).cast(pa.int64())
    fields_at = parquet.COLUMNS.index("fields")
    fields = columns[fields_at]
    names = "|".join(f'"{k}"' for k in (*STREAM_FIELDS, "stream"))
    hits = pc.match_substring_regex(fields, names)
    if pc.any(hits).as_py():
        frames = opened.to_pylist()
        rank = {f: i for i, f in enumerate(frames)}
        texts = fields.to_pylist()
        for i, hit in enumerate(hits.to_pylist()):
            if hit:
                texts[i] = _renumber_fields(texts[i], rank)
        columns[fields_at] = pa.array(texts, pa.string())
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)


def _renumber_fields(text: str, rank: dict[int, int]) -> str:
    fields = json.loads(text)
    for key in STREAM_FIELDS:
        if isinstance(fields.get(key), int):
            fields[key] = rank.get(fields[key], fields[key])
    for value in fields.values():
        if isinstance(value, dict) and isinstance(value.get("stream"), int):
            value["stream"] = rank.get(value["stream"], value["stream"])
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def _kept(decoded: DataFrame) -> DataFrame:
    """`decoded` computed once and kept on the executors' disks for its two readings. Spark's cache,
    not a local checkpoint: a cached block lost with its executor is computed again from its lineage,
    where a checkpoint's is gone and fails the job (CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND). The cache
    gathers rows into column batches in the heap first: a few rows each, as a record blob is up to a
    few MB (the setting is read when the cache is planned, so it is put back at once)."""
    from pyspark import StorageLevel

    conf = decoded.sparkSession.conf
    before = conf.get(CACHE_BATCH_CONF)
    conf.set(CACHE_BATCH_CONF, str(BLOBS_PER_CACHED_BATCH))
    try:
        return decoded.persist(StorageLevel.DISK_ONLY)
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
    spark: SparkSession, path: str, name: str, splits: list[Split], partitions: int
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
    chunks = plan_df.mapInArrow(lambda b: read_splits(path, name, b), _spark_types(CHUNKS))
    return chunks.repartition(partitions, "flow").sortWithinPartitions("flow", "split", "part")


def _decoded_capture(
    spark: SparkSession, path: str, name: str, opts: Options, split_size: int, partitions: int
) -> tuple[DataFrame, pa.Array, list[Finding]]:
    """Stages 1-4 and the aggregation: the records (DECODED rows, kept), the opening frames of all
    streams in order, and the capture's delivery findings."""
    from pyspark.sql import functions as F

    with phase(spark, f"wirelog: plan the splits of {name}"):
        splits = spark_plan(spark, path, split_size)
    opts = flow_options(opts, splits)
    decoded = shuffled_segments(spark, path, name, splits, partitions).mapInArrow(
        lambda b: decode_flows(name, opts, b), _spark_types(DECODED)
    )
    decoded = _kept(decoded)
    with phase(spark, f"wirelog: read, shuffle and decode {name}"):
        marks = decoded.filter(F.col("kind") != RECORDS).select("kind", "frame", "text").collect()
    opened = pa.array(sorted({r["frame"] for r in marks if r["kind"] == OPENED}), pa.int64())
    rank = {f: i for i, f in enumerate(opened.to_pylist())}
    results = [json.loads(r["text"]) for r in marks if r["kind"] == DELIVERY]
    verdict = _core.delivery_findings(json.dumps(combine_delivery(results, rank)))
    for f in verdict:
        f.capture = name
    return decoded.filter(F.col("kind") == RECORDS), opened, verdict


def read_split_capture(
    spark: SparkSession, path: str, name: str, opts: Options, split_size: int, partitions: int
) -> DataFrame:
    """The records of one uncompressed capture, read by many tasks (see the module docstring)."""
    records, opened, verdict = _decoded_capture(spark, path, name, opts, split_size, partitions)
    rows = records.mapInArrow(
        lambda b: (spark_batch(r, False) for r in opened_records(b, opened)), spark_schema()
    )
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
    """The records of one uncompressed capture written by the tasks that renumber them (stage 5
    writes Parquet, engine/spark_output.py), the delivery findings by the driver; their manifests."""
    records, opened, verdict = _decoded_capture(spark, path, name, opts, split_size, partitions)
    manifests = records.mapInArrow(lambda b: _written(job, task, b, opened), spark_output.MANIFEST_DDL)
    with phase(spark, f"wirelog: write {name}"):
        written = spark_output.from_rows(manifests.collect())
    if verdict:
        rows = parquet.batch([parquet.row(f) for f in verdict])
        written += spark_output.write_task(job, f"{task}-verdict", [rows])
    return written
