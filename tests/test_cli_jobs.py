"""`convert --jobs N`: several capture files at once, the same output as one job."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from tests.capture_tools import run_cli
from tests.conftest import REPO

DATA = REPO / "tests" / "data"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[str]:
    """Captures of three protocols, a truncated copy and a file that is not a capture, in this order."""
    tmp = tmp_path_factory.mktemp("inputs")
    paths = [DATA / "lumberjack" / "pylogbeat-logstash.pcap", DATA / "hercules" / "gate-session.pcap"]
    paths.append(DATA / "lumberjack" / "pylogbeat-stalled-resend.pcap")
    names = []
    for i, p in enumerate(paths):
        names.append(str(shutil.copy(p, tmp / f"{i}-{p.name}")))
    whole = (DATA / "lumberjack" / "pylogbeat-logstash.pcap").read_bytes()
    (tmp / "3-truncated.pcap").write_bytes(whole[: len(whole) // 2])
    (tmp / "4-notes.txt").write_bytes(b"not a capture at all\n")
    return [*names, str(tmp / "3-truncated.pcap"), str(tmp / "4-notes.txt")]


def convert(*args: str) -> tuple[int, bytes, str]:
    return run_cli("convert", *args)


def test_json_is_byte_for_byte_the_one_job_output(inputs):
    one = convert(*inputs, "--to", "json")
    two = convert(*inputs, "--to", "json", "-j", "2")
    every_cpu = convert(*inputs, "--to", "json", "--jobs", "0")
    assert one[1] and one == two == every_cpu  # exit code, stdout and the error lines, in input order
    assert one[0] == 0 and "4-notes.txt: not a pcap or pcapng capture" in one[2]


def test_parquet_has_the_same_rows(inputs, tmp_path):
    assert convert(*inputs, "--to", "parquet", "-o", str(tmp_path / "one.parquet"))[0] == 0
    assert convert(*inputs, "--to", "parquet", "-o", str(tmp_path / "two.parquet"), "-j", "3")[0] == 0
    one, two = pq.read_table(tmp_path / "one.parquet"), pq.read_table(tmp_path / "two.parquet")
    assert one.num_rows > 50 and one.equals(two)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.parquet", "two.parquet"]  # no parts left


@pytest.mark.parametrize("fmt", ["json", "parquet", "hercules"])
def test_one_file_per_input_is_the_same(inputs, tmp_path, fmt):
    assert convert(*inputs, "--to", fmt, "-o", f"{tmp_path}/one/")[0] == 0
    assert convert(*inputs, "--to", fmt, "-o", f"{tmp_path}/two/", "-j", "2")[0] == 0
    one = sorted((tmp_path / "one").iterdir())
    two = sorted((tmp_path / "two").iterdir())
    assert [p.name for p in one] == [p.name for p in two] and len(one) == 5
    for a, b in zip(one, two, strict=True):
        if fmt == "parquet":
            assert pq.read_table(a).equals(pq.read_table(b)), a.name
        else:
            assert a.read_bytes() == b.read_bytes(), a.name


def test_what_jobs_cannot_do_is_a_usage_error(inputs):
    code, _, err = convert(*inputs[:2], "--to", "hercules", "-j", "2")
    assert code == 2 and "-o DIR/" in err
    code, _, err = convert(inputs[0], "-", "-j", "2")
    assert code == 2 and "stdin" in err
    # one input, or one job: nothing to share out, no restriction
    assert convert(inputs[0], "--to", "hercules", "-j", "4")[0] == 0


def test_an_output_in_a_missing_directory_is_named_in_the_error(inputs, tmp_path):
    out = tmp_path / "missing" / "all.ndjson"
    for jobs in ("1", "2"):
        proc = subprocess.run(
            [sys.executable, "-m", "wirelog.cli", "convert", *inputs[:2], "-j", jobs, "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        expected = f"wirelog: {out}: No such file or directory (check the name and that its directory exists)"
        assert proc.returncode == 2 and proc.stderr.strip() == expected, jobs
