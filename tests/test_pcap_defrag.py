"""IPv4 and IPv6 fragment reassembly through the reader, and the bounds of the defragmenter."""

from __future__ import annotations

import random

from pcap_helpers import T0_NS, codes, link_frame, read_all, tcp_packet, write_pcap
from scapy.layers.inet import IP, TCP, UDP, fragment
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, fragment6

PAYLOAD = bytes(range(256)) * 12  # 3072 bytes


def v4_fragments(size: int = 800, ident: int = 77) -> list[bytes]:
    pkt = (
        IP(src="10.0.0.1", dst="10.0.0.2", id=ident)
        / TCP(sport=1234, dport=5044, seq=555, flags="PA")
        / PAYLOAD
    )
    return [link_frame(f) for f in fragment(pkt, fragsize=size)]


def v6_fragments(size: int = 1000, ident: int = 9) -> list[bytes]:
    pkt = (
        IPv6(src="2001:db8::1", dst="2001:db8::2")
        / IPv6ExtHdrFragment(id=ident)
        / TCP(sport=1234, dport=5044, seq=999, flags="PA")
        / PAYLOAD
    )
    return [link_frame(f) for f in fragment6(pkt, size)]


def test_ipv4_fragments_in_order(tmp_path):
    frags = v4_fragments()
    assert len(frags) == 4
    segs, info, findings = read_all(write_pcap(tmp_path / "f.pcap", frags))
    assert findings == []
    ((frame, ts, _, sport, _, dport, seq, _, _, payload, missing),) = segs
    assert (sport, dport, seq, payload, missing) == (1234, 5044, 555, PAYLOAD, 0)
    assert frame == 4 and ts == T0_NS // 1000 * 1000 + 3_000_000  # the completing fragment's
    assert (info.packets, info.tcp_packets) == (4, 4)


def test_ipv4_fragments_out_of_order_and_interleaved(tmp_path):
    a, b = v4_fragments(ident=1), v4_fragments(size=504, ident=2)
    order = [a[2], b[5], a[0], b[0], b[1], a[3], b[2], b[3], b[4], a[1], b[6]]
    assert len(b) == 7
    segs, _, findings = read_all(write_pcap(tmp_path / "o.pcap", order))
    assert findings == []
    assert [(s[0], s[9]) for s in segs] == [(10, PAYLOAD), (11, PAYLOAD)]


def test_ipv4_duplicate_fragment_is_harmless(tmp_path):
    f = v4_fragments()
    segs, _, findings = read_all(write_pcap(tmp_path / "d.pcap", [f[0], f[1], f[1], f[2], f[3]]))
    assert [s[9] for s in segs] == [PAYLOAD] and findings == []


def test_ipv4_overlap_with_different_bytes_first_wins(tmp_path):
    f = v4_fragments()
    forged = bytearray(f[1])
    forged[-10:] = b"X" * 10  # same offset and length, different bytes
    segs, _, findings = read_all(write_pcap(tmp_path / "x.pcap", [f[0], f[1], bytes(forged), f[2], f[3]]))
    assert [s[9] for s in segs] == [PAYLOAD]
    assert codes(findings) == ["ip.fragment-overlap"]
    assert findings[0].frame == 3 and findings[0].fields["first_frame"] == 2


def test_ipv4_missing_fragment_reported_at_end(tmp_path):
    f = v4_fragments()
    segs, info, findings = read_all(write_pcap(tmp_path / "m.pcap", [f[0], f[1], f[3]]))
    assert segs == [] and info.tcp_packets == 3
    assert codes(findings) == ["ip.fragments-incomplete"] and findings[0].frame == 1
    assert findings[0].protocol == "ip"


def test_udp_fragments_are_not_buffered(tmp_path):
    pkt = IP(src="10.0.0.1", dst="10.0.0.2") / UDP() / PAYLOAD
    frags = [link_frame(f) for f in fragment(pkt, fragsize=800)]
    segs, info, findings = read_all(write_pcap(tmp_path / "u.pcap", frags[:-1]))
    assert segs == [] and findings == [] and info.non_tcp_packets == len(frags) - 1


