"""Helpers for tests that run wirelog as a real process in a hostile environment: signals, closed
pipes, full disks, low memory limits, killed workers."""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench.gen_capture import generate
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "lumberjack-pylogbeat.pcap"
WIRELOG = [sys.executable, "-m", "wirelog.cli"]
FORMATS = {"json": ".ndjson", "parquet": ".parquet", "hercules": ".bin"}  # convert's suffixes
PREVIOUS = b"the previous output\n"  # what an output file held before a run that fails


@pytest.fixture(scope="module", name="big")
def big_capture(tmp_path_factory) -> Path:
    """A Lumberjack capture that takes a few seconds to convert: time to signal or kill a run."""
    path = tmp_path_factory.mktemp("captures") / "big.pcap"
    generate(str(path), 40_000, connections=20, payload="lumberjack")
    return path


def wirelog(*args: str, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    """One run of `python -m wirelog.cli ARGS`, stdout and stderr captured."""
    return subprocess.run([*WIRELOG, *args], capture_output=True, timeout=timeout, **kw)


def start(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([*WIRELOG, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def leftovers(directory: Path) -> list[str]:
    """Every temporary file or parts directory of wirelog under `directory`."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob(".wirelog-*"))


def open_under(directory: Path, *pids: int) -> list[str]:
    """The files processes `pids` hold open under `directory`: the outputs they are writing (a file
    without a name, O_TMPFILE, reads `DIR/#INODE (deleted)`)."""
    inside = os.path.realpath(directory) + os.sep
    found = []
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith(inside):
                        found.append(target)
    return found


def squeeze(pid: int, room: int = 1 << 20) -> None:
    """Limit the address space of the running process `pid` to what it uses plus `room`: its next
    large allocation fails (in Rust, an abort; in Python, a MemoryError)."""
    status = Path(f"/proc/{pid}/status").read_text()
    used = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmSize:"))) << 10
    resource.prlimit(pid, resource.RLIMIT_AS, (used + room, used + room))


def wait_for(condition: Callable[[], object], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()  # after "pid (comm) ": state, ppid, ...


def workers(pid: int) -> list[int]:
    """The --jobs worker processes of process `pid` (multiprocessing's spawned children)."""
    found = []
    for entry in Path("/proc").iterdir():
        fields = _stat_fields(int(entry.name)) if entry.name.isdigit() else None
        if fields and fields[1] == str(pid):
            with contextlib.suppress(OSError):
                if b"spawn_main" in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


@contextlib.contextmanager
def small_tmpfs(mountpoint: Path, size: str = "256k") -> Iterator[Path]:
    """A tmpfs of `size` at `mountpoint` (a real full disk); skips the test without the privilege."""
    mountpoint.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mountpoint)], capture_output=True
    )
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.decode().strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=True)


def fill(directory: Path) -> None:
    """Fill the file system of `directory` to the last block."""
    with open(directory / "filler", "wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 4096)
    assert os.statvfs(directory).f_bavail == 0


# The run's own peak RSS. A child's ru_maxrss starts at its parent's resident size (Linux keeps the
# high-water mark of the address space a fork copied, across exec), and pytest's is hundreds of MB
# in a full run: so a small launcher forks the run and reports what wait4 says of it.
_LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""


def measured(*args: str, one_cpu: bool = False) -> tuple[int, int, bytes]:
    """Run `python -m wirelog.cli ARGS`: (exit status, peak RSS in bytes, stdout). `one_cpu`: the
    run is pinned to one of this process's CPUs, as `taskset -c N` pins it."""
    pin = None
    if one_cpu:
        cpu = min(os.sched_getaffinity(0))
        pin = lambda: os.sched_setaffinity(0, {cpu})  # noqa: E731 (the child's, before exec)
    with tempfile.TemporaryDirectory() as tmp:
        out, err, report = (Path(tmp) / name for name in ("out", "err", "report"))
        with out.open("wb") as stdout, err.open("wb") as stderr:
            subprocess.run(
                [WIRELOG[0], "-c", _LAUNCHER, str(report), *WIRELOG[1:], *args],
                stdout=stdout,
                stderr=stderr,
                timeout=300,
                check=True,
                preexec_fn=pin,
            )
        status, maxrss_kib = map(int, report.read_text().split())
        stdout, stderr = out.read_bytes(), err.read_bytes()
    assert b"Traceback" not in stderr and b"memory allocation" not in stderr, stderr[-2000:]
    return status, maxrss_kib * 1024, stdout
