"""The `wirelog-hercules` PySpark data source writer: rows of the `wirelog` source → Hercules event files.

`df.write.format("wirelog-hercules").mode("overwrite").save(DIR)` writes one part file of concatenated
Hercules events (the form of a Kafka dump, as `wirelog convert --to hercules` writes) per task. Message
rows become events in the core, through the same encoder as the local engine (the task's Arrow batches
go to it whole, in row order), so a reader partitioned by whole captures gives the events (and
deterministic UUIDs) of the local engine;
finding rows are not events and are skipped, as locally. The rows' `ts_ns` column gives the exact
nanosecond capture times, making the bytes identical to the local output.

Each task writes `_temporary/…` and the driver's commit renames the parts into place and writes
`_SUCCESS`; mapping notes (renamed or truncated keys) go to `_mapping-notes.ndjson`. The directory must
be on a filesystem every executor can write (a local disk for local[N], a shared mount on a cluster).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from wirelog.export.hercules import HerculesWriter

NOTES = "_mapping-notes.ndjson"
_MAX_NOTES = 1000  # per task: notes are reported once per key, but keys can be unbounded


@dataclass
class HerculesPart(WriterCommitMessage):
    temp: str
    final: str
    events: int
    notes: list[bytes] = field(default_factory=list)


class HerculesPartWriter(DataSourceArrowWriter):
    def __init__(self, directory: str, overwrite: bool) -> None:
        self.directory = directory
        self.overwrite = overwrite
        self.job = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> HerculesPart:
        ctx = TaskContext.get()
        part, attempt = (ctx.partitionId(), ctx.attemptNumber()) if ctx else (0, 0)
        temp_dir = os.path.join(self.directory, "_temporary", self.job)
        os.makedirs(temp_dir, exist_ok=True)
        temp = os.path.join(temp_dir, f"part-{part:05d}-{attempt}.bin")
        result = HerculesPart(temp, f"part-{part:05d}-{self.job}.bin", 0)
        with open(temp, "wb") as out:
            writer = HerculesWriter(out)
            for batch in iterator:
                writer.write_batch(batch)
                result.events += pc.sum(pc.equal(batch.column("record"), "message")).as_py() or 0
                for _, line in writer.notes():
                    if len(result.notes) < _MAX_NOTES:
                        result.notes.append(line)
            writer.close()
        return result

    def commit(self, messages: list[HerculesPart | None]) -> None:
        if self.overwrite:
            for old in glob.glob(os.path.join(self.directory, "part-*.bin")):
                os.unlink(old)
            for name in ("_SUCCESS", NOTES):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.directory, name))
        notes = []
        for m in messages:
            if m is not None:
                os.replace(m.temp, os.path.join(self.directory, m.final))
                notes += m.notes
        if notes:
            with open(os.path.join(self.directory, NOTES), "ab") as f:
                f.writelines(notes)
        self._cleanup()
        with open(os.path.join(self.directory, "_SUCCESS"), "wb"):
            pass

    def abort(self, messages: list[HerculesPart | None]) -> None:
        self._cleanup()

    def _cleanup(self) -> None:
        shutil.rmtree(os.path.join(self.directory, "_temporary", self.job), ignore_errors=True)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.join(self.directory, "_temporary"))


class HerculesDataSource(DataSource):
    """`df.write.format("wirelog-hercules").mode("overwrite"|"append").save(DIR)`."""

    @classmethod
    def name(cls) -> str:
        return "wirelog-hercules"

    def writer(self, schema: StructType, overwrite: bool) -> HerculesPartWriter:
        if "path" not in self.options:
            raise ValueError("wirelog-hercules: give the output directory to save(), e.g. save('out/')")
        directory = os.path.abspath(self.options["path"])
        os.makedirs(directory, exist_ok=True)
        return HerculesPartWriter(directory, overwrite)
