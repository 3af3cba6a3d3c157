"""The native core's boundary and the reassembly defects the core fixed, end to end through the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from capture_tools import ndjson, run_cli
from pcap_helpers import tcp_conversation, write_pcap

from wirelog import _core
from wirelog.engine.capture import PANIC_AT_FRAME

EXAMPLE = Path(__file__).parent.parent / "examples" / "lumberjack-pylogbeat.pcap"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "wirelog.cli", *args],
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_a_panic_in_the_core_is_a_finding_and_keeps_every_record_before_it():
    whole = ndjson(_cli("convert", str(EXAMPLE), "--to", "json").stdout)
    cut = 12
    run = _cli("convert", str(EXAMPLE), "--to", "json", env={PANIC_AT_FRAME: str(cut)})
    assert run.returncode == 0 and b"Traceback" not in run.stderr and b"panicked" not in run.stderr
    records = ndjson(run.stdout)
    (panic,) = [r for r in records if r.get("code") == "internal.panic"]
    assert panic["severity"] == "error" and "test panic at frame 12" in panic["message"]
    assert panic["frame"] == cut
    before = [r for r in whole if r["record"] == "message" and r["frame"] is not None and r["frame"] < cut]
    assert before, "the sample has messages before the cut"
    key = ("stream", "direction", "frame", "offset", "kind", "length")  # not `acked`: later ACKs set it
    kept = {tuple(r[k] for k in key) for r in records if r["record"] == "message"}
    assert {tuple(r[k] for k in key) for r in before} <= kept


def test_debug_puts_the_rust_backtrace_in_the_finding():
    run = _cli("--debug", "convert", str(EXAMPLE), "--to", "json", env={PANIC_AT_FRAME: "3"})
    (panic,) = [r for r in ndjson(run.stdout) if r.get("code") == "internal.panic"]
    assert "backtrace" in panic and "pipeline" in panic["backtrace"]


def test_segments_written_after_the_ack_that_covers_them_are_not_lost(tmp_path):
    """5 % of a transfer's data packets moved 1-3 places later in the file (as multi-queue NICs
    write them): every byte is delivered, no gap, nothing reported missing."""
    payload = bytes(range(256)) * 400
    frames = tcp_conversation([("c", payload), ("s", b"ok")], mss=500)
    moved = list(frames)
    for i in range(3, len(moved) - 6, 20):  # every 20th data segment goes 1-3 places later
        seg = moved.pop(i)
        moved.insert(i + 1 + i % 3, seg)
    # the server's ACK of everything comes right after the client's last segment
    path = write_pcap(tmp_path / "moved.pcap", moved)
    code, out, _ = run_cli("streams", str(path), "--dump", "0")
    assert code == 0 and out == payload
    (info,) = ndjson(run_cli("streams", str(path), "--json")[1])
    assert (info["gaps"], info["gap_bytes"], info["bytes_c2s"]) == (0, 0, len(payload))


def test_a_late_segment_beyond_the_reorder_window_is_a_gap(tmp_path):
    frames = tcp_conversation([("c", b"A" * 400 + b"B" * 400 + b"C" * 400), ("s", b"ok")], mss=400)
    late = frames.pop(3)  # the "B" segment: after the server's reply, which acknowledges it
    frames.insert(len(frames) - 2, late)
    path = write_pcap(tmp_path / "late.pcap", frames)
    (within,) = ndjson(run_cli("streams", str(path), "--json")[1])
    (beyond,) = ndjson(run_cli("streams", str(path), "--json", "--reorder-window", "0")[1])
    assert within["gap_bytes"] == 0
    assert beyond["gap_bytes"] == 400


def test_a_fin_missing_from_the_capture_is_not_a_missing_byte(tmp_path):
    frames = tcp_conversation([("c", b"hello"), ("s", b"world")])
    del frames[-2]  # the client's FIN; the server's FIN acknowledges it
    path = write_pcap(tmp_path / "nofin.pcap", frames)
    (info,) = ndjson(run_cli("streams", str(path), "--json")[1])
    assert (info["gaps"], info["gap_bytes"]) == (0, 0)


def test_the_core_is_an_abi3_extension_of_this_package():
    assert Path(_core.__file__).parent == Path(__file__).parent.parent / "wirelog"
    assert ".abi3." in Path(_core.__file__).name


def test_stream_summaries_written_by_the_core_equal_the_python_writers(tmp_path):
    """`streams --json` lines come from the core (records/json.rs); with a --stream filter they
    come from StreamInfo objects through export/json.py: both must be the same bytes."""
    shared = Path(__file__).parents[2] / "shared" / "captures"
    captures = [EXAMPLE, *sorted(shared.rglob("*.pcap"))]
    frames = tcp_conversation([("c", b"hello"), ("s", b"x")])
    captures.append(write_pcap(tmp_path / 'we"ird\tnamé\\.pcap', frames))  # JSON escapes in the name
    for path in captures:
        code, core, _ = run_cli("streams", "--json", str(path))
        ids = [str(r["stream"]) for r in ndjson(core)]
        assert code == 0 and ids, path
        _, python, _ = run_cli("streams", "--json", str(path), *[a for i in ids for a in ("--stream", i)])
        assert core == python, path


def test_a_capture_format_error_survives_a_process_boundary():
    """Spark tasks and worker pools pickle what they raise: the core's error names its real module."""
    import pickle

    error = _core.CaptureFormatError("not a capture")
    assert type(error).__module__ == "wirelog._core"
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is _core.CaptureFormatError and str(again) == "not a capture"


def test_the_built_core_is_this_checkouts_version():
    """A stale wirelog/_core.abi3.so from another version would answer for this package."""
    import wirelog

    assert _core.__version__ == wirelog.__version__


def test_the_core_refuses_a_stream_info_whose_fields_moved(monkeypatch):
    """The core passes a stream summary's fields by position: a StreamInfo with its fields in
    another order must stop the core from loading, never fill the wrong fields."""
    import dataclasses

    import wirelog.model

    names = [f.name for f in dataclasses.fields(wirelog.model.StreamInfo)]
    names[2], names[3] = names[3], names[2]  # client and server swapped
    moved = dataclasses.make_dataclass("StreamInfo", names)
    monkeypatch.setattr(wirelog.model, "StreamInfo", moved)
    with pytest.raises(TypeError, match="StreamInfo's fields"):
        _core.Pipeline("c.pcap", None)
