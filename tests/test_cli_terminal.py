"""Terminal conventions (issue 44, item 4): COLUMNS honoured; output that is not a terminal (or
`--plain`) is plain aligned text, no box drawing, no colour, no spaces at the end of a line; paths
as the user gave them; with several captures every frame and stream is `capture:N`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fault_helpers import EXAMPLE, WIRELOG
from tests.pty_tools import ANSI
from tests.test_cli_escaping import _in_a_terminal

BOX = re.compile("[\u2500-\u257f]")  # box drawing: ─ │ ┏ ╭ ├ ...


@pytest.fixture
def two(tmp_path: Path) -> Path:
    """Two copies of the example, given as relative paths from `tmp_path`: ./a.pcap and sub/b.pcap."""
    (tmp_path / "sub").mkdir()
    shutil.copy(EXAMPLE, tmp_path / "a.pcap")
    shutil.copy(EXAMPLE, tmp_path / "sub" / "b.pcap")
    return tmp_path


def piped(*args: str, cwd: Path | None = None, columns: int | None = None) -> str:
    """stdout of a real process whose stdout is a pipe (COLUMNS as given, else unset)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    proc = subprocess.run([*WIRELOG, *args], capture_output=True, timeout=120, env=env, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert b"\x1b" not in proc.stdout  # no colour in a pipe
    return proc.stdout.decode()


def assert_plain(out: str) -> None:
    lines = out.splitlines()
    assert not BOX.search(out), out
    assert not [line for line in lines if line != line.rstrip()], "trailing spaces"
    assert not [line for line in lines if line.startswith(" ") and line.strip() in ("Streams", "Captures")]


@pytest.mark.parametrize(
    "args",
    [
        ["inspect"],
        ["inspect", "--stream", "0"],
        ["inspect", "--frame", "8"],
        ["streams"],
    ],
    ids=" ".join,
)
def test_piped_output_is_plain_aligned_text(args):
    out = piped(*args, str(EXAMPLE))
    assert_plain(out)
    assert out.strip()


def test_piped_tables_are_aligned_columns():
    out = piped("inspect", str(EXAMPLE))
    lines = out.splitlines()
    head = lines[lines.index("Streams") + 1]
    row = lines[lines.index("Streams") + 2]
    assert head.split()[:4] == ["id", "protocol", "ver", "client"]
    assert row.split()[:5] == ["0", "lumberjack", "2", "127.0.0.1:56466", "127.0.0.1:5044"]
    # right-aligned numbers end under the end of their header
    assert row.index("1152") + len("1152") == head.index("bytes c→s") + len("bytes c→s")
    assert (
        "lumberjack\n  kinds: ack 5, compressed 3, connection 1, event 9, window 3" in out
    )  # the panel, unboxed


@pytest.mark.parametrize("width", [60, 80])
def test_piped_output_honours_columns(width):
    out = piped("inspect", str(EXAMPLE), columns=width)
    assert all(len(line) <= width for line in out.splitlines()), out
    assert f"(not shown at {width} columns:" in out
    wide = piped("inspect", str(EXAMPLE))  # without COLUMNS: whole lines, as wide as they are
    assert max(len(line) for line in wide.splitlines()) > 100


def test_streams_piped_has_no_padding_and_honours_columns(two):
    out = piped("streams", "./a.pcap", "sub/b.pcap", cwd=two)
    assert_plain(out)
    assert out.splitlines()[0].startswith("capture")
    narrow = piped("streams", str(EXAMPLE), columns=70)
    assert all(len(line) <= 70 for line in narrow.splitlines())


@pytest.mark.parametrize("width", [80, 120])
def test_a_terminal_gets_boxed_tables_at_its_width(width):
    raw = _in_a_terminal(["inspect", str(EXAMPLE)], width, stderr=False)
    out = ANSI.sub(b"", raw).decode().replace("\r\n", "\n")
    assert BOX.search(out) and "lumberjack │" in out
    assert all(len(line) <= width for line in out.splitlines())
    if width == 120:
        assert "(not shown at" in out  # the full table is wider than 120 columns


@pytest.mark.parametrize("width", [80, 120])
def test_plain_on_a_terminal(width):
    raw = _in_a_terminal(["inspect", "--plain", str(EXAMPLE)], width, stderr=False)
    assert b"\x1b[" not in raw  # no colour either
    out = raw.decode().replace("\r\n", "\n")
    assert_plain(out)
    assert all(len(line) <= width for line in out.splitlines())
    assert "127.0.0.1:56466" in out and "127.0.0.1:5044" in out
    raw = _in_a_terminal(["streams", "--plain", str(EXAMPLE)], width, stderr=False)
    assert b"\x1b[" not in raw and not BOX.search(raw.decode())


def test_columns_is_honoured_on_a_terminal():
    out = _in_a_terminal(["inspect", str(EXAMPLE)], 200, columns=90, stderr=False)
    text = ANSI.sub(b"", out).decode().replace("\r\n", "\n")
    assert all(len(line) <= 90 for line in text.splitlines()) and "(not shown at 90 columns" in text


def test_frame_of_several_captures_names_each(two):
    out = piped("inspect", "./a.pcap", "sub/b.pcap", "--frame", "8", cwd=two)
    heads = [line for line in out.splitlines() if "lumberjack ack" in line]
    assert heads == ["./a.pcap:8 lumberjack ack  stream 0 s2c", "sub/b.pcap:8 lumberjack ack  stream 0 s2c"]
    assert "./a.pcap:8: stream 0 s2c bytes 0..6" in out and "sub/b.pcap:8: stream 0 s2c bytes 0..6" in out
    assert str(two) not in out


def test_a_frame_past_one_capture_is_said_for_that_capture(two):
    from scapy.utils import rdpcap, wrpcap

    wrpcap(str(two / "c.pcap"), rdpcap(str(EXAMPLE))[:10])
    out = piped("inspect", "./a.pcap", "c.pcap", "--frame", "20", cwd=two)
    assert "c.pcap: no frame 20 (it has 10 packets)" in out and "./a.pcap:20 " in out


def test_several_captures_name_frames_and_streams_as_given(two):
    out = piped("inspect", "./a.pcap", "sub/b.pcap", cwd=two)
    findings = out[out.index("Findings") :]
    assert "./a.pcap:14, sub/b.pcap:14" in findings  # the keep-alive finding's first frames
    streams = out[out.index("Streams") : out.index("Findings")]
    assert "./a.pcap:0" in streams and "sub/b.pcap:0" in streams
    assert str(two) not in out
    listed = piped("streams", "./a.pcap", "sub/b.pcap", cwd=two)
    assert [line.split()[0] for line in listed.splitlines()[1:]] == ["./a.pcap", "sub/b.pcap"]
    rows = piped("inspect", "./a.pcap", "sub/b.pcap", "--stream", "0", cwd=two)
    assert "./a.pcap:8 " in rows and "sub/b.pcap:8 " in rows


def test_one_capture_keeps_bare_numbers():
    out = piped("inspect", str(EXAMPLE), "--frame", "8")
    assert out.splitlines()[0] == "frame 8 lumberjack ack  stream 0 s2c"
    findings = piped("inspect", str(EXAMPLE))
    assert re.search(r"lumberjack\.keepalive\s+1\s+14\s", findings)
