"""The in-process pipeline: captures → segments → reassembly → per-stream decoders → records.

`run()` yields, in a deterministic order, the records of every input: `Message` and `Finding` as
they are produced, a `StreamInfo` when a stream ends, and a `CaptureInfo` when an input is done.
Consumers (CLI commands, writers, the Spark data source) pick the types they need.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from wirelog.decoders import registry
from wirelog.decoders.base import Decoder, Limits, ProtocolSpec, Sample, StreamContext
from wirelog.engine.capture import NATIVE, CoreCapture, Decoding, native_records
from wirelog.engine.filters import RecordFilter
from wirelog.engine.midstream import FrameHunt
from wirelog.inputs.errors import CaptureError
from wirelog.inputs.sources import STDIN, open_input
from wirelog.model import (
    CaptureInfo,
    Chunk,
    Direction,
    Finding,
    Gap,
    Message,
    RecordLines,
    RecordRows,
    Severity,
    StreamInfo,
    StreamLines,
)

Item = Message | Finding | StreamInfo | CaptureInfo | Chunk | Gap | StreamLines | RecordLines | RecordRows

REORDER_WINDOW = 2048  # packets a late segment may trail the ACK covering it (docs/records.md)


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
    limits: Limits = field(default_factory=Limits)
    keep: RecordFilter = field(default_factory=RecordFilter)  # records not accepted are not yielded
    input_format: str = "auto"  # auto: captures, else raw bytes a decoder recognises; pcap; or a protocol
    # How the records of the streams the core decodes come out: "objects" (Message/Finding), or for
    # writers, "ndjson" (RecordLines) or "arrow" (RecordRows) with no Python object per record.
    records: str = "objects"


def _decoding(opts: Options) -> dict[str, Any]:
    """The core's decoding options (native/src/python.rs `session`)."""
    keep = opts.keep
    d: dict[str, Any] = {
        "records": opts.records,
        "show_secrets": opts.show_secrets,
        "limits": asdict(opts.limits),
    }
    if keep.active:
        d.update(
            protocols=set(keep.protocols),
            streams=set(keep.streams),
            kinds=set(keep.kinds),
            events=keep.events,
            since=keep.since,
            until=keep.until,
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
) -> Iterator[Item]:
    """Process capture files (and raw dumps as one extra input); see the module docstring.

    An unusable input yields a CaptureInfo with `error` set (and no records) instead of raising, so
    one bad file never stops the others. `before_stdin_read` runs before each read of a capture on
    stdin, when every record of the bytes read so far has been consumed (a CLI flushes its output
    there, so a live capture's records show as they come).
    """
    opts = options or Options()
    for path in inputs:
        if opts.input_format in ("auto", "pcap"):
            yield from _run_capture(path, opts, before_stdin_read if path == STDIN else None)
        else:
            yield from _run_raw([path], opts, path, before_stdin_read)
    raw = list(raw)
    if raw:
        yield from _run_raw(raw, opts, "raw", before_stdin_read)


def _run_capture(path: str, opts: Options, before_read: Callable[[], None] | None = None) -> Iterator[Item]:
    info = CaptureInfo(capture=path)
    try:
        capture = CoreCapture(
            path,
            info,
            before_read,
            server_ports=sorted(registry.well_known_ports() | frozenset(opts.decode_as)),
            overlap=opts.overlap,
            reorder_packets=opts.reorder_window,
            emit_data=opts.decode or opts.chunks,
            stream_lines=opts.stream_lines and not opts.decode,
            decoding=_decoding(opts),
        )
    except CaptureError:
        yield info
        return
    pipe = _StreamPipeline(path, opts, capture.stream_info, capture.mute, capture.core)
    try:
        for batch in capture.records():
            yield from pipe.handle(batch)
    except CaptureError as e:
        if not info.format and opts.input_format == "auto" and path != "-" and _raw_protocol(path):
            yield from _run_raw([path], opts, capture=path)  # not a capture, but bytes we can decode
            return
        info.error = str(e)
    yield from pipe.verdict()
    info.delivery = pipe.delivery()
    yield info


RAW_SNIFF = 64 * 1024  # a file has all its bytes at hand: let detectors see whole records


def _raw_protocol(path: str) -> bool:
    """Whether a file that is not a capture starts like a protocol's raw byte stream."""
    try:
        stream, _ = open_input(path)
        with stream:
            head = stream.read(RAW_SNIFF)
    except (CaptureError, OSError):
        return False
    found = registry.detect(Sample(head, b"", 0, 0, closed=True))
    return bool(found) and found.name != "tls"


