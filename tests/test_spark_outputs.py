"""Issue 43 items 1 and 2: what both engines write is one thing, and every engine reads it as it is.

1. `ts` is INT64 TIMESTAMP(MICROS, isAdjustedToUTC=true) and `ts_ns` the exact nanoseconds in every
   Parquet file of both engines; a SparkSession made with no configuration at all (a fresh JVM, no
   `nanosAsLong`, no time zone), DuckDB and pandas read both engines' files and agree to the
   microsecond with `ts_ns`, which is the local engine's exact capture time.
2. The NDJSON of both engines is the same lines (modulo order: a Spark task writes its captures in
   its own file), whole captures and captures read in splits; the Parquet of both engines has one
   schema and the same rows.

On the repo's captures (generated nanosecond pcaps, tests/data) and every capture of ../shared/captures
when it is there. Skipped only when pyspark or Java is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from capture_tools import run_cli
from spark_helpers import SHARED, TS_NS, local_rows, make_captures

from wirelog.engine.local import Options
from wirelog.export import parquet

pytest.importorskip("pyspark")
if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
    pytest.skip("the Spark engine needs Java", allow_module_level=True)

from wirelog.engine import spark as engine
from wirelog.engine import spark_output

# Engine-made rows the local CLI says on stderr instead (docs/records.md): not compared.
SPARK_ONLY = "capture"
KEY = ("capture", "record", "stream", "direction", "frame", "offset", "kind", "code", "event_id")


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    if (active := SparkSession.getActiveSession()) is not None:
        active.stop()
    session = engine.session("local[2]", {"spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


def corpus(tmp: Path, which: str) -> list[str]:
    if which == "shared":
        if not SHARED.is_dir():
            pytest.skip("../shared/captures is absent")
        return [str(p) for p in sorted(SHARED.rglob("*.pcap"))]
    return [p for p in make_captures(tmp) if not p.startswith(str(SHARED))]


@pytest.fixture(scope="module", params=["repo", "shared"])
def outputs(request, tmp_path_factory, spark) -> dict:
    """Both engines' outputs of one corpus: the local CLI's Parquet file and NDJSON, the Spark
    engine's Parquet dataset and NDJSON part files (whole captures, and in splits of 2 KiB)."""
    tmp = tmp_path_factory.mktemp(request.param)
    captures = corpus(tmp, request.param)
    out = {"captures": captures, "dir": tmp}
    for fmt in ("parquet", "json"):
        local = tmp / f"local.{fmt}"
        code, _, err = run_cli("convert", *captures, "--to", fmt, "-o", str(local))
        assert code == 0, err
        out[f"local-{fmt}"] = local
        for split in (None, 2048):
            name = f"spark-{fmt}" + ("-split" if split else "")
            engine.convert_spark(captures, fmt, str(tmp / name), Options(), split_size=split)
            out[name] = tmp / name
    return out


def lines(path: Path) -> Counter:
    files = [path] if path.is_file() else sorted(path.glob("part-*.json"))
    return Counter(x for f in files for x in f.read_bytes().splitlines(keepends=True))


@pytest.mark.parametrize("name", ["spark-json", "spark-json-split"])
def test_ndjson_of_both_engines_is_the_same_lines(outputs, name):
    """`--engine spark --to json` writes the local engine's lines, byte for byte: objects stay
    objects (`event`, the protocol fields flat), one time format (RFC 3339 with nanoseconds)."""
    local = lines(outputs["local-json"])
    spark_lines = lines(outputs[name])
    only = Counter({x: n for x, n in spark_lines.items() if json.loads(x)["protocol"] == SPARK_ONLY})
    assert all(json.loads(x)["code"].startswith("capture.") for x in only)
    assert spark_lines - only == local
    assert sum(local.values()) > 0
    assert (outputs[name] / "_SUCCESS").is_file() and not (outputs[name] / "_temporary").exists()
    records = [json.loads(x) for x in local]
    events = [r for r in records if r.get("event") is not None]
    assert all(isinstance(r["event"], dict) for r in events if r["protocol"] != "cql")
    assert all(r["ts"] is None or len(r["ts"]) == len("2026-11-21T04:41:22.700273042Z") for r in records)
    if "shared" not in str(outputs["dir"]):
        assert events and any(not r["ts"].endswith("000Z") for r in events)  # nanoseconds compared


