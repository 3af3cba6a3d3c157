"""Vostok Hercules: Gate HTTP traffic, bare event streams and the binary event codec.

Detection is here (`detect`); the decoder is in the native core (native/src/decoders/hercules/).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict

from wirelog.decoders.base import Limits, ProtocolSpec, StreamContext
from wirelog.decoders.hercules.detect import detect
from wirelog.model import Chunk, Direction, Record

SPEC = ProtocolSpec(
    name="hercules",
    detect=detect,
    decoder=None,
    ports=frozenset({6306}),
    description="Vostok Hercules: Gate HTTP traffic (/stream/send, /stream/sendAsync) and bare events",
)

__all__ = ["SPEC", "decode_event_stream"]


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
            yield from session.decode(Chunk(0, Direction.C2S, offset, bytes(piece))) or ()
            offset += len(piece)
    yield from session.end_stream(0, True) or ()
