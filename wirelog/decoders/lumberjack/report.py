"""Where a record sits in the stream, and findings stamped with that place."""

from __future__ import annotations

from typing import NamedTuple

from wirelog.model import Direction, Finding, Severity

PROTOCOL = "lumberjack"


class Pos(NamedTuple):
    """Stream position of a frame: its direction, first byte's offset, and that byte's packet."""

    direction: Direction
    offset: int
    frame: int | None
    ts: int | None


def finding(code: str, severity: Severity, text: str, pos: Pos, **fields: object) -> Finding:
    """A `lumberjack.<code>` finding at `pos`; every code is listed in docs/protocols/lumberjack.md."""
    return Finding(
        f"{PROTOCOL}.{code}", severity, text, PROTOCOL, pos.direction, pos.offset, pos.frame, pos.ts, fields
    )
