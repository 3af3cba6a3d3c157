"""Independent references for the reassembly differential tests (tests/test_reassembly_differential.py).

Nothing here uses wirelog code:
- `oracle(path)`: every TCP direction's bytes as the union of the captured payloads (scapy dissects the
  packets), first copy wins, holes skipped; sequence numbers relative to the SYN (or the first packet
  seen when there is none), modulo 2**32.
- `read_pcap` / `write_records` / `mutate` / `duplicate_after_large` / `shift_sequences`: classic pcap
  records rewritten with struct (drops, duplicates, packets moved later; sequence numbers moved close
  to the 32-bit wrap).
- `tshark_follow(path, streams)`: `tshark -q -z follow,tcp,raw,N` for each stream, parsed per direction.
- `loopback_exchange(server, ...)`: a real socket server and clients on 127.0.0.1 sending random bytes
  both ways at once; returns what each side sent.
"""

from __future__ import annotations

import bisect
import random
import re
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from scapy.config import conf
from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.utils import RawPcapReader

SEQ_MOD = 1 << 32
SYN = 0x02

# ---------------------------------------------------------------- the oracle


@dataclass
class Direction:
    """The union of one direction's captured payload bytes, keyed by offset from the ISN + 1."""

    base: int | None = None  # raw sequence number of offset 0
    syn: bool = False
    covered: list[list[int]] = field(default_factory=list)  # sorted, disjoint, non-touching [start, end)
    chunks: dict[int, bytes] = field(default_factory=dict)  # start of a written piece → its bytes
    starts: list[int] = field(default_factory=list)  # the chunks' starts, sorted
    conflicting: int = 0  # bytes captured again with other content (the later copy lost)
    _flat: bytearray | None = field(default=None, repr=False)  # all of it, holes zeroed (for at())

    def add(self, offset: int, data: bytes) -> None:
        """Place `data` at `offset` where nothing is yet (first copy wins)."""
        self._flat = None
        start, end = max(offset, 0), offset + len(data)  # bytes before offset 0 are not the stream's
        if start >= end:
            return
        self.conflicting += self._differing(offset, data, start, end)
        for lo, hi in self._uncovered(start, end):
            self.chunks[lo] = data[lo - offset : hi - offset]
            bisect.insort(self.starts, lo)
        self._cover(start, end)

    def _differing(self, offset: int, data: bytes, start: int, end: int) -> int:
        """How many bytes of data[start - offset : end - offset] differ from those already placed."""
        count = 0
        for first in self.starts[max(bisect.bisect_right(self.starts, start) - 1, 0) :]:
            if first >= end:
                break
            piece = self.chunks[first]
            lo, hi = max(first, start), min(first + len(piece), end)
            if lo >= hi:
                continue
            old, new = piece[lo - first : hi - first], data[lo - offset : hi - offset]
            if old != new:
                count += sum(a != b for a, b in zip(old, new, strict=True))
        return count

    def _uncovered(self, start: int, end: int) -> list[tuple[int, int]]:
        pieces, pos = [], start
        i = max(bisect.bisect_right(self.covered, [start, SEQ_MOD * 4]) - 1, 0)
        for lo, hi in self.covered[i:]:
            if lo >= end:
                break
            if hi <= pos:
                continue
            if lo > pos:
                pieces.append((pos, lo))
            pos = max(pos, hi)
        if pos < end:
            pieces.append((pos, end))
        return pieces

    def _cover(self, start: int, end: int) -> None:
        i = bisect.bisect_left(self.covered, [start, start])
        if i and self.covered[i - 1][1] >= start:
            i -= 1
        j = i
        while j < len(self.covered) and self.covered[j][0] <= end:
            start, end = min(start, self.covered[j][0]), max(end, self.covered[j][1])
            j += 1
        self.covered[i:j] = [[start, end]]

    def data(self) -> bytes:
        """The covered bytes in order, holes skipped."""
        return b"".join(self.chunks[k] for k in self.starts)

    def end(self) -> int:
        """Offset one past the last captured byte (0 when nothing was captured)."""
        return self.covered[-1][1] if self.covered else 0

    def at(self, offset: int, length: int) -> bytes | None:
        """The bytes at [offset, offset + length) when all of them were captured, else None."""
        i = bisect.bisect_right(self.covered, [offset, SEQ_MOD * 4]) - 1
        if i < 0 or self.covered[i][1] < offset + length:
            return None
        if self._flat is None:
            self._flat = bytearray(self.end())
            for start, piece in self.chunks.items():
                self._flat[start : start + len(piece)] = piece
        return bytes(self._flat[offset : offset + length])

    def holes(self) -> list[tuple[int, int]]:
        """(offset, length) of every hole before the last captured byte (a leading one included)."""
        out, pos = [], 0
        for lo, hi in self.covered:
            if lo > pos:
                out.append((pos, lo - pos))
            pos = hi
        return out


