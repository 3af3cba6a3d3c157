"""ParquetWriter: row groups of the asked size whatever the internal batching, every record kept."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from tests.parquet_helpers import assert_wirelog_encodings
from wirelog.export.parquet import ParquetWriter
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
