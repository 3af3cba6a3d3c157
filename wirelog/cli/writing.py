"""Writing records to one output in one of `convert`'s formats (shared by the serial and the
parallel conversion)."""

from __future__ import annotations

from collections.abc import Iterable

from wirelog.cli.common import error
from wirelog.cli.output import open_output
from wirelog.export.hercules import HerculesWriter, is_events
from wirelog.export.json import JsonWriter
from wirelog.model import Finding, Message, RecordLines, RecordRows

SUFFIX = {"json": ".ndjson", "parquet": ".parquet", "hercules": ".bin"}
# The form the core gives its decoders' records in, per output format (engine Options.records):
# NDJSON, Arrow rows and Hercules events, each written by the core with no Python object per record.
RECORDS = {"json": "ndjson", "parquet": "arrow", "hercules": "hercules"}


def write_records(fmt: str, output: str, items: Iterable) -> None:
    records = (
        i for i in items if isinstance(i, Message | Finding | RecordLines | RecordRows) or is_events(i)
    )
    if fmt == "parquet":
        from wirelog.export.parquet import ParquetWriter  # imported here: pyarrow costs ~70 ms of start-up

        with ParquetWriter(output) as writer:
            for rec in records:
                if isinstance(rec, RecordRows):
                    writer.write_batch(rec.batch)
                else:
                    writer.write(rec)
        return
    with open_output(output) as out:
        if fmt == "json":
            writer = JsonWriter(out)
            for rec in records:
                if isinstance(rec, RecordLines):
                    writer.write_lines(rec.data, rec.count)
                else:
                    writer.write(rec)
            writer.close()
        else:
            write_hercules(out, records)


def write_hercules(out, records: Iterable) -> None:
    """Messages become events (docs/hercules.md); mapping notes (renamed keys, ...) are reported
    once on stderr."""
    writer = HerculesWriter(out)
    for rec in records:
        if isinstance(rec, Finding):
            continue
        writer.write(rec)
        for message, _ in writer.notes():
            error(f"hercules: {message}")
    writer.close()
