"""Hercules binary output: every message record as one Hercules event, encoded by the core
(native/src/records/hercules.rs; the mapping is docs/hercules.md). No Python object per record: the
core's decoding sessions hand over events (`records="hercules"`), Arrow batches in the record schema
are read by the core, and only messages decoded in Python (TLS handshakes) are mapped one by one.
"""

from __future__ import annotations

from typing import Any, BinaryIO

from wirelog import _core
from wirelog.model import Message

Events = _core.HerculesEvents  # what a decoding session with records="hercules" gives


def is_events(item: Any) -> bool:
    return isinstance(item, Events)


class HerculesWriter:
    """Streams records as concatenated Hercules events (the form of a Kafka dump).

    One writer per output: event UUIDs are uuid5 of capture, stream, direction, offset, protocol and
    kind plus a counter for consecutive messages sharing them, and an event without a time takes the
    previous one's, so a re-run gives identical bytes. Findings are not events and are skipped.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self._out = stream
        self._core = _core.HerculesWriter()

    def write(self, item: Any) -> None:
        """Core events (`Events`) or a Message; anything else is not exported."""
        if isinstance(item, Events):
            self._out.write(self._core.write(item))
        elif isinstance(item, Message):
            self._out.write(self._core.write_message(item))

    def write_batch(self, batch: Any) -> None:
        """The message rows of an Arrow batch in the record schema (docs/schema.md; a `ts_ns`
        column, when present, gives exact capture times)."""
        self._out.write(self._core.write_arrow(batch))

    def notes(self) -> list[tuple[str, bytes]]:
        """Mapping notes (renamed or shortened keys, cut objects) since the last call, each once per
        output: its sentence and its NDJSON finding line (with the position where it was first seen)."""
        return self._core.take_notes()

    def close(self) -> None:
        """Flush; the caller owns (and closes) the stream."""
        self._out.flush()
