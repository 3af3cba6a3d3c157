"""The `wirelog-hercules` PySpark data source writer: rows of the `wirelog` source → Hercules event files.

`df.write.format("wirelog-hercules").mode("overwrite").save(DIR)` writes one part file of concatenated
Hercules events (the form of a Kafka dump, as `wirelog convert --to hercules` writes) per task. Message
rows become events through the same HerculesWriter as the local engine, in the task's row order, so a
reader partitioned by whole captures gives the events (and deterministic UUIDs) of the local engine;
finding rows are not events and are skipped, as locally. With the reader's `exactTime` option the
`ts_ns` column restores nanosecond capture times, making the bytes identical to the local output.

Each task writes `_temporary/…` and the driver's commit renames the parts into place and writes
`_SUCCESS`; mapping notes (renamed or truncated keys) go to `_mapping-notes.ndjson`. The directory must
be on a filesystem every executor can write (a local disk for local[N], a shared mount on a cluster).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from wirelog.export.hercules import HerculesWriter
from wirelog.export.json import dumps
from wirelog.model import Direction, Message

NOTES = "_mapping-notes.ndjson"
_MAX_NOTES = 1000  # per task: notes are reported once per key, but keys can be unbounded


def _loads(text: str | None) -> object:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # integers beyond 64 bits
        return json.loads(text)


def row_messages(batch: pa.RecordBatch) -> Iterator[Message]:
    """The Message of every `record = 'message'` row (fields and event parsed back from JSON)."""
    names = batch.schema.names
    cols = {n: batch.column(n).to_pylist() for n in names if n != "ts"}
    if "ts_ns" in cols:
        ts = cols["ts_ns"]
    else:
        ts = [None if t is None else t * 1000 for t in batch.column("ts").cast(pa.int64()).to_pylist()]
    for i, record in enumerate(cols["record"]):
        if record != "message":
            continue
        direction = cols["direction"][i]
        yield Message(
            protocol=cols["protocol"][i],
            kind=cols["kind"][i],
            direction=Direction(direction) if direction is not None else None,
            offset=cols["offset"][i],
            length=cols["length"][i],
            frame=cols["frame"][i],
            ts=ts[i],
            version=cols["version"][i],
            fields=_loads(cols["fields"][i]) or {},
            event=_loads(cols["event"][i]),
            acked=cols["acked"][i],
            stream=cols["stream"][i],
            capture=cols["capture"][i],
            client=cols["client"][i],
            server=cols["server"][i],
        )


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
                for msg in row_messages(batch):
                    for note in writer.write(msg):
                        if len(result.notes) < _MAX_NOTES:
                            result.notes.append(dumps(note))
                    result.events += 1
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
