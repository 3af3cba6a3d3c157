"""The reader against the real captures in ../shared/captures and against tshark (another implementation).

Packet counts come from ../shared/captures/README.md (read there with tshark 4.0.17 and capinfos). The
tshark comparisons run only when tshark is installed; the shared captures only when ../shared exists.
"""

from __future__ import annotations

import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from pcap_helpers import LINKTYPES, codes, link_frame, read_all, tcp_frame, write_pcap, write_pcapng
from scapy.layers.inet import IP, TCP, UDP, fragment
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop, fragment6

CAPTURES = Path(__file__).resolve().parents[1].parent / "shared" / "captures"

# file → packets, per the captures README (every packet in these files is IPv4/TCP).
README_PACKETS = {
    "public/cql-packetbeat/cassandra_compressed.pcap": 72,
    "public/cql-packetbeat/cassandra_create_index.pcap": 10,
    "public/cql-packetbeat/cassandra_create_keyspace.pcap": 7,
    "public/cql-packetbeat/cassandra_create_table.pcap": 10,
    "public/cql-packetbeat/cassandra_insert.pcap": 2,
    "public/cql-packetbeat/cassandra_mixed_frame.pcap": 313,
    "public/cql-packetbeat/cassandra_select.pcap": 2,
    "public/cql-packetbeat/cassandra_select_via_index.pcap": 2,
    "public/cql-packetbeat/cassandra_trace_err.pcap": 2,
    "public/ndpi_cassandra.pcap": 20,
    "public/arkime_cassandra1.pcap": 4,
    "public/reassembly/sv_eve-payload-01-tcp-exact-overlap__tcp-overlap.pcap": 7,
    "public/reassembly/sv_eve-payload-04-partial-overlap__tcp-overlap2.pcap": 7,
    "public/reassembly/sv_eve-payload-05-tcp-data-gap__tcp-simple-gap2.pcap": 7,
    "public/reassembly/sv_eve-payload-06-tcp-data-leading-gap__tcp-leading-gap.pcap": 7,
    "public/reassembly/sv_bug-3286-02-linux-evasion__with_evasion_linux.pcap": 10,
    "public/reassembly/sv_bug-3286-03-windows-evasion__with_evasion_windows.pcap": 9,
    "public/reassembly/sv_bug-2491-02__simple_http_download.onesided.nosyn.pcap": 11,
    "peers/courier-ruby2.12-client-server.pcap": 16,
    "peers/courier-go2.12-client-ruby2.12-server.pcap": 19,
    "peers/courier-go2.0.6-legacy-client-ruby-server.pcap": 10,
}

needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")


def shared(relative: str) -> Path:
    path = CAPTURES / relative
    if not path.exists():
        pytest.skip(f"../shared/captures/{relative} not available")
    return path


