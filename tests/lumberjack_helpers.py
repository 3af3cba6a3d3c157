"""Lumberjack test helpers: a frame encoder, feeding helpers, and a loopback receiver.

The encoder is the project's own (written from reference/lumberjack.md §1, independent of the
decoder); the receiver reads windows the way Logstash / go-lumber do and ACKs in their styles, so real
clients (pylogbeat, npm lumberjack-client/-protocol) can talk to it over loopback.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import socket
import ssl
import struct
import subprocess
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.core_decoders import CoreDecoder
from wirelog.engine.protocols import Limits, StreamContext
from wirelog.model import Chunk, Direction, Finding, Gap, Message, Record

C2S, S2C = Direction.C2S, Direction.S2C
PEERS = Path(__file__).resolve().parent / "peers" / "lumberjack"

# encoder -------------------------------------------------------------------------------------------


def window(count: int, v: str = "2") -> bytes:
    return v.encode() + b"W" + struct.pack(">I", count)


def jframe(seq: int, doc: bytes | dict, v: str = "2") -> bytes:
    body = doc if isinstance(doc, bytes) else json.dumps(doc, separators=(",", ":")).encode()
    return v.encode() + b"J" + struct.pack(">II", seq, len(body)) + body


def dframe(seq: int, pairs: dict[str, str] | Sequence[tuple[bytes, bytes]], v: str = "1") -> bytes:
    items = [(k.encode(), val.encode()) for k, val in pairs.items()] if isinstance(pairs, dict) else pairs
    out = [v.encode() + b"D" + struct.pack(">II", seq, len(items))]
    for k, val in items:
        out.append(struct.pack(">I", len(k)) + k + struct.pack(">I", len(val)) + val)
    return b"".join(out)


def cframe(inner: bytes, level: int = 6, v: str = "2") -> bytes:
    body = zlib.compress(inner, level)
    return v.encode() + b"C" + struct.pack(">I", len(body)) + body


def ack(value: int, v: str = "2") -> bytes:
    return v.encode() + b"A" + struct.pack(">I", value)


# feeding -------------------------------------------------------------------------------------------


def decoder(stream: int = 0, limits: Limits | None = None, shared: dict | None = None) -> CoreDecoder:
    """The core's Lumberjack decoder for one stream; decoders given the same `shared` share a capture."""
    ctx = StreamContext(stream, "127.0.0.1:40000", "127.0.0.1:5044", 40000, 5044)
    if limits is not None:
        ctx.limits = limits
    if shared is not None:
        ctx.shared = shared
    return CoreDecoder("lumberjack", ctx)


def run(
    turns: Iterable[tuple[Direction, bytes]],
    cuts: Iterable[int] | None = None,
    dec: CoreDecoder | None = None,
    close: bool = True,
) -> list[Record]:
    """Feed (direction, bytes) turns in order; each turn is split at `cuts` (positions within it).

    Every chunk is its own packet: frame numbers count chunks from 1, ts = frame × 1 ms.
    """
    dec = dec or decoder()
    offsets = {C2S: 0, S2C: 0}
    frame = 0
    out: list[Record] = []
    cut_list = sorted(set(cuts or ()))
    for direction, data in turns:
        bounds = [0, *[c for c in cut_list if 0 < c < len(data)], len(data)]
        for a, b in itertools.pairwise(bounds):
            frame += 1
            out += dec.feed(Chunk(0, direction, offsets[direction], data[a:b], frame, frame * 1_000_000))
            offsets[direction] += b - a
    if close:
        out += dec.close()
    return out


def feed_chunks(
    chunks: Iterable[tuple[Direction, bytes] | Gap], dec: CoreDecoder | None = None
) -> list[Record]:
    """Feed pre-cut chunks (and Gaps) in order, then close."""
    dec = dec or decoder()
    offsets = {C2S: 0, S2C: 0}
    out: list[Record] = []
    for frame, item in enumerate(chunks, 1):
        if isinstance(item, Gap):
            out += dec.gap(item)
            offsets[item.direction] = item.offset + item.length
            continue
        direction, data = item
        out += dec.feed(Chunk(0, direction, offsets[direction], data, frame, frame * 1_000_000))
        offsets[direction] += len(data)
    return out + dec.close()


def messages(records: Iterable[Record], kind: str | None = None) -> list[Message]:
    return [r for r in records if isinstance(r, Message) and (kind is None or r.kind == kind)]


def findings(records: Iterable[Record], code: str | None = None) -> list[Finding]:
    full = code if code is None or "." in code else f"lumberjack.{code}"
    return [r for r in records if isinstance(r, Finding) and (full is None or r.code == full)]


