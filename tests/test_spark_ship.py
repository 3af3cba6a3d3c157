"""What the Spark engine ships to a cluster's executors (engine/spark_ship.py): the wheel of exactly
the running code, never a stale one, and dependencies that import in a Python without wirelog."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest
from spark_cluster import executor_python

from wirelog.engine import spark_ship


def _altered(wheel: Path, out: Path) -> Path:
    """`wheel` with one module changed and its RECORD kept: what a wheel of older sources looks like."""
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "wirelog/engine/spark_ship.py":
                data += b"\n# an older version\n"
            dst.writestr(item, data)
    return out


def test_packed_wheel_holds_the_running_code(tmp_path):
    wheel = spark_ship.pack_wheel(tmp_path)
    assert wheel.name.startswith("wirelog-") and wheel.name.endswith(".whl")
    assert spark_ship.wheel_files(wheel) == spark_ship.package_files(spark_ship.package_dir())
    assert "wirelog/_core.abi3.so" in spark_ship.wheel_files(wheel)


def test_a_stale_wheel_is_never_shipped(tmp_path):
    good = spark_ship.pack_wheel(tmp_path / "packed")
    dist = tmp_path / "dist"
    dist.mkdir()
    stale = _altered(good, dist / good.name)
    with pytest.raises(spark_ship.ShipError, match="does not hold the wirelog code"):
        spark_ship.find_wheel(str(stale), tmp_path / "cache")
    shipped = spark_ship.find_wheel(None, tmp_path / "cache", dist)
    assert shipped.parent == tmp_path / "cache"  # packed from the running code instead
    assert spark_ship.wheel_files(shipped) == spark_ship.wheel_files(good)
    good_in_dist = dist / good.name
    good_in_dist.write_bytes(good.read_bytes())
    assert spark_ship.find_wheel(None, tmp_path / "cache", dist) == good_in_dist


def test_executor_conf_keeps_the_users_archives_and_path(tmp_path):
    conf = spark_ship.executor_conf(
        {"spark.archives": "mine.tgz#mine", "spark.executorEnv.PYTHONPATH": "mine"}, tmp_path
    )
    assert conf == {
        "spark.archives": f"{tmp_path}/wirelog-wheel.zip#wirelog-wheel,{tmp_path}/wirelog-deps.zip#wirelog-deps,mine.tgz#mine",
        "spark.executorEnv.PYTHONPATH": "wirelog-wheel:wirelog-deps:mine",
    }


def test_the_archives_import_in_a_python_with_only_pyarrow_and_pandas(tmp_path):
    """What an executor's Python worker gets: the two extracted archives on its PYTHONPATH."""
    wheel, here = spark_ship.prepare(cache=tmp_path)
    with zipfile.ZipFile(here / "wirelog-deps.zip") as z:
        tops = {n.split("/")[0] for n in z.namelist()}
    assert {"lz4", "orjson", "zstandard", "click", "rich"} <= tops
    assert not tops & {"pyarrow", "pandas", "numpy", "pyspark"}  # the executors' own
    assert (here / "wirelog-wheel.zip").read_bytes() == wheel.read_bytes()
    lean = executor_python()
    code = (
        "import wirelog, wirelog._core, wirelog.engine.local, wirelog.engine.splits, wirelog.export.parquet\n"
        "print(wirelog.__file__)"
    )
    env = {"PYTHONPATH": "wirelog-wheel:wirelog-deps", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([lean, "-c", code], cwd=here, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(here / "wirelog-wheel" / "wirelog" / "__init__.py")
    bare = subprocess.run(
        [lean, "-c", code], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, capture_output=True
    )
    assert bare.returncode != 0  # nothing of wirelog without them
