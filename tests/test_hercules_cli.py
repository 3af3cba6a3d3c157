"""`wirelog convert --to hercules` and back through `--raw ... --to json`, end to end on captures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from capture_tools import ndjson, run_cli

from wirelog.model import COMMON_MESSAGE_KEYS

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "examples" / "lumberjack-pylogbeat.pcap"
SHARED = HERE.parent.parent / "shared" / "captures"
CAPTURES = [
    HERE / "data" / "lumberjack" / "pylogbeat-logstash.pcap",
    SHARED / "public" / "cql-packetbeat" / "cassandra_compressed.pcap",
    HERE / "data" / "hercules" / "gate-session.pcap",
]


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_convert_to_hercules_and_back_gives_the_same_documents(capture: Path, tmp_path: Path):
    if not capture.exists():
        pytest.skip(f"{capture} absent")
    code, out, _ = run_cli("convert", str(capture), "--to", "json")
    assert code == 0
    originals = [r for r in ndjson(out) if r["record"] == "message"]
    binary = tmp_path / "events.bin"
    code, _, err = run_cli("convert", str(capture), "--to", "hercules", "-o", str(binary))
    assert code == 0
    again = tmp_path / "again.bin"
    run_cli("convert", str(capture), "--to", "hercules", "-o", str(again))
    assert binary.read_bytes() == again.read_bytes()
    code, out, _ = run_cli("convert", "--raw", str(binary), "--to", "json")
    back = ndjson(out)
    assert [r["record"] for r in back] == ["message"] * len(originals)
    for orig, dec in zip(originals, back, strict=True):
        assert dec["protocol"] == "hercules" and dec["kind"] == "event"
        assert dec["event"] == orig["event"]
        src = dec["source"]
        assert (src["protocol"], src["kind"], src.get("offset"), src.get("frame")) == (
            orig["protocol"], orig["kind"], orig["offset"], orig["frame"],
        )  # fmt: skip
        assert src["fields"] == {k: v for k, v in orig.items() if k not in COMMON_MESSAGE_KEYS}
    if "lumberjack" in capture.name:
        assert err.count("'@timestamp' as '_x40timestamp'") == 1


def test_renamed_keys_are_one_line(tmp_path: Path):
    """Beats events rename `@timestamp` and `@metadata`: one summary line on stderr, not one per key."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "wirelog.cli",
            "convert",
            str(EXAMPLE),
            "--to",
            "hercules",
            "-o",
            str(tmp_path / "x"),
        ],
        capture_output=True,
        timeout=120,
    )
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == 0 and len(lines) == 1, lines
    assert "2 keys" in lines[0] and "'@timestamp' as '_x40timestamp'" in lines[0]
    assert "'@metadata' as '_x40metadata'" in lines[0]


def test_a_gate_connection_shows_its_http_version_whatever_record_comes_first(tmp_path: Path):
    """Alike Gate connections showed "1.1" or "1" (the events' format version) by which kind of
    record a batch of the summary happened to bring first; `inspect --json` (the summary) and the
    terminal table (the stream fold) both give the connection's own HTTP version."""
    from hercules_helpers import pipelined_gate

    pcap = tmp_path / "pipelined.pcap"
    pipelined_gate(pcap)
    code, out, err = run_cli("inspect", str(pcap), "--json")
    assert code == 0, err
    assert [s["version"] for s in json.loads(out)["streams"]] == ["1.1"] * 4
    code, out, err = run_cli("inspect", str(pcap), "--all", "--plain")
    rows = [line.split() for line in out.decode().splitlines() if "10.1.0.1:6306" in line]
    assert [row[1:3] for row in rows] == [["hercules", "1.1"]] * 4, out.decode()
