"""No litter on failure (issue 15): a full disk, a write the kernel refuses, a stop signal or a
killed --jobs worker leave the previous output under its name and no temporary file.

Process behaviour runs in real subprocesses (`python -m wirelog.cli`); a full disk is a real small
tmpfs when mounting is permitted, else a file size limit (RLIMIT_FSIZE: EFBIG from the kernel)."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.fault_helpers import (
    EXAMPLE,
    FORMATS,
    PREVIOUS,
    alive,
    big_capture,  # noqa: F401 - the `big` fixture
    fill,
    leftovers,
    open_under,
    small_tmpfs,
    squeeze,
    start,
    wait_for,
    wirelog,
    workers,
)

# (format, extra options, inputs: "example" and/or "big", output: a file name or DIR/)
FAILING_WRITERS = [
    pytest.param("parquet", (), ("example",), "out.parquet", id="parquet-written-at-close"),
    pytest.param("parquet", (), ("big",), "out.parquet", id="parquet"),
    pytest.param("json", (), ("big",), "out.ndjson", id="json"),
    pytest.param("hercules", (), ("big",), "out.bin", id="hercules"),
    pytest.param("json", ("-j", "2"), ("big", "big"), "out.ndjson", id="json-jobs"),
    pytest.param("parquet", ("-j", "2"), ("example", "big"), "out.parquet", id="parquet-jobs"),
    pytest.param("parquet", ("-j", "2"), ("example", "big"), "dir/", id="parquet-jobs-directory"),
    pytest.param("parquet", (), ("example", "big"), "dir/", id="parquet-directory"),
]


def _prepare(where: Path, output: str, first_input: str, fmt: str) -> tuple[Path, Path]:
    """(the output given to wirelog, the file under the final name holding PREVIOUS: for DIR/, the
    output of the first input)."""
    if output.endswith("/"):
        (where / output).mkdir()
        previous = where / output / (Path(first_input).stem + FORMATS[fmt])
    else:
        previous = where / output
    previous.write_bytes(PREVIOUS)
    return where / output, previous


def _inputs(names: tuple[str, ...], big: Path) -> list[str]:
    return [str(EXAMPLE) if n == "example" else str(big) for n in names]


def _assert_failed_cleanly(proc, where: Path, previous: Path, error: str) -> None:
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "Traceback" not in err and "Exception ignored" not in err
    assert err.splitlines()[-1].startswith(f"wirelog: {previous}: {error} ("), err  # names the output
    assert previous.read_bytes() == PREVIOUS
    assert leftovers(where) == []


@pytest.mark.parametrize(("fmt", "options", "names", "output"), FAILING_WRITERS)
def test_a_full_disk_leaves_the_previous_output_and_no_temporary_file(
    tmp_path, big, fmt, options, names, output
):
    inputs = _inputs(names, big)
    with small_tmpfs(tmp_path / "disk") as disk:
        out, previous = _prepare(disk, output, inputs[0], fmt)
        fill(disk)
        proc = wirelog("convert", *inputs, "--to", fmt, *options, "-o", str(out))
        _assert_failed_cleanly(proc, disk, previous, "No space left on device")


def _file_size_limit(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.parametrize(("fmt", "options", "names", "output"), FAILING_WRITERS)
def test_a_write_refused_by_the_kernel_leaves_the_previous_output(tmp_path, big, fmt, options, names, output):
    """RLIMIT_FSIZE: the kernel refuses writes past 4 KiB with EFBIG (Python ignores SIGXFSZ), a
    write fault at the OS boundary without any privilege."""
    inputs = _inputs(names, big)
    out, previous = _prepare(tmp_path, output, inputs[0], fmt)
    proc = wirelog(
        "convert", *inputs, "--to", fmt, *options, "-o", str(out), preexec_fn=_file_size_limit(4096)
    )
    _assert_failed_cleanly(proc, tmp_path, previous, "File too large")


def _stop_signals_default() -> None:
    """In the child: a stop signal the test run inherited as ignored (under `nohup`, SIGHUP) is not;
    wirelog keeps an ignored one ignored on purpose."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


# (signal, format, extra options, how many inputs (0: the capture on a standard input left open), output)
SIGNALS = [
    pytest.param(signal.SIGTERM, "json", (), 0, "out.ndjson", id="SIGTERM-json"),
    pytest.param(signal.SIGINT, "parquet", (), 0, "out.parquet", id="SIGINT-parquet"),
    pytest.param(signal.SIGHUP, "hercules", (), 0, "out.bin", id="SIGHUP-hercules"),
    pytest.param(signal.SIGTERM, "json", ("-j", "2"), 4, "out.ndjson", id="SIGTERM-json-jobs"),
    pytest.param(signal.SIGINT, "parquet", ("-j", "2"), 4, "dir/", id="SIGINT-parquet-jobs-directory"),
]


