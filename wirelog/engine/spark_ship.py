"""What a Spark cluster's executors need to run wirelog, shipped by the job itself (docs/spark.md).

Executors run Python workers that import `wirelog` (the data source, the split stages) and with it its
native core, `_core.abi3.so`. Python cannot import an extension module from a zip (PEP 273), so
`--py-files` cannot carry it; instead two archives go through `spark.archives`, which Spark extracts
into every executor's working directory, and `spark.executorEnv.PYTHONPATH` names the two directories:

- `wirelog-wheel.zip#wirelog-wheel`: the wirelog wheel itself (a wheel is a zip; Spark picks how to
  extract by the name's suffix, hence the copy named `.zip`). It is the wheel `make wheel` put in
  `dist/` when that wheel holds exactly the running code (byte for byte), else one packed from the
  running package, so driver and executors always run the same code.
- `wirelog-deps.zip#wirelog-deps`: wirelog's runtime dependencies as installed beside the driver
  (click, rich, lz4, zstandard, orjson and theirs), but for pyarrow, pandas and numpy, which PySpark's
  Arrow path needs on every executor anyway. PySpark requires the driver's Python minor version on
  the executors, so the driver's compiled dependencies fit them.

The driver's own Python workers (Spark plans a Python data source on the driver, with the same
interpreter setting) get the same two directories, extracted once into a cache, through PYTHONPATH.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as metadata
import os
import platform
import re
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import wirelog

WHEEL, DEPS = "wirelog-wheel", "wirelog-deps"
# PySpark's Arrow path needs these on every executor already; pyarrow alone is ~150 MB.
PROVIDED = frozenset({"pyarrow", "pandas", "numpy", "pyspark", "py4j"})
WHEEL_CONF = "spark.wirelog.wheel"  # a wheel to ship instead of the one found
SHIP_CONF = "spark.wirelog.ship"  # "false": the executors have wirelog installed already


class ShipError(Exception):
    """The executors' archives cannot be made (a named wheel does not hold the running code)."""


def package_dir() -> Path:
    return Path(wirelog.__file__).resolve().parent


def package_files(root: Path) -> dict[str, str]:
    """The running package's files as a wheel's RECORD names them: `wirelog/x.py` → sha256 digest."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            out[f"{root.name}/{path.relative_to(root).as_posix()}"] = _digest(path.read_bytes())
    return out


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel_files(wheel: Path) -> dict[str, str]:
    """The package files a wheel holds (its dist-info left out), with digests of their bytes."""
    with zipfile.ZipFile(wheel) as z:
        return {n: _digest(z.read(n)) for n in z.namelist() if not n.endswith("/") and ".dist-info/" not in n}


def find_wheel(named: str | None, cache: Path, dist: Path | None = None) -> Path:
    """The wheel to ship: `named`, else a wheel of the running code in `dist` (default: the checkout's
    dist/, where `make wheel` puts it), else one packed into `cache`."""
    running = package_files(package_dir())
    if named:
        if wheel_files(Path(named)) != running:
            raise ShipError(f"{named}: this wheel does not hold the wirelog code running here")
        return Path(named)
    dist = dist or package_dir().parent / "dist"
    pattern = f"wirelog-{_version()}-*.whl"
    for wheel in sorted(dist.glob(pattern), key=lambda p: p.stat().st_mtime, reverse=True):
        if wheel_files(wheel) == running:
            return wheel
    return pack_wheel(cache)


def _version() -> str:
    try:
        return metadata.version("wirelog")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def pack_wheel(out_dir: Path) -> Path:
    """A wheel of the running package (what pip installed from one, or a checkout's build)."""
    version = _version()
    arch = platform.machine()
    name = f"wirelog-{version}-cp311-abi3-linux_{arch}.whl"
    info = f"wirelog-{version}.dist-info"
    try:
        meta = metadata.distribution("wirelog").read_text("METADATA") or ""
    except metadata.PackageNotFoundError:
        meta = ""
    meta = meta or f"Metadata-Version: 2.1\nName: wirelog\nVersion: {version}\n"
    wheel_meta = (
        f"Wheel-Version: 1.0\nGenerator: wirelog\nRoot-Is-Purelib: false\nTag: cp311-abi3-linux_{arch}\n"
    )
    root = package_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_dir, suffix=".tmp")
    os.close(fd)
    record = []
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for arcname in package_files(root):
            data = (root.parent / arcname).read_bytes()
            z.writestr(arcname, data)
            record.append(f"{arcname},{_digest(data)},{len(data)}")
        for leaf, text in (("METADATA", meta), ("WHEEL", wheel_meta)):
            z.writestr(f"{info}/{leaf}", text)
            record.append(f"{info}/{leaf},{_digest(text.encode())},{len(text.encode())}")
        z.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    os.replace(tmp, out_dir / name)
    return out_dir / name


