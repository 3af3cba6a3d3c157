"""Generate large synthetic TCP captures quickly (struct writer, no scapy).

Many concurrent connections with handshakes and FINs; each side's byte stream is cut into 100–600
byte segments independent of any framing, and about 2 % of adjacent segments are swapped
(reordering). The bytes are either opaque (`payload="opaque"`, for reassembly-only runs) or real
protocol traffic: Lumberjack v2 (Beats windows of JSON events, compressed, acknowledged) or CQL v4
(QUERY → RESULT). Deterministic for a given seed.
"""

from __future__ import annotations

import argparse
import random
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import BinaryIO

ETH = b"\x00\x00\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x01" + b"\x08\x00"
SYN, ACK, FIN, PSH = 0x02, 0x10, 0x01, 0x08
PORTS = {"opaque": 9042, "lumberjack": 5044, "cql": 9042}

Messages = Iterator[tuple[bool, bytes]]  # (client→server?, bytes) in conversation order


def _packet(
    src: int, dst: int, sport: int, dport: int, seq: int, ack: int, flags: int, payload: bytes
) -> bytes:
    tcp = struct.pack(
        ">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 0x50, flags, 65535, 0, 0
    )
    ip = struct.pack(">BBHHHBBHII", 0x45, 0, 40 + len(payload), 0, 0x4000, 64, 6, 0, src, dst)
    return ETH + ip + tcp + payload


