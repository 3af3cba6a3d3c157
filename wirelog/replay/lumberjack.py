"""Lumberjack v2 as Filebeat (go-lumber's client) speaks it, sans-IO.

A window is `2W count`, then the events as `2J seq length json` with seq 1..count, inside one
`2C length zlib(...)` frame when compressing (go-lumber's layout: W outside C). The receiver answers
`2A value`: value = events of the oldest outstanding window acknowledged so far (go-lumber counts,
Logstash sends the highest seq: the same number with per-window seqs), possibly in several partial
ACKs; ACK 0 (or a repeat) while a window waits is a keep-alive. Windows are pipelined (Filebeat's
`pipelining`, default 2) and acknowledged in order. When the connection is lost, the unacknowledged
rest of every outstanding window is sent again, as new windows, on the next connection.
"""

from __future__ import annotations

import struct
import zlib
from collections import deque

from wirelog.replay.buffer import ReceiveBuffer
from wirelog.replay.events import Acked, Event, Item, KeepAlive, ProtocolError
from wirelog.replay.resend import Resending

_HEAD = struct.Struct(">II")
_U32 = struct.Struct(">I")
ACK_LENGTH = 6


class _Window:
    __slots__ = ("acked", "items")

    def __init__(self, items: list[Item]) -> None:
        self.items = items
        self.acked = 0


class LumberjackSender(Resending):
    """Windows of events out, ACKs in. `level`: zlib level, 0 for plain J frames (Filebeat's
    `compression_level`, default 3); `pipelining`: windows on the wire awaiting their ACK."""

    name = "lumberjack"

    def __init__(self, level: int = 3, pipelining: int = 2) -> None:
        super().__init__()
        self.level = level
        self.pipelining = max(1, pipelining)
        self._windows: deque[_Window] = deque()
        self._buf = ReceiveBuffer()

    # -- connection ------------------------------------------------------------------------------

    def connection_made(self) -> bytes:
        """A new connection: the bytes to write first (none: Lumberjack has no handshake)."""
        self._buf = ReceiveBuffer()
        return b""

    def connection_lost(self) -> None:
        """The connection ended: what its windows had not got acknowledged is sent again."""
        rests = [w.items[w.acked :] for w in self._windows if w.acked < len(w.items)]
        self._windows.clear()
        self._resend.extendleft(reversed(rests))

    @property
    def ready(self) -> bool:
        return True

    # -- sending ---------------------------------------------------------------------------------

    def can_send(self) -> bool:
        return len(self._windows) < self.pipelining

    def send(self, items: list[Item]) -> bytes:
        """One window of `items` (at least one)."""
        frames = b"".join(
            [b"2J" + _HEAD.pack(seq, len(payload)) + payload for seq, (_, payload) in enumerate(items, 1)]
        )
        head = b"2W" + _U32.pack(len(items))
        if self.level:
            body = zlib.compress(frames, self.level)
            out = head + b"2C" + _U32.pack(len(body)) + body
        else:
            out = head + frames
        self._windows.append(_Window(items))
        return out

    @property
    def outstanding(self) -> int:
        """Events on the wire not yet acknowledged."""
        return sum(len(w.items) - w.acked for w in self._windows)

    # -- receiving -------------------------------------------------------------------------------

    def receive(self, data: bytes) -> list[Event]:
        self._buf.feed(data)
        out: list[Event] = []
        while (frame := self._buf.take(ACK_LENGTH)) is not None:
            if frame[:2] != b"2A":
                raise ProtocolError(
                    f"the receiver sent {frame[:2]!r}, not a Lumberjack v2 ACK (is it a Lumberjack v2 server?)"
                )
            (value,) = _U32.unpack_from(frame, 2)
            out.append(self._ack(value))
        return out

    def _ack(self, value: int) -> Event:
        if not self._windows:
            if value == 0:
                return KeepAlive()
            raise ProtocolError(f"the receiver sent ACK {value} while no window waited for one")
        w = self._windows[0]
        if value == 0 or value == w.acked:
            return KeepAlive()
        if value > len(w.items):
            raise ProtocolError(f"the receiver sent ACK {value} for a window of {len(w.items)} events")
        if value < w.acked:
            raise ProtocolError(f"the receiver sent ACK {value} after ACK {w.acked} for the same window")
        keys = [key for key, _ in w.items[w.acked : value]]
        w.acked = value
        if value == len(w.items):
            self._windows.popleft()
        return Acked(keys)
