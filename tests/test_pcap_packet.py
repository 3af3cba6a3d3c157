"""Link layers, IPv4/IPv6 (options, extension headers), TCP parsing, and what is not TCP."""

from __future__ import annotations

import ipaddress
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pcap_helpers import LINKTYPES, codes, link_frame, read_all, tcp_frame, tcp_packet, write_pcap
from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption_NOP, IPOption_RR
from scapy.layers.inet6 import (
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
)
from scapy.layers.ipsec import AH
from scapy.layers.l2 import ARP, Ether

from wirelog.model import Severity

V6_SRC, V6_DST = "2001:db8::1", "2001:db8::2"
LINK_TYPES = (0, 1, 12, 14, 101, 108, 113, 228, 229, 276)  # docs/capture.md


def one(tmp_path, frame: bytes, linktype: int = 1, **kw):
    return read_all(write_pcap(tmp_path / "p.pcap", [frame], linktype, **kw))


@pytest.mark.parametrize(
    ("link", "v6"),
    [(link, v6) for link in sorted(LINKTYPES) for v6 in (False, True) if link != ("ipv6", "ipv4")[v6]],
)
def test_every_link_type_yields_the_segment(tmp_path, link, v6):
    src, dst = (V6_SRC, V6_DST) if v6 else ("192.0.2.1", "198.51.100.7")
    frame = tcp_frame(
        0xFFFFFFF0, b"hello", "SA", link=link, src=src, dst=dst, sport=5044, dport=40001, ack=99
    )
    segs, info, findings = one(tmp_path, frame, LINKTYPES[link])
    assert findings == [] and info.tcp_packets == 1
    ((fr, _, s, sport, d, dport, seq, ack, flags, payload, missing),) = segs
    size = 16 if v6 else 4
    assert len(s) == len(d) == size
    assert (fr, sport, dport, seq, ack, flags, payload, missing) == (
        1,
        5044,
        40001,
        0xFFFFFFF0,
        99,
        0x12,
        b"hello",
        0,
    )
    assert (s, d) == (ipaddress.ip_address(src).packed, ipaddress.ip_address(dst).packed)


@pytest.mark.parametrize(("linktype", "af"), [(0, 2), (0, 24), (0, 28), (0, 30), (108, 2), (108, 30)])
@pytest.mark.parametrize("order", ["<", ">"])
def test_bsd_loopback_families_in_both_byte_orders(tmp_path, linktype, af, order):
    v6 = af != 2
    pkt = tcp_packet(5, b"lo", src=V6_SRC if v6 else "127.0.0.1", dst=V6_DST if v6 else "127.0.0.1")
    segs, _, findings = one(tmp_path, struct.pack(order + "I", af) + bytes(pkt), linktype)
    assert [s[9] for s in segs] == [b"lo"] and findings == []


def test_bsd_loopback_unknown_family_is_not_tcp(tmp_path):
    segs, info, findings = one(tmp_path, struct.pack("<I", 7) + bytes(tcp_packet(1, b"x")), 0)
    assert segs == [] and info.non_tcp_packets == 1 and findings == []


def test_raw_link_with_libpcap_dlt_values(tmp_path):
    for linktype in (12, 14, 101):
        segs, _, _ = one(tmp_path, bytes(tcp_packet(3, b"raw")), linktype)
        assert [s[9] for s in segs] == [b"raw"]


def test_documented_link_types_are_read_and_others_reported(tmp_path):
    for linktype in (*LINK_TYPES, 147):
        path = write_pcap(tmp_path / f"{linktype}.pcap", [bytes(60)], linktype=linktype)
        _, info, findings = read_all(path)
        assert ("pcap.unsupported-linktype" in codes(findings)) == (linktype == 147), linktype
        assert (info.packets, info.non_tcp_packets) == (1, 1)


def test_vlan_stack_of_three_tags(tmp_path):
    inner = bytes(tcp_packet(9, b"deep"))
    tags = struct.pack("!HHHHHH", 0x88A8, 10, 0x9100, 20, 0x8100, 30)
    frame = b"\x02" * 12 + tags + b"\x08\x00" + inner
    segs, _, findings = one(tmp_path, frame)
    assert [s[9] for s in segs] == [b"deep"] and findings == []


def test_ethernet_padding_is_trimmed_by_ip_total_length(tmp_path):
    frame = tcp_frame(1, b"", "A")  # 54 bytes; Ethernet pads to 60 (+FCS)
    segs, _, findings = one(tmp_path, frame + b"\xde\xad\xbe\xef\x00\x00\x11\x22\x33\x44")
    assert segs[0][9] == b"" and segs[0][10] == 0 and findings == []


def test_ipv4_options_and_tcp_options(tmp_path):
    pkt = (
        IP(src="10.1.1.1", dst="10.1.1.2", options=[IPOption_NOP(), IPOption_RR(routers=["1.2.3.4"])])
        / TCP(sport=1, dport=2, seq=42, flags="S", options=[("MSS", 1460), ("WScale", 7), ("SAckOK", b"")])
        / b"opt"
    )
    segs, _, findings = one(tmp_path, link_frame(pkt))
    assert [(s[6], s[8], s[9]) for s in segs] == [(42, 2, b"opt")] and findings == []


def test_ipv6_extension_headers_are_walked(tmp_path):
    pkt = (
        IPv6(src=V6_SRC, dst=V6_DST)
        / IPv6ExtHdrHopByHop()
        / IPv6ExtHdrRouting(addresses=["2001:db8::3"])
        / IPv6ExtHdrDestOpt()
        / AH(nh=6, payloadlen=4, spi=1, icv=b"\x00" * 12)
        / TCP(sport=1, dport=2, seq=77)
        / b"v6ext"
    )
    segs, _, findings = one(tmp_path, link_frame(pkt))
    assert [(s[6], s[9]) for s in segs] == [(77, b"v6ext")] and findings == []


