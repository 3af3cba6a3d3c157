"""Inputs as a user names them (#44 item 8): a directory is its captures (recursively, compressed ones
too, hidden and `_` names skipped as Spark skips them, in a stable order) for every command; a file
whose name looks like a glob is that file; a file name that is not UTF-8 is named with escapes, never
an internal error."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.capture_tools import ndjson, run_cli
from tests.conftest import REPO

SAMPLE = REPO / "examples" / "lumberjack-pylogbeat.pcap"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """captures/{b.pcap, sub/a.pcap.gz, sub/deeper/c.pcap} and what must be skipped."""
    root = tmp_path / "captures"
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / ".snapshots").mkdir()
    shutil.copy(SAMPLE, root / "b.pcap")
    (root / "sub" / "a.pcap.gz").write_bytes(gzip.compress(SAMPLE.read_bytes()))
    shutil.copy(SAMPLE, root / "sub" / "deeper" / "c.pcap")
    shutil.copy(SAMPLE, root / ".snapshots" / "old.pcap")
    shutil.copy(SAMPLE, root / ".hidden.pcap")
    (root / "_SUCCESS").write_bytes(b"")
    return root


def captures_of(*args: str) -> list[str]:
    code, out, err = run_cli("inspect", "--json", *args)
    assert code == 0, err
    return [c["capture"] for c in json.loads(out)["captures"]]


def test_a_directory_is_read_as_its_captures(tree: Path) -> None:
    want = [str(tree / "b.pcap"), str(tree / "sub" / "a.pcap.gz"), str(tree / "sub" / "deeper" / "c.pcap")]
    assert captures_of(str(tree)) == want
    # the same records as naming the files one by one, in that order
    code, whole, err = run_cli("convert", str(tree), "--to", "json")
    assert code == 0, err
    code, one_by_one, err = run_cli("convert", *want, "--to", "json")
    assert code == 0, err
    assert whole == one_by_one and {r["capture"] for r in ndjson(whole)} == set(want)
    # a glob that matches a directory reads it the same way
    assert captures_of(str(tree / "su*")) == want[1:]
    code, out, err = run_cli("validate", str(tree))
    assert code == 0 and str(tree / "sub" / "deeper" / "c.pcap") in out.decode()


def test_a_directory_without_files_is_one_line_and_status_2(tmp_path: Path) -> None:
    (tmp_path / "empty" / ".git").mkdir(parents=True)
    code, out, err = run_cli("convert", str(tmp_path / "empty"), "--to", "json")
    assert code == 2 and out == b""
    assert err.strip().splitlines() == [f"wirelog: {tmp_path / 'empty'}: directory holds no capture files"]


@pytest.mark.parametrize(
    "command",
    [["inspect"], ["validate"], ["streams"], ["convert", "--to", "json"], ["inspect", "--json"]],
)
def test_an_input_that_cannot_be_read_is_its_one_error_line_and_nothing_else(
    tmp_path: Path, command: list[str]
) -> None:
    """Issue 44 item 8: beside a good capture, a file that is no capture and one that does not
    exist are each one line on stderr; stdout says nothing of them (before, inspect's Captures table
    had a row of zeros for each, repeating the error). `inspect --json` keeps the error in its
    `captures` list (data for scripts, not a view)."""
    bad = tmp_path / "not-a-capture.pcap"
    bad.write_bytes(b"garbage, not a capture")
    missing = tmp_path / "missing.pcap"
    code, out, err = run_cli(*command, str(bad), str(missing), str(SAMPLE))
    assert code == 0, err
    lines = err.strip().splitlines()
    assert sorted(lines) == sorted(
        [
            f"wirelog: {missing}: no such file",
            f"wirelog: {bad}: not a pcap or pcapng capture (starts with 67 61 72 62)",
        ]
    )
    if command == ["inspect", "--json"]:
        errors = {c["capture"]: c["error"] for c in json.loads(out)["captures"]}
        assert errors[str(bad)] and errors[str(SAMPLE)] is None
    else:
        assert b"not-a-capture" not in out and b"missing.pcap" not in out
        assert out  # the good capture is still read and shown


def test_a_file_named_like_a_glob_is_that_file(tmp_path: Path) -> None:
    odd = tmp_path / "capture[1].pcap"
    shutil.copy(SAMPLE, odd)
    assert captures_of(str(odd)) == [str(odd)]


def test_a_file_name_that_is_not_utf8_is_named_with_escapes(tmp_path: Path) -> None:
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/\xff\x1b[31m.pcap"))
    shutil.copy(SAMPLE, odd)
    shown = str(tmp_path) + "/\\xff\x1b[31m.pcap"
    code, out, err = run_cli("convert", str(odd), "--to", "json")
    assert code == 0, err
    assert {r["capture"] for r in ndjson(out)} == {shown}
    for command in (["inspect"], ["validate"], ["streams"], ["report", "-o", str(tmp_path / "r.html")]):
        code, out, err = run_cli(*command, str(odd))
        assert code == 0, (command, err)
        assert b"\x1b" not in out, command  # the terminal gets no escape sequence from a file name
