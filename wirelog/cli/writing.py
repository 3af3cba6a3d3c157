"""Writing records to one output in one of `convert`'s formats (shared by the serial and the
parallel conversion)."""

from __future__ import annotations

import os
from collections.abc import Iterable

import orjson

from wirelog.cli.common import error
from wirelog.cli.output import open_output
from wirelog.export.hercules import HerculesWriter, is_events
from wirelog.export.json import JsonWriter
from wirelog.model import Finding, Message, RecordLines, RecordRows, TableRows

SUFFIX = {"json": ".ndjson", "parquet": ".parquet", "hercules": ".bin"}
# The form the core gives its decoders' records in, per output format (engine Options.records):
# NDJSON, Arrow rows and Hercules events, each written by the core with no Python object per record.
RECORDS = {"json": "ndjson", "parquet": "arrow", "hercules": "hercules"}


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: taskset, a container's cpuset), what
    `--jobs 0` means and what decides Parquet's encoding thread (it only adds CPU, 2-8 %, where it
    cannot run beside the decoding)."""
    affinity = getattr(os, "sched_getaffinity", None)  # not on macOS
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def write_records(fmt: str, output: str, items: Iterable, threaded: bool = False) -> int:
    """Write the records among `items` to `output`; returns how many were written (a batch's size
    added once per batch). `threaded`: Parquet row groups are encoded on a thread of their own
    (a serial conversion's; export/parquet.py `RowGroups`)."""
    records = (
        i for i in items if isinstance(i, Message | Finding | RecordLines | RecordRows) or is_events(i)
    )
    written = 0
    if fmt == "parquet":
        from wirelog.export.parquet import ParquetWriter  # imported here: pyarrow costs ~70 ms of start-up

        with ParquetWriter(output, threaded=threaded and usable_cpus() > 1) as writer:
            for rec in records:
                if isinstance(rec, RecordRows):
                    writer.write_batch(rec.batch)
                    written += rec.batch.num_rows
                else:
                    writer.write(rec)
                    written += 1
        return written
    with open_output(output) as out:
        if fmt == "json":
            writer = JsonWriter(out)
            for rec in records:
                if isinstance(rec, RecordLines):
                    writer.write_lines(rec.data, rec.count)
                    written += rec.count
                else:
                    writer.write(rec)
                    written += 1
            writer.close()
        else:
            written = write_hercules(out, records)
    return written


def write_tables(output: str, items: Iterable) -> int:
    """The typed tables of `items` into the directory `output` (docs/schema.md); returns the rows
    written to all tables."""
    from wirelog.export.tables import TablesWriter  # pyarrow: only when asked for

    with TablesWriter(output, threaded=usable_cpus() > 1) as writer:
        for item in items:
            if isinstance(item, TableRows):
                writer.write_batches(item.batches)
            elif isinstance(item, Finding):
                writer.write_finding(item)
    return writer.count


_RENAMED = "hercules.export-key-renamed"
_SHOWN = 3  # renamed keys named in the summary line


def write_hercules(out, records: Iterable) -> int:
    """Messages become events (docs/hercules.md). Keys renamed by the mapping are summed up in one
    line on stderr at the end (a capture of Beats events renames `@timestamp`, `@metadata`...); the
    other notes (a key cut short, an object cut to 65535 tags: data changed) have a line each.
    Returns the number of events written."""
    writer = HerculesWriter(out)
    renamed: list[tuple[str, str]] = []
    written = 0
    for rec in records:
        if isinstance(rec, Finding):
            continue
        writer.write(rec)
        written += len(rec) if is_events(rec) else 1
        _report(writer.notes(), renamed)
    writer.close()
    _report(writer.notes(), renamed)
    if renamed:
        error(_renamed_line(renamed))
    return written


def _report(notes: list[tuple[str, bytes]], renamed: list[tuple[str, str]]) -> None:
    for message, line in notes:
        finding = orjson.loads(line)
        if finding["code"] == _RENAMED:
            renamed.append((finding["key"], finding["name"]))
        else:
            error(f"hercules: {message}")


def _renamed_line(renamed: list[tuple[str, str]]) -> str:
    """`hercules: 2 keys outside the tag-name rules escaped (reversible, ...): '@a' as '_x40a', ...`"""
    shown = ", ".join(f"{key!r} as {name!r}" for key, name in renamed[:_SHOWN])
    more = f" and {len(renamed) - _SHOWN} more" if len(renamed) > _SHOWN else ""
    keys = "key" if len(renamed) == 1 else "keys"
    return (
        f"hercules: {len(renamed)} {keys} outside the tag-name rules escaped (reversible, "
        f"docs/hercules.md): {shown}{more}"
    )
