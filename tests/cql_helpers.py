"""Helpers for the CQL tests: run the decoder over scripted or captured byte streams."""

from __future__ import annotations

import io
import socket
import struct
import threading
from collections.abc import Iterable
from pathlib import Path

import lz4.block
from cassandra.connection import segment_codec_lz4, segment_codec_no_compression

from tests.core_decoders import CoreDecoder
from wirelog.engine.protocols import StreamContext
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
    dec = CoreDecoder("cql", context or ctx())
    offsets = {C2S: 0, S2C: 0}
    out: list[Record] = []
    for i, ev in enumerate(events, 1):
        d, data = ev[0], ev[1]
        frame, ts = (ev[2], ev[3]) if len(ev) == 4 else (i, i * 1000)
        out += dec.feed(Chunk(0, d, offsets[d], data, frame, ts))
        offsets[d] += len(data)
    return out + dec.close()


def run_with_gap(d: Direction, before: bytes, gap: int, after: bytes) -> list[Record]:
    dec = CoreDecoder("cql", ctx())
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


# ---- a scripted CQL server for the real driver (loopback tests) ----------------------------------


def _rows(values: list[bytes]) -> bytes:
    body = struct.pack(">iii", 2, 1, 1) + s_string("ks") + s_string("t") + s_string("v") + b"\x00\x03"
    body += struct.pack(">i", len(values)) + b"".join(struct.pack(">i", len(v)) + v for v in values)
    return body


class Responder:
    """Answers OPTIONS, STARTUP (READY or AUTHENTICATE), AUTH_RESPONSE, QUERY, PREPARE, EXECUTE; a QUERY
    whose text has "invalid" with an ERROR (0x2200), one with "hang" never (a server stuck on it)."""

    def __init__(self, auth: bool = False, big: int = 300_000) -> None:
        self.auth = auth
        self.big = big
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.crc_errors: list[str] = []
        self.requests: list[tuple[int, int, bytes]] = []  # (version, opcode, body)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.sock.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn: socket.socket) -> None:
        rf = conn.makefile("rb")
        codec = None
        pending = bytearray()
        try:
            while True:
                if codec is None:
                    head = rf.read(9)
                    if len(head) < 9:
                        return
                    body = rf.read(struct.unpack(">I", head[5:])[0])
                    envs = [head + body]
                else:
                    envs = self._read_frames(rf, codec, pending)
                    if envs is None:
                        return
                for envelope in envs:
                    out, switch = self._answer(envelope)
                    if out is None:
                        continue
                    if codec is None:
                        conn.sendall(out)
                    else:
                        conn.sendall(self._frame(codec, out))
                    if switch is not None:
                        codec = switch
        except (OSError, ValueError):
            return
        finally:
            conn.close()

    def _read_frames(self, rf, codec, pending: bytearray) -> list[bytes] | None:
        hl = codec.header_length_with_crc
        while True:
            raw = rf.read(hl)
            if len(raw) < hl:
                return None
            buf = io.BytesIO(raw)
            try:
                header = codec.decode_header(buf)
            except Exception as exc:  # the driver's CrcException
                self.crc_errors.append(str(exc))
                return None
            rest = rf.read(header.payload_length + 4)
            try:
                seg = codec.decode(io.BytesIO(rest), header)
            except Exception as exc:
                self.crc_errors.append(str(exc))
                return None
            pending += seg.payload
            envs = []
            while len(pending) >= 9:
                total = 9 + struct.unpack(">I", pending[5:9])[0]
                if len(pending) < total:
                    break
                envs.append(bytes(pending[:total]))
                del pending[:total]
            if envs:
                return envs

    @staticmethod
    def _frame(codec, envelope: bytes) -> bytes:
        out = io.BytesIO()
        if len(envelope) <= 131071:
            codec.encode(out, envelope)
        else:  # Cassandra's Flusher: 131060-byte chunks, all not self-contained
            for i in range(0, len(envelope), 131060):
                codec._encode_segment(out, envelope[i : i + 131060], False)
        return out.getvalue()

    def _answer(self, envelope: bytes) -> tuple[bytes | None, object]:
        version, flags, stream, opcode, _ = struct.unpack(">BBhBI", envelope[:9])
        body = envelope[9:]
        if flags & 0x01 and version < 5:  # v4 LZ4 body from the driver
            n = struct.unpack(">I", body[:4])[0]
            body = lz4.block.decompress(body[4:], uncompressed_size=n)
        self.requests.append((version, opcode, body))

        def reply(op: int, payload: bytes) -> bytes:
            return struct.pack(">BBhBI", version | 0x80, 0, stream, op, len(payload)) + payload

        switch = None
        if opcode == 0x05:
            sup = {
                "CQL_VERSION": ["3.4.7"],
                "COMPRESSION": ["lz4", "snappy"],
                "PROTOCOL_VERSIONS": ["3/v3", "4/v4", "5/v5"],
            }
            payload = struct.pack(">H", len(sup)) + b"".join(
                s_string(k) + struct.pack(">H", len(v)) + b"".join(s_string(x) for x in v)
                for k, v in sup.items()
            )
            return reply(0x06, payload), None
        if opcode == 0x01:
            wants_lz4 = b"lz4" in body
            if version >= 5:
                switch = segment_codec_lz4 if wants_lz4 else segment_codec_no_compression
            if self.auth:
                return reply(0x03, s_string("org.apache.cassandra.auth.PasswordAuthenticator")), switch
            return reply(0x02, b""), switch
        if opcode == 0x0F:
            return reply(0x10, b"\xff\xff\xff\xff"), None
        if opcode == 0x07:
            n = struct.unpack(">i", body[:4])[0]
            text = body[4 : 4 + n]
            if b"hang" in text:
                return None, None
            if b"invalid" in text:
                return reply(0x00, struct.pack(">i", 0x2200) + s_string("invalid query")), None
            if b"big" in text:
                return reply(0x08, _rows([b"x" * self.big])), None
            return reply(0x08, _rows([text])), None
        if opcode == 0x09:
            pid = b"\x01\x02\x03\x04"
            meta = (
                struct.pack(">iii", 1, 1, 1)
                + b"\x00\x00"
                + s_string("ks")
                + s_string("t")
                + s_string("k")
                + b"\x00\x09"
            )
            res = struct.pack(">ii", 1, 1) + s_string("ks") + s_string("t") + s_string("v") + b"\x00\x03"
            mid = struct.pack(">H", 2) + b"\xaa\xbb" if version >= 5 else b""
            return reply(0x08, struct.pack(">i", 4) + struct.pack(">H", 4) + pid + mid + meta + res), None
        if opcode == 0x0A:
            return reply(0x08, _rows([b"executed"])), None
        return reply(0x00, struct.pack(">i", 0x000A) + s_string("unsupported")), None