class PcapWriter:
    """An Ethernet pcap (ns timestamps) written frame by frame, the clock advancing `step_ns` a frame."""

    def __init__(self, f: BinaryIO, step_ns: int = 5000, t0: int = 1_700_000_000_000_000_000) -> None:
        self._f = f
        self.step_ns = step_ns
        self.t = t0
        self.frames = 0
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))

    def emit(self, frame: bytes, step_ns: int | None = None) -> None:
        self.t += self.step_ns if step_ns is None else step_ns
        self._f.write(
            struct.pack("<IIII", self.t // 1_000_000_000, self.t % 1_000_000_000, len(frame), len(frame))
        )
        self._f.write(frame)
        self.frames += 1


class Connection:
    """One TCP connection in a PcapWriter: handshake, then whole messages cut into MSS segments."""

    def __init__(
        self, writer: PcapWriter, client: int, cport: int, server: int, sport: int, mss: int = 1448
    ) -> None:
        self._w = writer
        self._ends = ((client, cport), (server, sport))
        self._seq = [1000, 5000]
        self._mss = mss

    def handshake(self) -> None:
        (c, cp), (s, sp) = self._ends
        self._w.emit(_packet(c, s, cp, sp, self._seq[0] - 1, 0, SYN, b""))
        self._w.emit(_packet(s, c, sp, cp, self._seq[1] - 1, self._seq[0], SYN | ACK, b""))

    def send(self, to_server: bool, data: bytes) -> None:
        d = 0 if to_server else 1
        (src, sp), (dst, dp) = self._ends if to_server else self._ends[::-1]
        for at in range(0, len(data), self._mss):
            part = data[at : at + self._mss]
            self._w.emit(_packet(src, dst, sp, dp, self._seq[d], self._seq[1 - d], ACK | PSH, part))
            self._seq[d] += len(part)


def opaque(rng: random.Random, blob: bytes) -> Messages:
    while True:
        size = rng.randrange(100, 601)
        start = rng.randrange(0, len(blob) - size)
        yield rng.random() < 0.8, blob[start : start + size]


def lumberjack(rng: random.Random, _blob: bytes, acked: bool = True) -> Messages:
    """Beats-like: window of N JSON events (sequence restarting at 1), zlib-compressed, then the ACK
    (none when not `acked`: a stalled server)."""
    n = 0
    while True:
        count = rng.randrange(20, 60)
        frames = []
        for seq in range(1, count + 1):
            n += 1
            # json.dumps(separators=(",", ":")) of the event, written out: nothing in it needs an
            # escape, and the encoder was two thirds of a big capture's generation time
            body = (
                f'{{"@timestamp":"2026-11-21T05:{n // 60 % 60:02d}:{n % 60:02d}.{n % 1000:03d}Z",'
                f'"message":"GET /api/items/{rng.randrange(10**6)} HTTP/1.1 200 {rng.randrange(10**5)}",'
                f'"host":{{"name":"web-{rng.randrange(40)}"}},'
                f'"log":{{"offset":{n * 120},"file":{{"path":"/var/log/nginx/access.log"}}}},'
                f'"fields":{{"env":"prod","dc":"{rng.choice(("eu1", "us2"))}"}}}}'
            ).encode()
            frames.append(b"2J" + struct.pack(">II", seq, len(body)) + body)
        packed = zlib.compress(b"".join(frames), 3)
        yield True, b"2W" + struct.pack(">I", count) + b"2C" + struct.pack(">I", len(packed)) + packed
        if acked:
            yield False, b"2A" + struct.pack(">I", count)


def cql(rng: random.Random, _blob: bytes) -> Messages:
    """CQL v4 QUERY → RESULT Rows (one text column) with stream ids in flight."""
    stream = 0
    while True:
        stream = (stream + 1) % 32768
        query = f"SELECT * FROM logs.events WHERE id = {rng.randrange(10**9)}".encode()
        body = struct.pack(">I", len(query)) + query + struct.pack(">HB", 1, 0)
        yield True, struct.pack(">BBhBI", 4, 0, stream, 7, len(body)) + body
        rows = rng.randrange(1, 8)
        meta = struct.pack(">iii", 2, 1, 1) + b"\x00\x04logs\x00\x06events" + b"\x00\x04line\x00\x0d"
        cells = b"".join(struct.pack(">i", 40) + rng.randbytes(20).hex().encode() for _ in range(rows))
        result = meta + struct.pack(">i", rows) + cells
        yield False, struct.pack(">BBhBI", 0x84, 0, stream, 8, len(result)) + result


GENERATORS: dict[str, Callable[[random.Random, bytes], Messages]] = {
    "opaque": opaque,
    "lumberjack": lumberjack,
    "cql": cql,
}


def generate(
    path: str,
    packets: int,
    connections: int = 400,
    seed: int = 1,
    payload: str = "opaque",
    ack_every: int = 1,
    close: bool = True,
) -> int:
    """Write about `packets` packets to `path`; returns the exact number written. Lumberjack only:
    the server acknowledges the windows of every `ack_every`-th connection only (0: none, a stalled
    server); `close=False` leaves every connection open (no FINs)."""
    rng = random.Random(seed)
    blob = zlib.compress(rng.randbytes(1 << 16), 0) * 4
    server, sport = 0x0A010001, PORTS[payload]
    per_conn = max(8, packets // connections)
    with open(path, "wb") as f:
        writer = PcapWriter(f)

        def emit(frame: bytes) -> None:
            writer.emit(frame, rng.randrange(1000, 20000))

        conns = []
        for i in range(connections):
            client, cport = 0x0A020000 + i + 1, 20000 + i
            cseq, sseq = rng.getrandbits(32), rng.getrandbits(32)
            emit(_packet(client, server, cport, sport, cseq, 0, SYN, b""))
            emit(_packet(server, client, sport, cport, sseq, cseq + 1, SYN | ACK, b""))
            emit(_packet(client, server, cport, sport, cseq + 1, sseq + 1, ACK, b""))
            conns.append({"c": client, "p": cport, "cs": cseq + 1, "ss": sseq + 1, "n": 0, "held": [],
                          "msgs": messages(payload, random.Random(seed * 7919 + i), blob, acked := ack_every > 0 and i % ack_every == 0),
                          "answered": acked or payload != "lumberjack", "buf": b"", "dir": False})  # fmt: skip
        active = list(range(connections))
        while active:
            i = active[rng.randrange(len(active))]
            c = conns[i]
            # a connection ends after a whole exchange (after the client's message when unanswered)
            if c["n"] >= per_conn - 5 and not c["buf"] and not (c["dir"] and c["answered"]):
                for frame in c["held"]:
                    emit(frame)
                active.remove(i)
                if not close:
                    continue
                emit(_packet(c["c"], server, c["p"], sport, c["cs"], c["ss"], FIN | ACK, b""))
                emit(_packet(server, c["c"], sport, c["p"], c["ss"], c["cs"] + 1, FIN | ACK, b""))
                emit(_packet(c["c"], server, c["p"], sport, c["cs"] + 1, c["ss"] + 1, ACK, b""))
                continue
            if not c["buf"]:
                c["dir"], c["buf"] = next(c["msgs"])
            size = rng.randrange(100, 601)
            piece, c["buf"] = c["buf"][:size], c["buf"][size:]
            if c["dir"]:
                frame = _packet(c["c"], server, c["p"], sport, c["cs"], c["ss"], PSH | ACK, piece)
                c["cs"] += len(piece)
            else:
                frame = _packet(server, c["c"], sport, c["p"], c["ss"], c["cs"], PSH | ACK, piece)
                c["ss"] += len(piece)
            c["n"] += 1
            if c["held"]:
                emit(frame)
                for h in c["held"]:
                    emit(h)
                c["held"].clear()
            elif c["buf"] and rng.random() < 0.02:  # swap with the next segment of the same message
                c["held"].append(frame)
            else:
                emit(frame)
    return writer.frames


def messages(payload: str, rng: random.Random, blob: bytes, acked: bool) -> Messages:
    """A connection's conversation (an unacknowledged one for Lumberjack when not `acked`)."""
    if payload == "lumberjack":
        return lumberjack(rng, blob, acked)
    return GENERATORS[payload](rng, blob)


def short(path: str, connections: int, concurrency: int = 64, seed: int = 3) -> int:
    """`connections` short connections (handshake, a 200-byte request, a 300-byte reply, FINs), at
    most `concurrency` open at once, interleaved: the shape of a busy RPC or HTTP/1.0 service."""
    rng = random.Random(seed)
    server, sport = 0x0A010001, 9042
    with open(path, "wb") as f:
        writer = PcapWriter(f)
        steps: dict[int, list[bytes]] = {}
        started = 0
        while started < connections or steps:
            while started < connections and len(steps) < concurrency:
                c, cp = 0x0A020000 + (started >> 14) + 1, 1024 + (started & 0x3FFF)
                cs, ss = rng.getrandbits(32), rng.getrandbits(32)
                req, rep = rng.randbytes(200), rng.randbytes(300)
                steps[started] = [
                    _packet(c, server, cp, sport, cs, 0, SYN, b""),
                    _packet(server, c, sport, cp, ss, cs + 1, SYN | ACK, b""),
                    _packet(c, server, cp, sport, cs + 1, ss + 1, ACK | PSH, req),
                    _packet(server, c, sport, cp, ss + 1, cs + 201, ACK | PSH, rep),
                    _packet(c, server, cp, sport, cs + 201, ss + 301, FIN | ACK, b""),
                    _packet(server, c, sport, cp, ss + 301, cs + 202, FIN | ACK, b""),
                    _packet(c, server, cp, sport, cs + 202, ss + 302, ACK, b""),
                ][::-1]
                started += 1
            key = rng.choice(list(steps))
            writer.emit(steps[key].pop(), rng.randrange(1000, 20000))
            if not steps[key]:
                del steps[key]
    return writer.frames


def reorder(src: str, dst: str, fraction: float = 0.05, most: int = 3, seed: int = 1) -> None:
    """Copy the classic pcap `src` to `dst` with about `fraction` of its packets each written 1 to
    `most` places later (as multi-queue NICs and merged captures do), in one pass."""
    rng = random.Random(seed)
    with open(src, "rb") as f, open(dst, "wb") as out:
        out.write(f.read(24))
        held: list[list] = []  # [places still to wait, record]
        while header := f.read(16):
            record = header + f.read(struct.unpack_from("<I", header, 8)[0])
            if rng.random() < fraction:
                held.append([rng.randint(1, most), record])
                continue
            out.write(record)
            for h in held:
                h[0] -= 1
            out.write(b"".join(h[1] for h in held if h[0] <= 0))
            held = [h for h in held if h[0] > 0]
        out.write(b"".join(h[1] for h in held))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("output")
    ap.add_argument("--packets", type=int, default=200_000)
    ap.add_argument("--connections", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--payload", choices=sorted(GENERATORS), default="opaque")
    args = ap.parse_args()
    n = generate(args.output, args.packets, args.connections, args.seed, args.payload)
    print(f"{args.output}: {n} packets")


if __name__ == "__main__":
    main()
