"""One uncompressed capture cut into byte-range splits that several tasks read (docs/spark.md).

A split is planned in two steps. Each byte range `[lo, hi)` is scanned by the core
(`_core.SplitScanner`, native/src/capture/split.rs): it finds the first record boundary at or after
`lo` by a plausibility heuristic (record headers that chain), then walks the record headers to count
the frames that start before `hi` and to find `next`, the first boundary at or after `hi`. The scans
are independent (a Spark job runs them in parallel). Then the plan is made exact by induction: split
0 starts at the file's first record; whenever split i+1's boundary differs from split i's `next` (a
payload spelled record headers and fooled the heuristic), split i+1 is scanned again from `next`,
which a walk from a true boundary always gives. Every packet is then read by exactly one split, and
frame numbers (the ones Wireshark shows) follow from the per-split frame counts.

pcapng section headers, interface descriptions and decryption secrets are context: a reader of a
split gets those that precede it (since the last section header) before its own bytes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from wirelog import _core

SPLIT_SIZE = 128 * 1024 * 1024  # bytes per split, like Spark's spark.sql.files.maxPartitionBytes
READ_SIZE = 1024 * 1024
PREFIX = 64  # bytes of the file's start a scanner needs (its header and first record header)

Scan = tuple[int | None, int, int, list[tuple[int, bytes]]]  # start, next, frames, context


@dataclass(frozen=True, slots=True)
class Split:
    """The records of one task: file bytes `[start, next)`, numbered from `first_frame`."""

    index: int
    start: int
    next: int
    first_frame: int
    frames: int
    context: bytes  # fed to the reader before the split's bytes (pcap: the file header)


def _read_from(path: str, offset: int) -> Iterator[tuple[bytes, bool]]:
    """The file's bytes from `offset` on, in pieces, each with whether it ends the file."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(offset)
        at = offset
        while at < size:
            data = f.read(READ_SIZE)
            if not data:
                return
            at += len(data)
            yield data, at >= size
    if offset >= size:
        yield b"", True


def scan(path: str, prefix: bytes, lo: int, hi: int, trusted: bool) -> Scan:
    """Scan the split `[lo, hi)` of `path` (`trusted`: `lo` is a record boundary)."""
    scanner = _core.SplitScanner(prefix, lo, hi, trusted)
    first, _ = _core.SplitScanner.head(prefix)
    for data, eof in _read_from(path, max(lo, first)):
        if scanner.feed(data, eof):
            break
    return scanner.result()


def plan(
    path: str,
    split_size: int = SPLIT_SIZE,
    run: Callable[[Callable[[tuple[int, int]], Scan], list[tuple[int, int]]], Iterable[Scan]] | None = None,
) -> list[Split]:
    """The splits of an uncompressed capture. `run(fn, ranges)` applies `fn` to every byte range
    (default: in this process; the Spark engine runs them as tasks). Raises ValueError for a file
    that is not a pcap or pcapng capture."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        prefix = f.read(PREFIX)
    first, head = _core.SplitScanner.head(prefix)
    ranges = [(lo, min(lo + split_size, size)) for lo in range(0, size, split_size)] or [(0, 0)]

    def one(bounds: tuple[int, int]) -> Scan:
        lo, hi = bounds
        return scan(path, prefix, lo, hi, lo <= first)

    scans = list((run or _local)(one, ranges))
    splits: list[Split] = []
    expected, frame = first, 1
    context: list[bytes] = [head] if head else []
    for (_, hi), found in zip(ranges, scans, strict=True):
        if expected >= hi:
            continue  # no record starts in this range: the previous split's last record covers it
        start, nxt, frames, blocks = found
        if start != expected:  # fooled, or no boundary found: the previous walk is authoritative
            start, nxt, frames, blocks = scan(path, prefix, expected, hi, True)
        splits.append(Split(len(splits), expected, nxt, frame, frames, b"".join(context)))
        for _, block in blocks:
            if block[:4] == b"\x0a\x0d\x0d\x0a":  # a section header: earlier interfaces are gone
                context = []
            context.append(block)
        expected, frame = nxt, frame + frames
    return splits


def _local(fn: Callable[[tuple[int, int]], Scan], ranges: list[tuple[int, int]]) -> Iterator[Scan]:
    return map(fn, ranges)


def split_bytes(path: str, split: Split) -> Iterator[bytes]:
    """What a reader of `split` is fed: its context, then the file's bytes `[start, next)`."""
    if split.context:
        yield split.context
    with open(path, "rb") as f:
        f.seek(split.start)
        left = split.next - split.start
        while left > 0:
            data = f.read(min(READ_SIZE, left))
            if not data:
                return
            left -= len(data)
            yield data
