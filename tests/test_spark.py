"""The Spark engine: the `wirelog` data source and `convert_spark` against the local engine.

One local[2] SparkSession for the module (Spark start-up costs several seconds); a handful of jobs.
Skipped only when pyspark or Java is missing (CI installs both).
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from capture_tools import run_cli
from lumberjack_helpers import ack, cframe, jframe, window, write_capture
from pcap_helpers import T0_NS, damaged_pcap, tcp_conversation, write_pcap
from s3_helpers import BUCKET, s3_server
from s3_helpers import ENV as S3_ENV
from spark_helpers import DATA, ROOT, SHARED, TS_NS, local_rows, make_captures, spark_rows

from wirelog.engine.filters import RecordFilter
from wirelog.engine.keylogs import KeyLogSource
from wirelog.engine.local import Options, run
from wirelog.export import parquet
from wirelog.export.hercules import HerculesWriter
from wirelog.inputs import remote
from wirelog.inputs.errors import CaptureError
from wirelog.model import Direction, Message

pytest.importorskip("pyspark")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("the Spark engine needs Java", allow_module_level=True)

from wirelog.engine import spark as engine
from wirelog.engine import spark_output
from wirelog.engine.hercules_events import decode_event_stream
from wirelog.engine.spark_source import ARROW_SCHEMA, Capture, expand, option_strings, pack, parse_options
from wirelog.engine.splits import plan

C2S, S2C = Direction.C2S, Direction.S2C


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> list[str]:
    return make_captures(tmp_path_factory.mktemp("generated"))


@pytest.fixture(scope="module")
def spark():
    # workers get the dummy S3 credentials as a cluster's executors get real ones: spark.executorEnv,
    # a setting read when a context starts, so not one left running by another test module's CLI run
    from pyspark.sql import SparkSession

    if (active := SparkSession.getActiveSession()) is not None:
        active.stop()
    s3_env = {f"spark.executorEnv.{k}": v for k, v in S3_ENV.items()}
    # local[2,2]: two attempts per task, as on a cluster (local[2] gives up after one failure), for
    # the commit-protocol test
    session = engine.session("local[2,2]", {"spark.sql.shuffle.partitions": "2", **s3_env})
    yield session
    session.stop()


def test_rows_equal_the_local_engine_row_for_row(spark, captures):
    table = engine.read(spark, captures).toArrow()
    assert table.schema == ARROW_SCHEMA == parquet.SCHEMA
    got = spark_rows(table)
    want, unreadable = local_rows(captures)
    garbage = next(p for p in captures if p.endswith("garbage.pcap"))
    assert unreadable == {garbage}
    [error] = got.pop(garbage)
    assert error[parquet.COLUMNS.index("code")] == "capture.unreadable"
    assert garbage in error[parquet.COLUMNS.index("message")]
    del want[garbage]
    assert got.keys() == {c for c, rows in want.items() if rows}
    for capture, rows in want.items():
        spark_side = got.get(capture, [])
        assert spark_side == rows, capture  # ts to the microsecond, ts_ns exact
    messages = [r for rows in want.values() for r in rows if r[0] == "message"]
    protocols = {r[parquet.COLUMNS.index("protocol")] for r in messages}
    assert {"lumberjack", "courier", "hercules", "cql"} <= protocols
    codes = Counter(r[parquet.COLUMNS.index("code")] for rows in want.values() for r in rows)
    assert codes["pcap.truncated"] == 1 and codes["tcp.gap"] >= 1
    assert any(r[TS_NS] % 1000 for r in messages)  # nanosecond captures were part of the comparison


def test_captures_in_s3_read_on_workers_equal_the_local_engine(spark, captures):
    lumberjack, courier = captures[0], next(p for p in captures if "courier" in p)
    with s3_server() as s3:
        s3.put("run/lumberjack.pcap", Path(lumberjack).read_bytes())
        s3.put("run/sub/courier.pcap.gz", gzip.compress(Path(courier).read_bytes(), mtime=0))
        s3.put("run/_SUCCESS", b"")
        # the workers do not get AWS_ENDPOINT_URL: the endpoint goes in the URI's options
        table = engine.read(spark, [f"s3a://{BUCKET}/run{s3.query}"]).toArrow()
        names = [
            f"s3a://{BUCKET}/run/lumberjack.pcap{s3.query}",
            f"s3a://{BUCKET}/run/sub/courier.pcap.gz{s3.query}",
        ]
        want, unreadable = local_rows(names)
    got = spark_rows(table)
    assert not unreadable and got.keys() == set(names) and all(want[n] for n in names)
    for name in names:
        assert got[name] == want[name], name
    assert [len(want[n]) for n in names] == [len(local_rows([p])[0][p]) for p in (lumberjack, courier)]


def test_options_reach_the_workers(spark, captures):
    mine = [p for p in captures if not p.startswith(str(SHARED)) or "courier" in p]
    opts = Options(
        decode_as={12345: "courier"}, keep=RecordFilter(protocols=frozenset({"courier", "lumberjack"}))
    )
    df = engine.read(spark, mine, opts, findings="exclude")
    got = spark_rows(df.toArrow())
    want, _ = local_rows(mine, opts)
    expected = {c: [r for r in rows if r[0] == "message"] for c, rows in want.items()}
    assert got == {c: rows for c, rows in expected.items() if rows}
    assert {r[parquet.COLUMNS.index("protocol")] for rows in got.values() for r in rows} == {
        "courier",
        "lumberjack",
    }


def dataset(out: str | Path, filesystem=None) -> pa.Table:
    """A Parquet dataset written by convert_spark, columns in the Parquet schema's order."""
    return ds.dataset(
        str(out), format="parquet", partitioning="hive", schema=parquet.SCHEMA, filesystem=filesystem
    ).to_table()


