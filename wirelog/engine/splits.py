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

import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from wirelog import _core
from wirelog.engine.local import Options, StreamPipeline, decoding_options, server_ports
from wirelog.model import Finding, Severity, StreamInfo

SPLIT_SIZE = 128 * 1024 * 1024  # bytes per split, like Spark's spark.sql.files.maxPartitionBytes
READ_SIZE = 1024 * 1024
PREFIX = 64  # bytes of the file's start a scanner needs (its header and first record header)
SECTION_HEADER = b"\x0a\x0d\x0d\x0a"  # a pcapng block type, the same in either byte order
SECRETS_BLOCK = (b"\x0a\x00\x00\x00", b"\x00\x00\x00\x0a")  # little- and big-endian

Scan = tuple[int | None, int, int, list[tuple[int, bytes]], list[tuple[int, int]]]  # + holes


@dataclass(frozen=True, slots=True)
class Split:
    """The records of one task: file bytes `[start, next)`, numbered from `first_frame`."""

    index: int
    start: int
    next: int
    first_frame: int
    frames: int
    context: bytes  # fed to the reader before the split's bytes (pcap: the file header)
    secrets: bytes = b""  # the section headers and Decryption Secrets Blocks within the split
    holes: tuple[int, ...] = ()  # damaged byte ranges skipped: from, to, from, to...


def flow_options(opts: Options, splits: list[Split]) -> Options:
    """The options every flow of the capture is decoded with: `opts` and the TLS key logs of the
    pcapng's Decryption Secrets Blocks, wherever they are in the file (a flow's decoder never reads
    the file's blocks; the local engine uses them for every stream)."""
    return replace(opts, tls_keylogs=(*opts.tls_keylogs, *_embedded_keylogs(splits)))


def _embedded_keylogs(splits: list[Split]) -> list[tuple[str, str]]:
    reader = _core.SegmentBatches("secrets")
    if splits:
        reader.feed(splits[0].context)
    for split in splits:
        reader.feed(split.secrets)
    reader.finish()
    return [
        ("the capture's Decryption Secrets Block", text.decode("utf-8", "replace"))
        for text in reader.secrets()
    ]


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
    in_hole = False  # the previous split ended inside a damaged range: `expected` is no boundary
    context: list[bytes] = [head] if head else []
    for (_, hi), found in zip(ranges, scans, strict=True):
        if expected >= hi:
            continue  # no record starts in this range: the previous split's last record covers it
        start, nxt, frames, blocks, holes = found
        if in_hole:  # this range's own search from its start (== expected) goes on through the damage
            holes = ([(expected, start if start is not None else nxt)] if start != expected else []) + holes
            start = expected
        elif start != expected:  # fooled, or no boundary found: the previous walk is authoritative
            start, nxt, frames, blocks, holes = scan(path, prefix, expected, hi, True)
        secrets = b"".join(b for _, b in blocks if b[:4] in (SECTION_HEADER, *SECRETS_BLOCK))
        flat = tuple(x for hole in holes for x in hole)
        splits.append(Split(len(splits), expected, nxt, frame, frames, b"".join(context), secrets, flat))
        for _, block in blocks:
            if block[:4] == SECTION_HEADER:  # earlier interfaces are gone
                context = []
            context.append(block)
        in_hole = bool(holes) and holes[-1][1] == nxt  # a search that ran to the range's end
        expected, frame = nxt, frame + frames
    return splits


def _local(fn: Callable[[tuple[int, int]], Scan], ranges: list[tuple[int, int]]) -> Iterator[Scan]:
    return map(fn, ranges)


def split_bytes(path: str, split: Split) -> Iterator[bytes]:
    """What a reader of `split` is fed: its context, then the file's bytes `[start, next)` but its
    damaged ranges (the records before and after one meet)."""
    if split.context:
        yield split.context
    cuts = [split.start, *split.holes, split.next]
    with open(path, "rb") as f:
        for lo, hi in zip(cuts[::2], cuts[1::2], strict=True):
            f.seek(lo)
            left = hi - lo
            while left > 0:
                data = f.read(min(READ_SIZE, left))
                if not data:
                    return
                left -= len(data)
                yield data


def hole_findings(split: Split) -> list[Finding]:
    """A finding per damaged range the split's walk skipped."""
    return [
        Finding(
            "pcap.corrupt", Severity.ERROR,
            f"bytes {lo:,}-{hi:,} of the capture are damaged (no record boundary in them): skipped,"
            " reading resumed after them", "pcap", None, None, None, None,
            {"from": lo, "to": hi, "skipped": hi - lo},
        )
        for lo, hi in zip(split.holes[::2], split.holes[1::2], strict=True)
    ]  # fmt: skip


def segment_batches(path: str, split: Split, opts: Options, name: str | None = None) -> Iterator[Any]:
    """A split's TCP segments as pyarrow RecordBatches in the segment schema (records/segments.rs,
    its `flow` column the shuffle key), and the capture findings of its packets (Finding objects)."""
    import pyarrow as pa

    reader = _core.SegmentBatches(name or path, split.first_frame, server_ports(opts))
    steps = itertools.chain(
        (reader.feed(data) for data in split_bytes(path, split)), (reader.finish() for _ in ".")
    )
    yield from hole_findings(split)
    for batch, findings in steps:
        if batch is not None:
            yield pa.RecordBatchReader.from_stream(batch).read_next_batch()
        yield from findings


def _flow_pipeline(capture: str, opts: Options, **options: Any) -> Any:
    """A core pipeline for one flow's segments, reassembled as the local engine reassembles them."""
    return _core.Pipeline(
        capture,
        None,
        server_ports=server_ports(opts),
        overlap=opts.overlap,
        reorder_packets=opts.reorder_window,
        **options,
    )


def _fed(core: Any, batches: list[Any]) -> Iterator[list]:
    """The core's output for a flow's segments (in frame order), to its end."""
    import pyarrow as pa

    yield core.feed_segments(pa.RecordBatchReader.from_batches(batches[0].schema, batches))
    yield core.finish()
    while (more := core.more()) is not None:
        yield more


def opening_frames(capture: str, batches: list[Any], opts: Options) -> list[int]:
    """The frames that opened the streams of one flow (its segments in frame order): reassembly only,
    no decoding and no bytes handed on, so it costs a fraction of `decode_flow`."""
    core = _flow_pipeline(capture, opts, decode=False, emit_data=False, ids_by_frame=True)
    return [r.stream for out in _fed(core, batches) for r in out if isinstance(r, StreamInfo)]


def decode_flow(
    capture: str, batches: list[Any], opts: Options, ranks: Any, delivery: dict | None = None
) -> list[Any]:
    """The records of the connections of one flow (its segments in frame order), decoded as the local
    engine decodes them, with the capture's stream ids: `ranks` (a `_core.StreamRanks`) holds the
    frames that opened every stream of the capture (`opening_frames` of every flow), and a stream's
    id is its frame's rank, as the local engine numbers streams in the order they open. The flow's
    delivery verdict numbers go to `delivery` (its findings are the capture's to make, from every
    flow's numbers)."""
    core = _flow_pipeline(capture, opts, decoding=decoding_options(opts), stream_ranks=ranks)
    pipe = StreamPipeline(capture, opts, core.stream_info, core)
    out = [item for batch in _fed(core, batches) for item in pipe.handle(batch)]
    if delivery is not None:
        delivery.update(pipe.delivery())
    return out
