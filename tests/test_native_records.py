"""The core's record forms against the Python writers: for the streams the core decodes, NDJSON lines
(`convert --to json`) and Arrow rows (`--to parquet`) must equal what the Python writers make of the
same records as objects — the same bytes, the same Parquet rows — with and without record filters.

The records are the core's (Lumberjack and Courier are in wirelog._core.NATIVE): this checks
native/src/records/ (json.rs, arrow.rs, filter.rs) against wirelog/export/ on the same records.
"""

from __future__ import annotations

import ctypes
import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from wirelog import _core
from wirelog.engine.filters import RecordFilter
from wirelog.engine.local import Options, run
from wirelog.export.json import JsonWriter
from wirelog.export.parquet import ParquetWriter
from wirelog.model import CaptureInfo, Finding, Message, RecordLines, RecordRows, StreamInfo

ROOT = Path(__file__).parent
SHARED = ROOT.parent.parent / "shared" / "captures"
CAPTURES = [
    ROOT.parent / "examples" / "lumberjack-pylogbeat.pcap",
    ROOT / "data" / "lumberjack" / "pylogbeat-logstash.pcap",
    ROOT / "data" / "lumberjack" / "pylogbeat-stalled-resend.pcap",
    *sorted((SHARED / "peers").glob("courier-*.pcap")),
]
FILTERS = {
    "all": RecordFilter(),
    "events": RecordFilter(events=True),
    "protocol": RecordFilter(protocols=frozenset({"courier"})),
    "kinds": RecordFilter(kinds=frozenset({"ack", "delivery", "connection"})),
    "stream": RecordFilter(streams=frozenset({1})),
    "findings": RecordFilter(findings=True),
}


def _json(path: Path, keep: RecordFilter, records: str) -> bytes:
    out = io.BytesIO()
    writer = JsonWriter(out)
    for item in run([str(path)], options=Options(keep=keep, records=records)):
        if isinstance(item, RecordLines):
            assert item.count == bytes(item.data).count(b"\n")
            writer.write_lines(item.data, item.count)
        elif isinstance(item, Message | Finding):
            writer.write(item)
    return out.getvalue()


def _parquet(path: Path, keep: RecordFilter, records: str, out: Path) -> list[dict]:
    with ParquetWriter(str(out)) as writer:
        for item in run([str(path)], options=Options(keep=keep, records=records)):
            if isinstance(item, RecordRows):
                writer.write_batch(item.batch)
            elif isinstance(item, Message | Finding):
                writer.write(item)
    return pq.read_table(out).to_pylist()


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


@pytest.mark.parametrize("keep", list(FILTERS.values()), ids=list(FILTERS))
@pytest.mark.parametrize("path", CAPTURES, ids=_ids(CAPTURES))
def test_ndjson_lines_equal_the_python_writer(path: Path, keep: RecordFilter) -> None:
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared is not beside the repository)")
    native = _json(path, keep, "ndjson")
    assert native == _json(path, keep, "objects")
    if keep == FILTERS["all"]:
        assert native.count(b"\n") > 0


@pytest.mark.parametrize("keep", [FILTERS["all"], FILTERS["events"]], ids=["all", "events"])
@pytest.mark.parametrize("path", CAPTURES, ids=_ids(CAPTURES))
def test_arrow_rows_equal_the_python_parquet_rows(path: Path, keep: RecordFilter, tmp_path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared is not beside the repository)")
    native = _parquet(path, keep, "arrow", tmp_path / "native.parquet")
    python = _parquet(path, keep, "objects", tmp_path / "python.parquet")
    assert native == python
    assert native


def test_ndjson_lines_are_a_read_only_buffer_read_in_place() -> None:
    """The core's lines reach Python without a copy: a buffer that file.write reads as it is,
    which a writer cannot change (the core made it once)."""
    path = CAPTURES[0]
    lines = [i for i in run([str(path)], options=Options(records="ndjson")) if isinstance(i, RecordLines)]
    assert lines and all(isinstance(i.data, _core.Buffer) for i in lines)
    view = memoryview(lines[0].data)
    assert view.readonly and view.nbytes == len(lines[0].data) and view.tobytes().endswith(b"}\n")
    with pytest.raises(TypeError, match="not writable"):
        (ctypes.c_char * len(lines[0].data)).from_buffer(lines[0].data)  # asks for a writable view
    out = io.BytesIO()
    JsonWriter(out).write_lines(lines[0].data, lines[0].count)
    assert out.getvalue() == view.tobytes()


def test_arrow_rows_have_the_parquet_schema() -> None:
    """The core's batches carry exactly the documented schema (export/parquet.py SCHEMA)."""
    from wirelog.export.parquet import SCHEMA

    path = CAPTURES[0]
    rows = [i for i in run([str(path)], options=Options(records="arrow")) if isinstance(i, RecordRows)]
    assert "lumberjack" in _core.NATIVE and rows
    for r in rows:
        assert isinstance(r.batch, pa.RecordBatch)
        assert r.batch.schema.equals(SCHEMA)


def test_the_delivery_verdict_reaches_inspect_per_input() -> None:
    """Each input's CaptureInfo carries its verdict; the stalled-resend capture has one for Lumberjack."""
    path = ROOT / "data" / "lumberjack" / "pylogbeat-stalled-resend.pcap"
    infos = [i for i in run([str(path)]) if isinstance(i, CaptureInfo)]
    assert len(infos) == 1
    verdict = infos[0].delivery["lumberjack"]
    assert verdict["distinct_events"] == verdict["events"] - verdict["resent"] > 0


def test_decoding_rejects_what_it_does_not_know() -> None:
    with pytest.raises(TypeError, match="unexpected decoding option"):
        _core.Decoding("raw", colour="blue")
    with pytest.raises(ValueError, match="records must be"):
        _core.Decoding("raw", records="xml")
    info = StreamInfo("raw", 0, "a:1", "b:2", 1, 2)
    assert _core.Decoding("raw").attach("nope", info) is False
    assert _core.Decoding("raw").attach("tls", info) is True  # a TLS layer, its plaintext detected
    assert _core.Decoding("raw").attach("courier", info) is True
