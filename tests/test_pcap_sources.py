"""Input expansion, decompression by magic, stdin."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import subprocess
import sys
from pathlib import Path

import lz4.frame
import pytest
import zstandard
from pcap_helpers import codes, fast_pcap, pcap_bytes, read_all, tcp_frame

from wirelog.engine.capture import iter_segments
from wirelog.inputs import CaptureError, expand_inputs, open_input
from wirelog.model import CaptureInfo

REPO = Path(__file__).resolve().parents[1]

PAYLOADS = [b"chunk-%02d" % i for i in range(12)]


def capture() -> bytes:
    return pcap_bytes([tcp_frame(100 + i, p) for i, p in enumerate(PAYLOADS)])


COMPRESSORS = {
    "gzip": gzip.compress,
    "zstd": lambda d: zstandard.ZstdCompressor().compress(d),
    "lz4": lz4.frame.compress,
    "bzip2": bz2.compress,
    "xz": lzma.compress,
}


def test_expand_inputs_sorts_globs_keeps_stdin_and_order(tmp_path):
    for name in ("b.pcap", "a.pcap", "c.txt"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.pcap").write_bytes(b"x")
    got = expand_inputs([str(tmp_path / "c.txt"), "-", str(tmp_path / "*.pcap"), str(tmp_path / "**/*.pcap")])
    assert got == [
        str(tmp_path / "c.txt"),
        "-",
        str(tmp_path / "a.pcap"),
        str(tmp_path / "b.pcap"),
        str(tmp_path / "a.pcap"),
        str(tmp_path / "b.pcap"),
        str(tmp_path / "sub" / "d.pcap"),
    ]


@pytest.mark.parametrize(
    ("name", "needle"),
    [("missing.pcap", "no such file"), ("*.nothing", "no file matches"), ("", "no such file")],
)
def test_expand_inputs_rejects_missing(tmp_path, name, needle):
    with pytest.raises(CaptureError, match=needle):
        expand_inputs([str(tmp_path / name) if name else str(tmp_path / "nope")])


def test_expand_inputs_rejects_directory(tmp_path):
    with pytest.raises(CaptureError, match="directory"):
        expand_inputs([str(tmp_path)])


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_compressed_capture_detected_by_magic_not_name(tmp_path, kind):
    path = tmp_path / "misleading.pcap"  # the name says plain pcap
    path.write_bytes(COMPRESSORS[kind](capture()))
    segs, info, findings = read_all(path)
    assert info.compression == kind and info.format == "pcap"
    assert [s[9] for s in segs] == PAYLOADS and findings == []


def test_open_input_plain_returns_no_compression(tmp_path):
    path = tmp_path / "p.gz"  # the name says gzip, the bytes do not
    path.write_bytes(capture())
    stream, compression = open_input(str(path))
    with stream:
        assert compression is None
        assert stream.read() == capture()


def test_concatenated_gzip_members(tmp_path):
    data = capture()
    path = tmp_path / "two.pcap.gz"
    path.write_bytes(gzip.compress(data[:100]) + gzip.compress(data[100:]))
    segs, _, _ = read_all(path)
    assert [s[9] for s in segs] == PAYLOADS


@pytest.mark.parametrize("kind", ["gzip", "zstd", "lz4", "bzip2", "xz"])
def test_cut_compressed_stream_keeps_what_came_before(tmp_path, kind):
    full = fast_pcap(tmp_path / "full.pcap", 8000)  # several bzip2 blocks
    payloads = [s[9] for s in read_all(full)[0]]
    blob = COMPRESSORS[kind](full.read_bytes())
    path = tmp_path / "cut.pcap"
    path.write_bytes(blob[: len(blob) // 2])
    segs, info, findings = read_all(path)
    assert info.truncated and codes(findings) == ["pcap.truncated"]
    assert 0 < len(segs) < len(payloads)
    assert [s[9] for s in segs] == payloads[: len(segs)]


def test_gzip_of_garbage_is_a_capture_error(tmp_path):
    path = tmp_path / "g.gz"
    path.write_bytes(gzip.compress(b"this is just text, not a capture"))
    with pytest.raises(CaptureError, match=r"not a pcap or pcapng capture after gzip decompression"):
        read_all(path)


def test_damaged_gzip_header_is_a_capture_error(tmp_path):
    path = tmp_path / "g.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00garbage-garbage-garbage")
    with pytest.raises(CaptureError, match="cannot read"):
        read_all(path)


def test_unreadable_file_is_a_capture_error(tmp_path):
    with pytest.raises(CaptureError, match="cannot open"):
        read_all(tmp_path / "absent.pcap")


class _Pipe(io.RawIOBase):
    """A non-seekable stream that hands out one byte per read, like the worst pipe."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if not self.data:
            return 0
        b[0] = self.data[0]
        self.data = self.data[1:]
        return 1


@pytest.mark.parametrize("kind", [None, "zstd"])
def test_stdin_dash_reads_a_trickling_pipe(monkeypatch, kind):
    data = capture() if kind is None else COMPRESSORS[kind](capture())
    fake = io.TextIOWrapper(io.BufferedReader(_Pipe(data), buffer_size=1))
    monkeypatch.setattr(sys, "stdin", fake)
    info = CaptureInfo("-")
    segs = list(iter_segments("-", info, []))
    assert [s[9] for s in segs] == PAYLOADS and info.compression == kind
    assert not fake.buffer.closed  # stdin is not ours to close


def test_stdin_through_a_real_pipe(tmp_path):
    code = (
        "import sys; from wirelog.model import CaptureInfo; from wirelog.engine.capture import iter_segments\n"
        "info = CaptureInfo('-')\n"
        "print(len(list(iter_segments('-', info, []))), info.packets, info.compression)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=gzip.compress(capture()),
        capture_output=True,
        cwd=REPO,
        check=True,
    )
    assert proc.stdout.split() == [b"12", b"12", b"gzip"]


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
def test_a_cut_compressed_capture_says_it_is_truncated(tmp_path, kind):
    """Cut before its first packet, the file is named as truncated (not "empty input"); cut later,
    the truncation finding says why reading stopped (the core inflates these two itself)."""
    small = tmp_path / "small.pcap"
    small.write_bytes(COMPRESSORS[kind](capture())[:20])
    with pytest.raises(CaptureError) as e:
        read_all(small)
    message = str(e.value)
    assert message.startswith(f"{small}: ") and "empty input" not in message
    assert "truncated" in message.split("(", 1)[-1] or "ended before" in message
    full = fast_pcap(tmp_path / "full.pcap", 3000)
    blob = COMPRESSORS[kind](full.read_bytes())
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(blob[: len(blob) * 2 // 3])
    segs, info, findings = read_all(cut)
    (finding,) = findings
    assert segs and info.truncated and finding.code == "pcap.truncated"
    assert "truncated" in finding.message or "ended before" in finding.message
