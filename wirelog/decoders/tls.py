"""TLS: recognised (by the core's detection) and reported, never guessed through.

Log shippers very often speak TLS (Beats → Logstash, Log Courier's default transport), so a TLS
stream must say so instead of turning into decoder noise. We read the record layer and the
ClientHello/ServerHello (SNI, ALPN, versions) because that is what a user needs to know which
pipeline the stream belongs to; everything after the handshake is opaque.
"""

from __future__ import annotations

import struct

from wirelog.decoders.base import StreamContext
from wirelog.decoders.buffer import StreamBuffer
from wirelog.model import Chunk, Direction, Finding, Gap, Message, Record, Severity

CONTENT_TYPES = {20: "change_cipher_spec", 21: "alert", 22: "handshake", 23: "application_data"}
VERSIONS = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2", 0x0304: "TLS 1.3"}
MAX_RECORD = 16384 + 2048


def looks_like_record(data: bytes) -> bool:
    """True when `data` starts with a plausible TLS record header (5 bytes needed)."""
    if len(data) < 5:
        return False
    ctype, major, minor, length = data[0], data[1], data[2], struct.unpack_from(">H", data, 3)[0]
    return ctype in CONTENT_TYPES and major == 3 and minor <= 4 and 0 < length <= MAX_RECORD


def _hello_fields(body: bytes) -> dict[str, object]:
    """SNI, ALPN and supported_versions from a Client/ServerHello body (best effort, bounded)."""
    out: dict[str, object] = {}
    htype = body[0]
    p = 4 + 2 + 32  # handshake header, legacy_version, random
    try:
        sid_len = body[p]
        p += 1 + sid_len
        if htype == 1:
            (cs_len,) = struct.unpack_from(">H", body, p)
            p += 2 + cs_len
            p += 1 + body[p]  # compression methods
        else:
            out["cipher_suite"] = f"0x{struct.unpack_from('>H', body, p)[0]:04x}"
            p += 3
        (ext_total,) = struct.unpack_from(">H", body, p)
        p += 2
        end = min(len(body), p + ext_total)
        while p + 4 <= end:
            etype, elen = struct.unpack_from(">HH", body, p)
            ext = body[p + 4 : p + 4 + elen]
            p += 4 + elen
            if etype == 0 and len(ext) > 5:  # server_name: list len, type, name len, name
                (nlen,) = struct.unpack_from(">H", ext, 3)
                out["sni"] = ext[5 : 5 + nlen].decode("ascii", "replace")
            elif etype == 16 and len(ext) > 2:  # ALPN
                names, q = [], 2
                while q < len(ext):
                    n = ext[q]
                    names.append(ext[q + 1 : q + 1 + n].decode("ascii", "replace"))
                    q += 1 + n
                out["alpn"] = names
            elif etype == 43 and ext:  # supported_versions
                raw = ext[1:] if htype == 1 else ext
                vers = [struct.unpack_from(">H", raw, i)[0] for i in range(0, len(raw) - 1, 2)]
                out["supported_versions"] = [VERSIONS.get(v, f"0x{v:04x}") for v in vers]
    except (IndexError, struct.error):
        out["truncated"] = True
    return out


class TlsDecoder:
    """Reports the handshake messages and counts the rest; one finding says the stream is opaque."""

    def __init__(self, ctx: StreamContext) -> None:
        self._bufs = {Direction.C2S: StreamBuffer(), Direction.S2C: StreamBuffer()}
        self._records = {Direction.C2S: 0, Direction.S2C: 0}
        self._synced = {Direction.C2S: True, Direction.S2C: True}
        self._reported = False
        self._hello: Message | None = None  # the ClientHello, to judge the answer at close
        self._plain: dict[Direction, bytes] = {}  # first bytes of a direction that is not TLS

    def feed(self, chunk: Chunk) -> list[Record]:
        buf = self._bufs[chunk.direction]
        buf.append(chunk)
        out: list[Record] = []
        if not self._reported:
            self._reported = True
            out.append(
                Finding(
                    "tls.encrypted",
                    Severity.INFO,
                    "stream is TLS: only the handshake is visible, the application data is not decoded",
                    "tls",
                    chunk.direction,
                    chunk.offset,
                    chunk.frame,
                    chunk.ts,
                )
            )
        while self._synced[chunk.direction] and len(buf) >= 5:
            head = buf.peek(5)
            if not looks_like_record(head):
                self._plain.setdefault(chunk.direction, buf.peek(16))
                frame, ts = buf.origin()
                out.append(
                    Finding(
                        "tls.bad-record",
                        Severity.WARNING,
                        f"bytes {head.hex()} are not a TLS record header; rest of this direction skipped",
                        "tls",
                        chunk.direction,
                        buf.offset,
                        frame,
                        ts,
                    )
                )
                self._synced[chunk.direction] = False
                break
            length = struct.unpack_from(">H", head, 3)[0]
            if len(buf) < 5 + length:
                break
            frame, ts = buf.origin()
            offset = buf.offset
            body = buf.consume(5 + length)[5:]
            self._records[chunk.direction] += 1
            if head[0] == 22 and body and body[0] in (1, 2) and self._records[chunk.direction] <= 2:
                kind = "client_hello" if body[0] == 1 else "server_hello"
                version = VERSIONS.get(struct.unpack_from(">H", head, 1)[0])
                hello = Message(
                    "tls", kind, chunk.direction, offset, 5 + length, frame, ts, version, _hello_fields(body)
                )
                if kind == "client_hello" and self._hello is None:
                    self._hello = hello
                out.append(hello)
        if not self._synced[chunk.direction]:
            buf.skip(len(buf))
        return out

    def gap(self, gap: Gap) -> list[Record]:
        self._bufs[gap.direction].reset(gap.offset + gap.length)
        self._synced[gap.direction] = False  # record boundaries are lost for good
        return []

    def close(self) -> list[Record]:
        """A ClientHello the other side never answered in TLS: TLS on one side of the pipeline only."""
        hello = self._hello
        if hello is None or self._records[hello.direction.other]:
            return []
        plain = self._plain.get(hello.direction.other)
        reply = f"answered with plaintext bytes {plain.hex(' ')}" if plain else "sent nothing back"
        return [
            Finding(
                "tls.no-server-hello",
                Severity.WARNING,
                f"the client started TLS but the server {reply}: a TLS client talking to a plaintext "
                "server (e.g. Beats or Log Courier with TLS enabled on one side only)?",
                "tls",
                hello.direction,
                hello.offset,
                hello.frame,
                hello.ts,
                {"reply": plain.hex() if plain else None},
            )
        ]