def _run_raw(
    paths: list[str], opts: Options, capture: str = "raw", before_stdin_read: Callable[[], None] | None = None
) -> Iterator[Item]:
    """Raw stream dumps (`--raw`, or an input that is not a capture), decoded like TCP streams."""
    from wirelog.inputs.raw import iter_raw_chunks, pair_dumps  # imported here: captures never need it

    info = CaptureInfo(capture=capture, format="raw")
    streams = pair_dumps(paths, capture, registry.well_known_ports() | frozenset(opts.decode_as))
    core = Decoding(capture, **_decoding(opts))
    pipe = _StreamPipeline(capture, opts, {s.info.stream: s.info for s in streams}.get, lambda _: None, core)
    for stream in streams:
        try:
            for chunk in iter_raw_chunks(stream, before_stdin_read):
                yield from pipe.handle([chunk])
        except CaptureError as e:
            info.error = str(e)
        info.bytes += stream.info.bytes_c2s + stream.info.bytes_s2c
        yield from pipe.handle([stream.info])
    yield from pipe.verdict()
    info.delivery = pipe.delivery()
    yield info


class _StreamState:
    """Detection buffer, then decoder, of one stream."""

    __slots__ = ("info", "decoder", "native", "spec", "held", "sample", "dead", "hunt")

    def __init__(self, info: StreamInfo) -> None:
        self.info = info
        self.decoder: Decoder | None = None
        self.native = False  # decoded in the core: its bytes go there, its records come from there
        self.spec: ProtocolSpec | None = None
        self.held: list[Chunk | Gap] = []
        self.sample = {Direction.C2S: bytearray(), Direction.S2C: bytearray()}
        self.dead = False  # decided: nothing to decode (unknown protocol or decoder failure)
        self.hunt: FrameHunt | None = None  # mid-stream and unknown: searching for a frame start


