"""Raw Hercules event files (concatenated events or count-prefixed batches) decoded by the core
(native/src/decoders/hercules/): `--raw` inputs, read-back checks and the tests. Detection, the
decoder and the export encoder are native (native/src/records/hercules.rs); tests craft events
with tests/hercules_codec.py."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict

from wirelog.engine.protocols import Limits, StreamContext
from wirelog.model import Chunk, Direction, Record

__all__ = ["decode_event_stream"]


def decode_event_stream(data: bytes | Iterable[bytes], limits: Limits | None = None) -> Iterator[Record]:
    """Records of a raw Hercules file (concatenated events, or count-prefixed batches), decoded by
    the core.

    `data` is the whole file or an iterable of its chunks. Yields `event` (and `batch`) messages and
    findings, with offsets into the file; the direction is c2s, like a raw dump's.
    """
    from wirelog import _core  # the core loads only for the files that need it

    session = _core.Decoding("", records="objects", limits=asdict(limits or Limits()))
    session.attach("hercules-events", StreamContext(0, "", "", 0, 0))
    offset = 0
    for piece in [data] if isinstance(data, bytes | bytearray | memoryview) else data:
        if piece:
            for records in session.decode(Chunk(0, Direction.C2S, offset, bytes(piece))):
                yield from records
            offset += len(piece)
    for records in session.end_stream(0, True)[1]:
        yield from records
