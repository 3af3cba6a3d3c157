"""`make wheel`: a manylinux2014 (glibc 2.17) abi3 wheel, for any Linux a cluster still runs, that
installs into a fresh venv without a Rust toolchain and converts the sample capture as the checkout does.

Both tests use the wheel of `make wheel` (tests/wheel_helpers.py): `make test` builds it before pytest
(a few minutes the first time, its zig build keeps native/target/zig/), so here it is a no-op; a bare
`pytest` builds it on first use. The glibc check is twice independent of maturin: auditwheel's own
verdict, and the symbol versions the core's ELF asks for, read here with pyelftools.
"""

from __future__ import annotations

import io
import os
import platform
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection
from wheel_helpers import ROOT, built_wheel

SAMPLE = ROOT / "examples" / "lumberjack-pylogbeat.pcap"
CORE = "wirelog/_core.abi3.so"
# The libraries a manylinux2014 wheel may need without carrying them (PEP 599).
MANYLINUX2014_LIBS = {
    "libgcc_s.so.1", "libstdc++.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libc.so.6", "libnsl.so.1",
    "libutil.so.1", "libpthread.so.0", "libresolv.so.2", "libX11.so.6", "libXext.so.6", "libXrender.so.1",
    "libICE.so.6", "libSM.so.6", "libGL.so.1", "libgobject-2.0.so.0", "libgthread-2.0.so.0",
    "libglib-2.0.so.0", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "ld64.so.2", "ld-linux.so.2",
}  # fmt: skip


def glibc_needs(core: bytes) -> tuple[set[str], dict[str, set[tuple[int, ...]]]]:
    """The libraries an ELF shared object needs (DT_NEEDED), and per library the GLIBC_x.y symbol
    versions it asks for (.gnu.version_r): what the dynamic loader checks on the target machine."""
    elf = ELFFile(io.BytesIO(core))
    needed = {
        tag.needed
        for section in elf.iter_sections()
        if isinstance(section, DynamicSection)
        for tag in section.iter_tags()
        if tag.entry.d_tag == "DT_NEEDED"
    }
    versions: dict[str, set[tuple[int, ...]]] = {}
    for section in elf.iter_sections():
        if isinstance(section, GNUVerNeedSection):
            for verneed, auxes in section.iter_versions():
                for aux in auxes:
                    if m := re.fullmatch(r"GLIBC_([0-9.]+)", aux.name):
                        versions.setdefault(verneed.name, set()).add(tuple(map(int, m[1].split("."))))
    return needed, versions


def test_wheel_is_manylinux2014_and_needs_nothing_past_glibc_2_17():
    wheel = built_wheel()
    no_zig = ROOT / "dist" / ".no-zig"
    if no_zig.exists():  # ziglang could not be fetched from PyPI: make wheel built for this glibc
        pytest.skip(f"make wheel built without zig: {no_zig.read_text().strip()}")
    arch = platform.machine()
    tags = {f"cp311-abi3-manylinux2014_{arch}", f"cp311-abi3-manylinux_2_17_{arch}"}
    assert wheel.name == f"wirelog-0.1.0-cp311-abi3-manylinux2014_{arch}.manylinux_2_17_{arch}.whl"
    with zipfile.ZipFile(wheel) as z:
        [info] = [n for n in z.namelist() if n.endswith(".dist-info/WHEEL")]
        meta = z.read(info).decode()
        core = z.read(CORE)
    assert {line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Tag: ")} == tags

    needed, versions = glibc_needs(core)
    assert needed <= MANYLINUX2014_LIBS, needed - MANYLINUX2014_LIBS
    assert "libc.so.6" in versions  # the reading works: the core does ask libc for versioned symbols
    newest = max(v for vs in versions.values() for v in vs)
    assert newest <= (2, 17), f"the core needs GLIBC_{'.'.join(map(str, newest))}: {versions}"

    shown = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True, check=True
    )
    verdict = " ".join(shown.stdout.split())
    assert f'is consistent with the following platform tag: "manylinux_2_17_{arch}"' in verdict, verdict


def _without_rust(path: str) -> str:
    """PATH without the directories that hold cargo or rustc (rustup's ~/.cargo/bin, a system Rust)."""
    keep = [
        d for d in path.split(os.pathsep) if d and not any(Path(d, t).exists() for t in ("cargo", "rustc"))
    ]
    return os.pathsep.join(keep)


def test_wheel_installs_without_rust_and_converts_the_sample(tmp_path):
    wheel = built_wheel()
    name = wheel.name
    assert name.startswith("wirelog-0.1.0-cp311-abi3-manylinux"), name  # a host-glibc tag without zig
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
    version = subprocess.run(
        [str(venv / "bin/wirelog"), "--version"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("wirelog 0.1.0 ") and "pyarrow " in version.stdout, version.stdout
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
