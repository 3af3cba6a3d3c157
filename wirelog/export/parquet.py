"""Parquet: one documented schema (docs/schema.md) for every protocol, messages and findings alike.

Typed common columns come first so SQL engines can filter without parsing; protocol fields and the
event document are JSON text with Parquet's JSON logical type (DuckDB reads JSON, Spark strings for
`from_json`). The capture time is `ts`, a
UTC timestamp in microseconds (INT64 TIMESTAMP(MICROS, UTC): what Spark, Trino, DuckDB and pandas
all read as it is; Spark refuses nanosecond Parquet timestamps), and `ts_ns`, the exact nanoseconds
since the epoch as an integer. Findings are rows with
`record = 'finding'` in the same file: one file answers "what happened and what went wrong" with
one query. Rows are written in row groups as they come (memory stays flat), compressed with zstd,
through an AtomicFile: complete or not at all, and written in place to a device or FIFO.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from wirelog.export.atomic import AtomicFile, Published
from wirelog.export.json import dumps_line, json_default
from wirelog.model import Finding, Message

SCHEMA = pa.schema(
    [
        pa.field("record", pa.string(), nullable=False),
        pa.field("capture", pa.string(), nullable=False),
        pa.field("stream", pa.int64()),
        pa.field("client", pa.string()),
        pa.field("server", pa.string()),
        pa.field("direction", pa.string()),
        pa.field("frame", pa.int64()),
        pa.field("offset", pa.int64()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("ts_ns", pa.int64()),
        pa.field("protocol", pa.string(), nullable=False),
        pa.field("kind", pa.string()),
        pa.field("version", pa.string()),
        pa.field("length", pa.int64()),
        pa.field("seq", pa.int64()),
        pa.field("acked", pa.bool_()),
        pa.field("event_id", pa.string()),
        pa.field("delivery", pa.string()),
        pa.field("message", pa.string()),
        pa.field("code", pa.string()),
        pa.field("severity", pa.string()),
        pa.field("event", pa.string()),
        pa.field("fields", pa.string()),
    ]
)
COLUMNS = SCHEMA.names
# Encodings that pay: a dictionary only where values repeat (names, endpoints, kinds; frame numbers,
# offsets, times and JSON text are nearly all distinct, so a dictionary is built and then abandoned),
# and no min/max statistics on JSON text (no query prunes on them; they only fatten page headers).
# The Spark engine gives its writer the same choices (wirelog/engine/spark.py).
DICTIONARY_COLUMNS = (
    "record", "capture", "stream", "client", "server", "direction", "protocol", "kind", "version",
    "delivery", "code", "severity",
)  # fmt: skip
TEXT_COLUMNS = ("message", "event", "fields", "event_id")  # event_id: distinct per event, never pruned on
ROW_GROUP = 65_536
_INT64 = 1 << 63


def _json(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return orjson.dumps(value, default=json_default, option=orjson.OPT_NON_STR_KEYS).decode()
    except orjson.JSONEncodeError:  # integers beyond 64 bits: the stdlib path of the NDJSON writer
        return dumps_line(value)[:-1].decode()


def _seq(fields: dict[str, Any]) -> int | None:
    seq = fields.get("seq")
    return seq if type(seq) is int and -_INT64 <= seq < _INT64 else None


def row(rec: Message | Finding) -> tuple:
    """The values of one record in COLUMNS order."""
    direction = rec.direction.value if rec.direction is not None else None
    ts = rec.ts
    common = (
        rec.record,
        rec.capture,
        rec.stream,
        rec.client,
        rec.server,
        direction,
        rec.frame,
        rec.offset,
        None if ts is None else ts // 1000,  # microseconds, toward the past (as the core's rows)
        ts,
    )
    fields = _json(rec.fields) if rec.fields else None
    if isinstance(rec, Message):
        event = rec.event
        text = event.get("message") if isinstance(event, dict) else None
        return (
            *common,
            rec.protocol,
            rec.kind,
            rec.version,
            rec.length,
            _seq(rec.fields),
            rec.acked,
            rec.event_id,
            rec.delivery,
            text if isinstance(text, str) else None,
            None,
            None,
            _json(event),
            fields,
        )
    return (
        *common,
        rec.protocol,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
        rec.message,
        rec.code,
        rec.severity.value,
        None,
        fields,
    )


def batch(rows: list[tuple]) -> pa.RecordBatch:
    """A record batch of rows (tuples in COLUMNS order) with exactly SCHEMA."""
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in COLUMNS]
    arrays = [pa.array(col, type=f.type) for col, f in zip(columns, SCHEMA, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


JSON_COLUMNS = ("event", "fields")  # JSON text: Parquet's JSON logical type in the files


def file_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` as written to a file: its JSON text columns annotated with Parquet's JSON logical
    type (DuckDB reads them as JSON, Spark and pandas as strings, as before)."""
    for name in JSON_COLUMNS:
        at = schema.get_field_index(name)
        if at >= 0:
            f = schema.field(at)
            schema = schema.set(at, pa.field(name, pa.json_(), f.nullable))
    return schema


