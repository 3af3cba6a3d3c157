"""ParquetWriter: row groups of the asked size whatever the internal batching, every record kept."""

from __future__ import annotations

import io

import pyarrow.parquet as pq
import pytest

from tests.parquet_helpers import assert_wirelog_encodings
from wirelog.export.parquet import ParquetWriter, RowGroups, batch, file_writer, row
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
def test_row_groups_have_the_asked_size(tmp_path, records, row_group, groups):
    out = tmp_path / "out.parquet"
    writer = ParquetWriter(str(out), row_group=row_group)
    for i in range(records):
        writer.write(event(i))
    writer.close()
    meta = pq.ParquetFile(out).metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == groups
    table = pq.read_table(out, columns=["frame", "seq", "message"])
    assert table.column("frame").to_pylist() == list(range(1, records + 1))
    assert table.column("message").to_pylist()[-1] == f"line {records - 1}"
    assert_wirelog_encodings(out)


def _write_groups(sink, background: bool, rows: int = 30_000, batch_rows: int = 3_500) -> None:
    groups = RowGroups(file_writer(sink), row_group=7_000, background=background)
    for at in range(0, rows, batch_rows):
        groups.add(batch([row(event(i)) for i in range(at, min(rows, at + batch_rows))]))
    groups.close()


def test_row_groups_written_in_the_background_make_the_same_file():
    """Each row group is encoded on a thread while the next is gathered: the same bytes, in order."""
    inline, background = io.BytesIO(), io.BytesIO()
    _write_groups(inline, background=False)
    _write_groups(background, background=True)
    assert pq.ParquetFile(io.BytesIO(inline.getvalue())).metadata.num_row_groups == 5
    assert background.getvalue() == inline.getvalue()


class _FullDisk(io.RawIOBase):
    """A sink that takes `room` bytes, then refuses writes as a full disk does."""

    def __init__(self, room: int) -> None:
        self.room = room

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(28, "No space left on device", "out.parquet")
        self.room -= len(data)
        return len(data)


def test_a_write_failing_in_the_background_is_raised_to_the_caller():
    with pytest.raises(OSError, match="No space left on device"):
        _write_groups(_FullDisk(room=50_000), background=True)