def test_ipv6_fragments_in_and_out_of_order(tmp_path):
    f = v6_fragments()
    assert len(f) >= 3
    shuffled = f[:]
    random.Random(5).shuffle(shuffled)
    for frames in (f, shuffled):
        segs, _, findings = read_all(write_pcap(tmp_path / "v6.pcap", frames))
        assert findings == []
        ((frame, _, src, _, _, _, seq, _, _, payload, _),) = segs
        assert (seq, payload, len(src), frame) == (999, PAYLOAD, 16, len(f))


def test_ipv6_fragment_with_destination_options_inside(tmp_path):
    pkt = (
        IPv6(src="2001:db8::1", dst="2001:db8::2")
        / IPv6ExtHdrFragment(id=3)
        / IPv6ExtHdrDestOpt()
        / TCP(sport=1, dport=2, seq=4)
        / PAYLOAD
    )
    frags = [link_frame(f) for f in fragment6(pkt, 1200)]
    segs, _, findings = read_all(write_pcap(tmp_path / "d6.pcap", frags))
    assert [s[9] for s in segs] == [PAYLOAD] and findings == []


def test_unfragmented_tcp_between_fragments(tmp_path):
    f = v4_fragments()
    plain = link_frame(tcp_packet(1, b"plain"))
    segs, _, _ = read_all(write_pcap(tmp_path / "p.pcap", [f[0], plain, f[1], f[2], f[3]]))
    assert [(s[0], s[9]) for s in segs] == [(2, b"plain"), (5, PAYLOAD)]


# ------------------------------------------------------------------ bounds (defaults: 1024 sets, 60 s)


def _first_fragment(ident: int, size: int = 8) -> bytes:
    """The first fragment of a TCP datagram whose other fragments never come."""
    return link_frame(IP(src="10.0.0.1", dst="10.0.0.2", id=ident, flags="MF", proto=6) / (b"a" * size))


def test_set_count_is_bounded_and_oldest_evicted(tmp_path):
    frags = [_first_fragment(i) for i in range(1030)]
    last = IP(src="10.0.0.1", dst="10.0.0.2", id=1029, frag=1, proto=6) / b"b"
    segs, _, findings = read_all(write_pcap(tmp_path / "n.pcap", [*frags, link_frame(last)]))
    evicted = [f for f in findings if f.code == "ip.fragments-incomplete"]
    assert [f.frame for f in evicted[:6]] == [1, 2, 3, 4, 5, 6]
    assert all("evicted to bound memory" in f.message for f in evicted[:6])
    assert len(segs) == 0  # the completed datagram is 9 bytes: too short for a TCP header
    assert "tcp.malformed" in codes(findings)


def test_old_sets_time_out(tmp_path):
    packets = [(T0_NS, _first_fragment(1)), (T0_NS + 61 * 10**9, _first_fragment(2))]
    _, _, findings = read_all(write_pcap(tmp_path / "t.pcap", packets))
    timed_out = [f for f in findings if "timed out" in f.message]
    assert codes(timed_out) == ["ip.fragments-incomplete"] and timed_out[0].frame == 1


def test_fragment_beyond_largest_datagram_is_malformed(tmp_path):
    pkt = IP(src="10.0.0.1", dst="10.0.0.2", id=5, frag=65528 // 8, proto=6) / (b"x" * 16)
    segs, _, findings = read_all(write_pcap(tmp_path / "b.pcap", [link_frame(pkt)]))
    assert segs == [] and codes(findings) == ["ip.malformed"]


def test_snaplen_cut_fragment_never_completes_falsely(tmp_path):
    head = _first_fragment(1, 8)
    tail = link_frame(IP(src="10.0.0.1", dst="10.0.0.2", id=1, frag=1, proto=6) / (b"b" * 8))
    cut = (T0_NS + 10**6, tail[:-4], len(tail))  # 4 of its 8 payload bytes captured
    segs, _, findings = read_all(write_pcap(tmp_path / "s.pcap", [(T0_NS, head), cut]))
    assert segs == [] and "ip.fragments-incomplete" in codes(findings)
