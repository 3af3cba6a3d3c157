"""`wirelog convert --engine spark` against a real standalone cluster: a master and two one-core
workers in JVMs of their own (tests/spark_cluster.py), executors whose Python has pyarrow and pandas
only. The CLI must ship wirelog itself (the wheel of `make wheel`, engine/spark_ship.py); the rows
must be the local engine's, with both the many-captures engine and the split engine, and a worker
killed in the middle of a split job (while it reads, or while it writes) must not change them.

Skipped only when pyspark or Java is missing (CI installs both).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from spark_cluster import Cluster, executor_python
from spark_helpers import ROOT, local_rows, make_captures, spark_rows
from wheel_helpers import built_wheel

from bench.gen_capture import generate

pytest.importorskip("pyspark")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("the Spark engine needs Java", allow_module_level=True)

import pyarrow.dataset as ds

from wirelog.export import parquet

JOB_TIMEOUT = 600
pytestmark = pytest.mark.slow  # a minute or so each; `make test` (CI) runs them


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c.start(workers=2)
    finally:
        c.stop()


@pytest.fixture(scope="module")
def lean_python() -> str:
    python = executor_python()
    probe = subprocess.run([python, "-c", "import wirelog"], capture_output=True, cwd="/")
    assert probe.returncode != 0  # the executors' Python has no wirelog of its own
    return python


@pytest.fixture(scope="module")
def wheel() -> Path:
    return built_wheel()


@pytest.fixture(scope="module")
def split_capture(tmp_path_factory) -> Path:
    """~4.7 MB of Lumberjack traffic over 60 connections: five 1 MiB splits."""
    path = tmp_path_factory.mktemp("split") / "beats.pcap"
    generate(str(path), 15_000, connections=60, payload="lumberjack")
    return path


def convert(cluster: Cluster, python: str, inputs: list[str], out: Path, *extra: str) -> subprocess.Popen:
    """The CLI as a user runs it, from a directory outside the checkout (a Python worker imports from
    its cwd), with a cache of its own so that the archives for the executors are made here."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env |= {"PYSPARK_PYTHON": python, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(out.parent / "cache")}
    cmd = [sys.executable, "-m", "wirelog.cli", "convert", "--engine", "spark", "--master", cluster.url]
    cmd += [*inputs, "--to", "parquet", "-o", str(out), *extra]
    log = open(out.parent / f"{out.name}.log", "w")  # noqa: SIM115 - closed by finish()
    return subprocess.Popen(cmd, cwd=out.parent, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen, out: Path) -> str:
    proc.wait(timeout=JOB_TIMEOUT)
    text = (out.parent / f"{out.name}.log").read_text()
    assert proc.returncode == 0, text
    return text


def dataset_rows(out: Path) -> dict[str, list[tuple]]:
    """Per capture, the rows the tasks wrote (`ts` as integer microseconds, `ts_ns` exact)."""
    return spark_rows(
        ds.dataset(out, format="parquet", partitioning="hive", schema=parquet.SCHEMA).to_table()
    )


def assert_clean_output(out: Path) -> None:
    """Only committed part files (one per task and protocol) and _SUCCESS: nothing of a failed or
    repeated attempt (duplicated rows are what the row comparisons catch)."""
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    parts = {
        f for f in files if re.fullmatch(r"protocol=[a-z]+/part-[-a-z0-9]+-[0-9a-f]{32}\.zstd\.parquet", f)
    }
    assert parts and files - parts == {"_SUCCESS"}, sorted(files - parts)


def assert_executors_got(cluster: Cluster, wheel: Path, log: str) -> None:
    """The job shipped dist/'s wheel, and executors extracted exactly its files."""
    assert f"executors get {wheel}" in log, log
    with zipfile.ZipFile(wheel) as z:
        want = {n: z.read(n) for n in z.namelist() if not n.endswith("/")}
    extracted = [d for d in cluster.tmp.glob("worker*/app-*/*/wirelog-wheel") if d.is_dir()]
    assert extracted
    for d in extracted:
        got = {p.relative_to(d).as_posix(): p.read_bytes() for p in d.rglob("*") if p.is_file()}
        assert got == want


def test_many_captures_on_a_standalone_cluster(cluster, lean_python, wheel, tmp_path):
    (tmp_path / "captures").mkdir()
    captures = make_captures(tmp_path / "captures")
    out = tmp_path / "out"
    started = time.monotonic()
    log = finish(convert(cluster, lean_python, captures, out), out)
    print(f"many captures on the cluster: {time.monotonic() - started:.1f} s")
    assert_executors_got(cluster, wheel, log)
    assert_clean_output(out)
    got = dataset_rows(out)
    want, unreadable = local_rows(captures)
    [garbage] = unreadable
    [error] = got.pop(garbage)
    assert error[parquet.COLUMNS.index("code")] == "capture.unreadable"
    assert got.keys() == {c for c, rows in want.items() if rows}
    for capture, rows in got.items():
        assert Counter(rows) == Counter(want[capture]), capture


