"""Truncated compressed captures (issue 29): what decompressed before the cut is kept, exactly one
line on stderr says the compressed file is truncated, and the status is the documented one (0 when
packets were read, 2 when nothing before the cut could be: docs/commands/convert.md). The same from
a file and from stdin, for the five compressions, through gzip and zstd inflated by the core and
lz4, bzip2 and xz by Python.

The capture is the real example, compressed in blocks of 512 bytes so that a cut in its middle
leaves whole blocks before it (lz4 and zstd flush a block, bzip2 starts a stream, as pbzip2 does;
gzip and xz decode as they go), or compressed whole and cut inside its first block."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import subprocess
from pathlib import Path

import lz4.frame
import pytest
import zstandard

from tests.fault_helpers import EXAMPLE, WIRELOG

CAPTURE = EXAMPLE.read_bytes()
BLOCK = 512
SENTENCE = "the compressed file is truncated"


def _blocks() -> list[bytes]:
    return [CAPTURE[i : i + BLOCK] for i in range(0, len(CAPTURE), BLOCK)]


def _lz4_blocks() -> bytes:
    c = lz4.frame.LZ4FrameCompressor(auto_flush=True)
    return c.begin() + b"".join(c.compress(b) for b in _blocks()) + c.flush()


def _zstd_blocks() -> bytes:
    c = zstandard.ZstdCompressor().compressobj()
    return b"".join(c.compress(b) + c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) for b in _blocks()) + c.flush()


# suffix → (compressed in blocks, compressed whole)
COMPRESSED = {
    "gz": (gzip.compress(CAPTURE), gzip.compress(CAPTURE)),
    "zst": (_zstd_blocks(), zstandard.ZstdCompressor().compress(CAPTURE)),
    "lz4": (_lz4_blocks(), lz4.frame.compress(CAPTURE)),
    "bz2": (b"".join(bz2.compress(b) for b in _blocks()), bz2.compress(CAPTURE)),
    "xz": (lzma.compress(CAPTURE), lzma.compress(CAPTURE)),
}


def _cut(suffix: str, where: str) -> bytes:
    blocks, whole = COMPRESSED[suffix]
    return blocks[: len(blocks) // 2] if where == "middle" else whole[:40]


def _run(args: list[str], data: bytes, tmp_path: Path, suffix: str, stdin: bool):
    """(status, stdout, stderr lines, the input's name) of `wirelog ARGS INPUT`."""
    if stdin:
        name, given = "-", {"input": data}
    else:
        path = tmp_path / f"cut.pcap.{suffix}"
        path.write_bytes(data)
        name, given = str(path), {"stdin": subprocess.DEVNULL}
    proc = subprocess.run([*WIRELOG, *args, name], capture_output=True, timeout=120, **given)
    return proc.returncode, proc.stdout, proc.stderr.decode().splitlines(), name


# what a message is, whatever came after it (acknowledgements and resends change the rest)
IDENTITY = ("stream", "direction", "frame", "offset", "kind", "event")


def _messages(ndjson: bytes) -> list[tuple]:
    records = [json.loads(line) for line in ndjson.splitlines()]
    return [
        tuple(json.dumps(r[k]) if k == "event" else r[k] for k in IDENTITY)  # a document is not hashable
        for r in records
        if r["record"] == "message"
    ]


FULL = _messages(subprocess.run([*WIRELOG, "convert", str(EXAMPLE)], capture_output=True, check=True).stdout)


@pytest.mark.parametrize("stdin", [False, True], ids=["file", "stdin"])
@pytest.mark.parametrize("suffix", list(COMPRESSED))
def test_a_capture_cut_in_its_middle_keeps_what_came_before(tmp_path, suffix, stdin):
    code, out, err, name = _run(["convert", "--to", "json"], _cut(suffix, "middle"), tmp_path, suffix, stdin)
    assert code == 0 and len(err) == 1, err
    assert err[0].startswith(f"wirelog: {name}: ") and err[0].count(SENTENCE) == 1, err
    read = int(err[0].split("; the ")[1].split()[0])  # "...; the 11 packets before it were read"
    kept = _messages(out)
    assert 0 < len(kept) < len(FULL) and len(set(kept)) == len(kept)
    # the messages of the packets before the cut, as the whole capture has them
    assert set(kept) <= set(FULL) and {m for m in FULL if m[2] is not None and m[2] <= read} <= set(kept)


@pytest.mark.parametrize("stdin", [False, True], ids=["file", "stdin"])
@pytest.mark.parametrize("suffix", list(COMPRESSED))
def test_a_capture_cut_in_its_first_block_is_one_line_and_status_2(tmp_path, suffix, stdin):
    code, out, err, name = _run(["convert", "--to", "json"], _cut(suffix, "first"), tmp_path, suffix, stdin)
    assert code == 2 and out == b"" and len(err) == 1, err
    assert err[0].startswith(f"wirelog: {name}: ") and err[0].count(SENTENCE) == 1, err


@pytest.mark.parametrize(
    "args",
    [
        ["inspect"],
        ["inspect", "--json"],
        ["streams"],
        ["streams", "--json"],
        ["streams", "--dump", "0"],
        ["validate"],
    ],
    ids=" ".join,
)
@pytest.mark.parametrize("suffix", list(COMPRESSED))
def test_every_command_says_it_once(tmp_path, suffix, args):
    for where, status in (("first", 2), ("middle", 0)):
        code, _, err, name = _run(args, _cut(suffix, where), tmp_path, suffix, stdin=False)
        assert code == status and len(err) == 1, (where, err)
        assert err[0].startswith(f"wirelog: {name}: ") and err[0].count(SENTENCE) == 1, (where, err)
