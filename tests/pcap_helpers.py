"""Crafting captures for tests: scapy builds the packets, small struct writers lay out the files.

- `tcp_frame(...)`: the bytes of one TCP packet over any supported link layer (scapy-built).
- `write_pcap(path, packets, linktype=...)`: classic pcap, either byte order, µs or ns timestamps.
- `write_pcapng(path, packets, interfaces=...)` and the block builders (`shb`, `idb`, `epb`, `spb`,
  `opb`) for several sections/interfaces/resolutions.
- `fast_pcap(path, n)`: many Ethernet/IPv4/TCP packets quickly (struct only) for throughput runs.

A packet given to a writer is `bytes` or a scapy packet (timestamped T0_NS + 1 ms per position),
`(ts_ns, bytes)` or `(ts_ns, bytes, wirelen)` (wirelen > len(bytes) simulates snaplen truncation).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from scapy.layers.inet import IP, TCP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import CookedLinux, CookedLinuxV2, Dot1AD, Dot1Q, Ether
from scapy.packet import Packet, Raw

from wirelog.engine.capture import iter_segments
from wirelog.model import CaptureInfo, Finding

# LINKTYPE_* numbers per link name understood by tcp_frame().
LINKTYPES = {
    "ether": 1,
    "vlan": 1,
    "qinq": 1,
    "null": 0,
    "null-be": 0,
    "loop": 108,
    "raw": 101,
    "ipv4": 228,
    "ipv6": 229,
    "sll": 113,
    "sll2": 276,
}

T0_NS = 1_700_000_000_123_456_789  # a timestamp with all nine fractional digits set


def ip_layer(src: str = "10.0.0.1", dst: str = "10.0.0.2") -> Packet:
    """IPv4 or IPv6 header depending on the address syntax."""
    return IPv6(src=src, dst=dst) if ":" in src else IP(src=src, dst=dst)


def tcp_packet(
    seq: int,
    payload: bytes = b"",
    flags: str = "PA",
    *,
    src: str = "10.0.0.1",
    dst: str = "10.0.0.2",
    sport: int = 40000,
    dport: int = 5044,
    ack: int = 0,
) -> Packet:
    """An IP/TCP packet (no link layer) built by scapy."""
    # add_payload, not `/`: `/` copies both sides, which was most of the time of building a packet
    tcp = TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags)
    if payload:
        tcp.add_payload(Raw(payload))
    pkt = ip_layer(src, dst)
    pkt.add_payload(tcp)
    return pkt


def link_frame(ip_packet: Packet | bytes, link: str = "ether") -> bytes:
    """Wrap an IP packet (scapy or bytes) in the link layer named by `link` (see LINKTYPES)."""
    raw = bytes(ip_packet)
    return link_header(link, raw[0] >> 4 == 6) + raw


@functools.cache
def link_header(link: str, v6: bool) -> bytes:
    """The bytes `link` puts before an IPv4 or IPv6 packet. None of these headers holds a length or
    a checksum of what follows, so scapy builds each once (it took two thirds of a long
    conversation's generation when built around every packet)."""
    etype = 0x86DD if v6 else 0x0800
    if link == "ether":
        return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=etype))
    if link == "vlan":
        return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / Dot1Q(vlan=300, type=etype))
    if link == "qinq":
        outer = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / Dot1AD(vlan=10)
        return bytes(outer / Dot1Q(vlan=300, type=etype))
    if link in ("null", "null-be"):
        order = "<" if link == "null" else ">"
        return struct.pack(order + "I", 30 if v6 else 2)
    if link == "loop":
        return struct.pack(">I", 30 if v6 else 2)
    if link in ("raw", "ipv4", "ipv6"):
        return b""
    if link == "sll":
        return bytes(
            CookedLinux(pkttype=0, lladdrtype=1, lladdrlen=6, src=b"\x02" * 6 + b"\0\0", proto=etype)
        )
    if link == "sll2":
        return bytes(CookedLinuxV2(proto=etype, ifindex=1, lladdrtype=1, pkttype=0, lladdrlen=6))
    raise ValueError(f"unknown link {link!r}")


def tcp_frame(seq: int, payload: bytes = b"", flags: str = "PA", *, link: str = "ether", **kw: Any) -> bytes:
    """One TCP packet over `link`, as bytes; keyword arguments go to `tcp_packet`."""
    return link_frame(tcp_packet(seq, payload, flags, **kw), link)


