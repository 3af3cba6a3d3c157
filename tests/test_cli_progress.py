"""Progress and completion (issue 44, item 7): on a terminal, a long run of every command (but
replay, which has its own) shows a bar of the input bytes read, with percent, rate, ETA and counts
that grow while it runs; `convert` and `report` end with one line on stderr (records written,
path). Nothing of it when stderr is not a terminal.

The runs are made long by a reader that waits between reads (a `sitecustomize` on PYTHONPATH wraps
the engine's `_reads`): a few seconds for a 3 MB capture, whatever the machine's speed.
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from rich.filesize import decimal

from bench.gen_capture import generate
from tests.fault_helpers import WIRELOG
from tests.pty_tools import ANSI
from tests.pty_tools import on_terminal as run_on_terminal

DELAY_S = 0.2  # between two reads of 256 KiB: the 12 reads of the capture below take 2.4 s
SLOW = f"""
import time
import wirelog.engine.capture as capture

_reads = capture._reads


def _slow(*args, **kwargs):
    for data in _reads(*args, **kwargs):
        time.sleep({DELAY_S})
        yield data


capture._reads = _slow
"""
BAR = re.compile(
    r"(?P<command>\w+) [━╸╺]+\s+(?P<percent>\d+)%\s+(?P<done>[\d.]+ \w+)/(?P<total>[\d.]+ \w+)\s+"
    r"(?P<rate>[\d.]+ \w+/s|-/s)\s+ETA (?P<eta>\d+:\d\d:\d\d|-:--:--)\s+(?P<packets>[\d,]+) packets\s+"
    r"(?P<streams>[\d,]+) streams(?:\s+(?P<records>[\d,]+) (?P<what>records|findings))?"
)


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("progress") / "cap.pcap"
    generate(str(path), 10_000, connections=20, payload="lumberjack")
    return path


@pytest.fixture(scope="module")
def slow(tmp_path_factory) -> dict[str, str]:
    """The environment of a run whose reads wait DELAY_S each."""
    site = tmp_path_factory.mktemp("slow")
    (site / "sitecustomize.py").write_text(SLOW)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    return env


def on_terminal(args: list[str], env: dict[str, str], cwd: Path, stdout_too: bool = False) -> str:
    """What a run writes on a pseudo-terminal of 160 columns: stderr, and stdout too with
    `stdout_too` (else stdout goes to /dev/null). The text without its escape sequences, each
    redraw of the bar on a line of its own."""
    out = "terminal" if stdout_too else "null"
    status, raw, _ = run_on_terminal([*WIRELOG, *args], 160, env, stdout=out, cwd=cwd)
    assert status == 0, raw
    return ANSI.sub(b"", raw).decode().replace("\r", "\n")


def bars(text: str) -> list[re.Match]:
    return [m for line in text.split("\n") if (m := BAR.search(line))]


def _number(text: str | None) -> int:
    return int((text or "0").replace(",", ""))


COMMANDS = {
    "inspect": ["inspect", "cap.pcap"],
    "validate": ["validate", "cap.pcap"],
    "convert": ["convert", "cap.pcap", "--to", "parquet", "-o", "out.parquet"],
    "streams": ["streams", "cap.pcap"],
    "report": ["report", "cap.pcap", "-o", "report.html"],
}


@pytest.fixture
def here(tmp_path: Path, capture: Path) -> Path:
    shutil.copy(capture, tmp_path / "cap.pcap")
    return tmp_path


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_long_run_shows_percent_rate_eta_and_growing_counts(command, here, slow):
    if command == "report":
        pytest.importorskip("vl_convert")
    text = on_terminal(COMMANDS[command], slow, here)
    seen = bars(text)
    assert seen, text
    total = decimal((here / "cap.pcap").stat().st_size)
    assert {m["total"] for m in seen} == {total}  # of the input's bytes
    assert {m["command"] for m in seen} == {command}
    percents = [int(m["percent"]) for m in seen]
    assert percents == sorted(percents)
    inside = {p for p in percents if 0 < p < 100}
    assert len(inside) >= 3, percents  # it moves while it runs
    moving = [m for m in seen if 0 < int(m["percent"]) < 100]
    assert all(m["rate"] != "-/s" and m["eta"] != "-:--:--" for m in moving[1:]), moving
    assert max(int(m["eta"].replace(":", "")) for m in moving[1:]) >= 1  # seconds still to go
    packets = [_number(m["packets"]) for m in seen]
    assert packets == sorted(packets) and len({p for p in packets if p}) >= 3
    if command != "streams":  # which decodes nothing: no records
        records = [_number(m["records"]) for m in seen]
        assert records == sorted(records) and records[-1] > 0
        assert {m["what"] for m in seen} == {"findings" if command == "validate" else "records"}


def test_convert_ends_with_the_records_written_and_the_path(here, slow):
    text = on_terminal(["convert", "cap.pcap", "--to", "json", "-o", "out.ndjson"], slow, here)
    lines = (here / "out.ndjson").read_bytes().count(b"\n")
    last = [line for line in text.split("\n") if line.strip()][-1]
    assert re.fullmatch(
        rf"wirelog: {lines:,} records written to out\.ndjson \(1 capture, [\d.]+ MB read in [\d.]+ s\)", last
    ), last
    assert text.count("records written") == 1


def test_report_ends_with_one_line_naming_the_page(here, slow):
    pytest.importorskip("vl_convert")
    text = on_terminal(["report", "cap.pcap", "-o", "report.html"], slow, here, stdout_too=True)
    last = [line for line in text.split("\n") if line.strip()][-1]
    assert re.fullmatch(
        r"wirelog: report of [\d,]+ records \(20 streams\) written to report\.html "
        r"\(1 capture, [\d.]+ MB read in [\d.]+ s\)",
        last,
    ), last


def test_a_compressed_input_is_measured_in_its_compressed_bytes(here, slow):
    with open(here / "cap.pcap", "rb") as f, gzip.open(here / "cap.pcap.gz", "wb", compresslevel=1) as g:
        shutil.copyfileobj(f, g)
    size = (here / "cap.pcap.gz").stat().st_size
    assert size < (here / "cap.pcap").stat().st_size
    seen = bars(on_terminal(["inspect", "cap.pcap.gz"], slow, here))
    assert {m["total"] for m in seen} == {decimal(size)}
    assert len({m["percent"] for m in seen}) >= 3


def test_no_bar_over_records_written_to_the_same_terminal(here, slow):
    """`convert` to stdout on the terminal: the records would mix with the bar, so no bar (as curl);
    the closing line still says what was written."""
    text = on_terminal(["convert", "cap.pcap", "--to", "json"], slow, here, stdout_too=True)
    assert not bars(text) and "ETA" not in text
    assert re.search(r"wirelog: [\d,]+ records written to stdout \(1 capture", text)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_piped_runs_show_nothing_of_it(command, here, slow):
    if command == "report":
        pytest.importorskip("vl_convert")
    proc = subprocess.run([*WIRELOG, *COMMANDS[command]], capture_output=True, env=slow, cwd=here, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == b""  # no bar, no closing line
    for text in (proc.stdout, proc.stderr):
        assert b"ETA" not in text and b"\x1b" not in text and b"records written" not in text


def test_a_piped_convert_does_not_load_the_bar(here):
    """rich's console and bar are ~25 ms of every run's start-up: a run in a pipe never draws them
    (`python -X importtime` lists every module a run imports, on stderr)."""
    args = ["convert", "cap.pcap", "--events", "--to", "json", "-o", os.devnull]
    proc = subprocess.run(
        [WIRELOG[0], "-X", "importtime", *WIRELOG[1:], *args], capture_output=True, cwd=here, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.decode().splitlines()}
    assert "wirelog.engine.local" in imported  # (the listing is whole)
    assert not imported & {"rich.console", "rich.progress", "wirelog.cli.progress_bar"}
