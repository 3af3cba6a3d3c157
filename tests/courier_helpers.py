"""Shared helpers for the Log Courier tests: genuine vectors, a conversation driver, pcap reading.

The hex vectors are the genuine loopback bytes from reference/courier.md §4 (Go 2.12.0 client,
Ruby gem 2.12.0 client and server, Go 2.0.6 legacy client); nonces are from those runs.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.core_decoders import CoreDecoder
from wirelog.engine.protocols import Limits, StreamContext
from wirelog.model import Chunk, Direction, Finding, Gap, Message, Record

C2S, S2C = Direction.C2S, Direction.S2C
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
PEERS = SHARED / "captures" / "peers"

# reference/courier.md §4, Go 2.12.0 client (LCOR) + Ruby 2.12.0 server
GO_HELO = bytes.fromhex("48454c4f0000002000000000000000020000000c000000004c434f52000000000000000000000000")
RUBY_VERS = bytes.fromhex("564552530000001400000000000000020000000c0000000052594c43")
GO_ACKN = bytes.fromhex("41434b4e00000014ca832a423b8577145701d5813760742700000002")
PING = bytes.fromhex("50494e4700000000")
PONG = bytes.fromhex("504f4e4700000000")
# Ruby 2.12.0 client + Ruby server: HELO = that VERS with type HELO
RUBY_HELO = bytes.fromhex("48454c4f") + RUBY_VERS[4:]
RUBY_JDAT = bytes.fromhex(
    "4a44415400000047b7b84ca035a49023405f0ced89ed4cb4789c63606050ae56ca4d2d2e4e4c4f55b252ca48cdc9c957"
    "3050d251cac82f2e010aa4a4e6e62bd532605566489c3223746500bdd12269"
)
RUBY_JDAT_EVENTS = [f'{{"message":"hello {n}","host":"demo"}}'.encode() for n in range(3)]
RUBY_ACKN = bytes.fromhex("41434b4e00000014b7b84ca035a49023405f0ced89ed4cb400000003")
# Go 2.12.0 client + an EVNT-advertising stub server (its VERS is synthetic; the EVNT is genuine)
STUB_VERS = bytes.fromhex("564552530000002001000000000000020000000c000000004c435652") + bytes(12)
GO_EVNT = bytes.fromhex(
    "45564e54ffffffff1f8050fb57c75276df775331e97c67b5785e94d03b8ac3301087719fe55fcb8b247bfd986a0fb1d5"
    "2e29041e3f0a59263324846072f590ce4d827d800f7e7c5996ad77fce8145934c405046f7d953b977bf76b4b2a3db9e2"
    "abb645eb6cfbedff60302651102e11069145c2c020a4996190fa5e5841d660093a8220da4d330c340c02fa3f19e86d79"
    "051dc784f508a0aa2bf71ea0d7b4019407008fbd079aa2f90418cfbc7dd0ec253c030000ffffe2ae6f0f"
)
UNKNOWN_REPLY = bytes.fromhex("3f3f3f3f00000000")
LEGACY_GO_PREFIX = bytes.fromhex("4a4441540000007e56847afe9799739b3d9677972a3b58ef785e")


@dataclass
class Conversation:
    """Drives one core Courier decoder with whole messages per side, tracking offsets and frame numbers."""

    ctx: StreamContext
    split: int = 0  # >0: feed every message in pieces of this many bytes (same frame)

    def __post_init__(self) -> None:
        self.decoder = CoreDecoder("courier", self.ctx)
        self.offsets = {C2S: 0, S2C: 0}
        self.frame = 0
        self.records: list[Record] = []

    def send(self, direction: Direction, data: bytes, ts: int | None = None) -> list[Record]:
        self.frame += 1
        ts = self.frame * 1_000_000_000 if ts is None else ts
        step = self.split or max(1, len(data))
        out: list[Record] = []
        for i in range(0, len(data), step):
            part = data[i : i + step]
            out += self.decoder.feed(
                Chunk(self.ctx.stream, direction, self.offsets[direction], part, self.frame, ts)
            )
            self.offsets[direction] += len(part)
        self.records += out
        return out

    def c(self, *msgs: bytes, ts: int | None = None) -> list[Record]:
        return [r for m in msgs for r in self.send(C2S, m, ts)]

    def s(self, *msgs: bytes, ts: int | None = None) -> list[Record]:
        return [r for m in msgs for r in self.send(S2C, m, ts)]

    def gap(self, direction: Direction, length: int) -> list[Record]:
        self.frame += 1
        out = self.decoder.gap(Gap(self.ctx.stream, direction, self.offsets[direction], length, self.frame))
        self.offsets[direction] += length
        self.records += out
        return out

    def close(self) -> list[Record]:
        """The decoder's final records (not added to `records`, so `records + close()` is everything)."""
        return self.decoder.close()


def split_events(block: bytes) -> list[bytes]:
    """The events of an inflated payload block: each behind its 4-byte big-endian length."""
    events, p = [], 0
    while p + 4 <= len(block):
        n = int.from_bytes(block[p : p + 4], "big")
        events.append(block[p + 4 : p + 4 + n])
        p += 4 + n
    return events