def _records(packets: Iterable[Any]) -> Iterable[tuple[int, bytes, int]]:
    """Normalise writer input to (ts_ns, data, wirelen), defaulting to 1 ms apart from T0_NS."""
    for i, item in enumerate(packets):
        ts = T0_NS + i * 1_000_000
        if isinstance(item, Packet | bytes | bytearray):
            data = bytes(item)
            yield ts, data, len(data)
        else:
            ts, data, *rest = item
            yield ts, bytes(data), rest[0] if rest else len(data)


def pcap_bytes(
    packets: Iterable[Any],
    linktype: int = 1,
    *,
    big_endian: bool = False,
    nano: bool = False,
    snaplen: int = 262144,
) -> bytes:
    """A classic pcap file (version 2.4) holding `packets`."""
    order = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype)]
    div = 1 if nano else 1000
    for ts, data, wirelen in _records(packets):
        sec, frac = divmod(ts, 1_000_000_000)
        out.append(struct.pack(order + "IIII", sec, frac // div, len(data), wirelen))
        out.append(data)
    return b"".join(out)


def write_pcap(path: str | Path, packets: Iterable[Any], linktype: int = 1, **kw: Any) -> Path:
    """Write `pcap_bytes(packets, linktype, **kw)` to `path`; returns the path."""
    path = Path(path)
    path.write_bytes(pcap_bytes(packets, linktype, **kw))
    return path


# ---------------------------------------------------------------- pcapng


def _block(btype: int, body: bytes, order: str) -> bytes:
    body += b"\0" * (-len(body) % 4)
    length = len(body) + 12
    return struct.pack(order + "II", btype, length) + body + struct.pack(order + "I", length)


def _option(code: int, value: bytes, order: str) -> bytes:
    return struct.pack(order + "HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def shb(order: str = "<") -> bytes:
    """Section Header Block (version 1.0, unknown section length)."""
    return _block(0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1), order)


def dsb(keylog: bytes, order: str = "<") -> bytes:
    """Decryption Secrets Block holding an NSS key log (what `editcap --inject-secrets tls,FILE` writes)."""
    return _block(0x0000000A, struct.pack(order + "II", 0x544C534B, len(keylog)) + keylog, order)


def idb(
    linktype: int, *, tsresol: int | None = None, tsoffset: int = 0, snaplen: int = 0, order: str = "<"
) -> bytes:
    """Interface Description Block; `tsresol` is the raw if_tsresol byte, `tsoffset` whole seconds."""
    opts = b""
    if tsresol is not None:
        opts += _option(9, bytes([tsresol]), order)
    if tsoffset:
        opts += _option(14, struct.pack(order + "q", tsoffset), order)
    if opts:
        opts += struct.pack(order + "HH", 0, 0)
    return _block(1, struct.pack(order + "HHI", linktype, 0, snaplen) + opts, order)


def ts_units(ts_ns: int, tsresol: int | None = None, tsoffset: int = 0) -> int:
    """Timestamp units for an interface (inverse of the reader's conversion, exact for the tests)."""
    ts_ns -= tsoffset * 1_000_000_000
    code = 6 if tsresol is None else tsresol
    n = code & 0x7F
    if code & 0x80:
        return (ts_ns << n) // 1_000_000_000
    return ts_ns * 10**n // 1_000_000_000


def epb(iface: int, units: int, data: bytes, wirelen: int | None = None, order: str = "<") -> bytes:
    """Enhanced Packet Block."""
    head = struct.pack(
        order + "IIIII", iface, units >> 32, units & 0xFFFFFFFF, len(data), wirelen or len(data)
    )
    return _block(6, head + data, order)


def opb(iface: int, units: int, data: bytes, order: str = "<") -> bytes:
    """Obsolete Packet Block (16-bit interface id, 16-bit drop count)."""
    head = struct.pack(order + "HHIIII", iface, 0, units >> 32, units & 0xFFFFFFFF, len(data), len(data))
    return _block(2, head + data, order)


def spb(data: bytes, wirelen: int | None = None, order: str = "<") -> bytes:
    """Simple Packet Block (interface 0, no timestamp)."""
    return _block(3, struct.pack(order + "I", wirelen or len(data)) + data, order)


def write_pcapng(
    path: str | Path,
    packets: Iterable[tuple[int, Any]],
    interfaces: Iterable[tuple[int, int | None]] = ((1, None),),
    *,
    order: str = "<",
) -> Path:
    """One section: `interfaces` = (linktype, if_tsresol) pairs; `packets` = (interface, packet) pairs,
    where packet is anything `write_pcap` accepts. Returns the path.
    """
    ifaces = list(interfaces)
    blocks = [shb(order)] + [idb(lt, tsresol=res, order=order) for lt, res in ifaces]
    for i, (iface, packet) in enumerate(packets):
        ((ts, data, wirelen),) = _records([packet])
        if not isinstance(packet, tuple):
            ts += i * 1_000_000
        blocks.append(epb(iface, ts_units(ts, ifaces[iface][1]), data, wirelen, order))
    path = Path(path)
    path.write_bytes(b"".join(blocks))
    return path


# ---------------------------------------------------------------- throughput input


def fast_pcap(path: str | Path, n: int, *, payload: int = 300, connections: int = 50) -> Path:
    """`n` Ethernet/IPv4/TCP data packets spread over `connections`, written with struct alone."""
    eth = bytes.fromhex("020000000002020000000001") + b"\x08\x00"
    ip_hdr = struct.Struct("!BBHHHBBH4s4s")
    tcp_hdr = struct.Struct("!HHIIBBHHH")
    body = bytes(range(256)) * (payload // 256 + 1)
    rec = struct.Struct("<IIII")
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)]
    seqs = [1000] * connections
    for i in range(n):
        c = i % connections
        size = 100 + (i * 37) % payload
        ip = ip_hdr.pack(
            0x45, 0, 40 + size, i & 0xFFFF, 0x4000, 64, 6, 0, b"\x0a\x00\x00\x01", b"\x0a\x00\x01\x01"
        )
        tcp = tcp_hdr.pack(40000 + c, 9042, seqs[c], 1, 0x50, 0x18, 65535, 0, 0)
        seqs[c] = (seqs[c] + size) & 0xFFFFFFFF
        frame = eth + ip + tcp + body[:size]
        ts = 1_700_000_000_000_000 + i * 10
        out.append(rec.pack(ts // 1_000_000, ts % 1_000_000, len(frame), len(frame)))
        out.append(frame)
    path = Path(path)
    path.write_bytes(b"".join(out))
    return path


def read_all(path: str | Path) -> tuple[list[tuple], CaptureInfo, list[Finding]]:
    """Every segment `iter_segments` yields for `path`, with the filled CaptureInfo and the findings."""
    info = CaptureInfo(str(path))
    findings: list[Finding] = []
    return list(iter_segments(str(path), info, findings)), info, findings


def codes(findings: Iterable[Finding]) -> list[str]:
    return [f.code for f in findings]


def tcp_conversation(
    turns: Iterable[tuple[str, bytes]],
    *,
    client: tuple[str, int] = ("10.1.0.5", 41000),
    server: tuple[str, int] = ("10.1.0.9", 5044),
    handshake: bool = True,
    fin: bool = True,
    mss: int = 1 << 16,
    seqs: tuple[int, int] = (1000, 5000),
) -> list[bytes]:
    """Ethernet frames of one TCP connection: `turns` of ('c' | 's', bytes) in `mss`-byte segments,
    with the handshake and the closing FINs unless told otherwise (a capture begun mid-stream)."""
    ends = {"c": (client, server), "s": (server, client)}
    seq = {"c": seqs[0], "s": seqs[1]}

    def frame(side: str, flags: str, data: bytes = b"") -> bytes:
        (src, sport), (dst, dport) = ends[side]
        other = seq["s" if side == "c" else "c"]
        return tcp_frame(seq[side], data, flags, src=src, dst=dst, sport=sport, dport=dport, ack=other)

    frames = []
    if handshake:
        frames.append(frame("c", "S"))
        seq["c"] += 1
        frames.append(frame("s", "SA"))
        seq["s"] += 1
    for side, data in turns:
        for i in range(0, len(data), mss):
            frames.append(frame(side, "PA", data[i : i + mss]))
            seq[side] += len(data[i : i + mss])
    if fin:
        frames += [frame("c", "FA"), frame("s", "FA")]
    return frames


def damaged_pcap(path: Path) -> tuple[Path, int, int]:
    """`fast_pcap` of 300 packets on 3 connections with 3000 bytes of its middle overwritten (record
    headers too); returns the path and the damaged range."""
    fast_pcap(path, 300, payload=200, connections=3)
    data = bytearray(path.read_bytes())
    lo = len(data) // 2
    data[lo : lo + 3000] = b"\xff" * 3000
    path.write_bytes(data)
    return path, lo, lo + 3000
