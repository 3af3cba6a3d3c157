"""`wirelog convert --to hercules` and back through `--raw ... --to json`, end to end on captures."""

from __future__ import annotations

from pathlib import Path

import pytest
from capture_tools import ndjson, run_cli

from wirelog.model import COMMON_MESSAGE_KEYS

HERE = Path(__file__).resolve().parent
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
        assert err.count("'@timestamp' is outside the tag-name rules") == 1