def parquet_files(outputs: dict, name: str) -> list[Path]:
    path = outputs[name]
    return [path] if path.is_file() else sorted(path.glob("protocol=*/*.parquet"))


@pytest.mark.parametrize("name", ["local-parquet", "spark-parquet", "spark-parquet-split"])
def test_every_parquet_file_has_micros_utc_ts_and_ns_ts_ns(outputs, name):
    files = parquet_files(outputs, name)
    assert files
    for f in files:
        schema = pq.ParquetFile(f).schema
        ts = schema.column(schema.names.index("ts"))
        assert ts.physical_type == "INT64"
        logical = json.loads(ts.logical_type.to_json())
        assert (logical["Type"], logical["isAdjustedToUTC"], logical["timeUnit"]) == (
            "Timestamp",
            True,
            "microseconds",
        ), f
        ns = schema.column(schema.names.index("ts_ns"))
        assert (ns.physical_type, ns.logical_type.type) == ("INT64", "NONE"), f
        want = parquet.file_schema(parquet.SCHEMA if name == "local-parquet" else spark_output.FILE_SCHEMA)
        assert pq.read_schema(f).remove_metadata() == want, f  # one schema, `protocol` in the path


def dataset_rows(outputs: dict, name: str) -> Counter:
    """The rows of a Parquet output in the schema's column order (ts as integer microseconds), but
    the engine-made `capture` ones."""
    path = outputs[name]
    if path.is_file():  # the JSON columns read as the strings of SCHEMA
        table = ds.dataset(str(path), format="parquet", schema=parquet.SCHEMA).to_table()
    else:
        table = ds.dataset(str(path), format="parquet", partitioning="hive", schema=parquet.SCHEMA).to_table()
    assert table.schema == parquet.SCHEMA
    at = parquet.COLUMNS.index("ts")
    table = table.set_column(at, "ts", table.column("ts").cast(pa.int64()))
    return Counter(tuple(r.values()) for r in table.to_pylist() if r["protocol"] != SPARK_ONLY)


