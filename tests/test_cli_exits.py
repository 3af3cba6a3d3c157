"""How a run ends (issue 15): a closed stdout is quiet and exits 0; running out of memory is one
line and exit 4, with --debug too; every message names what, why and what to do."""

from __future__ import annotations

import contextlib
import errno
import gzip
import os
import pickle
import resource
import signal
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.gen_capture import generate
from tests.fault_helpers import (
    EXAMPLE,
    WIRELOG,
    alive,
    big_capture,  # noqa: F401 - the `big` fixture
    leftovers,
    open_under,
    squeeze,
    start,
    wait_for,
    wirelog,
    workers,
)
from tests.lumberjack_helpers import ack, jframe, window
from tests.pcap_helpers import pcap_bytes, tcp_conversation
from wirelog.cli import exits
from wirelog.cli import writing as writing_module
from wirelog.cli.exits import OUT_OF_MEMORY_MESSAGE, oserror_message
from wirelog.cli.main import main


def _reader_gone(proc: subprocess.Popen, read_first: bool) -> tuple[int, bytes]:
    """Close the process's stdout (after one line when `read_first`, as `head -1` does)."""
    if read_first:
        assert proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


# ---------------------------------------------------------------- 3. closed pipes


@pytest.mark.parametrize(
    "args",
    [
        ("convert", "BIG", "--to", "json"),  # EPIPE in the middle of the records
        ("convert", "EXAMPLE", "--to", "hercules"),
        ("inspect", "EXAMPLE"),  # rich's console
        ("inspect", "EXAMPLE", "--json"),
        ("streams", "EXAMPLE"),
    ],
    ids=" ".join,
)
def test_a_closed_stdout_ends_quietly_with_status_0(big, args):
    args = [{"BIG": str(big), "EXAMPLE": str(EXAMPLE)}.get(a, a) for a in args]
    code, err = _reader_gone(start(*args), read_first=args[0] == "convert" and "json" in args)
    assert (code, err) == (0, b"")


def test_a_closed_stdout_stops_every_worker(big, tmp_path):
    proc = start("convert", str(big), str(big), str(big), "-j", "2", "--to", "json", env=_tmpdir(tmp_path))
    wait_for(lambda: len(workers(proc.pid)) == 2, "two workers", 120)
    spawned = workers(proc.pid)
    assert _reader_gone(proc, read_first=True) == (0, b"")
    assert leftovers(tmp_path) == []  # the parts directory (in $TMPDIR for stdout)
    wait_for(lambda: not any(alive(w) for w in spawned), "the workers to end", 10)


def _tmpdir(path: Path) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(path)}


@pytest.mark.parametrize(("fail_on", "verdict"), [("error", 0), ("info", 1)])
def test_validate_keeps_its_verdict_when_the_reader_goes(fail_on, verdict):
    """validate's status is its verdict on every input, whoever reads its lines."""
    code, err = _reader_gone(start("validate", str(EXAMPLE), "--fail-on", fail_on), read_first=False)
    assert (code, err) == (verdict, b"")  # the example has info findings only


def _stdout_closed() -> None:
    os.close(1)  # as the shell's `>&-`: the process starts without a descriptor 1