def test_ipv6_atomic_fragment_is_not_buffered(tmp_path):
    pkt = IPv6(src=V6_SRC, dst=V6_DST) / IPv6ExtHdrFragment(offset=0, m=0, id=5) / TCP(seq=8) / b"atomic"
    segs, _, findings = one(tmp_path, link_frame(pkt))
    assert [s[9] for s in segs] == [b"atomic"] and findings == []


@pytest.mark.parametrize(
    "frame",
    [
        bytes(Ether() / IP() / UDP() / b"udp"),
        bytes(Ether() / IP() / ICMP()),
        bytes(Ether() / ARP()),
        bytes(Ether() / IPv6() / UDP()),
        bytes(Ether(type=0x88CC) / (b"\x00" * 40)),  # LLDP
        bytes(Ether() / IPv6(nh=50) / (b"\x00" * 24)),  # ESP: the TCP inside cannot be seen
        bytes(Ether() / IPv6(nh=59)),  # no next header
        bytes(Ether(type=0x0800)),  # nothing after the Ethernet header
    ],
)
def test_non_tcp_packets_are_counted_not_yielded(tmp_path, frame):
    segs, info, findings = one(tmp_path, frame)
    assert segs == [] and (info.packets, info.tcp_packets, info.non_tcp_packets) == (1, 0, 1)
    assert [f for f in findings if f.code != "ip.malformed"] == []


def test_unsupported_link_type_reported_once(tmp_path):
    frame = bytes(tcp_packet(1, b"x"))
    path = write_pcap(tmp_path / "u.pcap", [frame, frame, frame], linktype=147)
    segs, info, findings = read_all(path)
    assert segs == [] and info.non_tcp_packets == 3 and info.link_types == [147]
    assert codes(findings) == ["pcap.unsupported-linktype"]
    assert findings[0].frame == 1 and findings[0].fields["linktype"] == 147


def test_snaplen_truncated_payload_reports_missing(tmp_path):
    full = tcp_frame(100, b"A" * 1000)
    cut = full[:200]
    segs, _, findings = one(tmp_path, (10**18, cut, len(full)), snaplen=200)
    ((*_, payload, missing),) = segs
    assert payload == b"A" * (200 - 54) and missing == 1000 - (200 - 54)
    assert codes(findings) == ["pcap.snaplen-truncated"] and findings[0].severity is Severity.WARNING


@pytest.mark.parametrize("keep", [20, 40, 60])  # inside Ethernet+IP, inside TCP, inside TCP options
def test_snaplen_cut_inside_headers(tmp_path, keep):
    full = link_frame(IP() / TCP(options=[("MSS", 1460)] * 3) / (b"x" * 50))
    segs, _, findings = one(tmp_path, (10**18, full[:keep], len(full)))
    assert segs == [] and codes(findings) == ["pcap.snaplen-truncated"]


def test_snaplen_findings_are_rate_limited(tmp_path):
    full = tcp_frame(100, b"B" * 500)
    path = write_pcap(tmp_path / "s.pcap", [(10**18 + i, full[:100], len(full)) for i in range(25)])
    segs, _, findings = read_all(path)
    assert len(segs) == 25 and all(s[10] == 500 - 46 for s in segs)
    assert codes(findings) == ["pcap.snaplen-truncated"] * 11
    assert findings[-1].fields["count"] == 25


def test_tso_zero_total_length_uses_captured_bytes(tmp_path):
    frame = bytearray(tcp_frame(5, b"C" * 3000))
    struct.pack_into("!H", frame, 16, 0)  # IPv4 total length 0, as seen with segmentation offload
    segs, _, findings = one(tmp_path, bytes(frame))
    assert segs[0][9] == b"C" * 3000 and segs[0][10] == 0 and findings == []


@pytest.mark.parametrize(
    ("mutate", "code"),
    [
        (lambda f: f.__setitem__(14, 0x43), "ip.malformed"),  # IHL 3
        (lambda f: f.__setitem__(14, 0x55), "ip.malformed"),  # version 5
        (lambda f: struct.pack_into("!H", f, 16, 10), "ip.malformed"),  # total < header
        (lambda f: f.__setitem__(46, 0x30), "tcp.malformed"),  # data offset 12 bytes
        (lambda f: f.__setitem__(46, 0xF0), "tcp.malformed"),  # data offset beyond the segment
    ],
)
def test_malformed_headers_become_findings(tmp_path, mutate, code):
    frame = bytearray(tcp_frame(1, b"xyz"))
    mutate(frame)
    segs, info, findings = one(tmp_path, bytes(frame))
    assert segs == [] and codes(findings) == [code] and findings[0].frame == 1
    assert info.packets == 1


def test_total_length_beyond_the_wire_is_reported_and_clamped(tmp_path):
    frame = bytearray(tcp_frame(1, b"xyz"))
    struct.pack_into("!H", frame, 16, 900)
    segs, _, findings = one(tmp_path, bytes(frame))
    assert segs[0][9] == b"xyz" and segs[0][10] == 0 and codes(findings) == ["ip.malformed"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.binary(max_size=120),
    linktype=st.sampled_from(LINK_TYPES),
    extra=st.integers(min_value=0, max_value=70000),
)
def test_arbitrary_packet_bytes_never_raise(tmp_path, data, linktype, extra):
    segs, info, _ = one(tmp_path, (10**18, data, len(data) + extra), linktype)
    assert info.packets == 1 and info.tcp_packets + info.non_tcp_packets == 1
    for seg in segs:
        assert seg[10] >= 0 and isinstance(seg[9], bytes)