def test_split_capture_on_a_standalone_cluster(cluster, lean_python, wheel, split_capture, tmp_path):
    out = tmp_path / "out"
    started = time.monotonic()
    log = finish(convert(cluster, lean_python, [str(split_capture)], out, "--split-size", "1m"), out)
    print(f"split capture on the cluster: {time.monotonic() - started:.1f} s")
    assert "is read in splits of 1048576 bytes" in log
    assert_executors_got(cluster, wheel, log)
    assert_clean_output(out)
    want, _ = local_rows([str(split_capture)])
    got = dataset_rows(out)
    assert list(got) == [str(split_capture)]
    assert Counter(got[str(split_capture)]) == Counter(want[str(split_capture)])
    assert len(want[str(split_capture)]) > 100_000


def test_a_worker_killed_during_a_split_job(cluster, lean_python, split_capture, tmp_path):
    """SIGKILL to worker 0's JVM once the job writes its output (the routes already kept on both
    executors): its executor goes with it, the lost work is redone on worker 1, and the output
    holds each row once."""
    out = tmp_path / "out"
    started = time.monotonic()
    proc = convert(cluster, lean_python, [str(split_capture)], out, "--split-size", "1m")
    try:
        # the write job's temporary directory: decoding is done, the rows are being written
        while not (out / "_temporary").exists():
            assert proc.poll() is None, (out.parent / "out.log").read_text()
            assert time.monotonic() - started < JOB_TIMEOUT
            time.sleep(0.05)
        assert "Running task" in cluster.executor_logs(0)  # worker 0 had work
        cluster.kill_worker(0)
        killed_at = time.monotonic() - started
        assert proc.poll() is None  # the job was still running when the worker went
        finish(proc, out)
    finally:
        if proc.poll() is None:
            proc.kill()
        if 0 not in cluster.workers:
            cluster.start_worker(0)  # for tests after this one
    print(f"killed worker 0 after {killed_at:.1f} s; job ended after {time.monotonic() - started:.1f} s")
    assert_clean_output(out)
    want, _ = local_rows([str(split_capture)])
    got = dataset_rows(out)
    assert Counter(got[str(split_capture)]) == Counter(want[str(split_capture)])


def test_a_worker_killed_while_the_split_job_reads(cluster, lean_python, split_capture, tmp_path):
    """SIGKILL to worker 0's JVM as soon as its executor runs a task after the planning job (the
    routing and stream-finding job), before anything is written: the shuffle files and kept routes
    it held are lost, Spark redoes them on worker 1, and the output holds each row once."""
    out = tmp_path / "out"
    apps = cluster.tmp / "worker0"
    before = set(apps.glob("app-*"))
    started = time.monotonic()
    proc = convert(cluster, lean_python, [str(split_capture)], out, "--split-size", "1m")
    try:
        while True:
            logs = "".join(
                p.read_text(errors="replace")
                for p in apps.glob("app-*/*/stderr")
                if p.parents[1] not in before
            )
            if any(int(stage) >= 1 for stage in re.findall(r"Running task \S+ in stage (\d+)\.", logs)):
                break
            assert proc.poll() is None, (out.parent / "out.log").read_text()
            assert time.monotonic() - started < JOB_TIMEOUT
            time.sleep(0.02)
        assert not (out / "_temporary").exists()  # nothing written yet
        cluster.kill_worker(0)
        killed_at = time.monotonic() - started
        assert proc.poll() is None
        log = finish(proc, out)
    finally:
        if proc.poll() is None:
            proc.kill()
        if 0 not in cluster.workers:
            cluster.start_worker(0)
    assert "Lost executor" in log  # the driver saw it go while the job ran
    print(
        f"killed worker 0 after {killed_at:.1f} s, while reading; job ended after {time.monotonic() - started:.1f} s"
    )
    assert_clean_output(out)
    want, _ = local_rows([str(split_capture)])
    got = dataset_rows(out)
    assert Counter(got[str(split_capture)]) == Counter(want[str(split_capture)])


def test_typed_tables_on_a_standalone_cluster(cluster, lean_python, wheel, tmp_path):
    """`convert --engine spark --tables` on the cluster: every table's part files hold the local
    engine's `--tables` rows (and the unreadable capture's finding, which the local CLI prints)."""
    import pyarrow.parquet as pq

    from tests.test_tables import partitioned, table_rows
    from wirelog.export.tables import TABLES, schemas

    (tmp_path / "captures").mkdir()
    captures = make_captures(tmp_path / "captures")
    out = tmp_path / "out"
    finish(convert(cluster, lean_python, captures, out, "--tables"), out)
    local = tmp_path / "local"
    done = subprocess.run(
        [sys.executable, "-m", "wirelog.cli", "convert", *captures, "--to", "parquet", "--tables", "-o", f"{local}/"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    for table in TABLES:
        assert sorted((out / table).glob("**/part-*.zstd.parquet")), table
        got = table_rows(partitioned(out / table, schemas()[table]))
        want = table_rows(pq.read_table(local / f"{table}.parquet"))
        if table == "findings":
            unreadable = [r for r in got if "capture.unreadable" in r]
            assert len(unreadable) == 1
            del got[unreadable[0]]
        assert got == want, table