def file_writer(
    sink: Any,
    schema: pa.Schema = SCHEMA,
    dictionary: tuple[str, ...] = DICTIONARY_COLUMNS,
    text: tuple[str, ...] = TEXT_COLUMNS,
) -> pq.ParquetWriter:
    """A pyarrow writer with this schema's encoding choices (zstd; dictionaries and statistics only
    where they pay: `dictionary` columns, none on `text` columns), for the columns of `schema`
    (SCHEMA, SCHEMA without a partition column, or a typed table's), its JSON columns so typed."""
    names = schema.names
    return pq.ParquetWriter(
        sink,
        file_schema(schema),
        compression="zstd",
        use_dictionary=[c for c in dictionary if c in names],
        write_statistics=[c for c in names if c not in text],
    )


def _as_file(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """`batch` with its JSON text columns as the file's JSON type (no copy: the same buffers)."""
    if batch.schema.equals(schema):
        return batch
    columns = [
        pa.ExtensionArray.from_storage(f.type, c) if isinstance(f.type, pa.JsonType) else c
        for f, c in zip(schema, batch.columns, strict=True)
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


# Gathered batches are merged by this many: a batch costs its own bookkeeping (the arrays imported
# from the core, each with its schema), so a table of a few rows a batch (`--tables`: a window
# table's 40) held a row group's thousands of them and grew with the capture.
MERGED_AFTER = 64

_encoder: ThreadPoolExecutor | None = None


def _encoding_thread() -> ThreadPoolExecutor:
    """The one thread of this process that encodes and compresses row groups (pyarrow's
    `write_table` releases the GIL, and the core's decoding runs without it): the two halves of a
    conversion overlap on two cores. One thread for every file keeps each file's row groups in order."""
    global _encoder
    if _encoder is None:
        _encoder = ThreadPoolExecutor(1, thread_name_prefix="parquet-encoder")
    return _encoder


def _forget_encoding_thread() -> None:
    global _encoder
    _encoder = None  # a forked child (convert --jobs, Spark's Python workers) has no such thread


os.register_at_fork(after_in_child=_forget_encoding_thread)


class RowGroups:
    """Batches gathered into row groups of `row_group` rows, written to an open pyarrow writer: memory
    holds one row group in columnar form, whatever the batches' sizes.

    `threaded`: each row group is encoded on the encoding thread while the next is gathered, so
    memory holds two. For a serial conversion, whose decoding leaves a core idle (on a 2-core
    machine, a 315 MB Lumberjack capture: 20.2 → 15.5 s wall, CPU +8 %, peak RSS +64 MB); not
    where processes already use every core (`convert --jobs`, Spark's tasks) or the process may
    run on one CPU only (cli/writing.py `usable_cpus`): the CPU it adds would be lost there.
    Whoever abandons a threaded writer calls `settle()` before closing its sink: no write may
    still be running into it."""

    def __init__(self, writer: pq.ParquetWriter, row_group: int = ROW_GROUP, threaded: bool = False) -> None:
        self.writer = writer
        self.row_group = row_group
        self.threaded = threaded
        self._batches: list[pa.RecordBatch] = []
        self._merged = 0  # the first batches of `_batches` that are merges of smaller ones
        self._rows = 0
        self._encoding: Future[None] | None = None

    def add(self, rows: pa.RecordBatch) -> None:
        self._batches.append(_as_file(rows, self.writer.schema))
        self._rows += rows.num_rows
        if self._rows >= self.row_group:
            self.flush()
        elif len(self._batches) - self._merged >= MERGED_AFTER:
            recent = pa.Table.from_batches(self._batches[self._merged :], schema=self.writer.schema)
            self._batches[self._merged :] = recent.combine_chunks().to_batches()
            self._merged = len(self._batches)

    def flush(self) -> None:
        """The gathered batches as one row group: written, or (threaded) handed to the encoding
        thread once the row group it was encoding is written (an error writing that one is raised
        here)."""
        if self._batches:
            table = pa.Table.from_batches(self._batches, schema=self.writer.schema)
            self._batches, self._merged, self._rows = [], 0, 0
            if not self.threaded:
                self.writer.write_table(table, row_group_size=self.row_group)
                return
            self._wait()
            self._encoding = _encoding_thread().submit(
                self.writer.write_table, table, row_group_size=self.row_group
            )

    def _wait(self) -> None:
        encoding = self._encoding
        if encoding is None:
            return
        try:
            encoding.result()
        except Exception:
            self._encoding = None
            raise
        else:
            self._encoding = None  # an interrupt (KeyboardInterrupt) leaves it to `settle()`
        finally:
            # its error's traceback holds this frame: a cycle only the garbage collector would
            # end, and CPython 3.11 fails an AST being built while it collects one whose objects
            # have finalizers (a Python file's)
            del encoding

    def close(self) -> None:
        """The last row group and the footer."""
        self.flush()
        self._wait()
        self.writer.close()

    def settle(self) -> None:
        """For an abandoned writer: wait for the row group being encoded, whatever its outcome."""
        with contextlib.suppress(Exception):
            self._wait()


class ParquetWriter(Published):
    """Streams records into a Parquet file; `close()` publishes it, `abort()` leaves nothing.

    Records become Arrow batches every `BATCH_ROWS` rows (Python tuples cost ten times their Arrow
    size) and the batches of one row group are written together, so row groups stay `row_group` rows
    while memory holds only one row group in columnar form.
    """

    BATCH_ROWS = 8192

    def __init__(self, path: str, row_group: int = ROW_GROUP, threaded: bool = False) -> None:
        self.path = path
        self._out = AtomicFile(path, ".parquet")
        try:
            self._writer = file_writer(self._out.file)
        except BaseException:
            self._out.abort()
            raise
        self._groups = RowGroups(self._writer, row_group, threaded)
        self._rows: list[tuple] = []
        self._batch_rows = min(self.BATCH_ROWS, row_group)
        self.count = 0

    def write(self, rec: Message | Finding) -> None:
        self._rows.append(row(rec))
        self.count += 1
        if len(self._rows) >= self._batch_rows:
            self._to_batch()

    def write_batch(self, rows: pa.RecordBatch) -> None:
        """Rows already in columnar form (a batch of SCHEMA), after those written before."""
        self._to_batch()
        self._groups.add(rows)
        self.count += rows.num_rows

    def _to_batch(self) -> None:
        if self._rows:
            self._groups.add(batch(self._rows))
            self._rows = []

    def close(self) -> None:
        """Write the last row group and the footer, then publish the file; on failure leave nothing."""
        try:
            self._to_batch()
            self._groups.close()
        except BaseException:
            self.abort()
            raise
        self._out.commit()

    def abort(self) -> None:
        """Remove the temporary file; a device or FIFO gets no footer, so a reader sees no valid file."""
        self._groups.settle()
        self._out.abort()  # first: closing the Parquet writer after it cannot write the footer
        with contextlib.suppress(Exception):
            self._writer.close()