def endpoint(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


@dataclass
class Segment:
    src: str
    dst: str
    seq: int
    flags: int
    payload: bytes
    frame: int = 0  # 1-based packet number in the file
    ts: int = 0  # ns


def tcp_segments(path: Path) -> Iterable[Segment]:
    """Every TCP segment of a classic pcap file in file order, dissected by scapy (IP fragments are
    refused: the oracle does not defragment)."""
    with RawPcapReader(str(path)) as reader:
        link = conf.l2types[reader.linktype]
        frame = 0
        while True:
            try:  # iterating would cut packets at scapy's MTU (65535): loopback frames are longer
                data, meta = reader._read_packet(1 << 20)
            except EOFError:
                return
            frame += 1
            pkt = link(data)
            ip = pkt.getlayer(IP) or pkt.getlayer(IPv6)
            tcp = pkt.getlayer(TCP)
            if ip is None or tcp is None:
                continue
            if isinstance(ip, IP) and (ip.flags.MF or ip.frag):
                raise ValueError(f"frame {frame}: IP fragment (the oracle does not defragment)")
            raw = tcp.original  # the segment as captured (IP padding already cut off by scapy)
            yield Segment(
                endpoint(ip.src, tcp.sport),
                endpoint(ip.dst, tcp.dport),
                tcp.seq,
                int(tcp.flags),
                bytes(raw[tcp.dataofs * 4 :]),
                frame,
                meta.sec * 10**9 + meta.usec * (1 if reader.nano else 1000),
            )


REORDER_WINDOW = 2048  # wirelog's defaults: packets a late segment may trail in the file,
REORDER_NS = 10**9  # or capture time
MIN_REORDER_PACKETS = 32  # packets a hole waits whatever the capture time (tcp/reassembler.rs)


def oracle(path: Path, window: int = REORDER_WINDOW) -> dict[tuple[str, str], Direction]:
    """(source, destination) endpoints → that direction's captured bytes (see the module docstring).

    The base is the first SYN's sequence number + 1 wherever the SYN sits in the file; without a
    SYN, the earliest sequence number of the direction's data segments written within `window`
    packets after its first packet, and within a second of capture time once past the first
    MIN_REORDER_PACKETS (else that packet's; `window=0`: tshark's rule, the first
    packet's). Bytes before the base are not part of the stream. One connection per 4-tuple: captures that reuse ports are not for this oracle."""
    directions: dict[tuple[str, str], Direction] = {}
    segments = list(tcp_segments(path))
    first_packet: dict[tuple[str, str], int] = {}
    for i, seg in enumerate(segments):
        key = (seg.src, seg.dst)
        d = directions.setdefault(key, Direction())
        first_packet.setdefault(key, i)
        if seg.flags & SYN and not d.syn:
            d.syn, d.base = True, (seg.seq + 1) % SEQ_MOD
    for key, d in directions.items():
        if d.base is None:
            head = segments[first_packet[key]]
            starts = [
                s.seq
                for s in segments[first_packet[key] :]
                if (s.src, s.dst) == key
                and s.payload
                and s.frame - head.frame <= window
                and (s.frame - head.frame <= min(window, MIN_REORDER_PACKETS) or s.ts - head.ts <= REORDER_NS)
            ]
            first = head.seq
            d.base = min(starts, key=lambda seq: _signed(seq - first)) if starts else first
    for seg in segments:
        d = directions[(seg.src, seg.dst)]
        start = seg.seq + 1 if seg.flags & SYN else seg.seq
        if seg.payload:
            d.add(_signed(start - d.base), seg.payload)
    return directions


def _signed(delta: int) -> int:
    """A sequence-number difference as the nearest signed value (32-bit serial arithmetic)."""
    rel = delta % SEQ_MOD
    return rel - SEQ_MOD if rel >= SEQ_MOD // 2 else rel


# ---------------------------------------------------------------- pcap records rewritten with struct


@dataclass
class Pcap:
    header: bytes  # the 24-byte file header
    linktype: int
    records: list[tuple[bytes, bytes]]  # (16-byte record header, packet bytes)


def read_pcap(path: Path) -> Pcap:
    blob = path.read_bytes()
    magic = blob[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        order = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        order = ">"
    else:
        raise ValueError(f"{path}: not a classic pcap file")
    linktype = struct.unpack_from(order + "I", blob, 20)[0] & 0xFFFF
    records, pos = [], 24
    while pos + 16 <= len(blob):
        caplen = struct.unpack_from(order + "I", blob, pos + 8)[0]
        records.append((blob[pos : pos + 16], blob[pos + 16 : pos + 16 + caplen]))
        pos += 16 + caplen
    return Pcap(blob[:24], linktype, records)


def write_records(path: Path, pcap: Pcap, records: list[tuple[bytes, bytes]]) -> Path:
    path.write_bytes(pcap.header + b"".join(h + d for h, d in records))
    return path


def ip_offset(linktype: int, data: bytes) -> int | None:
    """Offset of the IP header in an Ethernet (+802.1Q) / DLT_NULL / raw IP packet, None if not IP."""
    if linktype == 1:
        pos, etype = 14, int.from_bytes(data[12:14], "big")
        while etype in (0x8100, 0x88A8):
            etype, pos = int.from_bytes(data[pos + 2 : pos + 4], "big"), pos + 4
        return pos if etype in (0x0800, 0x86DD) else None
    if linktype == 0:
        return 4
    if linktype in (101, 228, 229):
        return 0
    raise ValueError(f"link type {linktype} not handled by the rewriter")


def tcp_offset(linktype: int, data: bytes) -> tuple[int, int] | None:
    """(IP offset, TCP offset) of an unfragmented IPv4/IPv6 TCP packet without extension headers."""
    ip = ip_offset(linktype, data)
    if ip is None:
        return None
    if data[ip] >> 4 == 4 and data[ip + 9] == 6:
        return ip, ip + (data[ip] & 0x0F) * 4
    if data[ip] >> 4 == 6 and data[ip + 6] == 6:
        return ip, ip + 40
    return None


def payload_length(linktype: int, data: bytes) -> int:
    """TCP payload bytes in a packet (0 when it is not TCP)."""
    found = tcp_offset(linktype, data)
    if found is None:
        return 0
    ip, tcp = found
    if data[ip] >> 4 == 4:
        end = ip + int.from_bytes(data[ip + 2 : ip + 4], "big")
    else:
        end = ip + 40 + int.from_bytes(data[ip + 4 : ip + 6], "big")
    return max(0, min(end, len(data)) - tcp - (data[tcp + 12] >> 4) * 4)


@dataclass
class Mutation:
    records: list[tuple[bytes, bytes]]
    dropped: list[int]  # 1-based original frame numbers
    duplicated: list[int]
    moved: list[int]


def is_syn(linktype: int, data: bytes) -> bool:
    found = tcp_offset(linktype, data)
    return found is not None and bool(data[found[1] + 13] & SYN)


def mutate(pcap: Pcap, seed: int, drop: float = 0.01, dup: float = 0.01, move: float = 0.05) -> Mutation:
    """Drop a share of the data packets, duplicate a share of the packets (the copy right after the
    original) and move a share of the packets other than SYNs 1–3 places later; at least one of each
    when possible. Deterministic for a seed. (A SYN written after its direction's data is a known
    wirelog defect with its own test, test_syn_written_after_data; moving SYNs here would make the
    broad tests fail at random instead.)"""
    rng = random.Random(seed)
    n = len(pcap.records)
    data_frames = [i for i, (_, d) in enumerate(pcap.records) if payload_length(pcap.linktype, d)]

    def pick(pool: list[int], share: float) -> set[int]:
        k = min(len(pool), max(1, round(share * len(pool)))) if pool and share else 0
        return set(rng.sample(pool, k))

    dropped = pick(data_frames, drop)
    kept = [i for i in range(n) if i not in dropped]
    duplicated = pick(kept, dup)
    order = [j for i in kept for j in ([i, i] if i in duplicated else [i])]
    moved = set()
    movable = [p for p in range(len(order) - 1) if not is_syn(pcap.linktype, pcap.records[order[p]][1])]
    for pos in sorted(pick(movable, move), reverse=True):
        # from the end: a move does not shift the positions still to be moved
        moved.add(order[pos] + 1)
        order.insert(min(pos + rng.randint(1, 3), len(order) - 1), order.pop(pos))
    return Mutation(
        [pcap.records[i] for i in order],
        sorted(i + 1 for i in dropped),
        sorted(i + 1 for i in duplicated),
        sorted(moved),
    )


def flow(linktype: int, data: bytes) -> tuple[int, bytes, bytes] | None:
    """(TCP offset, source address + port, destination address + port) of a TCP packet."""
    found = tcp_offset(linktype, data)
    if found is None:
        return None
    ip, tcp = found
    addr = data[ip + 12 : ip + 20] if data[ip] >> 4 == 4 else data[ip + 8 : ip + 40]
    half = len(addr) // 2
    return tcp, addr[:half] + data[tcp : tcp + 2], addr[half:] + data[tcp + 2 : tcp + 4]


def duplicate_after_large(pcap: Pcap, large: int) -> tuple[list[tuple[bytes, bytes]], int]:
    """Every data packet whose direction's previous data packet carried more than `large` bytes,
    followed by an exact copy of itself; returns the records and how many were copied."""
    previous: dict[bytes, int] = {}
    out, copied = [], 0
    for record in pcap.records:
        out.append(record)
        length, where = payload_length(pcap.linktype, record[1]), flow(pcap.linktype, record[1])
        if where is None or not length:
            continue
        if previous.get(where[1], 0) > large:
            out.append(record)
            copied += 1
        previous[where[1]] = length
    return out, copied


def shift_sequences(pcap: Pcap, below_wrap: int) -> list[tuple[bytes, bytes]]:
    """Every TCP sequence/ack number moved so that each direction's first sequence number sits
    `below_wrap` bytes under 2**32: the stream wraps after that many bytes. The TCP checksum is not
    updated (as in loopback captures, where it is not final either)."""
    first: dict[bytes, int] = {}  # source address + port → its first sequence number
    parsed = []
    for hdr, data in pcap.records:
        where = flow(pcap.linktype, data)
        if where is not None:
            first.setdefault(where[1], struct.unpack_from(">I", data, where[0] + 4)[0])
        parsed.append((hdr, data, where))
    out = []
    for hdr, data, where in parsed:
        if where is None:
            out.append((hdr, data))
            continue
        tcp, src, dst = where
        seq, ack = struct.unpack_from(">II", data, tcp + 4)
        buf = bytearray(data)
        struct.pack_into(">I", buf, tcp + 4, (seq - first[src] - below_wrap) % SEQ_MOD)
        if data[tcp + 13] & 0x10 and dst in first:  # ACK flag: the peer's numbers moved too
            struct.pack_into(">I", buf, tcp + 8, (ack - first[dst] - below_wrap) % SEQ_MOD)
        out.append((hdr, bytes(buf)))
    return out


# ---------------------------------------------------------------- tshark


MISSING = re.compile(rb"^\[(\d+) bytes missing in capture file\]\x00?$")


@dataclass
class Followed:
    """One tshark stream's raw Follow output: chunks per node, `missing` markers as ints."""

    node0: str
    node1: str
    chunks: dict[int, list[bytes | int]]  # node (0/1) → data chunks and missing-byte counts

    def data(self, node: int) -> bytes:
        return b"".join(c for c in self.chunks[node] if isinstance(c, bytes))

    def layout(self, node: int) -> list[tuple[int, bytes | int]]:
        """(stream offset, data chunk or missing-byte count) in output order."""
        out, pos = [], 0
        for chunk in self.chunks[node]:
            out.append((pos, chunk))
            pos += chunk if isinstance(chunk, int) else len(chunk)
        return out


def tshark_follow(path: Path, streams: int) -> list[Followed]:
    """`tshark -q -z follow,tcp,raw,N` for N < `streams` in one run (a stream tshark does not have
    comes back with empty nodes and is left out). A hex line indented by a tab is node 1's; a line
    that decodes to "[N bytes missing in capture file]" is tshark's marker for N missing bytes."""
    args = [a for n in range(streams) for a in ("-z", f"follow,tcp,raw,{n}")]
    out = subprocess.run(
        ["tshark", "-r", str(path), "-q", *args], capture_output=True, text=True, check=True
    ).stdout
    found: dict[int, Followed] = {}
    current: Followed | None = None
    for line in out.splitlines():
        if line.startswith("Filter: tcp.stream eq "):
            current = found.setdefault(int(line.split()[-1]), Followed("", "", {0: [], 1: []}))
        elif current is None or line.startswith(("=", "Follow:")) or not line.strip():
            continue
        elif line.startswith("Node 0: "):
            current.node0 = line[8:]
        elif line.startswith("Node 1: "):
            current.node1 = line[8:]
        else:
            chunk = bytes.fromhex(line.strip())
            marker = MISSING.match(chunk)
            current.chunks[1 if line.startswith("\t") else 0].append(
                int(marker.group(1)) if marker else chunk
            )
    return [found[n] for n in sorted(found) if found[n].node0 != ":0"]


# ---------------------------------------------------------------- loopback traffic


PACE = 16 << 20  # bytes per second and direction: tcpdump's kernel buffer overflows at full loopback speed


def _send_all(sock: socket.socket, data: bytes, rng: random.Random, pace: float) -> None:
    pos, start = 0, time.monotonic()
    while pos < len(data):
        step = rng.choice((1, 100, 536, 1448, 4096, 16384, 65536))
        sock.sendall(data[pos : pos + step])
        pos += step
        time.sleep(max(0.0, start + pos / pace - time.monotonic()))
    sock.shutdown(socket.SHUT_WR)


def _recv_all(sock: socket.socket) -> bytes:
    parts = []
    while chunk := sock.recv(1 << 20):
        parts.append(chunk)
    return b"".join(parts)


def _duplex(sock: socket.socket, data: bytes, seed: int, pace: float) -> bytes:
    """Send `data` while receiving until the peer's EOF; returns what was received."""
    sender = threading.Thread(target=_send_all, args=(sock, data, random.Random(seed), pace))
    sender.start()
    received = _recv_all(sock)
    sender.join()
    return received


@dataclass
class Exchange:
    client: str  # client endpoint ip:port
    server: str
    c2s: bytes
    s2c: bytes


def listening_socket() -> socket.socket:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    return server


def loopback_exchange(
    server: socket.socket, sizes: list[tuple[int, int]], seed: int, pace: float = PACE
) -> list[Exchange]:
    """One connection per (c2s bytes, s2c bytes) to the listening `server`, one after the other,
    random bytes flowing both ways at once in sends of random sizes (TCP_NODELAY, so small sends
    make small segments). Checks that each side received exactly what the other sent, and returns
    what was sent."""
    rng = random.Random(seed)
    done = []
    for n, (up, down) in enumerate(sizes):
        c2s, s2c = rng.randbytes(up), rng.randbytes(down)
        received: dict[str, bytes] = {}

        def serve(s2c: bytes = s2c, received: dict[str, bytes] = received, n: int = n) -> None:
            conn, _ = server.accept()
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                received["server"] = _duplex(conn, s2c, seed + 2 * n + 1, pace)

        thread = threading.Thread(target=serve)
        thread.start()
        with socket.socket() as client:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.connect(server.getsockname())
            got = _duplex(client, c2s, seed + 2 * n, pace)
            local = client.getsockname()
        thread.join()
        if got != s2c or received["server"] != c2s:
            raise RuntimeError(f"connection {n}: the peers did not receive what was sent")
        done.append(Exchange(endpoint(*local), endpoint(*server.getsockname()), c2s, s2c))
    return done
