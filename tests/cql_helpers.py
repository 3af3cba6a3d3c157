"""Helpers for the CQL tests: run the decoder over scripted or captured byte streams."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from wirelog.decoders.base import StreamContext
from wirelog.decoders.cql import CqlDecoder
from wirelog.model import Chunk, Direction, Finding, Gap, Message, Record

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CAPTURES = SHARED / "captures" / "public"
C2S, S2C = Direction.C2S, Direction.S2C

Event = tuple[Direction, bytes] | tuple[Direction, bytes, int | None, int | None]


def ctx(**kw: object) -> StreamContext:
    base: dict[str, object] = dict(
        stream=0, client="10.0.0.1", server="10.0.0.2", client_port=40000, server_port=9042
    )
    base.update(kw)
    return StreamContext(**base)  # type: ignore[arg-type]


def run(events: Iterable[Event], context: StreamContext | None = None) -> list[Record]:
    """Feed (direction, bytes[, frame, ts]) events in order, then close; all records."""
    dec = CqlDecoder(context or ctx())
    offsets = {C2S: 0, S2C: 0}
    out: list[Record] = []
    for i, ev in enumerate(events, 1):
        d, data = ev[0], ev[1]
        frame, ts = (ev[2], ev[3]) if len(ev) == 4 else (i, i * 1000)
        out += dec.feed(Chunk(0, d, offsets[d], data, frame, ts))
        offsets[d] += len(data)
    return out + dec.close()


def run_with_gap(d: Direction, before: bytes, gap: int, after: bytes) -> list[Record]:
    dec = CqlDecoder(ctx())
    out = dec.feed(Chunk(0, d, 0, before, 1, 1000))
    out += dec.gap(Gap(0, d, len(before), gap, 2, 2000))
    out += dec.feed(Chunk(0, d, len(before) + gap, after, 2, 2000))
    return out + dec.close()


def messages(records: list[Record], kind: str | None = None) -> list[Message]:
    return [r for r in records if isinstance(r, Message) and (kind is None or r.kind == kind)]


def findings(records: list[Record]) -> list[Finding]:
    return [r for r in records if isinstance(r, Finding)]


def codes(records: list[Record]) -> list[str]:
    return [f.code for f in findings(records)]


def pcap_connections(path: Path, server_port: int = 9042) -> list[list[Event]]:
    """TCP payloads of each connection on `server_port`, in capture order, with 1-based frame numbers
    and ns timestamps. Only for the public captures, which have no loss, reordering or retransmission."""
    from scapy.layers.inet import TCP
    from scapy.utils import rdpcap

    conns: dict[tuple, list[Event]] = {}
    for i, pkt in enumerate(rdpcap(str(path)), 1):
        if TCP not in pkt:
            continue
        tcp = pkt[TCP]
        payload = bytes(tcp.payload)
        if server_port not in (tcp.sport, tcp.dport):
            continue
        d = C2S if tcp.dport == server_port else S2C
        key = tcp.sport if d is C2S else tcp.dport
        conns.setdefault(key, [])
        if payload:
            conns[key].append((d, payload, i, int(pkt.time * 1_000_000) * 1000))
    return [conns[k] for k in sorted(conns)]


def driver_envelope(msg: object, stream: int, version: int, compressor: object = None) -> bytes:
    """An envelope encoded by the real cassandra-driver (requests only)."""
    from cassandra.protocol import ProtocolHandler

    return ProtocolHandler.encode_message(msg, stream, version, compressor, False)


def driver_frames(envelope: bytes, lz4: bool) -> bytes:
    """The driver's own v5 segment encoding of an envelope (CRC or LZ4 frames)."""
    import io

    from cassandra.connection import segment_codec_lz4, segment_codec_no_compression

    out = io.BytesIO()
    (segment_codec_lz4 if lz4 else segment_codec_no_compression).encode(out, envelope)
    return out.getvalue()


def s_string(s: str) -> bytes:
    b = s.encode()
    return len(b).to_bytes(2, "big") + b


def s_bytes(b: bytes | None) -> bytes:
    return b"\xff\xff\xff\xff" if b is None else len(b).to_bytes(4, "big") + b


def s_int(n: int) -> bytes:
    return n.to_bytes(4, "big", signed=True)