def codes(records: Iterable[Record]) -> set[str]:
    return {r.code.removeprefix("lumberjack.") for r in records if isinstance(r, Finding)}


def canonical(records: Iterable[Record]) -> list[tuple]:
    """Comparable view of records (ignores frame/ts, which depend on chunking)."""
    out = []
    for r in records:
        if isinstance(r, Message):
            fields = {k: v for k, v in r.fields.items() if k != "ack_frame"}
            out.append(
                (
                    "m",
                    r.kind,
                    r.direction,
                    r.offset,
                    r.length,
                    r.version,
                    repr(fields),
                    repr(r.event),
                    r.acked,
                )
            )
        else:
            out.append(("f", r.code, r.severity, r.direction, r.offset, r.message))
    return out


# loopback receiver --------------------------------------------------------------------------------


@dataclass
class Received:
    """What the receiver got on one connection: every event (seq, raw payload), the ACKs it sent, and
    the plaintext byte stream in both directions (after TLS), in order, as (direction, bytes) turns."""

    events: list[tuple[int, bytes]] = field(default_factory=list)
    windows: list[int] = field(default_factory=list)
    acks: list[int] = field(default_factory=list)
    turns: list[tuple[Direction, bytes]] = field(default_factory=list)


class LumberjackServer:
    """A loopback Lumberjack receiver for tests, with the ACK styles of real servers.

    ack: "highest-seq" (Logstash), "count" (go-lumber), or "none" (never ACKs, like a stalled
    pipeline: keep-alives only, then it closes after `close_after` seconds of silence). `keepalive`: seconds between ACK 0s sent while a batch
    waits `ack_delay` seconds (go-lumber/Logstash keep-alive). `partial_every`: also ACK every k
    events (old Ruby Logstash, or a sliding-window v1 client). `tls`: an SSLContext to wrap with.
    `port` 0 picks a free port.
    """

    def __init__(
        self,
        ack: str = "highest-seq",
        keepalive: float | None = None,
        ack_delay: float = 0.0,
        partial_every: int | None = None,
        close_after: float = 1.0,
        tls: ssl.SSLContext | None = None,
        port: int = 0,
    ) -> None:
        self.ack, self.keepalive, self.ack_delay = ack, keepalive, ack_delay
        self.partial_every, self.close_after, self.tls = partial_every, close_after, tls
        self.connections: list[Received] = []
        self._sock = socket.create_server(("127.0.0.1", port))
        self.port = self._sock.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._stop = False

    def __enter__(self) -> LumberjackServer:
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._sock.close()
        for t in self._threads[1:]:
            t.join(timeout=5)

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            rec = Received()
            self.connections.append(rec)
            t = threading.Thread(target=self._serve, args=(conn, rec), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket, rec: Received) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            conn.settimeout(self.close_after)
            reader = _Reader(conn, rec.turns)
            while True:
                head = reader.exact(2)
                if head is None:
                    return
                self._batch(conn, reader, head, rec)
        except (OSError, ssl.SSLError):
            return
        finally:
            conn.close()

    def _batch(self, conn: socket.socket, reader: _Reader, head: bytes, rec: Received) -> None:
        version = head[:1]
        if head[1:] != b"W":
            raise OSError(f"expected a window frame, got {head!r}")
        count = struct.unpack(">I", reader.need(4))[0]
        rec.windows.append(count)
        batch: list[tuple[int, bytes]] = []
        while len(batch) < count:
            for ev in _read_events(reader, reader.need(2)):
                batch.append(ev)
                rec.events.append(ev)
                if self.partial_every and len(batch) % self.partial_every == 0 and len(batch) < count:
                    self._send(conn, version, ev[0], rec)
        deadline = time.monotonic() + self.ack_delay
        while self.keepalive and time.monotonic() + self.keepalive < deadline:
            time.sleep(self.keepalive)
            self._send(conn, b"2", 0, rec)
        time.sleep(max(0.0, deadline - time.monotonic()))
        if self.ack == "none":
            return
        value = count if self.ack == "count" else max(seq for seq, _ in batch) if batch else 0
        self._send(conn, version, value, rec)

    @staticmethod
    def _send(conn: socket.socket, version: bytes, value: int, rec: Received) -> None:
        frame = version + b"A" + struct.pack(">I", value)
        conn.sendall(frame)
        rec.turns.append((S2C, frame))
        rec.acks.append(value)


