"""IPv4 and IPv6 fragment reassembly through the reader, and the bounds of the defragmenter."""

from __future__ import annotations

import random

from pcap_helpers import T0_NS, codes, link_frame, read_all, tcp_packet, write_pcap
from scapy.layers.inet import IP, TCP, UDP, fragment
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, fragment6

from wirelog.model import Finding
from wirelog.pcap.defrag import Defragmenter
from wirelog.pcap.findings import FindingSink

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


# ------------------------------------------------------------------ bounds


def _defrag(**kw) -> tuple[Defragmenter, list[Finding]]:
    out: list[Finding] = []
    return Defragmenter(FindingSink(out), **kw), out


def test_set_count_is_bounded_and_oldest_evicted():
    d, out = _defrag(max_sets=3)
    for i in range(5):
        assert d.add((4, i), 0, b"a" * 8, 8, True, i + 1, 0) is None
    assert codes(out) == ["ip.fragments-incomplete"] * 2
    assert [f.frame for f in out] == [1, 2]
    assert d.add((4, 4), 8, b"b", 1, False, 9, 0) == (b"a" * 8 + b"b", None)


def test_buffered_bytes_are_bounded():
    d, out = _defrag(max_bytes=1000)
    for i in range(10):
        d.add((4, i), 0, b"z" * 400, 400, True, i + 1, 0)
    assert d._bytes <= 1000
    assert len(out) == 8


def test_old_sets_time_out():
    d, out = _defrag(timeout_ns=10)
    d.add((4, 1), 0, b"a" * 8, 8, True, 1, 0)
    d.add((4, 2), 0, b"a" * 8, 8, True, 2, 11)
    assert codes(out) == ["ip.fragments-incomplete"] and "timed out" in out[0].message


def test_fragment_beyond_largest_datagram_is_malformed():
    d, out = _defrag()
    assert d.add((4, 1), 65528, b"x" * 16, 16, False, 1, 0) is None
    assert codes(out) == ["ip.malformed"]


def test_snaplen_cut_fragment_never_completes_falsely():
    d, out = _defrag()
    d.add((4, 1), 0, b"a" * 8, 8, True, 1, 0)
    assert d.add((4, 1), 8, b"b" * 4, 8, False, 2, 0) is None  # 4 of 8 bytes captured
    d.finish()
    assert codes(out) == ["ip.fragments-incomplete"]
