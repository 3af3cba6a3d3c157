"""The typed tables (`convert --to parquet --tables -o DIR/`, docs/schema.md "Typed tables"): one
Parquet file per table, `DIR/<table>.parquet`, each with its fixed schema.

The core fills the tables' rows (native/src/records/tables.rs) and hands them over as one Arrow
batch per table; the findings Python receives as objects (TCP and capture findings) become rows of
the `findings` table here, a batch at a time. Every file is written in row groups as rows come
(memory holds one row group a table) and published together when all are complete; an interrupted
run leaves none of them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from wirelog import _core
from wirelog.export.atomic import AtomicFile, Published
from wirelog.export.parquet import COLUMNS, ROW_GROUP, RowGroups, batch, file_writer, row
from wirelog.model import Finding

TABLES = ("connections", "events", "batches", "cql", "findings")  # the core's, in order (a test checks)
# Columns whose values repeat (a dictionary pays) and JSON or distinct text (no statistics pay).
DICTIONARY_COLUMNS = (
    "capture", "stream", "client", "server", "direction", "protocol", "version", "kind", "delivery",
    "code", "severity", "state", "opcode", "response_opcode", "consistency", "keyspace", "result_kind",
    "outcome", "agent.type", "agent.name", "agent.version", "host.name", "event.dataset",
    "service.name", "log.file.path", "tls_version", "tls_cipher_suite", "tls_sni", "tls_alpn",
)  # fmt: skip
TEXT_COLUMNS = ("message", "event", "fields", "event_id", "query", "error_message", "prepared_id")


def schemas() -> dict[str, pa.Schema]:
    """Every table's fixed schema, by name, in the order the tables are written."""
    read = pa.RecordBatchReader.from_stream
    return {name: read(rows).schema for name, rows in _core.table_schemas().items()}


def findings_batch(findings: list[Finding], schema: pa.Schema) -> pa.RecordBatch:
    """Findings Python holds as objects (TCP, capture) as rows of the `findings` table (`schema`)."""
    rows = batch([row(f) for f in findings])
    return pa.RecordBatch.from_arrays([rows.column(COLUMNS.index(n)) for n in schema.names], schema=schema)


BATCH_ROWS = 8192  # findings gathered before they become a batch


class TablesWriter(Published):
    """Streams the typed tables into `directory`; `close()` publishes every file, `abort()` none.

    With `open_file` (a table's name → a writable binary stream) the files go there instead,
    published by the caller (the Spark engine's tasks: engine/spark_output.py commits them)."""

    def __init__(
        self,
        directory: str,
        row_group: int = ROW_GROUP,
        open_file: Callable[[str], Any] | None = None,
        threaded: bool = False,
    ) -> None:
        self.schemas = schemas()
        self._files: dict[str, AtomicFile] = {}
        self._sinks: list[Any] = []
        self._groups: dict[str, RowGroups] = {}
        try:
            if open_file is None:
                os.makedirs(directory, exist_ok=True)
            for name, schema in self.schemas.items():
                if open_file is None:
                    out = AtomicFile(os.path.join(directory, name + ".parquet"), ".parquet")
                    self._files[name] = out
                    sink = out.file
                else:
                    sink = open_file(name)
                    self._sinks.append(sink)
                writer = file_writer(sink, schema, DICTIONARY_COLUMNS, TEXT_COLUMNS)
                self._groups[name] = RowGroups(writer, row_group, threaded)
        except BaseException:
            self.abort()
            raise
        self._findings: list[Finding] = []
        self.rows = dict.fromkeys(self.schemas, 0)  # rows written, per table
        self.count = 0

    def write_batches(self, batches: dict[str, pa.RecordBatch]) -> None:
        """One batch per table, in the core's order."""
        self._flush_findings()
        for name, rows in batches.items():
            if rows.num_rows:
                self._groups[name].add(rows)
                self.rows[name] += rows.num_rows
                self.count += rows.num_rows

    def write_finding(self, finding: Finding) -> None:
        """A finding Python holds as an object (TCP, capture): a row of `findings`."""
        self._findings.append(finding)
        self.rows["findings"] += 1
        self.count += 1
        if len(self._findings) >= BATCH_ROWS:
            self._flush_findings()

    def _flush_findings(self) -> None:
        if self._findings:
            self._groups["findings"].add(findings_batch(self._findings, self.schemas["findings"]))
            self._findings = []

    def close(self) -> None:
        """Write the last row groups and footers, then publish the files; on failure leave none."""
        try:
            self._flush_findings()
            for groups in self._groups.values():
                groups.close()
        except BaseException:
            self.abort()
            raise
        for out in self._files.values():
            out.commit()
        for sink in self._sinks:
            sink.close()

    def abort(self) -> None:
        for groups in self._groups.values():
            groups.settle()
        for out in self._files.values():
            out.abort()
        for sink in self._sinks:
            with contextlib.suppress(Exception):
                sink.close()
        for groups in self._groups.values():
            with contextlib.suppress(Exception):
                groups.writer.close()