@pytest.mark.parametrize(("sig", "fmt", "options", "count", "output"), SIGNALS)
def test_a_stop_signal_removes_unfinished_outputs_and_ends_by_that_signal(
    tmp_path, big, sig, fmt, options, count, output
):
    out, previous = _prepare(tmp_path, output, str(big), fmt)
    if count:
        proc = start(
            "convert",
            *[str(big)] * count,
            "--to",
            fmt,
            *options,
            "-o",
            str(out),
            preexec_fn=_stop_signals_default,
        )
    else:
        # A conversion of a file can end before the signal comes (the whole capture takes ~1.5 s):
        # from a pipe that stays open it waits for more packets, as a live capture does.
        proc = start(
            "convert",
            "-",
            "--to",
            fmt,
            "-o",
            str(out),
            stdin=subprocess.PIPE,
            preexec_fn=_stop_signals_default,
        )
        proc.stdin.write(big.read_bytes())
        proc.stdin.flush()
    parallel = bool(options)
    # wait until the output is being written: by this process, or by the workers in the parts directory
    wait_for(
        lambda: open_under(tmp_path, *workers(proc.pid)) if parallel else open_under(tmp_path, proc.pid),
        "an output being written",
        120,
    )
    spawned = workers(proc.pid)
    time.sleep(0.3)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == -sig, err  # a shell shows 128 + the signal number
    assert b"Traceback" not in err and b"Exception ignored" not in err
    assert previous.read_bytes() == PREVIOUS
    assert leftovers(tmp_path) == []
    wait_for(lambda: not any(alive(w) for w in spawned), "the workers to end", 10)


def test_a_killed_worker_is_one_line_and_leaves_nothing(tmp_path, big):
    out = tmp_path / "all.parquet"
    out.write_bytes(PREVIOUS)
    proc = start("convert", str(big), str(big), str(big), "-j", "2", "--to", "parquet", "-o", str(out))
    wait_for(
        lambda: len(workers(proc.pid)) == 2 and len(open_under(tmp_path, *workers(proc.pid))) >= 2,
        "two busy workers",
        120,
    )
    spawned = workers(proc.pid)
    os.kill(spawned[0], signal.SIGKILL)  # as the out-of-memory killer does
    _, err = proc.communicate(timeout=120)
    lines = err.decode().splitlines()
    assert proc.returncode == 4 and len(lines) == 1 and "worker process was killed" in lines[0], err
    assert out.read_bytes() == PREVIOUS and leftovers(tmp_path) == []
    wait_for(lambda: not any(alive(w) for w in spawned), "the other worker to end", 10)


@pytest.mark.parametrize("room", [1 << 20, 8 << 20, 16 << 20], ids=["1m", "8m", "16m"])
def test_a_worker_aborted_by_the_core_is_one_line(tmp_path, big, room):
    """A failed allocation in the native core aborts its worker: Rust writes its own lines (with
    RUST_BACKTRACE set, a backtrace too) to the worker's stderr. Or, with a little more room, a
    Python object the core makes fails: PyO3 reports a MemoryError as unraisable, then panics (a
    PanicException, which cannot be pickled). The run still says it in one line. The worker's
    address space is limited to what it uses plus `room` while it converts."""
    env = {**os.environ, "RUST_BACKTRACE": "1"}
    proc = start(
        "convert", str(big), str(big), str(big), "-j", "2", "--to", "json", "-o", f"{tmp_path}/", env=env
    )
    wait_for(lambda: open_under(tmp_path, *workers(proc.pid)), "a busy worker", 120)
    worker = next(w for w in workers(proc.pid) if open_under(tmp_path, w))
    squeeze(worker, room)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        pytest.skip("the worker finished its input within the limit")
    lines = err.decode().splitlines()
    assert proc.returncode == 4 and len(lines) == 1, lines
    assert re.fullmatch(
        r"wirelog: (a --jobs worker process ran out of memory \(memory allocation of \d+ bytes failed\)|"
        r"out of memory): the run stopped and removed its unfinished output files; .*",
        lines[0],
    ), lines
    assert leftovers(tmp_path) == []
