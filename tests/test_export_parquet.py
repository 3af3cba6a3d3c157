"""ParquetWriter: row groups of the asked size whatever the internal batching, every record kept."""

from __future__ import annotations

import errno
import gc
import io
import os
import subprocess
import sys
import weakref

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.parquet_helpers import assert_wirelog_encodings
from wirelog.export.parquet import MERGED_AFTER, ParquetWriter, RowGroups, batch, file_writer, row
from wirelog.model import Direction, Message


def event(i: int) -> Message:
    return Message(
        "lumberjack", "event", Direction.C2S, i * 100, 100, i + 1, 1_763_700_000_000_000_000 + i, "2",
        {"seq": i}, {"message": f"line {i}", "host": "web-1"}, True, 0, "cap.pcap", "10.0.0.1:1", "10.0.0.2:5044",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("records", "row_group", "groups"),
    [(40_000, 16_384, [16_384, 16_384, 7_232]), (12_000, 5_000, [5_000, 5_000, 2_000]), (3, 65_536, [3])],
)
@pytest.mark.parametrize("threaded", [False, True])
def test_row_groups_have_the_asked_size(tmp_path, records, row_group, groups, threaded):
    out = tmp_path / "out.parquet"
    writer = ParquetWriter(str(out), row_group=row_group, threaded=threaded)
    for i in range(records):
        writer.write(event(i))
    writer.close()
    meta = pq.ParquetFile(out).metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == groups
    table = pq.read_table(out, columns=["frame", "seq", "message"])
    assert table.column("frame").to_pylist() == list(range(1, records + 1))
    assert table.column("message").to_pylist()[-1] == f"line {records - 1}"
    assert_wirelog_encodings(out)


class _FillsUp(io.RawIOBase):
    """A sink that takes `room` bytes, then refuses like a full disk."""

    def __init__(self, room: int) -> None:
        self.room = room

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return len(data)


def _rows(start: int, count: int) -> pa.RecordBatch:
    return batch([row(event(i)) for i in range(start, start + count)])


def test_a_row_group_that_cannot_be_written_fails_the_writer():
    # row groups are encoded on a thread of their own: its error must still reach the caller
    sink = _FillsUp(room=20_000)
    groups = RowGroups(file_writer(sink), row_group=1_000, threaded=True)
    freed = weakref.ref(sink)
    gc.disable()
    try:
        with pytest.raises(OSError, match="No space left"):
            for start in range(0, 20_000, 1_000):
                groups.add(_rows(start, 1_000))
            groups.close()
        groups.settle()  # an abandoned writer: nothing left running, nothing raised
        del groups, sink
        # freed at once, not left in a cycle for the collector (whose finalizers, run while
        # CPython 3.11 builds an AST, fail it: pytest's own imports at the end of a run)
        assert freed() is None
    finally:
        gc.enable()


def test_files_written_side_by_side_keep_their_own_rows_in_order(tmp_path):
    paths = [tmp_path / f"{n}.parquet" for n in range(3)]
    writers = [RowGroups(file_writer(pa.OSFile(str(p), "wb")), row_group=1_000, threaded=True) for p in paths]
    for start in range(0, 5_000, 500):
        for n, groups in enumerate(writers):
            groups.add(_rows(start + n * 100_000, 500))
    for groups in writers:
        groups.close()
    for n, path in enumerate(paths):
        meta = pq.ParquetFile(path).metadata
        assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [1_000] * 5
        frames = pq.read_table(path, columns=["frame"]).column("frame").to_pylist()
        assert frames == [n * 100_000 + i + 1 for i in range(5_000)]


@pytest.mark.parametrize("threaded", [False, True])
def test_many_small_batches_are_merged_as_they_are_gathered(tmp_path, threaded):
    # a table of a few rows a batch (--tables: a window table) must not hold a row group's
    # thousands of batches, each with its own arrays' bookkeeping: memory grew with the capture
    path = tmp_path / "small.parquet"
    groups = RowGroups(file_writer(pa.OSFile(str(path), "wb")), row_group=10_000, threaded=threaded)
    most = 0
    for start in range(0, 25_000, 5):
        groups.add(_rows(start, 5))
        most = max(most, len(groups._batches))
    groups.close()
    assert most <= 2 * MERGED_AFTER
    meta = pq.ParquetFile(path).metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [10_000, 10_000, 5_000]
    frames = pq.read_table(path, columns=["frame"]).column("frame").to_pylist()
    assert frames == list(range(1, 25_001))


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_a_process_pinned_to_one_cpu_encodes_without_a_thread():
    # the encoding thread only adds CPU where it cannot run beside the decoding
    cpus = sorted(os.sched_getaffinity(0))
    code = "import os, sys; os.sched_setaffinity(0, {%s}); from wirelog.cli.writing import usable_cpus; print(usable_cpus())"
    one = subprocess.run([sys.executable, "-c", code % cpus[0]], capture_output=True, text=True, check=True)
    assert one.stdout.strip() == "1"
    if len(cpus) > 1:
        two = subprocess.run(
            [sys.executable, "-c", code % f"{cpus[0]}, {cpus[1]}"], capture_output=True, text=True, check=True
        )
        assert two.stdout.strip() == "2"
