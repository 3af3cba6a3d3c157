"""Captures through the native core (`wirelog._core`): input bytes in, records out.

Python opens the input (files, globs, stdin, URIs; lz4/bzip2/xz undone there: inputs/sources.py) and
hands its bytes to the core in large reads; the core inflates gzip and zstd, parses packets,
reassembles TCP and returns what each read completed, in the order a consumer must see it: Chunk,
Gap, Finding, StreamInfo, and in the place of the streams it decodes itself (`attach`), their
records (`native_records`). No Python object exists per packet: only per reassembled chunk of the
streams whose decoders are still in Python.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from wirelog import _core
from wirelog.inputs.errors import CaptureError
from wirelog.inputs.sources import READ_ERRORS, consumed, open_input, read_error
from wirelog.model import (
    CaptureInfo,
    Finding,
    RecordLines,
    RecordRows,
    StreamInfo,
    StreamLines,
    TableRows,
)

# Capture bytes per call into the core: log events inflate ~25x into NDJSON, so a read of 256 KiB
# already gives takes of several MB (bigger reads only raise the peak memory).
READ_SIZE = 1 << 18
CORE_INFLATES = frozenset(_core.INFLATED)  # compressions the core undoes itself (gzip, zstd)
# Test hook: the core panics when this frame arrives (tests prove a panic becomes a finding).
PANIC_AT_FRAME = "WIRELOG_TEST_PANIC_AT_FRAME"

# The segment tuple of `iter_segments`: (frame, ts_ns, src, sport, dst, dport, seq, ack, flags,
# payload, missing); src/dst are packed addresses (4 or 16 bytes).
Segment = tuple[int, int, bytes, int, bytes, int, int, int, int, bytes, int]

Reassembler = _core.Reassembler  # reassembly alone, one segment at a time (tests of crafted segments)
Decoding = _core.Decoding  # the core's decoders fed by Python (raw dumps)


def native_records(out: Any) -> list:
    """What the core returns for its decoders' records (None, NDJSON bytes with their line count,
    Arrow rows, the typed tables' rows, Hercules events or a list of Message/Finding) as pipeline items."""
    if out is None:
        return []
    if isinstance(out, list):
        return out
    if isinstance(out, tuple):
        return [RecordLines(*out)]
    if isinstance(out, _core.HerculesEvents):  # convert --to hercules: written by the core too
        return [out]
    import pyarrow as pa  # only the Arrow forms get here (convert --to parquet)

    if isinstance(out, dict):  # the typed tables (--tables)
        read = pa.RecordBatchReader.from_stream
        return [TableRows({name: read(rows).read_next_batch() for name, rows in out.items()})]
    return [RecordRows(pa.RecordBatchReader.from_stream(out).read_next_batch())]


def _reads(
    stream: BinaryIO, compression: str | None, before_read: Callable[[], None] | None
) -> Iterator[bytes | str]:
    """The input in reads of at most READ_SIZE, as soon as each is available (a live pipe yields
    packets as they come); a read error ends it with its reason (a str)."""
    read = getattr(stream, "read1", stream.read)  # read1: at most one wait on the source
    while True:
        if before_read is not None:
            before_read()
        try:
            data = read(READ_SIZE)
        except READ_ERRORS as e:
            yield read_error(e, compression)
            return
        if not data:
            return
        yield data


def _fill(info: CaptureInfo, core: Any) -> None:
    for key, value in core.info().items():
        if key == "error":
            info.error = info.error or value
        else:
            setattr(info, key, value)


def _unusable(message: str, read_error: str | None) -> str:
    """The line for an input the core found unusable: with why reading stopped early, once (a
    header cut by a truncated compressed file is said to be both)."""
    if read_error is not None and read_error not in message:
        message = f"{message} ({read_error})"
    return message


class CoreCapture:
    """One capture input read by the core. `records()` yields lists of records; `stream_info` and
    `mute` reach the live streams of the reassembler. Raises CaptureError for an unusable input."""

    def __init__(
        self,
        path: str,
        info: CaptureInfo,
        before_read: Callable[[], None] | None = None,
        name: str | None = None,
        watch: Callable[[CoreCapture], None] | None = None,
        **options: Any,
    ) -> None:
        """`name`: the capture the records name (default `path`, the input opened); `watch`: called
        with this capture after each read the core took (a progress display asks `progress()`)."""
        try:
            self._stream, info.compression = open_input(path, CORE_INFLATES)
        except CaptureError as e:
            info.error = str(e)
            raise
        self._info = info
        self._before_read = before_read
        self._watch = watch
        self.name = info.capture
        if os.environ.get(PANIC_AT_FRAME):
            options["panic_at_frame"] = int(os.environ[PANIC_AT_FRAME])
        self.core = _core.Pipeline(path if name is None else name, info.compression, **options)

    def stream_info(self, stream: int) -> StreamInfo | None:
        return self.core.stream_info(stream)

    def mute(self, stream: int) -> None:
        self.core.mute(stream)

    def progress(self) -> tuple[int, int]:
        """(bytes taken from the input so far, compressed ones if it is; packets read so far)."""
        return consumed(self._stream), self.core.info()["packets"]

    def records(self) -> Iterator[list]:
        """Lists of records, one per read; stream summaries as StreamLines when the core writes them."""
        for batch in self._batches():
            lines = self.core.take_stream_lines()
            if lines:
                batch.append(StreamLines(self._info.capture, lines))
            if batch:
                yield batch

    def _batches(self) -> Iterator[list]:
        core, info = self.core, self._info
        read_error = None
        try:
            try:
                for data in _reads(self._stream, info.compression, self._before_read):
                    if isinstance(data, str):
                        read_error = data
                        break
                    yield core.feed(data)
                    yield from _rest(core)
                    if self._watch is not None:
                        self._watch(self)
                yield core.finish(read_error)
                yield from _rest(core)
            except _core.CaptureFormatError as e:
                info.error = _unusable(str(e), read_error)
                raise CaptureError(info.error) from None
        finally:
            self._stream.close()
            _fill(info, core)


def _rest(core: Any) -> Iterator[list]:
    """What the last call made past one batch (a stream's end, the capture's end), in batches."""
    while (more := core.more()) is not None:
        yield more


def iter_segments(path: str, info: CaptureInfo, findings: list[Finding]) -> Iterator[Segment]:
    """The TCP segments of one capture, as tuples (see `Segment`), with the capture-level findings
    appended to `findings` as they occur and `info` filled. The capture layer alone, for tests and
    benchmarks; raises CaptureError for an unusable input."""
    try:
        stream, info.compression = open_input(path, CORE_INFLATES)
    except CaptureError as e:
        info.error = str(e)
        raise
    reader = _core.SegmentReader(path, info.compression)
    read_error = None
    try:
        try:
            for data in _reads(stream, info.compression, None):
                if isinstance(data, str):
                    read_error = data
                    break
                yield from _split(reader.feed(data), findings)
            yield from _split(reader.finish(read_error), findings)
        except _core.CaptureFormatError as e:
            info.error = _unusable(str(e), read_error)
            raise CaptureError(info.error) from None
    finally:
        stream.close()
        _fill(info, reader)


def _split(items: list, findings: list[Finding]) -> Iterator[Segment]:
    for item in items:
        if isinstance(item, tuple):
            yield item
        else:
            findings.append(item)