class _Reader:
    """Exact reads from a socket (None on a clean close before the first byte)."""

    def __init__(self, conn: socket.socket, turns: list[tuple[Direction, bytes]]) -> None:
        self._conn, self._turns = conn, turns

    def exact(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            part = self._conn.recv(n - len(data))
            self._turns.append((C2S, part))
            if not part:
                if data:
                    raise OSError("connection closed inside a frame")
                return None
            data += part
        return data

    def need(self, n: int) -> bytes:
        data = self.exact(n)
        if data is None:
            raise OSError("connection closed inside a frame")
        return data


class _BytesReader:
    def __init__(self, data: bytes) -> None:
        self._data, self._pos = data, 0

    def exact(self, n: int) -> bytes | None:
        if self._pos >= len(self._data):
            return None
        return self.need(n)

    def need(self, n: int) -> bytes:
        out = self._data[self._pos : self._pos + n]
        if len(out) < n:
            raise OSError("inflated content ends inside a frame")
        self._pos += n
        return out


def _read_events(reader: _Reader | _BytesReader, head: bytes) -> list[tuple[int, bytes]]:
    kind = head[1:]
    if kind == b"J":
        seq, size = struct.unpack(">II", reader.need(8))
        return [(seq, reader.need(size))]
    if kind == b"D":
        seq, pairs = struct.unpack(">II", reader.need(8))
        raw = b""
        for _ in range(pairs * 2):
            size = reader.need(4)
            raw += size + reader.need(struct.unpack(">I", size)[0])
        return [(seq, raw)]
    if kind == b"C":
        size = struct.unpack(">I", reader.need(4))[0]
        inner = _BytesReader(zlib.decompress(reader.need(size)))
        out: list[tuple[int, bytes]] = []
        while (h := inner.exact(2)) is not None:
            out += _read_events(inner, h)
        return out
    raise OSError(f"unexpected frame {head!r}")


# crafted captures --------------------------------------------------------------------------------


def write_capture(
    path: Path, turns: Iterable[tuple[Direction, bytes]], port: int = 5044, drop: int | None = None
) -> Path:
    """A pcap of one TCP connection (handshake, `turns` as segments, FIN) built with scapy.

    `drop`: index of a turn whose segment is left out of the file, making a capture gap.
    """
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap

    cli, srv = ("10.1.0.5", 41000), ("10.1.0.9", port)
    seq = {C2S: 1000, S2C: 5000}
    ends = {C2S: (cli, srv), S2C: (srv, cli)}

    def pkt(d: Direction, flags: str, payload: bytes = b"") -> object:
        (sa, sp), (da, dp) = ends[d]
        p = Ether() / IP(src=sa, dst=da) / TCP(sport=sp, dport=dp, flags=flags, seq=seq[d], ack=seq[d.other])
        return p / payload if payload else p

    packets = [pkt(C2S, "S")]
    seq[C2S] += 1
    packets.append(pkt(S2C, "SA"))
    seq[S2C] += 1
    packets.append(pkt(C2S, "A"))
    for i, (d, data) in enumerate(turns):
        if i != drop:
            packets.append(pkt(d, "PA", data))
        seq[d] += len(data)
    packets += [pkt(C2S, "FA"), pkt(S2C, "FA")]
    for i, p in enumerate(packets):
        p.time = 1_795_240_000 + i / 100
    wrpcap(str(path), packets)
    return path


# peers ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def capture(path: Path, port: int) -> Iterator[None]:
    """tcpdump on lo around the block, then wait until the file stops growing (a loaded machine
    can leave the last packets in the kernel buffer when tcpdump is interrupted too early).
    Skips the test when tcpdump cannot capture here (not installed, no privileges)."""
    from capture_tools import tcpdump  # imports the CLI: only the capture tests need it

    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(tcpdump(path, port))
        except (RuntimeError, OSError) as exc:
            pytest.skip(f"cannot capture on lo: {exc}")
        yield
        size, stable_since, deadline = -1, time.monotonic(), time.monotonic() + 5
        while time.monotonic() < deadline and time.monotonic() - stable_since < 0.6:
            time.sleep(0.1)
            now = path.stat().st_size if path.exists() else 0
            if now != size:
                size, stable_since = now, time.monotonic()


def node_peer(package: str) -> Path | None:
    """The peers directory when node and the npm `package` are installed there, else None."""
    if shutil.which("node") is None or not (PEERS / "node_modules" / package).is_dir():
        return None
    return PEERS


def run_node(script: str, *args: object, timeout: float = 30) -> str:
    proc = subprocess.run(
        ["node", str(PEERS / script), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=PEERS,
    )
    if proc.returncode:
        raise RuntimeError(f"node {script} failed: {proc.stderr.strip()}")
    return proc.stdout


def self_signed(tmp: Path) -> tuple[Path, Path]:
    """(cert, key) for localhost, made with the openssl CLI."""
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key
