"""The capture layer's entry point: one capture in, its TCP segments out, as plain tuples.

`iter_segments` is the hot path of the whole tool. The common packet shape (Ethernet → IPv4 without
options or fragments → TCP, fully captured) is parsed inline here with three `struct` calls and one
slice; everything else goes to `packet.PacketParser`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator

from wirelog.model import CaptureInfo, Finding, Severity
from wirelog.pcap.errors import CaptureError
from wirelog.pcap.findings import FindingSink
from wirelog.pcap.formats import open_records
from wirelog.pcap.packet import PacketParser, Segment
from wirelog.pcap.sources import open_input

_NEVER = -(1 << 128)  # beyond any pcapng timestamp (64-bit units, 64-bit offset)
_ALWAYS = 1 << 128

# From byte 16 of an Ethernet frame: IPv4 total length, fragment field, protocol, addresses.
_ETH_IPV4 = struct.Struct("!H2xH1xB2x4s4s").unpack_from
_TCP = struct.Struct("!HHIIBB").unpack_from


def iter_segments(
    path: str, info: CaptureInfo, findings: list[Finding], before_read: Callable[[], None] | None = None
) -> Iterator[Segment]:
    """Yield `(frame, ts_ns, src, sport, dst, dport, seq, ack, flags, payload, missing)` per TCP segment.

    - frame: 1-based packet number (every packet record counts, TCP or not; Wireshark's number).
    - ts_ns: int ns since the epoch. A pcapng Simple Packet Block has no timestamp; it gets the
      previous packet's (0 before any), and does not take part in first/last time or the
      backwards check.
    - src/dst: packed IP addresses (4 or 16 bytes); sport/dport, seq/ack: raw ints; flags: TCP
      flags byte (FIN=1 SYN=2 RST=4 PSH=8 ACK=16 URG=32 ECE=64 CWR=128).
    - payload: `bytes` of the TCP payload that was captured; missing: payload bytes the IP header
      announces but the capture lacks (snaplen), else 0.
    A fragmented datagram yields one segment with the frame and ts of its completing fragment.

    Fills `info` (format, compression, packets, tcp_packets, non_tcp_packets, bytes = captured
    bytes of all packets, first_ts/last_ts = min/max, link_types, truncated, error) and appends
    findings to `findings` as they occur, plus end-of-capture summaries. Raises CaptureError before
    the first segment when the input is unusable. `before_read` runs before each read of the input
    (formats._Input).
    """
    try:
        stream, info.compression = open_input(path)
    except CaptureError as e:
        info.error = str(e)
        raise
    sink = FindingSink(findings)
    parser = PacketParser(sink)
    frame = nbytes = 0
    last, tmin, tmax = _NEVER, _ALWAYS, _NEVER
    try:
        try:
            records = open_records(stream, path, info, sink, before_read)
        except CaptureError as e:
            info.error = str(e)
            raise
        eth_ipv4, tcp, slow = _ETH_IPV4, _TCP, parser.packet
        for frame, ts, lt, buf, off, end, wirelen in records:
            nbytes += end - off
            if ts is None:
                ts = 0 if last == _NEVER else last
            else:
                if ts < last:
                    _backwards(sink, frame, ts, last)
                last = ts
                if ts < tmin:
                    tmin = ts
                if ts > tmax:
                    tmax = ts
            if (
                lt == 1
                and end - off >= 54
                and buf[off + 12] == 8
                and buf[off + 13] == 0
                and buf[off + 14] == 0x45
            ):
                total, frag, proto, src, dst = eth_ipv4(buf, off + 16)
                stop = off + 14 + total
                if proto == 6 and not frag & 0x3FFF and total >= 40 and stop <= end:
                    sport, dport, seq, ack, hl, flags = tcp(buf, off + 34)
                    data = off + 34 + (hl >> 4) * 4
                    if hl >= 0x50 and data <= stop:
                        yield frame, ts, src, sport, dst, dport, seq, ack, flags, buf[data:stop], 0
                        continue
            seg = slow(lt, buf, off, end, wirelen, frame, ts)
            if seg is not None:
                yield seg
        parser.finish()
        sink.finish()
    finally:
        stream.close()
        info.packets = frame
        info.non_tcp_packets = parser.non_tcp
        info.tcp_packets = frame - parser.non_tcp
        info.bytes = nbytes
        if tmax != _NEVER:
            info.first_ts, info.last_ts = tmin, tmax


def _backwards(sink: FindingSink, frame: int, ts: int, last: int) -> None:
    sink.limited(
        "pcap.time-backwards",
        Severity.INFO,
        f"packet {frame} is timestamped {(last - ts) / 1e9:.6f} s before the packet preceding it",
        frame,
        ts,
        previous_ts=last,
    )