def _requirements(requires: list[str] | None) -> list[str]:
    """The distribution names of requirements that apply without extras."""
    names = []
    for req in requires or []:
        spec, _, marker = req.partition(";")
        if "extra" in marker:
            continue
        names.append(re.split(r"[\s\[<>=!~(;]", spec.strip(), maxsplit=1)[0])
    return names


def dependency_files(wheel: Path) -> dict[str, Path]:
    """Archive name → installed file, for the wheel's runtime dependencies and theirs (not PROVIDED)."""
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    todo = _requirements(
        [line[len("Requires-Dist:") :] for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    )
    seen: set[str] = set()
    files: dict[str, Path] = {}
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen or name in PROVIDED:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement behind a marker that does not apply here (python_version < ...)
        todo += _requirements(dist.requires)
        for f in dist.files or []:
            if f.parts[0] != ".." and "__pycache__" not in f.parts:
                files[f.as_posix()] = Path(str(dist.locate_file(f)))
    return files


def _zip(files: dict[str, Path], out: Path) -> None:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, path in sorted(files.items()):
            z.write(path, arcname)


def prepare(named_wheel: str | None = None, cache: Path | None = None) -> tuple[Path, Path]:
    """The wheel shipped and the directory of the two archives (extracted beside them for the
    driver), made once per wheel, Python and set of installed dependencies in `cache`."""
    cache = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "wirelog" / "spark"
    wheel = find_wheel(named_wheel, cache / "packed")
    deps = dependency_files(wheel)  # their dist-info names carry the versions installed
    key = hashlib.sha256(wheel.read_bytes() + sys.version.encode() + "\n".join(sorted(deps)).encode())
    here = cache / key.hexdigest()[:16]
    if here.is_dir():
        return wheel, here
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=cache, prefix=".making-"))
    try:
        shutil.copyfile(wheel, tmp / f"{WHEEL}.zip")
        _zip(deps, tmp / f"{DEPS}.zip")
        for leaf in (WHEEL, DEPS):
            with zipfile.ZipFile(tmp / f"{leaf}.zip") as z:
                z.extractall(tmp / leaf)
        os.rename(tmp, here)  # whole or not at all; a concurrent run's copy may have won
    except OSError:
        if not here.is_dir():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return wheel, here


def executor_conf(conf: dict[str, str], here: Path) -> dict[str, str]:
    """Session settings that ship the archives in `here` (a user's own archives and path kept)."""
    archives = [f"{here / leaf}.zip#{leaf}" for leaf in (WHEEL, DEPS)]
    path = [WHEEL, DEPS]
    if conf.get("spark.archives"):
        archives.append(conf["spark.archives"])
    if conf.get("spark.executorEnv.PYTHONPATH"):
        path.append(conf["spark.executorEnv.PYTHONPATH"])
    return {"spark.archives": ",".join(archives), "spark.executorEnv.PYTHONPATH": os.pathsep.join(path)}


def driver_pythonpath(here: Path) -> str:
    """PYTHONPATH for the JVM's Python workers on the driver (they plan the data source)."""
    path = [str(here / WHEEL), str(here / DEPS)]
    path += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in path]
    return os.pathsep.join(path)


def main() -> None:
    """`spark-submit $(python -m wirelog.engine.spark_ship) job.py`: the options that ship wirelog."""
    _, here = prepare(os.environ.get("WIRELOG_WHEEL"))
    conf = executor_conf({}, here)
    print(
        f"--archives {conf['spark.archives']} --conf spark.executorEnv.PYTHONPATH={conf['spark.executorEnv.PYTHONPATH']}"
    )


if __name__ == "__main__":
    main()
