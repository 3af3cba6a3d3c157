"""Log Courier's protocol as its Go shipper speaks it (lc-lib/transports/tcp/courier), sans-IO.

Every message is `TYPE(4) length(u32) body`. The shipper opens with `HELO` (flags, version,
client name); the receiver answers `VERS` (flag bit 0: it reads `EVNT`) or, if it predates the
handshake, `????`. A payload is `JDAT length nonce(16) zlib(len(u32) event ...)` or, to a receiver
that reads them, `EVNT ffffffff nonce zlib-stream` (zlib level 3, as the Go shipper writes it).
The receiver acknowledges with `ACKN nonce(16) sequence(u32)`: the events of that payload
accepted so far, possibly several times per payload (partial ACKNs). A connection idle with no
payload pending is checked with `PING`, which the receiver answers `PONG` (lc-lib/publisher:
`timeoutKeepalive` after 10 s without traffic; no `PONG` within the network timeout fails it).
A payload not fully acknowledged when the connection is lost is sent again on the next one with
the same nonce, its unacknowledged tail only (renumbered from 1), as the Go shipper does.
"""

from __future__ import annotations

import os
import struct
import zlib

from wirelog.replay.buffer import ReceiveBuffer
from wirelog.replay.events import Acked, Event, Item, KeepAlive, Pong, ProtocolError, Ready
from wirelog.replay.resend import Resending

_HEADER = struct.Struct(">4sI")
_U32 = struct.Struct(">I")
HANDSHAKE_LENGTH = 32  # HELO and VERS bodies
ZLIB_LEVEL = 3
# HELO: flags (none), version 2.10.0, a client name the receiver shows as "Unknown v2.10.0"
HELO = b"HELO" + _U32.pack(HANDSHAKE_LENGTH) + bytes(4) + struct.pack(">III", 2, 10, 0) + bytes(16)
PING = b"PING" + _U32.pack(0)
MAX_BODY = 1 << 20  # no reply the receiver sends is larger (ACKN: 20 bytes, VERS: 32)


class _Payload:
    __slots__ = ("acked", "items", "nonce")

    def __init__(self, nonce: bytes, items: list[Item]) -> None:
        self.nonce = nonce
        self.items = items
        self.acked = 0


class CourierSender(Resending):
    """Payloads of events out, ACKNs in. `pipelining`: payloads awaiting their ACKN (the Go
    shipper's `max pending payloads`, default 10)."""

    name = "courier"

    def __init__(self, pipelining: int = 10, nonce=os.urandom) -> None:
        super().__init__()
        self.pipelining = max(1, pipelining)
        self._nonce = nonce
        self._payloads: dict[bytes, _Payload] = {}
        self._buf = ReceiveBuffer()
        self._ready = False
        self.pinging = False  # a PING waits for its PONG
        self.evnt = False
        self.receiver = ""

    def connection_made(self) -> bytes:
        self._buf = ReceiveBuffer()
        self._ready = False
        self.pinging = False
        return HELO

    def connection_lost(self) -> None:
        rest = [p for p in self._payloads.values() if p.acked < len(p.items)]
        self._payloads.clear()
        for p in reversed(rest):
            p.items, p.acked = p.items[p.acked :], 0
            self._resend.appendleft(p)

    @property
    def ready(self) -> bool:
        return self._ready

    def can_send(self) -> bool:
        return self._ready and len(self._payloads) < self.pipelining

    def _again(self, p: _Payload) -> tuple[bytes, int]:  # the same nonce, its unacknowledged tail
        return self._write(p), len(p.items)

    def send(self, items: list[Item]) -> bytes:
        return self._write(_Payload(self._nonce(16), items))

    def ping(self) -> bytes:
        self.pinging = True
        return PING

    @property
    def outstanding(self) -> int:
        return sum(len(p.items) - p.acked for p in self._payloads.values())

    def _write(self, p: _Payload) -> bytes:
        self._payloads[p.nonce] = p
        body = zlib.compress(b"".join([_U32.pack(len(doc)) + doc for _, doc in p.items]), ZLIB_LEVEL)
        if self.evnt:
            return b"EVNT\xff\xff\xff\xff" + p.nonce + body
        return b"JDAT" + _U32.pack(16 + len(body)) + p.nonce + body

    def receive(self, data: bytes) -> list[Event]:
        self._buf.feed(data)
        out: list[Event] = []
        while (head := self._buf.peek(8)) is not None:
            kind, length = _HEADER.unpack(head)
            if length > MAX_BODY:
                raise ProtocolError(f"the receiver sent a {kind!r} message of {length} bytes")
            message = self._buf.take(8 + length)
            if message is None:
                break
            out.append(self._message(kind, message[8:]))
        return out

    def _message(self, kind: bytes, body: bytes) -> Event:
        if kind == b"VERS" and not self._ready:
            self._ready = True
            self.evnt = bool(body[:1]) and bool(body[0] & 1)
            major, minor, patch = struct.unpack(">III", body[4:16].ljust(12, b"\0"))
            self.receiver = f"{body[16:20].strip(bytes(1)).decode(errors='replace') or 'Log Courier'} v{major}.{minor}.{patch}"
            return Ready(self.receiver)
        if kind == b"????" and not self._ready:  # a receiver without the handshake: JDAT only
            self._ready, self.evnt, self.receiver = True, False, "a receiver without the handshake"
            return Ready(self.receiver)
        if kind == b"ACKN" and len(body) == 20:
            return self._ackn(body[:16], _U32.unpack_from(body, 16)[0])
        if kind == b"PONG":  # (one after payloads were sent again is the Go shipper's too: ignored)
            self.pinging = False
            return Pong()
        raise ProtocolError(f"the receiver sent an unexpected {kind.decode(errors='replace')!r} message")

    def _ackn(self, nonce: bytes, sequence: int) -> Event:
        p = self._payloads.get(nonce)
        if p is None:
            raise ProtocolError(
                f"the receiver acknowledged nonce {nonce.hex()}, which no payload waiting has"
            )
        if sequence > len(p.items):
            raise ProtocolError(f"the receiver acknowledged {sequence} events of a payload of {len(p.items)}")
        if sequence <= p.acked:
            return KeepAlive()
        keys = [key for key, _ in p.items[p.acked : sequence]]
        p.acked = sequence
        if sequence == len(p.items):
            del self._payloads[nonce]
        return Acked(keys)