def assert_local_rows(table: pa.Table, want: dict[str, list[tuple]]) -> None:
    """Per capture and protocol, the dataset's rows are the local engine's, `ts` and `ts_ns` included, in
    the local order (a capture is converted by one task, into one file per protocol)."""
    got = spark_rows(table)
    at = parquet.COLUMNS.index("protocol")
    for capture in want.keys() | got.keys():
        mine, theirs = got.get(capture, []), want.get(capture, [])
        for protocol in {r[at] for r in mine + theirs}:
            assert [r for r in mine if r[at] == protocol] == [r for r in theirs if r[at] == protocol], (
                capture,
                protocol,
            )


def test_convert_parquet_dataset_reads_back_with_pyarrow(spark, captures, tmp_path):
    """Parquet written by the tasks with pyarrow: the local engine's schema and rows, `ts` in
    microseconds and `ts_ns` exact, `protocol` in Hive-style directories, nothing left of the attempts."""
    out = tmp_path / "out"
    n = engine.convert_spark(captures, "parquet", str(out), Options())
    stored = pq.read_schema(next(out.glob("protocol=*/*.parquet"))).remove_metadata()
    assert stored == parquet.file_schema(spark_output.FILE_SCHEMA)  # types, nullability, JSON type
    table = dataset(out)
    assert table.schema == parquet.SCHEMA and table.num_rows == n
    want, unreadable = local_rows(captures)
    [garbage] = unreadable
    want[garbage] = spark_rows(dataset(out).filter(pc.field("capture") == garbage))[garbage]
    assert [r[parquet.COLUMNS.index("code")] for r in want[garbage]] == ["capture.unreadable"]
    assert n == sum(len(rows) for rows in want.values())
    assert_local_rows(table, want)
    assert {p.name for p in out.iterdir() if p.is_dir()} >= {
        "protocol=cql",
        "protocol=lumberjack",
        "protocol=tcp",
    }
    assert not (out / "_temporary").exists() and (out / "_SUCCESS").is_file()
    # an earlier output is replaced; anything else is refused before Spark runs
    assert engine.convert_spark(captures[:1], "parquet", str(out), Options()) < n
    with pytest.raises(engine.SparkEngineError):
        engine.convert_spark(captures[:1], "parquet", str(DATA), Options())
    (tmp_path / "empty").mkdir()
    for nothing in ("missing.pcap", "empty"):
        with pytest.raises(CaptureError):
            engine.convert_spark([str(tmp_path / nothing)], "parquet", str(tmp_path / "o"), Options())
    assert engine.read(spark, [str(tmp_path / "empty")]).count() == 0


