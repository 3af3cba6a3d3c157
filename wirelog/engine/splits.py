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
from dataclasses import dataclass, replace
from typing import Any

from wirelog import _core
from wirelog.engine.keylogs import KeyLogSource
from wirelog.engine.local import Options, StreamPipeline, decoding_options, server_ports
from wirelog.model import Finding, Severity, StreamInfo

SPLIT_SIZE = 128 * 1024 * 1024  # bytes per split, like Spark's spark.sql.files.maxPartitionBytes
READ_SIZE = 1024 * 1024
# A routing task hands on its groups' routes every FLUSH_BYTES of the split, so its memory is bounded
# by that (36 bytes per packet), not by the split.
FLUSH_BYTES = 16 << 20
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


def group_options(opts: Options, splits: list[Split]) -> Options:
    """The options every group of the capture is decoded with: `opts` and the TLS key logs of the
    pcapng's Decryption Secrets Blocks, wherever they are in the file (a group's decoder never reads
    the file's blocks; the local engine uses them for every stream)."""
    return replace(opts, tls_keylogs=(*opts.tls_keylogs, *_embedded_keylogs(splits)))


def _embedded_keylogs(splits: list[Split]) -> list[KeyLogSource]:
    reader = _core.SegmentBatches("secrets")
    if splits:
        reader.feed(splits[0].context)
    for split in splits:
        reader.feed(split.secrets)
    reader.finish()
    return [
        KeyLogSource("the capture's Decryption Secrets Block", text=text.decode("utf-8", "replace"))
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
    for _, data in _split_pieces(path, split):
        yield data


def _split_pieces(path: str, split: Split) -> Iterator[tuple[int, bytes]]:
    """The file's bytes `[start, next)` of `split` but its damaged ranges, each with its offset."""
    cuts = [split.start, *split.holes, split.next]
    with open(path, "rb") as f:
        for lo, hi in zip(cuts[::2], cuts[1::2], strict=True):
            f.seek(lo)
            at = lo
            while at < hi:
                data = f.read(min(READ_SIZE, hi - at))
                if not data:
                    return
                yield at, data
                at += len(data)


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


def route_split(
    path: str, split: Split, groups: int, name: str | None = None
) -> Iterator[Finding | list[bytes]]:
    """Where the packets of a split go (native/src/capture/route.rs): every `FLUSH_BYTES` read and
    at its end, a list of `groups` byte strings, each the routes of one group of connections; and
    the findings of its packets (Finding objects), as a whole-file read makes them."""
    reader = _core.SegmentBatches(name or path, split.first_frame)
    if split.context:
        reader.feed(split.context)  # the file header, earlier sections' blocks
    reader.route(groups, split.start)
    yield from hole_findings(split)
    expected, fed = split.start, 0
    for at, data in _split_pieces(path, split):
        if at != expected:  # after a damaged range: no record is cut there
            reader.set_position(at)
        yield from reader.feed(data)
        expected, fed = at + len(data), fed + len(data)
        if fed >= FLUSH_BYTES:
            yield reader.take_routes()
            fed = 0
    yield from reader.finish()
    yield reader.take_routes()


def routed_segments(path: str, name: str, routes: Iterable[bytes]) -> Iterator[Any]:
    """The TCP segments of the packets `routes` name (each a byte string of routes, in frame
    order), read from the file: Arrow batches in the segment schema (records/segments.rs), in frame
    order."""
    reader = _core.SegmentBatches(name)  # no finish: the packet layer's findings are the routing tasks'
    with open(path, "rb") as f:
        for blob in routes:
            for lo, hi, first, last in _core.route_spans(blob):
                batch = reader.feed_routed(os.pread(f.fileno(), hi - lo, lo), lo, blob, first, last)
                if batch is not None:
                    yield batch


def _group_pipeline(capture: str, opts: Options, **options: Any) -> Any:
    """A core pipeline for one group's segments, reassembled as the local engine reassembles them."""
    return _core.Pipeline(
        capture,
        None,
        server_ports=server_ports(opts),
        overlap=opts.overlap,
        reorder_packets=opts.reorder_window,
        **options,
    )


def _fed(core: Any, segments: Iterable[Any]) -> Iterator[list]:
    """The core's output for a group's segments (Arrow batches in frame order), to its end; nothing
    for a group without any (the core takes no segments for an empty capture)."""
    fed = False
    for batch in segments:
        fed = True
        yield core.feed_segments(batch)
    if not fed:
        return
    yield core.finish()
    while (more := core.more()) is not None:
        yield more


def opening_frames(capture: str, segments: Iterable[Any], opts: Options) -> list[int]:
    """The frames that opened the streams of a group of connections (its segments in frame order):
    reassembly only, no decoding and no bytes handed on, so it costs a fraction of `decode_group`."""
    core = _group_pipeline(capture, opts, decode=False, emit_data=False, ids_by_frame=True)
    return [r.stream for out in _fed(core, segments) for r in out if isinstance(r, StreamInfo)]


def decode_group(
    capture: str, segments: Iterable[Any], opts: Options, ranks: Any, delivery: dict | None = None
) -> Iterator[Any]:
    """The records of a group of connections (its segments in frame order), decoded as the local
    engine decodes them, with the capture's stream ids: `ranks` (a `_core.StreamRanks`) holds the
    frames that opened every stream of the capture (`opening_frames` of every group), and a
    stream's id is its frame's rank, as the local engine numbers streams in the order they open.
    The group's delivery verdict numbers go to `delivery` once its records are all out (its
    findings are the capture's to make, from every group's numbers)."""
    core = _group_pipeline(capture, opts, decoding=decoding_options(opts), stream_ranks=ranks)
    pipe = StreamPipeline(capture, opts, core.stream_info, core)
    for batch in _fed(core, segments):
        yield from pipe.handle(batch)
    yield from pipe.verdict(findings=False)  # the records still waiting for their fate
    if delivery is not None:
        delivery.update(pipe.delivery())
