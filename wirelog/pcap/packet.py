"""Link layer → IPv4/IPv6 → TCP parsing for every packet shape (the general, slower path).

`segments.iter_segments` handles the common shape (Ethernet → IPv4 without options or fragments →
TCP) inline and hands every other packet to `PacketParser.packet`. All parsing is `struct` on the
record's bytes; nothing is verified that loopback captures get wrong (checksums). A segment is the
plain tuple `(frame, ts_ns, src, sport, dst, dport, seq, ack, flags, payload, missing)`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from wirelog.model import Severity
from wirelog.pcap.defrag import Defragmenter
from wirelog.pcap.findings import FindingSink

Segment = tuple[int, int, bytes, int, bytes, int, int, int, int, bytes, int]

TCP = 6
_IPV4, _IPV6 = 4, 6
_ETHERTYPES = {0x0800: _IPV4, 0x86DD: _IPV6}
_VLAN_TAGS = frozenset({0x8100, 0x88A8, 0x9100})
# BSD loopback address families: AF_INET is 2 everywhere, AF_INET6 is 24 (NetBSD, OpenBSD), 28
# (FreeBSD) or 30 (macOS).
_AF = {2: _IPV4, 24: _IPV6, 28: _IPV6, 30: _IPV6}
# IPv6 extension headers whose length byte counts 8-octet units beyond the first 8 octets.
_IPV6_EXT = frozenset({0, 43, 60, 135, 139, 140})
_IPV6_FRAGMENT, _IPV6_AH = 44, 51

_be16 = struct.Struct("!H").unpack_from
_le32 = struct.Struct("<I").unpack_from
_ipv4 = struct.Struct("!BxHHHxB2x4s4s").unpack_from
_ipv6 = struct.Struct("!HB").unpack_from
_ipv6_frag = struct.Struct("!BxHI").unpack_from
_tcp = struct.Struct("!HHIIBB").unpack_from

# A link parser returns (4 | 6 | None, offset of the IP header).
LinkParser = Callable[[bytes, int, int], tuple[int | None, int]]


def _after_ethertype(buf: bytes, etype: int, pos: int, end: int) -> tuple[int | None, int]:
    """Skip 802.1Q / 802.1ad / QinQ tags; `pos` is where the payload of `etype` starts."""
    while etype in _VLAN_TAGS:
        if pos + 4 > end:
            return None, pos
        etype = _be16(buf, pos + 2)[0]
        pos += 4
    return _ETHERTYPES.get(etype), pos


def _ethernet(buf: bytes, off: int, end: int) -> tuple[int | None, int]:
    if end - off < 14:
        return None, off
    return _after_ethertype(buf, _be16(buf, off + 12)[0], off + 14, end)


def _linux_sll(buf: bytes, off: int, end: int) -> tuple[int | None, int]:
    if end - off < 16:
        return None, off
    return _after_ethertype(buf, _be16(buf, off + 14)[0], off + 16, end)


def _linux_sll2(buf: bytes, off: int, end: int) -> tuple[int | None, int]:
    if end - off < 20:
        return None, off
    return _after_ethertype(buf, _be16(buf, off)[0], off + 20, end)


def _bsd_loopback(buf: bytes, off: int, end: int) -> tuple[int | None, int]:
    """DLT_NULL (host byte order) and DLT_LOOP (network order): either order is accepted."""
    if end - off < 4:
        return None, off
    af = _le32(buf, off)[0]
    if af > 0xFFFF:
        af = int.from_bytes(af.to_bytes(4, "little"), "big")
    return _AF.get(af), off + 4


def _raw_ip(buf: bytes, off: int, end: int) -> tuple[int | None, int]:
    if off >= end:
        return None, off
    version = buf[off] >> 4
    return (version if version in (_IPV4, _IPV6) else None), off


def _raw_ipv4(buf: bytes, off: int, end: int) -> tuple[int | None, int]:
    return _IPV4, off


def _raw_ipv6(buf: bytes, off: int, end: int) -> tuple[int | None, int]:
    return _IPV6, off


# pcap LINKTYPE_* values (12 and 14 are the DLT_RAW values libpcap maps to LINKTYPE_RAW).
LINK_PARSERS: dict[int, LinkParser] = {
    0: _bsd_loopback,
    1: _ethernet,
    12: _raw_ip,
    14: _raw_ip,
    101: _raw_ip,
    108: _bsd_loopback,
    113: _linux_sll,
    228: _raw_ipv4,
    229: _raw_ipv6,
    276: _linux_sll2,
}


class PacketParser:
    """Parses one packet record into a TCP segment; counts what is not TCP; reports what is broken.

    `non_tcp` counts packets that carry no TCP (other protocols, non-IP frames, unsupported link
    types, IP headers too broken to tell). Fragments of TCP datagrams count as TCP packets.
    """

    def __init__(self, sink: FindingSink) -> None:
        self.sink = sink
        self.defrag = Defragmenter(sink)
        self.non_tcp = 0
        self._unsupported: set[int] = set()

    def packet(
        self, linktype: int | None, buf: bytes, off: int, end: int, wirelen: int, frame: int, ts: int
    ) -> Segment | None:
        """The TCP segment in `buf[off:end]` (`wirelen` bytes on the wire), or None."""
        link = LINK_PARSERS.get(linktype)  # type: ignore[arg-type]
        if link is None:
            self.non_tcp += 1
            if linktype is not None and linktype not in self._unsupported:
                self._unsupported.add(linktype)
                self.sink.add(
                    "pcap.unsupported-linktype",
                    Severity.WARNING,
                    f"link type {linktype} is not supported; its packets (first: {frame}) are counted, "
                    "not decoded",
                    frame,
                    ts,
                    linktype=linktype,
                )
            return None
        version, ip = link(buf, off, end)
        cut = max(0, wirelen - (end - off))
        if version == _IPV4:
            return self._ipv4(buf, ip, end, cut, frame, ts)
        if version == _IPV6:
            return self._ipv6(buf, ip, end, cut, frame, ts)
        self.non_tcp += 1
        return None

    def _ipv4(self, buf: bytes, ip: int, end: int, cut: int, frame: int, ts: int) -> Segment | None:
        avail = end - ip
        if avail < 20:
            return self._short_ip(avail, cut, frame, ts)
        vihl, total, ident, frag, proto, src, dst = _ipv4(buf, ip)
        ihl = (vihl & 15) * 4
        if vihl >> 4 != 4 or ihl < 20:
            return self._bad_ip(f"IPv4 header with version {vihl >> 4} and length {ihl}", frame, ts)
        if ihl > avail:
            return self._short_ip(avail, cut, frame, ts)
        if total == 0:  # segmentation offload: the kernel saw a super-packet without a length
            total = avail + cut
        if total < ihl:
            return self._bad_ip(f"IPv4 total length {total} is shorter than its header", frame, ts)
        if total > avail + cut:
            self._report_ip(
                f"IPv4 total length {total} exceeds the {avail + cut} bytes on the wire", frame, ts
            )
            total = avail + cut
        if proto != TCP:
            self.non_tcp += 1
            return None
        stop = ip + total
        if frag & 0x3FFF:
            start = ip + ihl
            data = buf[start : min(stop, end)]
            done = self.defrag.add(
                (4, src, dst, ident), (frag & 0x1FFF) * 8, data, total - ihl, bool(frag & 0x2000), frame, ts
            )
            return None if done is None else self._tcp(done[0], 0, len(done[0]), 0, src, dst, frame, ts)
        return self._tcp(buf, ip + ihl, min(stop, end), max(0, stop - end), src, dst, frame, ts)

    def _ipv6(self, buf: bytes, ip: int, end: int, cut: int, frame: int, ts: int) -> Segment | None:
        avail = end - ip
        if avail < 40:
            return self._short_ip(avail, cut, frame, ts)
        if buf[ip] >> 4 != 6:
            return self._bad_ip(f"IPv6 header with version {buf[ip] >> 4}", frame, ts)
        plen, nh = _ipv6(buf, ip + 4)
        if plen == 0:  # jumbogram or segmentation offload: the payload is whatever is there
            plen = avail + cut - 40
        if 40 + plen > avail + cut:
            wire = avail + cut - 40
            self._report_ip(f"IPv6 payload length {plen} exceeds the {wire} bytes on the wire", frame, ts)
            plen = wire
        stop = ip + 40 + plen
        src, dst = buf[ip + 8 : ip + 24], buf[ip + 24 : ip + 40]
        return self._ipv6_chain(buf, nh, ip + 40, min(stop, end), max(0, stop - end), src, dst, frame, ts)

    def _ipv6_chain(
        self,
        buf: bytes,
        nh: int,
        pos: int,
        stop: int,
        missing: int,
        src: bytes,
        dst: bytes,
        frame: int,
        ts: int,
    ) -> Segment | None:
        """Walk the extension headers from `pos` to TCP; `stop` is the end of the captured payload."""
        while nh != TCP:
            if nh in _IPV6_EXT or nh == _IPV6_AH:
                if pos + 8 > stop:
                    return self._short_ip(stop - pos, missing, frame, ts)
                size = (buf[pos + 1] + 2) * 4 if nh == _IPV6_AH else (buf[pos + 1] + 1) * 8
                nh = buf[pos]
                pos += size
                if pos > stop:
                    return self._short_ip(0, missing if pos <= stop + missing else 0, frame, ts)
            elif nh == _IPV6_FRAGMENT:
                if pos + 8 > stop:
                    return self._short_ip(stop - pos, missing, frame, ts)
                nxt, offflags, ident = _ipv6_frag(buf, pos)
                pos += 8
                if not offflags & 0xFFF9:  # an atomic fragment: offset 0, no more fragments
                    nh = nxt
                    continue
                if nxt != TCP and nxt not in _IPV6_EXT and nxt != _IPV6_AH:
                    break
                done = self.defrag.add(
                    (6, src, dst, ident),
                    offflags & 0xFFF8,
                    buf[pos:stop],
                    stop - pos + missing,
                    bool(offflags & 1),
                    frame,
                    ts,
                    nxt,
                )
                if done is None:
                    return None
                buf, nh = done
                pos, stop, missing = 0, len(buf), 0
                if nh == _IPV6_FRAGMENT:
                    return self._bad_ip("IPv6 fragment header inside a reassembled datagram", frame, ts)
            else:
                break
        else:
            return self._tcp(buf, pos, stop, missing, src, dst, frame, ts)
        self.non_tcp += 1
        return None

    def _tcp(
        self, buf: bytes, start: int, stop: int, missing: int, src: bytes, dst: bytes, frame: int, ts: int
    ) -> Segment | None:
        """The segment in `buf[start:stop]`; `missing` bytes after `stop` were not captured."""
        if stop - start < 20:
            if missing:
                return self._snaplen(frame, ts, "its TCP header")
            return self._bad_tcp(f"TCP header of {stop - start} bytes", frame, ts)
        sport, dport, seq, ack, hl, flags = _tcp(buf, start)
        doff = (hl >> 4) * 4
        if doff < 20:
            return self._bad_tcp(f"TCP data offset {doff} is shorter than the header", frame, ts)
        if start + doff > stop:
            if start + doff <= stop + missing:
                return self._snaplen(frame, ts, "its TCP options")
            return self._bad_tcp(f"TCP data offset {doff} exceeds the segment", frame, ts)
        if missing:
            self._snaplen(frame, ts, f"{missing} bytes of its TCP payload")
        return frame, ts, src, sport, dst, dport, seq, ack, flags, buf[start + doff : stop], missing

    def _short_ip(self, have: int, cut: int, frame: int, ts: int) -> None:
        """An IP header that ends early: the snaplen's fault when bytes were cut, else malformed."""
        self.non_tcp += 1
        if cut > 0:
            self._snaplen(frame, ts, "its IP header")
        else:
            self._report_ip("IP header cut short", frame, ts)

    def _bad_ip(self, what: str, frame: int, ts: int) -> None:
        """An IP header too broken to find the protocol in: reported, counted as not TCP."""
        self.non_tcp += 1
        self._report_ip(what, frame, ts)

    def _report_ip(self, what: str, frame: int, ts: int) -> None:
        self.sink.limited("ip.malformed", Severity.WARNING, f"packet {frame}: {what}", frame, ts)

    def _bad_tcp(self, what: str, frame: int, ts: int) -> None:
        self.sink.limited("tcp.malformed", Severity.WARNING, f"packet {frame}: {what}", frame, ts)

    def _snaplen(self, frame: int, ts: int, what: str) -> None:
        self.sink.limited(
            "pcap.snaplen-truncated",
            Severity.WARNING,
            f"packet {frame} was cut by the capture's snap length: {what} is missing",
            frame,
            ts,
        )

    def finish(self) -> None:
        """End of capture: report incomplete fragment sets."""
        self.defrag.finish()
