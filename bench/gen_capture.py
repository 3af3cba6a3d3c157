"""Generate a large synthetic TCP capture quickly (struct writer, no scapy).

Many concurrent connections with handshakes and FINs; the client sends a continuous byte stream cut
into 100–600 byte segments (independent of any framing), the server answers now and then; about 2 %
of adjacent segments are swapped (reordering). Deterministic for a given seed.
"""

from __future__ import annotations

import argparse
import random
import struct
import zlib

ETH = b"\x00\x00\x00\x00\x00\x02" + b"\x00\x00\x00\x00\x00\x01" + b"\x08\x00"
SYN, ACK, FIN, PSH = 0x02, 0x10, 0x01, 0x08


def _packet(
    src: int, dst: int, sport: int, dport: int, seq: int, ack: int, flags: int, payload: bytes
) -> bytes:
    tcp = struct.pack(
        ">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0
    )
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack(">BBHHHBBHII", 0x45, 0, total, 0, 0x4000, 64, 6, 0, src, dst)
    return ETH + ip + tcp + payload


def generate(path: str, packets: int, connections: int = 400, seed: int = 1) -> int:
    """Write about `packets` packets to `path`; returns the exact number written."""
    rng = random.Random(seed)
    blob = zlib.compress(rng.randbytes(1 << 16), 0) * 4  # cheap varied payload source
    server, sport = 0x0A010001, 9042
    per_conn = max(8, packets // connections)
    conns = []
    for i in range(connections):
        client = 0x0A020000 + i + 1
        conns.append([client, 20000 + i, rng.getrandbits(32), rng.getrandbits(32), 0, []])
    written = 0
    t = 1_700_000_000_000_000
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))

        def emit(frame: bytes) -> None:
            nonlocal written, t
            t += rng.randrange(1000, 20000)
            f.write(struct.pack("<IIII", t // 1_000_000_000, t % 1_000_000_000, len(frame), len(frame)))
            f.write(frame)
            written += 1

        active = list(range(connections))
        for c in conns:
            client, cport, cseq, sseq, _, _ = c
            emit(_packet(client, server, cport, sport, cseq, 0, SYN, b""))
            emit(_packet(server, client, sport, cport, sseq, cseq + 1, SYN | ACK, b""))
            emit(_packet(client, server, cport, sport, cseq + 1, sseq + 1, ACK, b""))
            c[2], c[3] = cseq + 1, sseq + 1
        while active:
            i = active[rng.randrange(len(active))]
            c = conns[i]
            client, cport, cseq, sseq, sent, held = c
            if sent >= per_conn - 5:
                for frame in held:
                    emit(frame)
                emit(_packet(client, server, cport, sport, cseq, sseq, FIN | ACK, b""))
                emit(_packet(server, client, sport, cport, sseq, cseq + 1, FIN | ACK, b""))
                emit(_packet(client, server, cport, sport, cseq + 1, sseq + 1, ACK, b""))
                active.remove(i)
                continue
            size = rng.randrange(100, 601)
            start = rng.randrange(0, len(blob) - size)
            if rng.random() < 0.8:
                frame = _packet(
                    client, server, cport, sport, cseq, sseq, PSH | ACK, blob[start : start + size]
                )
                c[2] = cseq + size
            else:
                frame = _packet(
                    server, client, sport, cport, sseq, cseq, PSH | ACK, blob[start : start + size]
                )
                c[3] = sseq + size
            c[4] = sent + 1
            if held:
                emit(frame)
                for h in held:
                    emit(h)
                held.clear()
            elif rng.random() < 0.02:
                held.append(frame)
            else:
                emit(frame)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("output")
    ap.add_argument("--packets", type=int, default=200_000)
    ap.add_argument("--connections", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    n = generate(args.output, args.packets, args.connections, args.seed)
    print(f"{args.output}: {n} packets")


if __name__ == "__main__":
    main()
