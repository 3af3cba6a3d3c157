"""The first frame of a stream whose capture began inside a frame.

Detection judges a stream by its first bytes. When the capture starts mid-stream (a rotated file, a
late tcpdump), those bytes are often the inside of a frame — the middle of a compressed Lumberjack
window — which no detector can place, and on a port no protocol owns the stream would stay unknown.
For such streams the engine keeps searching the client's bytes, up to HUNT_LIMIT, with every
protocol's `find_start` signature, and starts that protocol's decoder at the frame found.
"""

from __future__ import annotations

from wirelog.decoders.base import ProtocolSpec
from wirelog.model import Chunk, Direction, Gap

HUNT_LIMIT = 8 * 1024 * 1024  # bytes (both directions) looked at before the stream is declared unknown
CARRY = 64  # bytes of the previous chunk searched again: a signature may straddle two packets


class FrameHunt:
    """Searches successive client→server chunks of one stream for a protocol's frame start."""

    __slots__ = ("specs", "first", "searched", "recent")

    def __init__(self, specs: tuple[ProtocolSpec, ...]) -> None:
        self.specs = specs
        self.first: Chunk | None = None  # the first client bytes seen (quoted if nothing is found)
        self.searched = 0
        # the last chunks searched, at least CARRY bytes when there are, contiguous with what comes next
        self.recent: list[Chunk] = []

    @property
    def exhausted(self) -> bool:
        return self.searched >= HUNT_LIMIT

    def skip(self, item: Chunk | Gap) -> None:
        """Server bytes (not searched, but they count toward the limit) or a gap (client or server)."""
        if isinstance(item, Gap):
            if item.direction is Direction.C2S:
                self.recent = []
        else:
            self.searched += len(item.data)

    def feed(self, chunk: Chunk) -> tuple[ProtocolSpec, list[Chunk]] | None:
        """(protocol, the client bytes from its first frame on) once a start is found, else None."""
        if self.first is None:
            self.first = chunk
        recent = self.recent
        if recent and recent[-1].offset + len(recent[-1].data) != chunk.offset:
            recent.clear()
        recent.append(chunk)
        data = b"".join(c.data for c in recent) if len(recent) > 1 else chunk.data
        found: tuple[ProtocolSpec, int] | None = None
        for spec in self.specs:
            at = spec.find_start(data)
            if at is not None and (found is None or at < found[1]):
                found = (spec, at)
        if found is not None:
            spec, at = found
            for i, c in enumerate(recent):  # the chunk holding the start, then the rest
                if at < len(c.data):
                    return spec, [_from(c, at), *recent[i + 1 :]]
                at -= len(c.data)
        self.searched += len(chunk.data)
        while len(data) - len(recent[0].data) >= CARRY:  # keep CARRY bytes to search again
            data = data[len(recent.pop(0).data) :]
        return None


def _from(chunk: Chunk, at: int) -> Chunk:
    """The part of `chunk` from byte `at` on, with its stream offset."""
    return Chunk(chunk.stream, chunk.direction, chunk.offset + at, chunk.data[at:], chunk.frame, chunk.ts)
