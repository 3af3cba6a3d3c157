"""The digests of every output wirelog writes for a fixed set of captures (issue 42, item 4).

The captures: every one in ../shared/captures, the bundled ones (examples/, tests/data/) and the
deterministic captures the benches generate, at small sizes. The outputs, each as a SHA-256:
`convert --to json` and `--to hercules` (their bytes), `--to parquet` and each table of
`--to parquet --tables` (their rows, see `rows_digest`: the file bytes also hold the writer's
version and encoding choices, which are not wirelog's output), and `streams --json` (its bytes).

tests/data/golden/outputs.json holds them as today's code writes them; tests/test_golden_outputs.py
compares. When an output change is intended and reviewed, rewrite the file (with ../shared present)
and commit it with the change:

    PYTHONPATH=. .venv/bin/python -m tests.golden_outputs
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import sys
import tempfile
from collections.abc import Callable
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from bench import bench_cql, bench_hercules, bench_lumberjack, bench_shapes
from bench.gen_capture import generate, reorder, short
from tests.capture_tools import run_cli
from tests.conftest import CAPTURES, REPO

GOLDEN = REPO / "tests" / "data" / "golden" / "outputs.json"
SHARED_PREFIX = "shared/"
GENERATED_PREFIX = "generated/"


def _reordered(path: Path) -> None:
    """A Lumberjack capture with 5 % of its packets written 1-3 places late (the causal merge's work)."""
    in_order = path.with_suffix(".in-order.pcap")
    generate(str(in_order), 3000, 20, 2, "lumberjack")
    reorder(str(in_order), str(path))
    in_order.unlink()


# The benches' generators, small. Not bench_tls's: its keys and certificate are new on every run.
GENERATED: dict[str, Callable[[Path], object]] = {
    "gen-lumberjack.pcap": lambda p: generate(str(p), 3000, 20, 1, "lumberjack"),
    # every third connection acknowledged, none closed: events that never learn their fate
    "gen-lumberjack-stalled.pcap": lambda p: generate(str(p), 3000, 20, 1, "lumberjack", 3, False),
    "gen-lumberjack-late.pcap": _reordered,
    "gen-cql.pcap": lambda p: generate(str(p), 3000, 20, 1, "cql"),
    "gen-opaque.pcap": lambda p: generate(str(p), 3000, 20, 1, "opaque"),
    "gen-short.pcap": lambda p: short(str(p), 300),
    "bench-lumberjack.pcap": lambda p: bench_lumberjack.write_capture(p, "lumberjack", 3, 4, 64),
    "bench-courier.pcap": lambda p: bench_lumberjack.write_capture(p, "courier", 3, 4, 64),
    "bench-cql-v4.pcap": lambda p: bench_cql.write_capture(p, 4, 3, 200),
    "bench-cql-v5-lz4.pcap": lambda p: bench_cql.write_capture(p, 5, 3, 200),
    "bench-hercules.pcap": lambda p: bench_hercules.write_capture(p, 3, 6, 20),
    # one window a connection; of the Python sender's, 7 connections in 8 never acknowledged
    "shape-python-sender.pcap": lambda p: bench_shapes.lumberjack_shape("python-sender", {p: 8}, 0.004),
    "shape-stack-traces.pcap": lambda p: bench_shapes.lumberjack_shape("stack-traces", {p: 1}, 0.02),
    **{
        f"shape-cql-{name}.pcap": partial(write, scale=0.01)
        for name, write in bench_shapes.CQL_SHAPES.items()
    },
}


def bundled() -> list[str]:
    """The captures in this repository, relative to it."""
    paths = [REPO / "examples" / "lumberjack-pylogbeat.pcap", *(REPO / "tests" / "data").rglob("*.pcap*")]
    return sorted(p.relative_to(REPO).as_posix() for p in paths)


def shared() -> list[str]:
    """The captures of ../shared/captures (none when it is absent), named shared/<relative path>."""
    if not CAPTURES.is_dir():
        return []
    return sorted(SHARED_PREFIX + p.relative_to(CAPTURES).as_posix() for p in CAPTURES.rglob("*.pcap*"))


def every_capture() -> list[str]:
    return [*shared(), *bundled(), *(GENERATED_PREFIX + name for name in GENERATED)]


def locate(name: str, scratch: Path) -> tuple[Path, str]:
    """(directory to run in, path to give wirelog) for a capture's name, generating it if it is
    one of the benches'. The path given is relative, so the `capture` field every record carries is
    the same wherever the repository and ../shared are."""
    if name.startswith(SHARED_PREFIX):
        return CAPTURES, name.removeprefix(SHARED_PREFIX)
    if name.startswith(GENERATED_PREFIX):
        file = name.removeprefix(GENERATED_PREFIX)
        GENERATED[file](scratch / file)
        return scratch, file
    return REPO, name


def _plain(value: Any) -> str:
    """JSON has no timestamps, bytes or decimals: their exact text instead."""
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"no canonical text for {type(value).__name__}")


def rows_digest(path: Path) -> str:
    """SHA-256 of a Parquet file's schema (names, types, nullability, field metadata) and rows in
    order, each row as JSON with sorted keys: what the table says, not how the file encodes it."""
    table = pq.read_table(path)
    digest = hashlib.sha256(table.schema.to_string(show_schema_metadata=False).encode())
    for row in table.to_pylist():
        digest.update(b"\n" + json.dumps(row, sort_keys=True, default=_plain).encode())
    return digest.hexdigest()


def _wirelog(*args: str) -> bytes:
    code, out, err = run_cli(*args)
    assert code == 0, f"wirelog {' '.join(args)} exited {code}: {err}"
    return out


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digests(name: str, scratch: Path) -> dict[str, Any]:
    """The digests of the capture `name` and of every output of it (see the module's docstring)."""
    root, capture = locate(name, scratch)
    parquet, tables = scratch / "records.parquet", scratch / "tables"
    with contextlib.chdir(root):
        found = {
            "capture": _sha256(Path(capture).read_bytes()),
            "json": _sha256(_wirelog("convert", capture, "--to", "json")),
            "hercules": _sha256(_wirelog("convert", capture, "--to", "hercules", "-o", "-")),
            "streams": _sha256(_wirelog("streams", "--json", capture)),
        }
        _wirelog("convert", capture, "--to", "parquet", "-o", str(parquet))
        _wirelog("convert", capture, "--to", "parquet", "--tables", "-o", str(tables))
    found["parquet"] = rows_digest(parquet)
    found["tables"] = {
        p.relative_to(tables).as_posix(): rows_digest(p) for p in sorted(tables.rglob("*.parquet"))
    }
    return found


def load() -> dict[str, dict[str, Any]]:
    return json.loads(GOLDEN.read_text())


def main() -> None:
    if not CAPTURES.is_dir():
        sys.exit(f"{CAPTURES} is absent: the golden file must cover the shared captures too")
    golden = {}
    for name in every_capture():
        with tempfile.TemporaryDirectory() as scratch:
            golden[name] = digests(name, Path(scratch))
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"{GOLDEN.relative_to(REPO)}: {len(golden)} captures")


if __name__ == "__main__":
    main()