def tshark_segments(path: Path) -> list[tuple]:
    """(frame, ts_ns, sport, dport, seq, flags, tcp.len) of every frame tshark dissects as TCP."""
    fields = [
        "frame.number",
        "frame.time_epoch",
        "tcp.srcport",
        "tcp.dstport",
        "tcp.seq_raw",
        "tcp.flags",
        "tcp.len",
    ]
    cmd = ["tshark", "-r", str(path), "-Y", "tcp", "-T", "fields"] + [a for f in fields for a in ("-e", f)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        frame, ts, sport, dport, seq, flags, length = line.split("\t")
        ns = int(Decimal(ts) * 10**9)
        rows.append((int(frame), ns, int(sport), int(dport), int(seq), int(flags, 16) & 0xFF, int(length)))
    return rows


def our_segments(path: Path) -> list[tuple]:
    segs, _, _ = read_all(path)
    return [(s[0], s[1], s[3], s[5], s[6], s[8], len(s[9]) + s[10]) for s in segs]


@pytest.mark.parametrize("relative", sorted(README_PACKETS))
def test_real_captures_packet_counts(relative):
    segs, info, findings = read_all(shared(relative))
    n = README_PACKETS[relative]
    assert (info.packets, info.tcp_packets, info.non_tcp_packets, len(segs)) == (n, n, 0, n)
    assert not info.truncated and info.format == "pcap"
    expected_link = 0 if "cql-packetbeat" in relative else 1
    assert info.link_types == [expected_link]
    assert [f for f in findings if f.code != "pcap.time-backwards"] == []


def test_ndpi_capture_timestamps_go_backwards_twice():
    _, info, findings = read_all(shared("public/ndpi_cassandra.pcap"))
    assert codes(findings) == ["pcap.time-backwards", "pcap.time-backwards"]
    assert [f.frame for f in findings] == [9, 17]
    assert (info.last_ts - info.first_ts) // 10**9 == 1_450_889_468  # capinfos' span (README)


def test_arkime_vlan_capture():
    segs, _, _ = read_all(shared("public/arkime_cassandra1.pcap"))
    assert [s[8] for s in segs] == [0x02, 0x12, 0x10, 0x18]
    assert bytes(segs[3][2]) == bytes([10, 10, 10, 10]) and segs[3][5] == 9160
    assert segs[3][9][:12] == bytes.fromhex("00000025800100010000000c")


@needs_tshark
@pytest.mark.parametrize("relative", sorted(README_PACKETS))
def test_real_captures_match_tshark(relative):
    path = shared(relative)
    assert our_segments(path) == tshark_segments(path)


def _crafted(tmp_path: Path) -> dict[str, Path]:
    """Captures covering link types, extension headers, fragments and pcapng interfaces."""
    out = {}
    for link in ("vlan", "qinq", "sll", "sll2", "null", "loop", "raw", "ipv6"):
        v6 = link in ("ipv6", "sll2", "qinq")
        src, dst = ("2001:db8::1", "2001:db8::2") if v6 else ("10.0.0.1", "10.0.0.2")
        frames = [tcp_frame(1000 + i * 7, b"x" * i, "PA", link=link, src=src, dst=dst) for i in range(1, 6)]
        out[link] = write_pcap(tmp_path / f"{link}.pcap", frames, LINKTYPES[link])
    ext = (
        IPv6(src="2001:db8::1", dst="2001:db8::2")
        / IPv6ExtHdrHopByHop()
        / IPv6ExtHdrDestOpt()
        / TCP(sport=7, dport=8, seq=3)
        / b"ext"
    )
    out["v6ext"] = write_pcap(tmp_path / "v6ext.pcap", [link_frame(ext)])
    payload = bytes(range(256)) * 10
    v4 = IP(src="10.0.0.1", dst="10.0.0.2", id=5) / TCP(sport=1, dport=2, seq=10) / payload
    udp = link_frame(IP() / UDP() / b"noise")
    f4 = [link_frame(f) for f in fragment(v4, fragsize=600)]
    out["frag4"] = write_pcap(tmp_path / "frag4.pcap", [f4[1], udp, f4[0], *f4[2:]])
    v6 = IPv6(src="2001:db8::1", dst="2001:db8::2") / IPv6ExtHdrFragment(id=8) / TCP(seq=20) / payload
    f6 = [link_frame(f) for f in fragment6(v6, 900)]
    out["frag6"] = write_pcap(tmp_path / "frag6.pcap", f6[::-1])
    full = tcp_frame(50, b"S" * 900)
    out["snaplen"] = write_pcap(tmp_path / "snap.pcap", [(10**18, full[:300], len(full))], snaplen=300)
    ng = [(0, tcp_frame(1, b"a")), (1, tcp_frame(2, b"bb", link="raw")), (0, tcp_frame(3, b"ccc"))]
    out["pcapng"] = write_pcapng(tmp_path / "two.pcapng", ng, [(1, None), (101, 9)])
    return out


@needs_tshark
def test_crafted_captures_match_tshark(tmp_path):
    for name, path in _crafted(tmp_path).items():
        ours, theirs = our_segments(path), tshark_segments(path)
        assert theirs, name
        assert ours == theirs, name
