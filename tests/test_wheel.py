"""`make wheel`: a manylinux abi3 wheel that installs into a fresh venv without a Rust toolchain and
converts the sample capture as the checkout does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from wheel_helpers import ROOT, built_wheel

SAMPLE = ROOT / "examples" / "lumberjack-pylogbeat.pcap"


def _without_rust(path: str) -> str:
    """PATH without the directories that hold cargo or rustc (rustup's ~/.cargo/bin, a system Rust)."""
    keep = [
        d for d in path.split(os.pathsep) if d and not any(Path(d, t).exists() for t in ("cargo", "rustc"))
    ]
    return os.pathsep.join(keep)


def test_wheel_installs_without_rust_and_converts_the_sample(tmp_path):
    wheel = built_wheel()
    name = wheel.name
    assert name.startswith("wirelog-") and "-cp311-abi3-manylinux_" in name, name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert "wirelog/_core.abi3.so" in names and "wirelog/cli/main.py" in names
    assert not [n for n in names if n.startswith(("tests/", "native/", "bench/"))]

    path = _without_rust(os.environ["PATH"])
    assert shutil.which("cargo", path=path) is None and shutil.which("rustc", path=path) is None
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | {"PATH": path}
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    pip = [str(venv / "bin/python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "--only-binary", ":all:", str(wheel)], check=True, env=env, cwd=tmp_path)

    # cwd outside the checkout: only the installed wheel can be imported
    where = subprocess.run(
        [str(venv / "bin/python"), "-c", "import wirelog._core, wirelog; print(wirelog.__file__)"],
        capture_output=True, text=True, check=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert where.stdout.strip().startswith(str(venv)), where.stdout
    installed = subprocess.run(
        [str(venv / "bin/wirelog"), "convert", str(SAMPLE), "--to", "json"],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    checkout = subprocess.run(
        [sys.executable, "-m", "wirelog.cli", "convert", str(SAMPLE), "--to", "json"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path,
    )  # fmt: skip
    assert installed.returncode == 0 == checkout.returncode, installed.stderr
    lines = installed.stdout.splitlines()
    assert len(lines) > 10 and '"protocol":"lumberjack"' in installed.stdout.replace(" ", "")
    assert installed.stdout == checkout.stdout
