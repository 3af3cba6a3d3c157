"""The in-process pipeline: captures → segments → reassembly → per-stream decoders → records.

`run()` yields, in a deterministic order, the records of every input: `Message` and `Finding` as
they are produced, a `StreamInfo` when a stream ends, and a `CaptureInfo` when an input is done.
Consumers (CLI commands, writers, the Spark data source) pick the types they need.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from wirelog.engine import protocols
from wirelog.engine.capture import CoreCapture, Decoding, native_records
from wirelog.engine.filters import RecordFilter
from wirelog.engine.keylogs import KeyLogSource, core_keylogs
from wirelog.engine.protocols import Limits
from wirelog.inputs.errors import CaptureError
from wirelog.inputs.sources import READ_ERRORS, STDIN, display_name, open_input
from wirelog.model import (
    CaptureInfo,
    Chunk,
    EventCounts,
    Finding,
    Gap,
    Message,
    RecordLines,
    RecordRows,
    StreamInfo,
    StreamLines,
)

Item = (
    Message
    | Finding
    | EventCounts
    | StreamInfo
    | CaptureInfo
    | Chunk
    | Gap
    | StreamLines
    | RecordLines
    | RecordRows
)

REORDER_WINDOW = 2048  # packets a late segment may trail the ACK covering it (docs/records.md)

# Items the engine passes on as they are (a tuple: `A | B` would build a union on every test).
_PASSED_ON = (Chunk, Gap, StreamInfo, StreamLines)


@dataclass(frozen=True, slots=True)
class Options:
    """Everything that changes what the pipeline produces."""

    decode: bool = True  # False: reassembly only (the `streams` command)
    chunks: bool = False  # also yield the reassembled Chunk/Gap items (`streams --dump`)
    stream_lines: bool = False  # captures' stream summaries as StreamLines (NDJSON by the core)
    decode_as: dict[int, str] = field(default_factory=dict)  # server or client port → protocol
    overlap: str = "first"
    reorder_window: int = REORDER_WINDOW
    show_secrets: bool = False
    # Hercules event records carry `bytes_base64`, the event's bytes as captured (`wirelog replay`
    # sends those to a Gate; every other output stays without them)
    event_bytes: bool = False
    tls_keylogs: tuple[KeyLogSource, ...] = ()  # NSS key logs for TLS streams
    limits: Limits = field(default_factory=Limits)
    keep: RecordFilter = field(default_factory=RecordFilter)  # records not accepted are not yielded
    input_format: str = "auto"  # auto: captures, else raw bytes a decoder recognises; pcap; or a protocol
    # How the records of the streams the core decodes come out: "objects" (Message/Finding),
    # "summary" (the same, but messages with an event document only counted: EventCounts), or for
    # writers, "ndjson" (RecordLines) or "arrow" (RecordRows) with no Python object per record;
    # "report" is "summary" plus each input's timeline in CaptureInfo.timeline (`wirelog report`).
    records: str = "objects"
    stall_ns: int = 2_000_000_000  # report: an answer later than this is drawn as a stall
    report_top: int = 20  # report: connections with a lane of their own, per input


def server_ports(opts: Options) -> list[int]:
    """The ports that tell a connection's server side: the protocols' and --decode-as ones."""
    return sorted(protocols.well_known_ports() | frozenset(opts.decode_as))


# How long (capture time) an unacknowledged event's record waits on a live input for a resend that
# decides its fate (docs/records.md, "Delivery"): Beats back off up to 60 s between reconnections
# and Log Courier up to 300 s. A file's records wait until it ends.
FATE_HORIZON_NS = 600 * 10**9


def live(path: str) -> bool:
    """An input that may never end: stdin, a FIFO, a character device."""
    if path == STDIN:
        return True
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # a URI, a glob's leftover: not a local special file
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def decoding_options(opts: Options, live_input: bool = False) -> dict[str, Any]:
    """The core's decoding options (native/src/python/decoding.rs `session`) for an input (`live_input`:
    one that may never end, `live`)."""
    keep = opts.keep
    limits = asdict(opts.limits)
    if live_input and limits["fate_horizon_ns"] is None:
        limits["fate_horizon_ns"] = FATE_HORIZON_NS
    d: dict[str, Any] = {
        "records": opts.records,
        "show_secrets": opts.show_secrets,
        "limits": limits,
        "decode_as": opts.decode_as,
        "tls_keylogs": core_keylogs(opts.tls_keylogs),
    }
    if opts.records == "report":
        d["stall_ns"] = opts.stall_ns
    if opts.event_bytes:
        d["event_bytes"] = True
    if opts.input_format not in ("auto", "pcap"):
        d["forced"] = opts.input_format
    if keep.active:
        d.update(
            protocols=set(keep.protocols),
            streams=set(keep.streams),
            kinds=set(keep.kinds),
            events=keep.events,
            since=keep.since,
            until=keep.until,
            findings=keep.findings,
        )
    return d


def _closed(info: StreamInfo) -> bool:
    """The connection ended in the capture (FIN or RST), so a missing ACK will not come later."""
    return info.fin_c2s or info.fin_s2c or info.reset


def run(
    inputs: Iterable[str],
    raw: Iterable[str] = (),
    options: Options | None = None,
    before_stdin_read: Callable[[], None] | None = None,
    names: Mapping[str, str] | None = None,
    watch: Callable[[CoreCapture], None] | None = None,
) -> Iterator[Item]:
    """Process capture files (and raw dumps as one extra input); see the module docstring.

    `names`: the `capture` an input's records carry when it is not the path opened (a Spark task
    opens an absolute path or a URI; its records name the capture as the user gave it).

    An unusable input yields a CaptureInfo with `error` set (and no records) instead of raising, so
    one bad file never stops the others. `before_stdin_read` runs before each read of a capture on
    stdin, when every record of the bytes read so far has been consumed (a CLI flushes its output
    there, so a live capture's records show as they come). `watch` is called with the capture being
    read after each read of it (CoreCapture.progress: what a progress display shows).
    """
    opts = options or Options()
    for path in inputs:
        name = display_name(names.get(path, path) if names else path)
        if opts.input_format in ("auto", "pcap"):
            yield from _run_capture(path, opts, before_stdin_read if path == STDIN else None, name, watch)
        else:
            yield from _run_raw([path], opts, name, before_stdin_read)
    raw = list(raw)
    if raw:
        yield from _run_raw(raw, opts, "raw", before_stdin_read)


def _run_capture(
    path: str,
    opts: Options,
    before_read: Callable[[], None] | None = None,
    name: str | None = None,
    watch: Callable[[CoreCapture], None] | None = None,
) -> Iterator[Item]:
    name = display_name(path) if name is None else name
    info = CaptureInfo(capture=name)
    try:
        capture = CoreCapture(
            path,
            info,
            before_read,
            server_ports=server_ports(opts),
            overlap=opts.overlap,
            reorder_packets=opts.reorder_window,
            stream_lines=opts.stream_lines and not opts.decode,
            decode=opts.decode,
            chunks=opts.chunks,
            decoding=decoding_options(opts, live(path)),
            name=name,
            watch=watch,
        )
    except CaptureError:
        yield info
        return
    pipe = StreamPipeline(name, opts, capture.stream_info, capture.core)
    try:
        for batch in capture.records():
            yield from pipe.handle(batch)
    except CaptureError as e:
        if not info.format and opts.input_format == "auto" and path != "-" and _raw_protocol(path):
            yield from _run_raw([path], opts, capture=name)  # not a capture, but bytes we can decode
            return
        info.error = str(e)
    yield from pipe.verdict()
    info.delivery = pipe.delivery()
    info.timeline = pipe.timeline()
    yield info


RAW_SNIFF = 64 * 1024  # a file has all its bytes at hand: let detectors see whole records


def _raw_protocol(path: str) -> bool:
    """Whether a file that is not a capture starts like a protocol's raw byte stream."""
    try:
        stream, _ = open_input(path)
        with stream:
            head = stream.read(RAW_SNIFF)
    except (CaptureError, *READ_ERRORS):  # unreadable, or a compressed file cut before any byte
        return False
    found = protocols.detect(head, closed=True)
    return bool(found) and found != "tls"


def _run_raw(
    paths: list[str], opts: Options, capture: str = "raw", before_stdin_read: Callable[[], None] | None = None
) -> Iterator[Item]:
    """Raw stream dumps (`--raw`, or an input that is not a capture), decoded like TCP streams."""
    from wirelog.inputs.raw import iter_raw_chunks, pair_dumps  # imported here: captures never need it

    info = CaptureInfo(capture=capture, format="raw")
    streams = pair_dumps(paths, capture, protocols.well_known_ports() | frozenset(opts.decode_as))
    core = Decoding(capture, **decoding_options(opts, any(live(p) for p in paths)))
    pipe = StreamPipeline(capture, opts, {s.info.stream: s.info for s in streams}.get, core)
    for stream in streams:
        core.open(stream.info)
        try:
            for chunk in iter_raw_chunks(stream, before_stdin_read):
                if opts.chunks:
                    yield chunk
                if opts.decode:
                    yield from pipe.handle(core.decode(chunk))
        except CaptureError as e:
            info.error = str(e)
        info.bytes += stream.info.bytes_c2s + stream.info.bytes_s2c
        stream.info.protocol, last = core.end_stream(stream.info.stream, _closed(stream.info))
        yield from pipe.handle([*last, stream.info])
    yield from pipe.verdict()
    info.delivery = pipe.delivery()
    info.timeline = pipe.timeline()
    yield info


class StreamPipeline:
    """Turns the core's output into pipeline items: the records of the streams the core decodes
    pass through, the findings made outside a decoder are stamped and filtered."""

    def __init__(
        self,
        capture: str,
        opts: Options,
        lookup: Callable[[int], StreamInfo | None],
        core: Any,
    ) -> None:
        self.capture = capture
        self.opts = opts
        self._core = core  # the core's Pipeline or Decoding: detection and the native decoders
        self._lookup = lookup  # StreamInfo of a live stream, by id
        self._filtering = opts.keep.active
        self._batch: list = []  # the core output being handled
        self._infos: dict[int, StreamInfo | None] = {}  # streams resolved for this batch
        self._ended: dict[int, StreamInfo] | None = None  # the batch's StreamInfos, once needed

    def verdict(self, findings: bool = True) -> Iterator[Item]:
        """At the end of the capture: the event records still waiting for their fate (in parts, each
        taken before the next is read back), then (`findings`) data loss and duplicates across
        connections, as findings."""
        done = False
        while not done:
            done, records = self._core.finish_decoding(findings)
            yield from native_records(records)

    def delivery(self) -> dict[str, dict[str, Any]]:
        """The delivery verdict's numbers per protocol (native/src/decoders/delivery.rs)."""
        return json.loads(self._core.delivery())

    def timeline(self) -> dict[str, Any] | None:
        """With records="report", after the verdict: the core's timeline of the input."""
        if self.opts.records != "report":
            return None
        text = self._core.report(self.opts.report_top)
        return None if text is None else json.loads(text)

    def handle(self, items: list) -> list[Item]:
        """Consume (and clear) a batch of the core's output; returns the pipeline items it gives
        (a list, not a generator: one generator level less for every record)."""
        batch = self._batch = items[:]
        items.clear()
        self._infos.clear()
        self._ended = None
        out: list[Item] = []
        for item in batch:
            if isinstance(item, _PASSED_ON):
                out.append(item)  # Chunk/Gap: only in chunks mode (streams --dump, inspect --frame)
            elif not isinstance(item, Finding):  # records of the streams the core decodes
                out += native_records(item)
            else:
                out += self._emit(item, self._info(item.stream))
        return out

    def _info(self, stream: int | None) -> StreamInfo | None:
        return None if stream is None else self._resolve(stream)

    def _resolve(self, stream: int) -> StreamInfo | None:
        """A stream's info: live in the source, or finished in this very batch (the bytes a stream
        flushes when it ends come just before its StreamInfo, after the source forgot it). Once a
        batch a stream: a batch of short connections holds hundreds of findings of ended ones."""
        try:
            return self._infos[stream]
        except KeyError:
            pass
        info = self._lookup(stream)
        if info is None:
            if self._ended is None:
                self._ended = {i.stream: i for i in reversed(self._batch) if type(i) is StreamInfo}
            info = self._ended.get(stream)
        self._infos[stream] = info
        return info

    def _emit(self, rec: Message | Finding, info: StreamInfo | None) -> list[Message | Finding]:
        """Stamp a record with its capture and stream; [it] if the filter keeps it, else []."""
        return self._stamp([rec], info)

    def _stamp(self, records: list[Message | Finding], info: StreamInfo | None) -> list[Message | Finding]:
        """`_emit` for a decoder step's records at once (this runs per record: no per-record calls)."""
        capture = self.capture
        if info is None:
            for rec in records:
                rec.capture = capture
        else:
            stream, client, server = info.stream, info.client, info.server
            for rec in records:
                rec.capture = capture
                rec.stream = stream
                rec.client = client
                rec.server = server
        return self._keep(records, info)

    def _keep(self, records: list[Message | Finding], info: StreamInfo | None) -> list[Message | Finding]:
        if not self._filtering:
            return records
        return self.opts.keep.select(records, info.protocol if info else None)
