"""Checks on how wirelog's Parquet files are encoded (the local writer and Spark's must agree)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

DICTIONARY = {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}


def assert_wirelog_encodings(path: Path) -> None:
    """Dictionaries on repeating names only, no min/max statistics on JSON text, statistics elsewhere."""
    group = pq.ParquetFile(path).metadata.row_group(0)
    columns = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}

    def min_max(name: str) -> bool:
        stats = columns[name].statistics
        return stats is not None and stats.has_min_max

    for name in ("message", "event", "fields"):
        assert not min_max(name), name
    for name in ("frame", "ts", "record"):
        assert min_max(name), name
    for name in ("frame", "offset", "ts", "event"):
        assert not DICTIONARY & set(columns[name].encodings), name
    for name in ("record", "kind"):
        assert DICTIONARY & set(columns[name].encodings), name