@pytest.mark.parametrize(
    "args",
    [
        ("convert", "EXAMPLE", "--to", "json"),
        ("convert", "EXAMPLE", "--to", "hercules"),
        ("convert", "EXAMPLE", "EXAMPLE", "-j", "2", "--to", "json"),
        ("streams", "EXAMPLE", "--json"),
        ("streams", "EXAMPLE", "--dump", "0"),
        ("streams", "EXAMPLE"),
        ("validate", "EXAMPLE"),
        ("inspect", "EXAMPLE"),
        ("inspect", "EXAMPLE", "--json"),
    ],
    ids=" ".join,
)
def test_a_stdout_closed_from_the_start_is_an_output_not_written(tmp_path, args):
    """Unlike a reader that went away (EPIPE), nobody ever got the output: status 2, one line."""
    args = [str(EXAMPLE) if a == "EXAMPLE" else a for a in args]
    proc = subprocess.run(
        [*WIRELOG, *args],
        stdout=subprocess.DEVNULL,  # then closed in the child, before wirelog starts
        stderr=subprocess.PIPE,
        preexec_fn=_stdout_closed,
        env=_tmpdir(tmp_path),
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.decode().splitlines() == [
        "wirelog: stdout: Bad file descriptor (it was closed: redirect it to a file or /dev/null)"
    ]
    assert leftovers(tmp_path) == []


def test_a_closed_stdin_is_an_input_not_read():
    """`wirelog convert - <&-`: no traceback, an input that could not be read."""
    proc = subprocess.run(
        [*WIRELOG, "convert", "-"],
        stdin=subprocess.DEVNULL,  # then closed in the child, before wirelog starts
        capture_output=True,
        preexec_fn=lambda: os.close(0),
        timeout=120,
    )
    assert (proc.returncode, proc.stdout) == (2, b"")
    assert proc.stderr.decode().splitlines() == ["wirelog: -: cannot open: stdin is closed"]


# ---------------------------------------------------------------- 4. out of memory


def _address_space(megabytes: int):
    def apply() -> None:
        limit = megabytes << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def _peak_rss(args: list[str], limit: int | None = None) -> tuple[int, int]:
    """Exit status and peak resident memory (bytes) of one real run, under an address-space limit."""

    def apply() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    proc = subprocess.Popen(
        [*WIRELOG, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=apply
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss << 10


@pytest.fixture(scope="module")
def acked(tmp_path_factory) -> Path:
    """100k packets of Lumberjack windows, every one acknowledged: a run's memory is mostly its own."""
    path = tmp_path_factory.mktemp("captures") / "acked.pcap"
    generate(str(path), 100_000, connections=400, payload="lumberjack")
    return path


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_a_limit_of_twice_the_memory_a_run_uses_is_enough(acked, tmp_path, fmt):
    """Under an address-space limit (ulimit -v) of twice its peak resident memory, a conversion
    succeeds and writes what it writes without one: Arrow's jemalloc pool alone reserved 1 GB, and
    such a run was refused at 700 MB (cli/address_space.py)."""
    out = tmp_path / f"out.{fmt}"
    args = ["convert", str(acked), "--to", fmt, "-o", str(out)]
    code, peak = _peak_rss(args)
    assert code == 0 and peak > 100 << 20  # big enough for the libraries' mappings not to dominate
    free = out.read_bytes() if fmt == "json" else pq.read_table(out)
    out.unlink()
    assert _peak_rss(args, 2 * peak)[0] == 0
    assert (out.read_bytes() if fmt == "json" else pq.read_table(out)) == free


# Native code that cannot survive a failed allocation under RLIMIT_AS, out of the Python front's
# reach: orjson (the JSON writer) dereferences a failed PyBytes allocation (SIGSEGV), and Rust's
# default allocation-error handler aborts (SIGABRT). A limit where one of them fails is skipped.
NATIVE_CRASHES = (-signal.SIGSEGV, -signal.SIGABRT)


def _orjson_import_crash(proc: subprocess.CompletedProcess) -> bool:
    """orjson's module initialisation dereferences what a failed allocation returned: SIGSEGV with
    nothing on stderr (`python -c 'import orjson'` under a 12-14 MB limit, every time), which a run
    meets when its limit runs out while it imports (26 MB once in CI)."""
    return proc.returncode == -signal.SIGSEGV and not proc.stderr


def test_out_of_memory_is_one_line_and_status_4(big):
    """Real runs under larger and larger address-space limits, until one runs out of memory in the
    middle of its records: each ends with a documented status and at most one line on stderr (no
    "Exception ignored in: <generator ...>"). Then the same with --debug.

    `inspect --stream` keeps a table row per message while the pipeline runs, so its Python heap
    grows with the capture (`validate` no longer does: it asks the core for findings only). "In the
    middle": the same command on the small example runs to its end under that limit. The
    conversion's own handling of a MemoryError is test_debug_shows_the_traceback_with_the_same_status.
    """
    every_stream = [a for i in range(20) for a in ("--stream", str(i))]  # the 20 connections of `big`

    def inspect(limit: int, *debug: str, capture: Path = big) -> subprocess.CompletedProcess | None:
        """The run, or None when it hung: once in a fresh clone under load, a failed Rust allocation
        printed "memory allocation of N bytes failed" and the process did not end (a native
        failure, like NATIVE_CRASHES, out of the Python front's reach; seen with --debug)."""
        try:
            return wirelog(
                *debug, "inspect", *every_stream, str(capture), preexec_fn=_address_space(limit), timeout=60
            )
        except subprocess.TimeoutExpired:
            return None

    # Past the first limit where memory runs out in the middle, 10 more: there the core's panic on
    # a Python object that could not be made used to abort in glibc ("failed to register TLS
    # destructor"), at 3 limits in 4 from 50 to 62 MB (python/mod.rs, ready_for_panics).
    middle = None
    for megabytes in range(24, 200, 2):
        proc = inspect(megabytes)
        if proc is None or _orjson_import_crash(proc):
            continue
        lines = proc.stderr.decode().splitlines()
        assert proc.returncode in (0, 4) and len(lines) <= 1, (megabytes, proc.stderr)
        if proc.returncode == 4:
            assert lines == [f"wirelog: {OUT_OF_MEMORY_MESSAGE}"]
            if middle is None:
                example = inspect(megabytes, capture=EXAMPLE)
                if example is not None and example.returncode == 0:
                    middle = megabytes
        if middle is not None and megabytes >= middle + 20:
            break
    if middle is None:
        pytest.fail("no limit made the run out of memory in its middle")
    megabytes = middle
    # Where memory runs out varies from run to run, and --debug imports more: at one limit the
    # first failed allocation may be a native one (skipped, as above), so nearby limits are tried.
    for limit in [m for m in range(megabytes - 8, megabytes + 12, 2) for _ in "ab"]:
        debug = inspect(limit, "--debug")
        if debug is None or debug.returncode in NATIVE_CRASHES or debug.returncode == 0:
            continue
        lines = debug.stderr.decode().splitlines()
        assert debug.returncode == 4, (limit, debug.stderr)
        assert "Traceback (most recent call last):" in lines
        assert lines[-1] == f"wirelog: {OUT_OF_MEMORY_MESSAGE}"
        return
    pytest.fail("--debug never ran out of memory near the same limit")


@pytest.fixture(scope="module")
def huge_frame() -> bytes:
    """A capture whose one Lumberjack connection sends a 48 MB data frame: the core holds it whole
    (and the event made of it), more than one of its allocator's arenas holds under a limit."""
    frame = jframe(1, {"message": "x" * 48_000_000})
    packets = tcp_conversation([("c", window(1) + frame), ("s", ack(1))], mss=60_000)
    return pcap_bytes(packets)


def test_memory_refused_to_the_core_is_one_line_and_status_4(tmp_path, huge_frame):
    """Memory running out inside the native core ends the run with the one line and status 4, with
    RUST_BACKTRACE set too: Rust's own handler prints two lines (a backtrace with RUST_BACKTRACE)
    and aborts with SIGABRT, which only --debug keeps. The run starts under an address-space limit
    (its allocator then reserves 32 MiB at a time, python/memory.rs), which is lowered to what it
    uses plus `room` while it reads the 48 MB frame from a pipe kept open; several rooms, as which
    allocation fails first, Python's or the core's, depends on it (--debug shows it was the core's)."""
    env = {**os.environ, "RUST_BACKTRACE": "1"}
    env.pop("MIMALLOC_ARENA_RESERVE", None)

    def run(*debug: str, room: int) -> tuple[int, str]:
        proc = start(
            *debug,
            "convert",
            "-",
            "-o",
            str(tmp_path / "out.ndjson"),
            stdin=subprocess.PIPE,
            env=env,
            preexec_fn=_address_space(4096),
        )
        proc.stdin.write(huge_frame[: 1 << 20])
        proc.stdin.flush()
        wait_for(lambda: open_under(tmp_path, proc.pid), "the output to be written", 120)
        squeeze(proc.pid, room)
        with contextlib.suppress(BrokenPipeError):  # it may be gone already
            proc.stdin.write(huge_frame[1 << 20 :])
        with contextlib.suppress(BrokenPipeError):  # what the write left in the buffer
            proc.stdin.close()  # closed even when its flush fails
        proc.stdin = None  # so communicate() does not flush it again (ValueError on a closed file)
        _, err = proc.communicate(timeout=120)
        return proc.returncode, err.decode()

    rooms = [kib << 10 for kib in (1024, 0, 256, 2048, 4096, 8192)]
    for room in rooms:
        code, err = run(room=room)
        assert code == 4 and err.splitlines() == [f"wirelog: {OUT_OF_MEMORY_MESSAGE}"], (room, err)
    shown = [run("--debug", room=room) for room in rooms]
    assert any(code == -signal.SIGABRT and "stack backtrace:" in err for code, err in shown), shown


def _out_of_memory(*_args, **_kw):
    raise MemoryError


def test_debug_shows_the_traceback_with_the_same_status(monkeypatch, capsys):
    monkeypatch.setattr(writing_module, "JsonWriter", _out_of_memory)
    for args, traceback in (([], False), (["--debug"], True)):
        with pytest.raises(SystemExit) as e:
            main([*args, "convert", str(EXAMPLE)])
        err = capsys.readouterr().err
        assert e.value.code == 4 and ("Traceback" in err) == traceback
        assert err.splitlines()[-1] == f"wirelog: {OUT_OF_MEMORY_MESSAGE}"


# ---------------------------------------------------------------- 5. messages


def test_an_unwritable_output_is_named_with_what_to_do(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    cases = {
        str(
            tmp_path / "missing" / "out.ndjson"
        ): "No such file or directory (check the name and that its directory exists)",
        str(
            tmp_path / "EXAMPLE.pcap" / "out.ndjson"
        ): "Not a directory (a part of the path is a file, not a directory)",
    }
    (tmp_path / "EXAMPLE.pcap").write_bytes(EXAMPLE.read_bytes())
    for output, expected in cases.items():
        proc = wirelog("convert", str(EXAMPLE), "-o", output)
        assert proc.returncode == 2 and proc.stderr.decode() == f"wirelog: {output}: {expected}\n"


@pytest.mark.parametrize(
    "code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EROFS, errno.EIO]
)
def test_every_output_error_says_what_to_do(code):
    message = oserror_message(OSError(code, "strerror", "out.parquet"))
    assert message.startswith("out.parquet: strerror (") and message.endswith(")")


def test_a_truncated_capture_is_named(tmp_path):
    cut = tmp_path / "cut.pcap.gz"
    cut.write_bytes(gzip.compress(EXAMPLE.read_bytes())[:1000])
    proc = wirelog("inspect", str(cut), "--json")
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == 0 and len(lines) == 1 and lines[0].startswith(f"wirelog: {cut}: "), lines


def _core_panic(message: str) -> BaseException:
    """An exception of the kind PyO3 raises for a panic: pyo3_runtime.PanicException, a BaseException
    whose module cannot be imported (so it cannot be pickled)."""
    panic = type("PanicException", (BaseException,), {"__module__": "pyo3_runtime"})
    return panic(message)


@pytest.mark.parametrize(
    ("message", "status", "line"),
    [
        ("PyObject pointer is null", exits.OUT_OF_MEMORY, OUT_OF_MEMORY_MESSAGE),
        ("index out of bounds", exits.INTERNAL, "internal error: CorePanic: index out of bounds"),
    ],
)
def test_a_core_panic_in_a_worker_reaches_the_run_as_its_own_outcome(message, status, line):
    """A --jobs worker sends its parent what went wrong through pickle: a core panic must get there
    with the same exit status and line as in a run without --jobs."""
    panic = _core_panic(message)
    with pytest.raises(pickle.PicklingError):
        pickle.dumps(panic)
    received = pickle.loads(pickle.dumps(exits.sendable(panic)))
    assert exits.outcome(received)[0] == exits.outcome(panic)[0] == status
    assert exits.outcome(received)[1].startswith(line)
    other = ValueError("x")
    assert exits.sendable(other) is other


def test_a_syntax_error_in_our_own_module_is_memory_running_out():
    """CPython's parser reports some failed allocations as a SyntaxError (a fresh clone under a 32 MB
    address-space limit: "expected ':'" in wirelog/engine/local.py, which compiles): one of our own
    modules, which this suite imports whole, means out of memory; any other file is still a bug."""
    import wirelog.engine.local as ours

    err = SyntaxError("expected ':'", (ours.__file__, 255, 1, "", 255, 2))
    assert exits.outcome(err) == (exits.OUT_OF_MEMORY, exits.OUT_OF_MEMORY_MESSAGE)
    elsewhere = SyntaxError("expected ':'", ("/tmp/plugin.py", 1, 1, "", 1, 2))
    assert exits.outcome(elsewhere)[0] == exits.INTERNAL
