"""Building wirelog records from decoded Hercules events and codec problems.

An event record's `event` is the payload as a JSON-compatible dict; for events wirelog exported, it
is the original document again and `fields.source` holds the record's origin (docs/hercules.md).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from wirelog.decoders.hercules.codec import Decoded, Problem
from wirelog.decoders.hercules.render import document, exported_by_wirelog, restore, uuid_text
from wirelog.decoders.hercules.types import TICKS_PER_SECOND
from wirelog.model import Direction, Finding, Message

PROTOCOL = "hercules"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso_time(ticks: int) -> str | None:
    """100-ns Unix ticks as ISO 8601 UTC with 7 fractional digits, None outside years 1..9999."""
    seconds, frac = divmod(ticks, TICKS_PER_SECOND)
    second = _second(seconds)
    return None if second is None else f"{second}.{frac:07d}Z"


@lru_cache(maxsize=4096)
def _second(seconds: int) -> str | None:
    try:
        return f"{_EPOCH + timedelta(seconds=seconds):%Y-%m-%dT%H:%M:%S}"
    except OverflowError:
        return None


def event_message(
    dec: Decoded,
    direction: Direction,
    offset: int,
    origin: tuple[int | None, int | None],
    extra: dict[str, Any],
    acked: bool | None = None,
) -> Message:
    """The `event` record of one decoded event; `offset` is where it starts in the stream."""
    ev = dec.event
    fields: dict[str, Any] = {
        "timestamp": ev.timestamp,
        "time": iso_time(ev.timestamp),
        "uuid": uuid_text(ev.uuid),
        "tag_count": len(ev.tags),
        **extra,
    }
    mapped = exported_by_wirelog(ev.tags)
    if mapped is None:
        doc: Any = document(ev.tags)
    else:
        tags = dict(ev.tags)
        source = restore(mapped)
        source["fields"] = restore(tags["fields"]) if "fields" in tags else {}
        fields["source"] = source
        doc = restore(tags["event"]) if "event" in tags else None
    frame, ts = origin
    return Message(
        PROTOCOL, "event", direction, offset, dec.length, frame, ts, str(ev.version), fields, doc, acked
    )


class Reporter:
    """Turns codec problems into findings; a tag name that breaks the convention is reported once
    per capture (it would otherwise repeat in every event)."""

    MAX_NAMES = 10_000

    def __init__(self, shared: dict[str, Any]) -> None:
        self._names: set[str] = shared.setdefault("hercules.tag-names", set())

    def finding(
        self,
        p: Problem,
        direction: Direction | None,
        offset: int | None,
        origin: tuple[int | None, int | None],
        extra: dict[str, Any] | None = None,
    ) -> Finding | None:
        """`p` as a finding at stream `offset`, or None for a name already reported."""
        if p.code == "hercules.tag-name":
            key = p.fields["key"]
            if key in self._names:
                return None
            if len(self._names) < self.MAX_NAMES:
                self._names.add(key)
        frame, ts = origin
        fields = {**p.fields, **(extra or {})}
        return Finding(p.code, p.severity, p.message, PROTOCOL, direction, offset, frame, ts, fields)