def context(stream: int = 0, shared: dict | None = None, **limits: int) -> StreamContext:
    ctx = StreamContext(stream, "127.0.0.1:40000", "127.0.0.1:12345", 40000, 12345, limits=Limits(**limits))
    if shared is not None:
        ctx.shared = shared
    return ctx


def conversation(stream: int = 0, shared: dict | None = None, split: int = 0, **limits: int) -> Conversation:
    return Conversation(context(stream, shared, **limits), split)


def messages(records: Iterable[Record], kind: str | None = None) -> list[Message]:
    return [r for r in records if isinstance(r, Message) and (kind is None or r.kind == kind)]


def findings(records: Iterable[Record], code: str | None = None) -> list[Finding]:
    return [r for r in records if isinstance(r, Finding) and (code is None or r.code == code)]


def codes(records: Iterable[Record]) -> list[str]:
    return [f.code for f in findings(records)]


@dataclass(frozen=True)
class Segment:
    direction: Direction
    data: bytes
    frame: int
    ts: int


def pcap_segments(path: Path) -> list[Segment]:
    """TCP payloads of a one-connection capture, with direction (the SYN's sender is the client)."""
    from scapy.layers.inet import IP, TCP
    from scapy.utils import rdpcap

    client: tuple[str, int] | None = None
    out: list[Segment] = []
    for frame, pkt in enumerate(rdpcap(str(path)), 1):
        if TCP not in pkt:
            continue
        ip, tcp = pkt[IP], pkt[TCP]
        if client is None and tcp.flags.S and not tcp.flags.A:
            client = (ip.src, tcp.sport)
        payload = bytes(tcp.payload)
        if payload:
            d = C2S if (ip.src, tcp.sport) == client else S2C
            out.append(Segment(d, payload, frame, int(pkt.time * 1_000_000_000)))
    return out


def decode_segments(segments: Sequence[Segment], ctx: StreamContext | None = None) -> list[Record]:
    """Feed the segments (in capture order) to a fresh decoder and close it."""
    ctx = ctx or context()
    dec = CoreDecoder("courier", ctx)
    offsets = {C2S: 0, S2C: 0}
    out: list[Record] = []
    for seg in segments:
        out += dec.feed(Chunk(ctx.stream, seg.direction, offsets[seg.direction], seg.data, seg.frame, seg.ts))
        offsets[seg.direction] += len(seg.data)
    return out + dec.close()


def tcp_capture(
    exchange: Sequence[tuple[Direction, bytes, float]],
    sport: int = 40000,
    dport: int = 12345,
    t0: float = 1_800_000_000.0,
    mss: int = 1400,
) -> list[tuple[int, bytes]]:
    """Ethernet/IPv4/TCP packets (ts_ns, frame) of one connection: handshake, `exchange`, FINs.

    `exchange` holds (direction, bytes, seconds after t0); bytes longer than `mss` go out in
    several segments. For pcap_helpers.write_pcap.
    """
    from pcap_helpers import tcp_frame

    client = {"src": "10.1.0.1", "dst": "10.1.0.2", "sport": sport, "dport": dport}
    server = {"src": "10.1.0.2", "dst": "10.1.0.1", "sport": dport, "dport": sport}
    seq = {C2S: 1000, S2C: 5000}
    ends = {C2S: client, S2C: server}
    ns = lambda s: int((t0 + s) * 1_000_000_000)  # noqa: E731
    out = [
        (ns(0), tcp_frame(seq[C2S] - 1, flags="S", **client)),
        (ns(0), tcp_frame(seq[S2C] - 1, flags="SA", ack=seq[C2S], **server)),
        (ns(0), tcp_frame(seq[C2S], flags="A", ack=seq[S2C], **client)),
    ]
    last = 0.0
    for d, data, t in exchange:
        for i in range(0, len(data), mss):
            part = data[i : i + mss]
            out.append((ns(t), tcp_frame(seq[d], part, "PA", ack=seq[d.other], **ends[d])))
            seq[d] += len(part)
        last = t
    out.append((ns(last + 0.5), tcp_frame(seq[C2S], flags="FA", ack=seq[S2C], **client)))
    out.append((ns(last + 0.5), tcp_frame(seq[S2C], flags="FA", ack=seq[C2S] + 1, **server)))
    out.append((ns(last + 0.5), tcp_frame(seq[C2S] + 1, flags="A", ack=seq[S2C] + 1, **client)))
    return out


def jdat_frame(nonce: bytes, events: list[bytes]) -> bytes:
    """A JDAT message: nonce, then the zlib-compressed events, each behind its 4-byte length."""
    payload = nonce + zlib.compress(b"".join(struct.pack(">I", len(e)) + e for e in events))
    return b"JDAT" + struct.pack(">I", len(payload)) + payload


def ackn_frame(nonce: bytes, n: int) -> bytes:
    """An ACKN message: the payload's nonce and how many of its events are acknowledged."""
    return b"ACKN" + struct.pack(">I", 20) + nonce + struct.pack(">I", n)