def test_parquet_written_by_tasks_to_s3(spark, captures, tmp_path):
    """`-o s3://...` on a real S3 implementation (moto's server): the tasks write through pyarrow,
    the driver commits; the rows are the local engine's and no attempt's file is left."""
    mine = [p for p in captures if not p.startswith(str(SHARED))][:5]
    with s3_server() as s3:
        out = f"s3://{BUCKET}/out{s3.query}"
        n = engine.convert_spark(mine, "parquet", out, Options())
        fs, path = remote.filesystem(out)
        keys = [i.path for i in fs.get_file_info(pafs.FileSelector(path, recursive=True)) if i.is_file]
        table = dataset(path, fs)
    want, _ = local_rows(mine)
    assert n == table.num_rows == sum(len(rows) for rows in want.values())
    assert_local_rows(table, want)
    assert f"{path}/_SUCCESS" in keys and not [k for k in keys if "_temporary" in k]
    assert all(re.fullmatch(rf"{path}/protocol=[a-z]+/part-c\d{{5}}-[0-9a-f]{{32}}\.zstd\.parquet", k)
               for k in keys if not k.endswith("_SUCCESS"))  # fmt: skip


def test_json_written_by_tasks_to_s3(spark, captures, tmp_path):
    """`--to json -o s3://...`: the tasks write the local engine's lines through pyarrow (no Hadoop
    connector needed), the driver commits."""
    mine = [p for p in captures if not p.startswith(str(SHARED))][:5]
    with s3_server() as s3:
        out = f"s3://{BUCKET}/json{s3.query}"
        n = engine.convert_spark(mine, "json", out, Options())
        fs, path = remote.filesystem(out)
        keys = [i.path for i in fs.get_file_info(pafs.FileSelector(path, recursive=True)) if i.is_file]
        got = []
        for k in keys:
            with fs.open_input_stream(k) as f:
                got += f.read().splitlines(keepends=True)
    code, local, err = run_cli("convert", *mine, "--to", "json")
    assert code == 0, err
    assert n == len(got) and sorted(got) == sorted(local.splitlines(keepends=True))
    assert f"{path}/_SUCCESS" in keys and not [k for k in keys if "_temporary" in k]


def test_a_failed_task_attempt_leaves_nothing_and_its_retry_is_committed(spark, captures, tmp_path):
    """The commit protocol on real Spark retries: every task writes its files and then fails on its
    first attempt; Spark runs it again (local[2,2]: two attempts per task), and the output holds
    each row once. A speculative copy that also succeeded is never committed."""
    from pyspark import TaskContext, cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this module
    mine = [p for p in captures if not p.startswith(str(SHARED))][:4]
    caps = expand(mine)
    src = parse_options(option_strings(Options()))

    def flaky(job, index, captures):
        written = engine.write_bin(src, job, index, captures)
        assert written and all(Path(w.file).is_file() for w in written)
        if TaskContext.get().attemptNumber() == 0:
            raise RuntimeError("made to fail once, after writing its files")
        return written

    out = tmp_path / "out"
    job = spark_output.start(str(out))
    bins = [[c] for c in caps]
    written = spark_output.run_tasks(spark, job, bins, flaky)
    attempts = {p.name for p in (out / "_temporary" / job.id).iterdir()}
    assert len(attempts) == 2 * len(bins)  # the failed attempts' files are still there
    # a speculative copy of task 0 that succeeded too: its files exist, its result was not taken
    spare = engine.write_bin(src, job, 0, bins[0])
    assert spare and {w.file for w in spare}.isdisjoint(w.file for w in written)
    assert spark_output.commit(job, written) == sum(w.rows for w in written)
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == sorted(["_SUCCESS", *(f"protocol={w.protocol}/{Path(w.file).name}" for w in written)])
    want, _ = local_rows([c.path for c in caps])
    table = dataset(out)
    assert table.num_rows == sum(len(rows) for rows in want.values())
    assert_local_rows(table, {c.path: want[c.path] for c in caps})
    with pytest.raises(ValueError, match="two committed attempts"):
        spark_output.commit(job, [*written, *spare])


