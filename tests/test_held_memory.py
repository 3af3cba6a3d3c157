"""Events waiting for their fate are held under one memory budget (`--held-memory`, default 128m;
WIRELOG_HELD_MEMORY) and wait in an unnamed temporary file past it (native/src/held/spill.rs).
The budget never changes an answer: with a budget of nothing, every held record goes through the
file and comes back, and the outputs are byte for byte (JSON, Hercules) or row for row (Parquet)
those of the default. The file has no name, so no exit leaves it behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.gen_capture import generate
from tests.fault_helpers import start, wait_for, wirelog
from tests.hercules_helpers import pipelined_gate

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "captures"
BUNDLED = [
    "examples/lumberjack-pylogbeat.pcap",
    "tests/data/lumberjack/pylogbeat-stalled-resend.pcap",
    "tests/data/hercules/gate-session.pcap",
]
COURIER = "peers/courier-go2.12-client-ruby2.12-server.pcap"


@pytest.fixture(scope="module")
def shapes(tmp_path_factory) -> dict[str, Path]:
    """Captures whose events wait: Lumberjack with 7 of 8 connections never acknowledged (closed)
    and a stalled server (nothing acknowledged, nothing closed: every event waits to the capture's
    end), and pipelined Gate requests (`pipelined_gate`)."""
    where = tmp_path_factory.mktemp("shapes")
    paths = {"lost": where / "lost.pcap", "stalled": where / "stalled.pcap", "gate": where / "gate.pcap"}
    generate(str(paths["lost"]), 3000, 40, 1, "lumberjack", 8, True)
    generate(str(paths["stalled"]), 3000, 40, 1, "lumberjack", 0, False)
    pipelined_gate(paths["gate"])
    return paths


def _inputs(shapes: dict[str, Path]) -> list[Path]:
    found = [ROOT / name for name in BUNDLED] + list(shapes.values())
    if (SHARED / COURIER).exists():
        found.append(SHARED / COURIER)
    return found


def _convert(src: Path, fmt: str, out: Path, *extra: str) -> bytes:
    done = wirelog("convert", str(src), "--to", fmt, "-o", str(out), *extra)
    assert done.returncode in (0, 1), done.stderr.decode()
    return out.read_bytes()


@pytest.mark.parametrize("fmt", ["json", "hercules"])
def test_no_budget_gives_the_same_bytes(shapes, tmp_path: Path, fmt: str) -> None:
    for src in _inputs(shapes):
        default = _convert(src, fmt, tmp_path / "default")
        spilled = _convert(src, fmt, tmp_path / "spilled", "--held-memory", "0")
        assert spilled == default, src
        assert default, src


def test_no_budget_gives_the_same_parquet_rows(shapes, tmp_path: Path) -> None:
    for src in _inputs(shapes):
        _convert(src, "parquet", tmp_path / "default.parquet")
        env_budget = {**os.environ, "WIRELOG_HELD_MEMORY": "0"}
        done = subprocess.run(
            [sys.executable, "-m", "wirelog.cli", "convert", str(src), "--to", "parquet",
             "-o", str(tmp_path / "spilled.parquet")],
            capture_output=True, env=env_budget,
        )  # fmt: skip
        assert done.returncode in (0, 1), done.stderr.decode()
        default = pq.read_table(tmp_path / "default.parquet")
        spilled = pq.read_table(tmp_path / "spilled.parquet")
        assert spilled.num_rows > 0 and spilled.equals(default), src


def test_the_verdict_is_the_same_whatever_the_budget(shapes) -> None:
    for src in shapes.values():
        texts = [
            wirelog("inspect", str(src), "--json", "--held-memory", budget).stdout
            for budget in ("0", "64k", "1g")
        ]
        assert texts[0] and texts[0] == texts[1] == texts[2], src
        assert b'"never_acknowledged"' in texts[0]


def test_a_budget_that_is_not_a_size_is_refused(shapes) -> None:
    done = wirelog("convert", str(shapes["lost"]), "--held-memory", "lots")
    assert done.returncode == 2
    assert b"'lots' is not a size" in done.stderr


def _spill_files(pid: int, tmpdir: Path) -> list[str]:
    """The files under `tmpdir` process `pid` holds open (an unnamed file reads `DIR/#INODE (deleted)`)."""
    inside = str(tmpdir) + os.sep
    found = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(inside):
            found.append(target)
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: signal.Signals(s).name)
def test_the_spill_file_has_no_name_and_nothing_is_left(shapes, tmp_path: Path, sig: int) -> None:
    """A conversion reading a stalled capture from a pipe that stays open holds its events in the
    spill file: the file is open in TMPDIR, yet the directory lists nothing, during the run and after
    it is killed."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "TMPDIR": str(tmpdir), "WIRELOG_HELD_MEMORY": "0"}
    proc = start(
        "convert", "-", "--to", "json", "-o", str(tmp_path / "out.ndjson"), stdin=subprocess.PIPE, env=env
    )
    try:
        proc.stdin.write(shapes["stalled"].read_bytes())
        proc.stdin.flush()
        wait_for(lambda: _spill_files(proc.pid, tmpdir), "the spill file", 60)
        assert all(f.endswith("(deleted)") for f in _spill_files(proc.pid, tmpdir))
        assert os.listdir(tmpdir) == []
        os.kill(proc.pid, sig)
        proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode != 0
    assert os.listdir(tmpdir) == []


