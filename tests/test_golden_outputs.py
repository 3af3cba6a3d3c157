"""Every output of every capture is byte for byte what it was when tests/data/golden/outputs.json was
written (issue 42, item 4): the proof that a rewrite of the core changed no output.

A failure names the capture and the outputs that differ. When the change is intended and reviewed,
regenerate the file (tests/golden_outputs.py says how) and commit it with the change.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import CAPTURES
from tests.golden_outputs import SHARED_PREFIX, digests, every_capture, load, rows_digest

GOLDEN = load()
CAPTURES_NOW = every_capture()


def _flat(digests_of: dict) -> dict[str, str]:
    """One entry per output, a table of `--tables` as tables/<file>, so a failure names it."""
    flat = {k: v for k, v in digests_of.items() if k != "tables"}
    return flat | {f"tables/{name}": v for name, v in digests_of["tables"].items()}


@pytest.mark.parametrize("name", sorted(set(GOLDEN) | set(CAPTURES_NOW)))
def test_outputs_are_the_golden_ones(name: str, tmp_path: Path) -> None:
    if name.startswith(SHARED_PREFIX) and not CAPTURES.is_dir():
        pytest.skip("../shared/captures not available")
    assert name in CAPTURES_NOW, f"{name} has golden digests but no longer exists: regenerate them"
    assert name in GOLDEN, f"{name} has no golden digests: regenerate them"
    found, golden = _flat(digests(name, tmp_path)), _flat(GOLDEN[name])
    if found["capture"] != golden["capture"]:
        pytest.fail(f"{name} is not the capture the digests were made of (its generator or file changed)")
    changed = sorted(k for k in found.keys() | golden.keys() if found.get(k) != golden.get(k))
    assert not changed, f"{name}: these outputs changed: {changed}"


def _write(path: Path, table: pa.Table, compression: str) -> Path:
    pq.write_table(table, path, compression=compression)
    return path


def test_row_digest_reads_the_rows_not_the_file(tmp_path: Path) -> None:
    rows = pa.table({"n": pa.array([1, 2], pa.int64()), "s": ["a", None]})
    digest = rows_digest(_write(tmp_path / "zstd.parquet", rows, "zstd"))
    assert rows_digest(_write(tmp_path / "snappy.parquet", rows, "snappy")) == digest
    one_value = rows.set_column(1, "s", pa.array(["a", "b"]))
    assert rows_digest(_write(tmp_path / "value.parquet", one_value, "zstd")) != digest
    one_type = rows.set_column(0, "n", pa.array([1, 2], pa.int32()))
    assert rows_digest(_write(tmp_path / "type.parquet", one_type, "zstd")) != digest
    reordered = rows.take([1, 0])
    assert rows_digest(_write(tmp_path / "order.parquet", reordered, "zstd")) != digest