def test_convert_json_part_files(spark, captures, tmp_path):
    """NDJSON written by the tasks: the local engine's lines (tests/test_spark_outputs.py compares
    every capture), one part file per task, nothing left of the attempts."""
    mine = [p for p in captures if "lumberjack" in p]
    n = engine.convert_spark(mine, "json", str(tmp_path / "json"), Options())
    parts = sorted((tmp_path / "json").glob("part-*.json"))
    got = [x for f in parts for x in f.read_bytes().splitlines(keepends=True)]
    assert len(got) == n and (tmp_path / "json" / "_SUCCESS").is_file()
    assert not (tmp_path / "json" / "_temporary").exists()
    code, out, err = run_cli("convert", *mine, "--to", "json")
    assert code == 0, err
    assert sorted(got) == sorted(out.splitlines(keepends=True))
    want, _ = local_rows(mine)
    assert n == sum(len(rows) for rows in want.values())
    assert all(isinstance(json.loads(x)["event"], dict) for x in got if b'"kind":"event"' in x)


def split_events(data: bytes) -> list[bytes]:
    recs = [r for r in decode_event_stream(data) if isinstance(r, Message) and r.kind == "event"]
    return [data[r.offset : r.offset + r.length] for r in recs]


def test_convert_hercules_events_are_the_local_bytes(spark, captures, tmp_path):
    mine = [p for p in captures if "lumberjack" in p or "courier" in p or "hercules" in p]
    out = tmp_path / "hercules"
    n = engine.convert_spark(mine, "hercules", str(out), Options())
    parts = sorted(out.glob("part-*.bin"))
    assert (out / "_SUCCESS").exists() and len(parts) >= 1
    spark_events = [e for p in parts for e in split_events(p.read_bytes())]
    buf = io.BytesIO()
    local = HerculesWriter(buf)
    for item in run(mine, (), Options()):
        if isinstance(item, Message):
            local.write(item)
    local_events = split_events(buf.getvalue())
    assert len(local_events) == n == len(spark_events) > 0
    assert sorted(spark_events) == sorted(local_events)  # byte for byte, nanosecond times included
    notes = (out / "_mapping-notes.ndjson").read_text().splitlines()
    assert {json.loads(x)["code"] for x in notes} == {"hercules.export-key-renamed"}  # `@timestamp`


