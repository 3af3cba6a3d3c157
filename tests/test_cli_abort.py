"""Outputs survive an abort (issue 29): a conversion killed where no cleanup can run (SIGKILL, as the
out-of-memory killer sends; SIGABRT, as a failed allocation in the native core raises) leaves no
file beside its output, and the file already under the output's name as it was, byte for byte.

Each run reads a capture from a pipe that stays open, so it is killed in the middle of its output,
waiting for more packets as a live capture does."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
from pathlib import Path

import pytest

from tests.fault_helpers import (
    FORMATS,
    PREVIOUS,
    alive,
    big_capture,  # noqa: F401 - the `big` fixture
    open_under,
    start,
    wait_for,
    workers,
)


def _no_core_dump() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _written(pid: int, directory: Path) -> int:
    """Bytes in the files process `pid` is writing under `directory`."""
    total = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) in open_under(directory, pid):
                total += os.stat(fd).st_size
        except OSError:
            continue
    return total


def _killed_mid_run(big: Path, where: Path, fmt: str, sig: int) -> tuple[int, Path]:
    """A conversion of `big` from a pipe to `where/out.<suffix>`, killed by `sig` once its output
    holds some bytes; returns (its status, the output's name)."""
    out = where / f"out{FORMATS[fmt]}"
    cwd = where.parent / "cwd"  # a core dump, if any, is not the litter looked for
    cwd.mkdir(exist_ok=True)
    proc = start(
        "convert", "-", "--to", fmt, "-o", str(out), stdin=subprocess.PIPE, cwd=cwd, preexec_fn=_no_core_dump
    )
    try:
        proc.stdin.write(big.read_bytes())
        proc.stdin.flush()
        wait_for(lambda: _written(proc.pid, where) > 0, "the output to be written", 120)
        os.kill(proc.pid, sig)
        proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.communicate()
    return proc.returncode, out


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGABRT], ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_killed_run_leaves_the_previous_output_and_nothing_beside_it(tmp_path, big, fmt, sig):
    where = tmp_path / "out"
    where.mkdir()
    previous = where / f"out{FORMATS[fmt]}"
    previous.write_bytes(PREVIOUS)
    os.chmod(previous, 0o604)
    code, out = _killed_mid_run(big, where, fmt, sig)
    assert code == -sig
    assert os.listdir(where) == [out.name]
    assert out.read_bytes() == PREVIOUS and (out.stat().st_mode & 0o777) == 0o604


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGABRT], ids=lambda s: signal.Signals(s).name)
def test_a_killed_run_leaves_no_new_output(tmp_path, big, sig):
    where = tmp_path / "out"
    where.mkdir()
    code, _ = _killed_mid_run(big, where, "json", sig)
    assert code == -sig and os.listdir(where) == []


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGABRT], ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("output", ["out.parquet", "dir/"])
@pytest.mark.parametrize("when", ["busy", "starting"])
def test_a_killed_jobs_run_leaves_nothing_beside_its_output(tmp_path, big, sig, output, when):
    """With --jobs the workers write parts into a directory beside the output; when the main process
    is killed they remove it and end: killed while both workers convert, or while they are still
    starting (a worker that begins after its parent ended must not wait for it forever, holding the
    pipes of the run)."""
    where = tmp_path / "out"
    where.mkdir()
    previous = where / "out.parquet"
    previous.write_bytes(PREVIOUS)
    proc = start(
        "convert", *[str(big)] * 3, "-j", "2", "--to", "parquet", "-o", f"{where}/{output}",
        cwd=where.parent, preexec_fn=_no_core_dump,
    )  # fmt: skip
    if when == "busy":
        ready = lambda: len(workers(proc.pid)) == 2 and all(open_under(where, w) for w in workers(proc.pid))  # noqa: E731
    else:
        ready = lambda: len(workers(proc.pid)) == 2  # noqa: E731
    wait_for(ready, f"{when} workers", 120)
    spawned = workers(proc.pid)
    os.kill(proc.pid, sig)
    proc.communicate(timeout=60)
    assert proc.returncode == -sig
    wait_for(lambda: not any(alive(w) for w in spawned), "the workers to end", 30)
    assert sorted(os.listdir(where)) == sorted(["out.parquet", *(["dir"] if output == "dir/" else [])])
    assert previous.read_bytes() == PREVIOUS
    if output == "dir/":
        assert os.listdir(where / "dir") == []
