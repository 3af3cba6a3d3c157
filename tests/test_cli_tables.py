"""`inspect` on a laptop terminal (issue 15): at 80 and 100 columns the values a user came for
(stream id, protocol, client, server, events = acked + unacked + unknown, findings; a finding's code) are never cut;
secondary columns are left out with a note, and --wide shows them."""

from __future__ import annotations

import copy
import io
import json
import os
import re

import pytest
from rich.console import Console

from tests.capture_tools import run_cli
from tests.fault_helpers import EXAMPLE, WIRELOG
from tests.pty_tools import ANSI, on_terminal
from wirelog.cli.inspect import _render


@pytest.fixture(scope="module")
def summary() -> dict:
    """The example's summary with the widths of a busy capture: long endpoints, large counts."""
    code, out, err = run_cli("inspect", "--json", str(EXAMPLE))
    assert code == 0, err
    r = json.loads(out)
    stream = r["streams"][0]
    r["streams"] = []
    for i, (client, server) in enumerate(
        [("192.168.100.200:54321", "192.168.100.201:5044"), ("10.0.0.7:40001", "10.0.0.1:9042")]
    ):
        s = copy.deepcopy(stream)
        s.update(
            stream=1000 + i, client=client, server=server, events=1234567, unacked=7654321, findings=99999
        )
        s.update(messages=2345678, acked=1234567, bytes_c2s=987654321, bytes_s2c=123456789, gaps=12)
        s.update(ack_unknown=3333333)
        r["streams"].append(s)
    r["findings"][0]["code"] = "lumberjack.never-acknowledged"
    return r


def render(r: dict, width: int, wide: bool = False) -> list[str]:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    _render(console, r, wide)
    return console.file.getvalue().splitlines()


def section(lines: list[str], title: str) -> list[str]:
    start = lines.index(next(line for line in lines if line.rstrip() == title))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("└"))
    return lines[start : end + 1]


# events = acked + unacked + ack_unknown: the row adds up at any width
ESSENTIAL = (
    "stream",
    "protocol",
    "client",
    "server",
    "events",
    "acked",
    "unacked",
    "ack_unknown",
    "findings",
)


def assert_whole(lines: list[str], r: dict, width: int) -> None:
    table = section(lines, "Streams")
    assert all(len(line) <= width for line in lines)
    assert not any("…" in line for line in table)
    for s in r["streams"]:
        for key in ESSENTIAL:
            value = str(s[key])
            assert any(re.search(rf"(?<![\w.:]){re.escape(value)}(?![\w.:])", line) for line in table), (
                key,
                value,
            )
    codes = "\n".join(section(lines, "Findings"))
    assert all(f["code"] in codes for f in r["findings"])


@pytest.mark.parametrize("width", [80, 100])
def test_essential_values_are_whole_at_laptop_widths(summary, width):
    lines = render(summary, width)
    assert_whole(lines, summary, width)
    end = lines.index(section(lines, "Streams")[-1])
    note = " ".join(" ".join(lines[end + 1 : end + 3]).split())  # under the table, wrapped at the width
    assert note.startswith(f"(not shown at {width} columns: bytes s→c,") and "--wide shows" in note


def test_wide_shows_every_column(summary):
    lines = render(summary, 80, wide=True)
    header = "\n".join(section(lines, "Streams")[:4])
    for column in ("ver", "msgs", "acked", "bytes c→s", "bytes s→c", "gaps", "flags"):
        assert column in header
    assert not any(line.startswith("(not shown") for line in lines)
    assert str(summary["streams"][0]["bytes_c2s"]) in "\n".join(lines)


def test_the_finding_example_still_wraps(summary):
    lines = render(summary, 80)
    example = summary["findings"][0]["example"]
    findings = section(lines, "Findings")
    cells = [line.split("│")[-2].strip() for line in findings if line.startswith("│")]
    assert " ".join(cells).startswith(" ".join(example.split()[:5])) and len(findings) > 6


@pytest.mark.parametrize("width", [80, 100])
def test_inspect_in_a_real_terminal_of_that_width(width):
    """End to end: `wirelog inspect` on a pseudo-terminal of `width` columns."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    status, out, _ = on_terminal([*WIRELOG, "inspect", str(EXAMPLE)], width, env)
    assert status == 0
    text = ANSI.sub(b"", out).decode().replace("\r\n", "\n")
    assert "127.0.0.1:56466" in text and "127.0.0.1:5044" in text and "lumberjack │" in text
    assert all(len(line) <= width for line in text.splitlines())
