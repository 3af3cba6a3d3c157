"""Captures of other protocols → Hercules events → decoded again: the same documents and fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wirelog.engine.local import Options, run
from wirelog.export.hercules import HerculesWriter
from wirelog.model import Finding, Message, RecordRows

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[0].parent / "shared" / "captures"
CAPTURES = [
    HERE / "data" / "lumberjack" / "pylogbeat-logstash.pcap",
    SHARED / "public" / "cql-packetbeat" / "cassandra_compressed.pcap",
    SHARED / "public" / "cql-packetbeat" / "cassandra_select.pcap",
    SHARED / "peers" / "courier-go2.12-client-ruby2.12-server.pcap",
]
COMMON = ("protocol", "kind", "capture", "stream", "client", "server", "offset", "length", "frame", "ts", "version", "acked")  # fmt: skip


def plain(x):
    return json.loads(json.dumps(x))


def export(records: list[Message], path: Path) -> bytes:
    with path.open("wb") as f:
        writer = HerculesWriter(f)
        for r in records:
            writer.write(r)
        writer.close()
    return path.read_bytes()


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.name)
def test_capture_to_hercules_and_back(capture: Path, tmp_path: Path):
    if not capture.exists():
        pytest.skip(f"{capture} absent")
    originals = [r for r in run([str(capture)]) if isinstance(r, Message)]
    assert originals
    data = export(originals, tmp_path / "out.bin")
    assert export(originals, tmp_path / "again.bin") == data  # deterministic
    items = list(run([], raw=[str(tmp_path / "out.bin")]))
    back = [r for r in items if isinstance(r, Message)]
    findings = [r for r in items if isinstance(r, Finding)]
    assert [r.protocol for r in back] == ["hercules"] * len(originals)
    assert [f.code for f in findings] == []
    for orig, dec in zip(originals, back, strict=True):
        assert dec.event == plain(orig.event)
        src = dec.fields["source"]
        assert src["fields"] == plain(orig.fields)
        assert src.get("direction") == (orig.direction.value if orig.direction else None)
        for name in COMMON:
            assert src.get(name) == getattr(orig, name)
    assert len({r.fields["uuid"] for r in back}) == len(back)


def test_every_input_of_the_writer_gives_the_same_bytes(tmp_path: Path):
    """Core events (convert's path), Message objects and Arrow rows (Spark's) are one encoding."""
    captures = [str(HERE / "data" / "hercules" / "gate-session.pcap"), str(HERE / "data" / "lumberjack" / "pylogbeat-logstash.pcap")]  # fmt: skip
    objects = export([r for r in run(captures) if isinstance(r, Message)], tmp_path / "objects.bin")
    events = tmp_path / "events.bin"
    with events.open("wb") as f:
        writer = HerculesWriter(f)
        for item in run(captures, (), Options(records="hercules")):
            writer.write(item)
    rows = tmp_path / "rows.bin"
    with rows.open("wb") as f:
        writer = HerculesWriter(f)
        for item in run(captures, (), Options(records="arrow")):
            if isinstance(item, RecordRows):
                writer.write_batch(item.batch)
    assert len(objects) > 1000
    assert events.read_bytes() == objects == rows.read_bytes()