class _StreamPipeline:
    """Routes reassembler output to per-stream detection and decoders; stamps records."""

    def __init__(
        self,
        capture: str,
        opts: Options,
        lookup: Callable[[int], StreamInfo | None],
        mute: Callable[[int], None],
        core: Any,
    ) -> None:
        self.capture = capture
        self.opts = opts
        self._core = core  # the core's Pipeline or Decoding: decodes the NATIVE protocols
        self._lookup = lookup  # StreamInfo of a live stream, by id
        self._mute = mute  # tell the source a stream's bytes are no longer wanted
        self._filtering = opts.keep.active
        self._batch: list = []  # the reassembler output being handled
        self._states: dict[int, _StreamState] = {}
        self._shared: dict[str, dict] = {}

    def verdict(self) -> list[Item]:
        """At the end of the capture: data loss and duplicates across connections, as findings."""
        return native_records(self._core.finish_decoding())

    def delivery(self) -> dict[str, dict[str, Any]]:
        """The delivery verdict's numbers per protocol (native/src/decoders/delivery.rs)."""
        return json.loads(self._core.delivery())

    def handle(self, items: list) -> list[Item]:
        """Consume (and clear) a batch of reassembler output; returns the pipeline items it gives
        (a list, not a generator: one generator level less for every record)."""
        batch = self._batch = items[:]
        items.clear()
        out: list[Item] = []
        for item in batch:
            if isinstance(item, Chunk | Gap):
                if self.opts.chunks:
                    out.append(item)
                if self.opts.decode:
                    out += self._data(item)
            elif isinstance(item, StreamInfo):
                out += self._end(item)
            elif isinstance(item, StreamLines):
                out.append(item)
            elif not isinstance(item, Finding):  # records of the streams the core decodes
                out += native_records(item)
            else:
                out += self._emit(item, self._info(item.stream))
        return out

    def _info(self, stream: int | None) -> StreamInfo | None:
        if stream is None:
            return None
        st = self._states.get(stream)
        return st.info if st is not None else self._resolve(stream)

    def _resolve(self, stream: int) -> StreamInfo | None:
        """A stream's info: live in the source, or finished in this very batch (the bytes a stream
        flushes when it ends come just before its StreamInfo, after the source forgot it)."""
        info = self._lookup(stream)
        if info is None:
            info = next((i for i in self._batch if isinstance(i, StreamInfo) and i.stream == stream), None)
        return info

    def _data(self, item: Chunk | Gap) -> Iterable[Item]:
        st = self._states.get(item.stream)
        if st is None:
            st = self._states[item.stream] = _StreamState(self._resolve(item.stream))
        if st.native:
            return native_records(self._core.decode(item))
        if st.dead:
            return ()
        if st.hunt is not None:
            return self._hunt(st, item)
        if st.decoder is None:
            st.held.append(item)
            if isinstance(item, Chunk):
                sample = st.sample[item.direction]
                if len(sample) < registry.SAMPLE_LIMIT:
                    sample += item.data[: registry.SAMPLE_LIMIT - len(sample)]
            return self._decide(st, closed=False)
        return self._call(st, item)

    def _decide(self, st: _StreamState, closed: bool) -> Iterator[Item]:
        info = st.info
        forced = self.opts.decode_as.get(info.server_port) or self.opts.decode_as.get(info.client_port)
        if self.opts.input_format not in ("auto", "pcap"):
            forced = self.opts.input_format
        if forced:
            spec: ProtocolSpec | bool | None = registry.spec(forced)
        else:
            sample = Sample(
                bytes(st.sample[Direction.C2S]),
                bytes(st.sample[Direction.S2C]),
                info.client_port,
                info.server_port,
                closed,
            )
            spec = registry.detect(sample)
        if spec is False:
            return
        held, st.held = st.held, []
        finders = registry.start_finders()
        if spec is None and info.midstream and finders and not forced:
            st.hunt = FrameHunt(finders)
            for item in held:
                yield from self._hunt(st, item)
            if closed and st.hunt is not None:
                yield from self._unknown(st, st.hunt.first)
            return
        if spec is None:
            yield from self._unknown(st, next((c for c in held if isinstance(c, Chunk)), None))
            return
        yield from self._start(st, spec, held)

    def _unknown(self, st: _StreamState, first: Chunk | None) -> list[Item]:
        """No protocol for this stream: stop looking at its bytes, say so once."""
        info = st.info
        st.dead = True
        st.hunt = None
        info.protocol = "unknown"
        if not self.opts.chunks:
            self._mute(info.stream)
        if first is None:
            return []
        preview = bytes(st.sample[first.direction][:16]).hex(" ")
        return self._emit(
            Finding(
                "stream.unknown-protocol",
                Severity.INFO,
                f"no known protocol recognised; first {first.direction.value} bytes: {preview}"
                f" (if you know it: --decode-as {info.server_port}=PROTOCOL"
                f"{', the capture starts mid-stream and no frame start was found' if info.midstream else ''})",
                "stream",
                first.direction,
                first.offset,
                first.frame,
                first.ts,
            ),
            info,
        )

    def _hunt(self, st: _StreamState, item: Chunk | Gap) -> list[Item]:
        """One item of a mid-stream stream no detector placed: search the client bytes for a frame
        start (engine/midstream.py); once found, the protocol's decoder takes over from there."""
        hunt = st.hunt
        if hunt is None:  # found in an earlier item of the same batch
            return self._data(item)
        if isinstance(item, Gap) or item.direction is not Direction.C2S:
            # server bytes before the client's first frame answer frames we never see
            hunt.skip(item)
            return self._unknown(st, hunt.first) if hunt.exhausted else []
        found = hunt.feed(item)
        if found is None:
            return self._unknown(st, hunt.first) if hunt.exhausted else []
        spec, parts = found
        st.hunt = None
        skipped = parts[0].offset - hunt.first.offset
        out = self._emit(
            Finding(
                "stream.midstream-start",
                Severity.INFO,
                f"the capture starts inside a frame: {spec.name} recognised at its first frame start, "
                f"c2s byte {parts[0].offset}; the {skipped} bytes before it are not decoded",
                "stream",
                Direction.C2S,
                parts[0].offset,
                parts[0].frame,
                parts[0].ts,
            ),
            st.info,
        )
        return out + list(self._start(st, spec, parts))

    def _start(self, st: _StreamState, spec: ProtocolSpec, items: list[Chunk | Gap]) -> Iterator[Item]:
        """Create the stream's decoder and give it the bytes held so far."""
        info = st.info
        st.spec = spec
        info.protocol = spec.name
        if spec.name in NATIVE and self._core.attach(spec.name, info):
            st.native = True
            for item in items:
                yield from native_records(self._core.decode(item))
            return
        ctx = StreamContext(
            stream=info.stream,
            client=info.client,
            server=info.server,
            client_port=info.client_port,
            server_port=info.server_port,
            show_secrets=self.opts.show_secrets,
            limits=self.opts.limits,
            shared=self._shared.setdefault(spec.name, {}),
            midstream=info.midstream,
        )
        st.decoder = spec.decoder(ctx)
        for item in items:
            yield from self._call(st, item)

    def _call(self, st: _StreamState, item: Chunk | Gap | None) -> list[Message | Finding]:
        """Run one decoder step; a decoder bug ends decoding of that stream, never the run."""
        try:
            if item is None:
                records = st.decoder.close()
            elif isinstance(item, Chunk):
                records = st.decoder.feed(item)
            else:
                records = st.decoder.gap(item)
        except MemoryError:
            raise  # the run cannot go on: one line and status 4 (cli/exits.py), not a finding
        except Exception as e:
            st.dead = True
            records = [
                Finding(
                    "decoder.internal-error",
                    Severity.ERROR,
                    f"the {st.spec.name} decoder failed ({type(e).__name__}: {e}); "
                    "the rest of this stream is not decoded",
                    st.spec.name,
                    getattr(item, "direction", None),
                    getattr(item, "offset", None),
                    getattr(item, "frame", None),
                    getattr(item, "ts", None),
                )
            ]
        return self._stamp(records, st.info)

    def _end(self, info: StreamInfo) -> Iterator[Item]:
        st = self._states.pop(info.stream, None)
        if st is not None and st.info is not info:  # the live snapshot gives way to the final info
            info.protocol = st.info.protocol
            st.info = info
        if st is not None and self.opts.decode:
            if st.hunt is not None:
                yield from self._unknown(st, st.hunt.first)
            elif st.decoder is None and not st.dead and not st.native:
                yield from self._decide(st, closed=True)
            if st.native:  # the core closes a stream it saw end; one attached at its end is closed here
                yield from native_records(self._core.end_stream(info.stream, _closed(info)))
            elif st.decoder is not None and not st.dead:
                yield from self._call(st, None)
        yield info

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