def test_expand_files_directories_globs_and_lists(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    for name in ("d/a.pcap", "d/sub/b.pcap", "d/_SUCCESS", "d/.hidden", "c.pcap"):
        (tmp_path / name).write_bytes(b"x")
    base = str(tmp_path)

    def names(paths, basedir=base):
        return [c.name for c in expand(paths, basedir)]

    assert names(["d"]) == ["d/a.pcap", "d/sub/b.pcap"]
    assert names(["c.pcap,d/*.pcap", "c.pcap"]) == ["c.pcap", "d/a.pcap"]
    assert names(["**/*.pcap"]) == ["c.pcap", "d/a.pcap", "d/sub/b.pcap"]
    assert names([f"file://{base}/c.pcap"], "") == [f"{base}/c.pcap"]
    assert expand(["d/a.pcap"], base) == [Capture("d/a.pcap", f"{base}/d/a.pcap", 1)]
    for bad in (["nope.pcap"], ["*.nothing"], ["hdfs://nn/x.pcap"]):
        with pytest.raises(CaptureError):
            expand(bad, base)


def test_pack_keeps_files_whole_and_bins_small_ones():
    mib = 1024 * 1024
    caps = [
        Capture(f"f{i:02d}", f"/x/f{i:02d}", s * mib) for i, s in enumerate([300, 40, 40, 40, 1, 1, 1, 1])
    ]
    bins = pack(caps, 128 * mib, 4 * mib, 1)
    assert sorted(c.name for b in bins for c in b) == [c.name for c in caps]  # each file exactly once
    assert [c.name for c in bins[0]] == ["f00"]  # bigger than the target: alone
    assert all(sum(c.size for c in b) <= 128 * mib for b in bins[1:])
    assert len(bins) == 3
    # min_partitions spreads small inputs over the cores
    assert len(pack(caps[4:], 128 * mib, 4 * mib, 1)) == 1
    assert len(pack(caps[4:], 128 * mib, 4 * mib, 2)) == 2


def test_option_strings_round_trip():
    from wirelog.engine.protocols import Limits
    from wirelog.engine.spark_source import parse_options

    opts = Options(
        decode_as={5044: "lumberjack", 9042: "cql"},
        overlap="last",
        show_secrets=True,
        tls_keylogs=(KeyLogSource("keys.log", text="CLIENT_RANDOM " + "ab" * 32 + " " + "cd" * 48 + "\n"),),
        limits=Limits(max_frame=1024),
        keep=RecordFilter(frozenset({"cql"}), frozenset({1, 2}), frozenset({"query"}), True, 5, 10),
    )
    strings = option_strings(opts, "only", batchRows=7)
    parsed = parse_options({k.lower(): v for k, v in strings.items()})
    assert parsed.engine == opts and parsed.findings == "only" and parsed.batch_rows == 7
    assert strings["decodeAs"] == "5044=lumberjack,9042=cql"
    for bad in (
        {"findings": "some"},
        {"decodeas": "5044=nope"},
        {"decodeas": "x=cql"},
        {"decodeas": "²=cql"},
    ):
        with pytest.raises(ValueError):
            parse_options(bad)


def test_local_cli_never_imports_pyspark():
    code = "import sys, wirelog.cli.main, wirelog.engine.spark; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_batches_are_bounded_and_a_failing_capture_keeps_its_rows(captures, monkeypatch):
    from wirelog.engine import spark_source
    from wirelog.engine.spark_source import batches, parse_options

    lumberjack = next(p for p in captures if p.endswith("/lumberjack.pcap"))
    caps = [Capture("lj", lumberjack, 0)]
    small = list(batches(caps, parse_options({"batchrows": "3"})))
    want, _ = local_rows([lumberjack])
    assert all(b.num_rows <= 3 for b in small) and len(small) > 3
    kind = parquet.COLUMNS.index("kind")
    assert [r["kind"] for b in small for r in b.to_pylist()] == [r[kind] for r in want[lumberjack]]

    def broken(paths, raw, options, **kw):
        yield from run(paths, raw, options, **kw)
        raise RuntimeError("boom")

    monkeypatch.setattr(spark_source, "run", broken)
    rows = [r for b in batches(caps * 2, parse_options({})) for r in b.to_pylist()]
    errors = [i for i, r in enumerate(rows) if r["code"] == "capture.internal-error"]
    n = len(want[lumberjack])
    assert errors == [n, 2 * n + 1]  # after each capture's rows; the next capture still runs
    assert "RuntimeError: boom" in rows[n]["message"]


def test_a_worker_reading_a_partition_tunes_its_garbage_collector(captures):
    """The CLI's collector settings do not reach Spark's Python workers; read() must apply them."""
    code = (
        "import gc, json, sys\n"
        "from wirelog.engine.spark_source import Bin, Capture, WirelogReader, parse_options\n"
        "before = gc.get_threshold()\n"
        "reader = WirelogReader([sys.argv[1]], parse_options({}))\n"
        "rows = sum(b.num_rows for b in reader.read(Bin(0, [Capture('c', sys.argv[1], 0)])))\n"
        "print(json.dumps([before, gc.get_threshold(), gc.get_freeze_count() > 0, rows > 0]))\n"
    )
    cmd = [sys.executable, "-c", code, captures[0]]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(out.stdout) == [[700, 10, 10], [100_000, 50, 100], True, True]


def test_one_capture_read_in_splits_gives_the_local_engines_rows(spark, tmp_path):
    """A capture of many interleaved connections from several clients, cut in splits of a few KB
    (packets straddle every boundary): routed by several tasks, read back and decoded per group of
    hosts; the same rows as the local engine, the capture-level verdict included."""
    docs = [{"message": f"line {n}", "@timestamp": "2026-11-21T04:41:22.123456789Z"} for n in range(40)]
    conns = []
    for c in range(12):
        first = 1 + 3 * c
        w = window(3) + b"".join(jframe(first + i, docs[first + i]) for i in range(3))
        turns = [("c", cframe(w)), ("s", ack(3))] if c % 5 else [("c", cframe(w))]  # 3 never acked
        conns.append(tcp_conversation(turns, client=(f"10.1.0.{5 + c % 4}", 41000 + c), mss=200))
    frames = [f for group in itertools.zip_longest(*conns) for f in group if f is not None]
    path = write_pcap(
        tmp_path / "many.pcap", [(T0_NS + i * 1_000_001, f) for i, f in enumerate(frames)], nano=True
    )
    assert len(plan(str(path), 1024)) > 5
    want, _ = local_rows([str(path)])
    got = spark_rows(engine.read(spark, [str(path)], split_size=1024).toArrow())[str(path)]
    assert sorted(got, key=repr) == sorted(want[str(path)], key=repr)
    codes = Counter(r[parquet.COLUMNS.index("code")] for r in got)
    assert codes["lumberjack.never-acknowledged"] == 1  # the verdict over every group, once


def test_routes_handed_on_in_many_chunks_per_split_keep_each_groups_order(tmp_path, monkeypatch):
    """The routing tasks hand on a pair per split, group and flush: with flushes every 4 KB (many
    per split, each group in many of them), a group's pairs sorted as the engine sorts them (group,
    split, chunk) read back and decode to the local engine's records — stages 2-5 in one process,
    no Spark."""
    from bench.gen_capture import generate
    from wirelog.engine import spark_split, splits

    path = tmp_path / "beats.pcap"
    generate(str(path), 3000, connections=12, payload="lumberjack")
    monkeypatch.setattr(splits, "READ_SIZE", 4096)
    monkeypatch.setattr(splits, "FLUSH_BYTES", 4096)
    parts = plan(str(path), 64 * 1024)
    opts = splits.group_options(Options(), parts)
    rows = [(s.index, s.start, s.next, s.first_frame, s.frames, s.context, b"", s.holes) for s in parts]
    groups = 3
    pairs = list(spark_split.route_splits(str(path), str(path), groups, iter(rows)))
    chunks = [key[2] for key, (finding, _) in pairs if finding is None]
    assert max(chunks) > 3 and len(parts) > 2 and {key[0] for key, _ in pairs} == set(range(groups))

    def group_pairs(group: int) -> list:  # what a group's task gets: its pairs, sorted by key
        return sorted((p for p in pairs if p[0][0] == group), key=lambda p: p[0])

    opened = [
        f
        for g in range(groups)
        for frames in spark_split.opened_streams(str(path), str(path), opts, iter(group_pairs(g)))
        for f in frames
    ]
    frames = pa.array(sorted(opened), pa.int64())
    deliveries: list[dict] = []
    got_batches = [
        batch
        for g in range(groups)
        for batch in spark_split.group_records(
            str(path), str(path), opts, frames, iter(group_pairs(g)), deliveries
        )
    ]
    got = spark_rows(pa.Table.from_batches(got_batches))
    assert len(deliveries) == groups  # every group's verdict numbers, for the driver
    want, _ = local_rows([str(path)])
    stream = parquet.COLUMNS.index("stream")
    mine, theirs = got[str(path)], [r for r in want[str(path)] if r[stream] is not None]
    assert len(theirs) > 1000 and len({r[stream] for r in theirs}) >= 12
    assert sorted(mine, key=repr) == sorted(theirs, key=repr)
    for s in {r[stream] for r in theirs}:  # within a stream, the local order
        assert [r for r in mine if r[stream] == s] == [r for r in theirs if r[stream] == s], s


def test_a_damaged_region_of_a_split_capture_is_a_finding_and_the_rest_is_converted(spark, tmp_path):
    """Bytes overwritten in the middle of a capture read in splits: the tasks skip them, a
    `pcap.corrupt` finding says which, and the packets after them are still decoded."""
    path, lo, hi = damaged_pcap(tmp_path / "d.pcap")
    got = spark_rows(engine.read(spark, [str(path)], split_size=4096).toArrow())[str(path)]
    col = {name: parquet.COLUMNS.index(name) for name in ("code", "fields", "frame")}
    damaged = [json.loads(r[col["fields"]]) for r in got if r[col["code"]] == "pcap.corrupt"]
    assert damaged and min(d["from"] for d in damaged) > lo - 300 and max(d["to"] for d in damaged) >= hi
    local_frames = max(getattr(r, "frame", 0) or 0 for r in run([str(path)], (), Options()))  # stops there
    assert max(r[col["frame"]] or 0 for r in got) > local_frames + 100


def test_tls_key_logs_reach_the_workers(spark, tmp_path):
    """The key log's text travels with the options: the workers decrypt as the local engine does
    (a genuine TLS 1.3 connection from the core's fixtures, laid into a pcap)."""
    fixtures = ROOT / "native/src/decoders/tls/testdata"
    lines = (fixtures / "tls13-aes128gcm.transcript").read_text().splitlines()
    turns = [(Direction(d), bytes.fromhex(h)) for d, h in (line.split() for line in lines)]
    pcap = str(write_capture(tmp_path / "tls.pcap", turns, port=5044))
    keys = (KeyLogSource("keys.log", path=str(fixtures / "tls13-aes128gcm.keylog")),)
    code = parquet.COLUMNS.index("code")
    for opts, no_key in ((Options(), True), (Options(tls_keylogs=keys), False)):
        got = spark_rows(engine.read(spark, [pcap], opts).toArrow())
        want, _ = local_rows([pcap], opts)
        assert got == {pcap: want[pcap]}
        assert ("tls.no-key" in {r[code] for r in got[pcap]}) is no_key


def test_java_reason_is_the_error_not_py4js_call_line():
    """A job aborted without a `Caused by:` (a lost checkpoint block) still says why in one line."""
    text = (
        "An error occurred while calling o221.parquet.\n"
        ": org.apache.spark.SparkException: [CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND] Checkpoint block rdd_16_0 not found!\n"
        "\tat org.apache.spark.rdd.LocalCheckpointRDD.compute(LocalCheckpointRDD.scala:64)\n"
    )
    assert engine.java_reason(RuntimeError(text)) == (
        "org.apache.spark.SparkException: [CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND] Checkpoint block rdd_16_0 not found!"
    )
    nested = text + "Caused by: java.io.IOException: disk full\n\tat x.y(Z.java:1)\n"
    assert engine.java_reason(RuntimeError(nested)) == "java.io.IOException: disk full"


def test_the_verdict_query_gives_inspects_numbers_in_spark_sql_and_on_the_spark_engines_parquet(
    spark, tmp_path
):
    """docs/schema.md's verdict query, as written, in Spark SQL over the `wirelog` source (whole
    captures and split ones) and in DuckDB over the Parquet the Spark engine wrote: `inspect --json`'s
    numbers, on captures with resends (recovered, twice), losses, open connections and Gate retries."""
    import duckdb
    from delivery_helpers import VERDICT_KEYS, VERDICT_QUERY, query, verdict_numbers
    from test_inspect_delivery import batch, connections, gate_answer, gate_post

    from tests.capture_tools import run_cli

    first = [("c", batch(1, 2)), ("s", ack(2)), ("c", batch(3, 3))]  # 3-5 unacknowledged
    second = [("c", batch(1, 4)), ("s", ack(4)), ("c", batch(9, 2))]  # 1, 2 twice; 3, 4 recovered; 5 lost
    gate = [("c", gate_post(1, 2)), ("s", gate_answer(503)), ("c", gate_post(2, 3)), ("s", gate_answer(200))]
    captures = [
        connections(tmp_path / "resend.pcap", [first, second, [("c", batch(20, 1))]], last_open=True),
        connections(tmp_path / "gate.pcap", [gate], port=6306),
        DATA / "lumberjack" / "pylogbeat-stalled-resend.pcap",
    ]
    for path in captures:
        code, out, err = run_cli("inspect", "--json", str(path))
        assert code == 0, err
        want = verdict_numbers(json.loads(out)["delivery"])
        assert any(n["recovered_by_resend"] for n in want.values())
        for split_size in (None, 256):
            frame = engine.read(spark, [str(path)], **({"split_size": split_size} if split_size else {}))
            frame.createOrReplaceTempView("records")
            rows = spark.sql(query(VERDICT_QUERY, "records")).collect()
            got = {r[0]: dict(zip(VERDICT_KEYS, r[1:], strict=True)) for r in rows}
            assert got == want, (path.name, split_size)
        out_dir = tmp_path / f"{path.stem}-parquet"
        engine.convert_spark([str(path)], "parquet", str(out_dir), Options())
        table = f"read_parquet('{out_dir}/**/*.parquet', hive_partitioning = true)"
        rows = duckdb.sql(query(VERDICT_QUERY, table)).fetchall()
        assert {r[0]: dict(zip(VERDICT_KEYS, r[1:], strict=True)) for r in rows} == want, path.name


def test_the_cql_outcome_query_gives_inspects_numbers_in_spark_sql_and_on_the_spark_engines_parquet(
    spark, tmp_path
):
    """docs/schema.md's CQL query, as written, in Spark SQL over the `wirelog` source and in DuckDB
    over the Parquet the Spark engine wrote: `inspect --json`'s `delivery.cql` (answered, refused,
    never answered on a closed connection, open at the capture's end)."""
    import duckdb
    from delivery_helpers import CQL_KEYS, CQL_QUERY, query
    from test_inspect_delivery import connections

    from tests.capture_tools import run_cli

    def envelope(stream: int, opcode: int, body: bytes = b"") -> bytes:
        return (
            bytes([4 if opcode in (5, 7) else 0x84, 0])
            + stream.to_bytes(2, "big")
            + bytes([opcode])
            + (len(body).to_bytes(4, "big") + body)
        )

    error = (0x2200).to_bytes(4, "big") + b"\x00\x03bad"
    closed = [("c", envelope(1, 5)), ("c", envelope(2, 5)), ("c", envelope(3, 5)), ("s", envelope(2, 0, error)),
              ("s", envelope(1, 6, b"\x00\x00"))]  # fmt: skip
    path = connections(tmp_path / "cql.pcap", [closed, [("c", envelope(1, 5))]], port=9042, last_open=True)
    code, out, err = run_cli("inspect", "--json", str(path))
    assert code == 0, err
    want = json.loads(out)["delivery"]["cql"]
    assert want == {"requests": 4, "answered": 1, "error": 1, "unanswered": 1, "unknown": 1}
    for split_size in (None, 256):
        frame = engine.read(spark, [str(path)], **({"split_size": split_size} if split_size else {}))
        frame.createOrReplaceTempView("records")
        (row,) = spark.sql(query(CQL_QUERY, "records")).collect()
        assert dict(zip(CQL_KEYS, row, strict=True)) == want, split_size
    out_dir = tmp_path / "cql-parquet"
    engine.convert_spark([str(path)], "parquet", str(out_dir), Options())
    table = f"read_parquet('{out_dir}/**/*.parquet', hive_partitioning = true)"
    (row,) = duckdb.sql(query(CQL_QUERY, table)).fetchall()
    assert dict(zip(CQL_KEYS, row, strict=True)) == want


@pytest.mark.parametrize("fmt", ["parquet", "json", "hercules"])
def test_no_readable_input_exits_2_as_with_the_local_engine(spark, tmp_path, fmt):
    """The same situation, the same status: every input unreadable is status 2 with one line saying
    so (the output keeps their capture.unreadable rows); one capture among them is enough for 0."""
    garbage = tmp_path / "notes.pcap"
    garbage.write_text("not a capture\n")
    local, _, local_err = run_cli("convert", str(garbage), "--to", fmt, "-o", str(tmp_path / f"local.{fmt}"))
    out = tmp_path / "out"
    code, _, err = run_cli("convert", str(garbage), "--engine", "spark", "--to", fmt, "-o", str(out))
    assert (local, code) == (2, 2), (local_err, err)
    assert err.splitlines()[-1] == (
        f"wirelog: no input could be read: none of the 1 inputs is a capture "
        f"(their capture.unreadable findings are in {out})"
    )
    example = str(ROOT / "examples" / "lumberjack-pylogbeat.pcap")
    code, _, err = run_cli("convert", str(garbage), example, "--engine", "spark", "--to", fmt, "-o", str(out))
    assert code == 0, err