@pytest.mark.parametrize("name", ["spark-parquet", "spark-parquet-split"])
def test_parquet_of_both_engines_holds_the_same_rows(outputs, name):
    local = dataset_rows(outputs, "local-parquet")
    assert dataset_rows(outputs, name) == local
    want, _ = local_rows(outputs["captures"])
    assert Counter(r for rows in want.values() for r in rows) == local  # ts_ns: the exact capture time
    assert all(r[TS_NS] // 1000 == r[parquet.COLUMNS.index("ts")] for r in local if r[TS_NS] is not None)


# A fresh Python and JVM: a SparkSession built with nothing but a master, reading both engines'
# Parquet; per output its Spark schema and its rows' key, microseconds (unix_micros) and ts_ns.
_BARE_SPARK = """
import json, sys
from pyspark.sql import SparkSession, functions as F
spark = SparkSession.builder.master("local[1]").getOrCreate()
out = {}
for name, path in json.loads(sys.argv[1]).items():
    df = spark.read.parquet(path)
    rows = df.select(*KEY, F.unix_micros("ts").alias("us"), "ts_ns", "protocol").collect()
    out[name] = {"schema": [(f.name, f.dataType.simpleString()) for f in df.schema.fields],
                 "rows": [list(r) for r in rows]}
spark.stop()
print(json.dumps(out))
"""


def bare_spark_read(paths: dict[str, Path]) -> dict:
    script = f"KEY = {list(KEY)!r}\n" + _BARE_SPARK
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_CONF"))}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps({k: str(v) for k, v in paths.items()})],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_spark_without_configuration_duckdb_and_pandas_read_both_engines_parquet(outputs):
    """Item 1's test: `spark.read.parquet` of the local file and of the Spark engine's dataset on a
    SparkSession with no configuration, DuckDB and pandas: the same times, `ts` to the microsecond
    (toward the past) and `ts_ns` the local engine's exact nanoseconds."""
    import duckdb
    import pandas as pd

    names = ("local-parquet", "spark-parquet", "spark-parquet-split")
    want, _ = local_rows(outputs["captures"])
    key_at = [parquet.COLUMNS.index(k) for k in KEY]
    expected = Counter(
        (*(r[i] for i in key_at), r[TS_NS] // 1000 if r[TS_NS] is not None else None, r[TS_NS])
        for rows in want.values()
        for r in rows
    )
    assert any(k[-1] % 1000 for k in expected if k[-1] is not None) or "shared" in str(outputs["dir"])

    read = bare_spark_read({n: outputs[n] for n in names})
    schemas = {n: sorted(read[n]["schema"]) for n in names}
    assert schemas["local-parquet"] == schemas["spark-parquet"] == schemas["spark-parquet-split"]
    assert dict(read["local-parquet"]["schema"])["ts"] == "timestamp"
    assert dict(read["local-parquet"]["schema"])["ts_ns"] == "bigint"
    for n in names:
        got = Counter(tuple(r[:-1]) for r in read[n]["rows"] if r[-1] != SPARK_ONLY)
        assert got == expected, n

    quoted = ", ".join(f'"{k}"' for k in KEY)  # `offset` is a keyword in DuckDB
    for n in names:
        path = outputs[n]
        source = f"read_parquet('{path}')" if path.is_file() else (
            f"read_parquet('{path}/**/*.parquet', hive_partitioning = true)"
        )  # fmt: skip
        types = dict(
            duckdb.sql(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {source})").fetchall()
        )
        assert (types["ts"], types["ts_ns"]) == ("TIMESTAMP WITH TIME ZONE", "BIGINT"), n
        rows = duckdb.sql(
            f"SELECT {quoted}, epoch_us(ts), ts_ns FROM {source} WHERE protocol <> '{SPARK_ONLY}'"
        ).fetchall()
        assert Counter(rows) == expected, n

        frame = pd.read_parquet(path, dtype_backend="numpy_nullable")  # ts_ns stays exact (Int64)
        frame = frame[frame["protocol"] != SPARK_ONLY]
        assert str(frame["ts"].dt.tz) == "UTC", n
        assert frame["ts"].isna().equals(frame["ts_ns"].isna()), n
        timed = frame[frame["ts"].notna()]
        us = (timed["ts"] - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(1, "us")
        assert list(us) == [ns // 1000 for ns in timed["ts_ns"]], n
        assert Counter(int(ns) for ns in timed["ts_ns"]) == Counter(
            k[-1] for k in expected.elements() if k[-1] is not None
        ), n


def test_spark_writer_on_a_wirelog_session_writes_micros_too(spark, tmp_path):
    """The `wirelog` source's rows written by Spark's own Parquet writer, on the session `session()`
    made: `ts` is TIMESTAMP(MICROS, UTC) there too (Spark's default would be INT96), `ts_ns` bigint."""
    captures = [p for p in make_captures(tmp_path) if not p.startswith(str(SHARED))][:5]
    out = tmp_path / "written"
    spark.read.format("wirelog").load(captures).write.parquet(str(out))
    files = sorted(out.glob("part-*.parquet"))
    assert files
    for f in files:
        schema = pq.ParquetFile(f).schema
        ts = schema.column(schema.names.index("ts"))
        logical = json.loads(ts.logical_type.to_json())
        assert (ts.physical_type, logical["timeUnit"], logical["isAdjustedToUTC"]) == (
            "INT64",
            "microseconds",
            True,
        )
        assert schema.column(schema.names.index("ts_ns")).physical_type == "INT64"
    table = pq.read_table(out)
    assert table.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    ns = table.column("ts_ns").to_pylist()
    assert table.column("ts").cast(pa.int64()).to_pylist() == [None if t is None else t // 1000 for t in ns]