def test_the_end_of_a_stalled_capture_comes_out_in_batches(tmp_path: Path) -> None:
    """Every event of a stalled capture waits to its end; they reach Python in batches of about
    16k records (native/src/pipeline/mod.rs STEP_RECORDS), not as one batch as large as the output."""
    from wirelog.engine.local import Options, run
    from wirelog.model import RecordLines

    path = tmp_path / "stalled.pcap"
    generate(str(path), 8000, 40, 1, "lumberjack", 0, False)
    sizes = [i.count for i in run([str(path)], (), Options(records="ndjson")) if isinstance(i, RecordLines)]
    assert sum(sizes) > 3 * 16_384
    per_stream = 2 * sum(sizes) // 40  # a step ends after the stream end that passed it
    assert max(sizes) <= 16_384 + per_stream


@pytest.mark.parametrize(
    "name", ["tests/data/lumberjack/pylogbeat-stalled-resend.pcap", "tests/data/hercules/gate-session.pcap"]
)
def test_impaired_copies_through_the_spill_file_keep_the_verdict(name: str, tmp_path: Path) -> None:
    """Packets reordered and duplicated, every held record through the spill file: the records and
    verdicts of the capture itself."""
    from impair import assert_same_when_impaired

    records = assert_same_when_impaired(ROOT / name, tmp_path, "--held-memory", "0")
    assert any(r.get("acked") is not None for r in records)


@pytest.fixture(scope="module")
def one_stalled(tmp_path_factory) -> dict[int, Path]:
    """One connection to a stalled server (a Filebeat and its Logstash), ~15k and ~60k events,
    every one of them held to the capture's end."""
    where = tmp_path_factory.mktemp("one")
    paths = {n: where / f"stalled-{n}.pcap" for n in (1500, 6000)}
    for packets, path in paths.items():
        generate(str(path), packets, 1, 1, "lumberjack", 0, False)
    return paths


def test_a_stalled_connections_end_comes_out_in_parts(one_stalled) -> None:
    """The ~60k events one connection held come out of its end in parts of about 4k records
    (native/src/decoders/mod.rs CloseRoom), each part reaching Python before the next is made: not
    one batch of every event the connection held."""
    from wirelog.engine.local import Options, run
    from wirelog.model import RecordLines

    sizes = [
        i.count
        for i in run([str(one_stalled[6000])], (), Options(records="ndjson"))
        if isinstance(i, RecordLines)
    ]
    assert sum(sizes) > 50_000
    assert len(sizes) > 10
    assert max(sizes) <= 4096 + 64  # and the rest of one window (20 to 60 events)


def test_a_stalled_connections_end_costs_no_more_memory_when_it_held_more(one_stalled) -> None:
    """Every held record through the spill file: the peak memory of a connection that held 60k
    events is about that of one that held 15k (its end made every record at once: +107 MB)."""
    from tests.fault_helpers import measured

    peaks = {}
    for packets, path in one_stalled.items():
        status, peaks[packets], out = measured("convert", str(path), "--to", "json", "--held-memory", "0")
        assert status == 0
        assert out.count(b'"kind":"event"') > packets * 8
    assert peaks[6000] - peaks[1500] < 20 << 20, peaks


def test_a_stalled_connections_end_in_parts_keeps_its_records_when_impaired(
    one_stalled, tmp_path: Path
) -> None:
    """Packets reordered and duplicated, every held record through the spill file: the ~15k events
    of a stalled connection's end, given in parts, are the records and verdict of the capture
    itself."""
    from impair import assert_same_when_impaired

    records = assert_same_when_impaired(one_stalled[1500], tmp_path, "--held-memory", "0")
    events = [r for r in records if r.get("kind") == "event"]
    assert len(events) > 3 * 4096  # more than three parts
    assert all(r["acked"] is False for r in events)
