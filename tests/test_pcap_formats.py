"""pcap and pcapng record parsing: byte orders, resolutions, interfaces, block kinds, damage."""

from __future__ import annotations

import math
import shutil
import struct
import subprocess
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pcap_helpers import (
    T0_NS,
    codes,
    epb,
    idb,
    opb,
    pcap_bytes,
    read_all,
    shb,
    spb,
    tcp_frame,
    ts_units,
    write_pcap,
    write_pcapng,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import ARP, Ether
from scapy.utils import wrpcap

from wirelog.inputs import CaptureError
from wirelog.model import Severity


def frames(n: int, link: str = "ether") -> list[bytes]:
    return [tcp_frame(1000 + 10 * i, b"payload%03d" % i, link=link) for i in range(n)]


# ------------------------------------------------------------------ classic pcap


@pytest.mark.parametrize("big_endian", [False, True])
@pytest.mark.parametrize("nano", [False, True])
def test_pcap_byte_orders_and_resolutions(tmp_path, big_endian, nano):
    ts = [T0_NS, T0_NS + 1_001, T0_NS + 2_000_000_007]
    pkts = [(t, f) for t, f in zip(ts, frames(3), strict=True)]
    path = write_pcap(tmp_path / "c.pcap", pkts, big_endian=big_endian, nano=nano)
    segs, info, findings = read_all(path)
    expected_ts = ts if nano else [t // 1000 * 1000 for t in ts]
    assert [s[1] for s in segs] == expected_ts
    assert [s[0] for s in segs] == [1, 2, 3]
    assert [s[6] for s in segs] == [1000, 1010, 1020]
    assert [s[9] for s in segs] == [b"payload000", b"payload001", b"payload002"]
    assert info.format == "pcap" and info.compression is None
    assert (info.packets, info.tcp_packets, info.non_tcp_packets) == (3, 3, 0)
    assert info.first_ts == expected_ts[0] and info.last_ts == expected_ts[-1]
    assert info.link_types == [1]
    assert info.bytes == sum(len(f) for f in frames(3))
    assert findings == [] and not info.truncated


def test_scapy_written_pcap(tmp_path):
    """A file written by another implementation (scapy's wrpcap) reads the same."""
    path = tmp_path / "s.pcap"
    wrpcap(str(path), [Ether(f) for f in frames(4)])
    segs, info, _ = read_all(path)
    assert info.packets == 4
    assert [s[9] for s in segs] == [b"payload%03d" % i for i in range(4)]


def test_frame_numbers_count_non_tcp_packets(tmp_path):
    udp = bytes(Ether() / IP(src="10.0.0.9", dst="10.0.0.8") / UDP(sport=53, dport=53) / b"dns")
    arp = bytes(Ether() / ARP())
    f = frames(3)
    path = write_pcap(tmp_path / "m.pcap", [udp, f[0], arp, f[1], udp, f[2]])
    segs, info, findings = read_all(path)
    assert [s[0] for s in segs] == [2, 4, 6]
    assert (info.packets, info.tcp_packets, info.non_tcp_packets) == (6, 3, 3)
    assert findings == []


def test_empty_pcap_is_not_an_error(tmp_path):
    path = write_pcap(tmp_path / "e.pcap", [])
    segs, info, findings = read_all(path)
    assert segs == [] and info.packets == 0 and findings == []
    assert info.first_ts is None and info.last_ts is None


def test_pcap_truncated_mid_record_keeps_earlier_packets(tmp_path):
    data = pcap_bytes(frames(5))
    for cut in (len(data) - 3, len(data) - len(frames(1)[0]) - 8):  # inside data / inside a header
        path = tmp_path / "t.pcap"
        path.write_bytes(data[:cut])
        segs, info, findings = read_all(path)
        assert [s[0] for s in segs] == [1, 2, 3, 4]
        assert info.truncated and info.packets == 4
        assert codes(findings) == ["pcap.truncated"]
        assert findings[0].frame == 5 and findings[0].protocol == "pcap"
        assert "packet" in findings[0].message or "record" in findings[0].message


def test_pcap_absurd_record_length_stops_without_allocating(tmp_path):
    data = bytearray(pcap_bytes(frames(3)))
    second = 24 + 16 + len(frames(1)[0])
    struct.pack_into("<I", data, second + 8, 0xFFFFFFF0)  # caplen of record 2
    path = tmp_path / "bad.pcap"
    path.write_bytes(bytes(data))
    segs, info, findings = read_all(path)
    assert [s[0] for s in segs] == [1]
    assert codes(findings) == ["pcap.corrupt"]
    assert findings[0].severity is Severity.ERROR and findings[0].frame == 2
    assert info.truncated and info.error


def test_pcap_record_crossing_read_blocks(tmp_path, monkeypatch):
    """Records straddling the reader's block boundary are carried over intact."""
    import wirelog.engine.capture as capture

    monkeypatch.setattr(capture, "READ_SIZE", 100)
    big = tcp_frame(7, bytes(range(256)) * 10)
    path = write_pcap(tmp_path / "b.pcap", [big, *frames(20), big])
    segs, info, findings = read_all(path)
    assert info.packets == 22 and findings == []
    assert segs[0][9] == segs[-1][9] == bytes(range(256)) * 10
    assert [s[9] for s in segs[1:-1]] == [b"payload%03d" % i for i in range(20)]


# ------------------------------------------------------------------ not a capture


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"Hello, world\n", "not a pcap or pcapng capture (starts with 48 65 6c 6c)"),
        (b"", "empty"),
        (b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00", "truncated pcap file header"),
        (b"\x0a\x0d\x0d\x0a\x1c\x00\x00\x00\x00\x00\x00\x00", "pcapng"),
    ],
)
def test_not_a_capture_raises_one_line_error(tmp_path, content, needle):
    path = tmp_path / "x.txt"
    path.write_bytes(content)
    with pytest.raises(CaptureError) as err:
        read_all(path)
    msg = str(err.value)
    assert needle in msg and msg.startswith(str(path)) and "\n" not in msg


# ------------------------------------------------------------------ timestamps


def test_time_backwards_reported_individually_then_summarised(tmp_path):
    ts = []
    for i in range(30):  # 15 jumps backwards
        ts.append(T0_NS + i * 1_000_000_000 if i % 2 == 0 else T0_NS + (i - 2) * 1_000_000_000)
    path = write_pcap(tmp_path / "b.pcap", list(zip(ts, frames(30), strict=True)), nano=True)
    segs, info, findings = read_all(path)
    assert len(segs) == 30
    back = [f for f in findings if f.code == "pcap.time-backwards"]
    assert [f.frame for f in back[:10]] == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20]
    assert all(f.severity is Severity.INFO for f in back)
    assert len(back) == 11 and back[-1].fields["count"] == 15 and back[-1].frame is None
    assert info.first_ts == min(ts) and info.last_ts == max(ts)


def test_findings_are_appended_as_they_occur(tmp_path):
    ts = [T0_NS, T0_NS - 1000, T0_NS + 5000]
    path = write_pcap(tmp_path / "b.pcap", list(zip(ts, frames(3), strict=True)), nano=True)
    from wirelog.engine.capture import iter_segments
    from wirelog.model import CaptureInfo

    findings: list = []
    it = iter_segments(str(path), CaptureInfo("b"), findings)
    next(it)
    assert findings == []
    assert next(it)[0] == 2
    assert codes(findings) == ["pcap.time-backwards"]


# ------------------------------------------------------------------ pcapng


def test_pcapng_two_interfaces_link_types_and_resolutions(tmp_path):
    t = T0_NS
    pkts = [
        (0, (t, tcp_frame(1, b"eth", link="ether"))),
        (1, (t + 123_456_789, tcp_frame(2, b"raw", link="raw"))),
        (0, (t + 200_000_000, tcp_frame(3, b"eth2", link="ether"))),
        (2, (t + 3_500_000_000, tcp_frame(4, b"sll", link="sll"))),
    ]
    interfaces = [(1, None), (101, 9), (113, 0x80 | 30)]  # µs default, ns, 2^-30 s
    path = write_pcapng(tmp_path / "two.pcapng", pkts, interfaces)
    segs, info, findings = read_all(path)
    assert findings == [] and info.format == "pcapng"
    assert [s[9] for s in segs] == [b"eth", b"raw", b"eth2", b"sll"]
    assert info.link_types == [1, 101, 113]
    assert segs[0][1] == t // 1000 * 1000
    assert segs[1][1] == t + 123_456_789
    assert segs[2][1] == (t + 200_000_000) // 1000 * 1000
    units = ts_units(t + 3_500_000_000, 0x80 | 30)
    assert segs[3][1] == (units * 10**9) >> 30
    assert abs(segs[3][1] - (t + 3_500_000_000)) <= 1


def test_pcapng_tsoffset_and_big_endian_second_section(tmp_path):
    first = shb("<") + idb(1) + epb(0, ts_units(T0_NS), tcp_frame(1, b"a"))
    second = (
        shb(">")
        + idb(229, tsresol=3, tsoffset=1_800_000_000, order=">")
        + epb(0, 700_000_123, tcp_frame(2, b"b", link="ipv6", src="fe80::1", dst="fe80::2"), order=">")
    )
    path = tmp_path / "s.pcapng"
    path.write_bytes(first + second)
    segs, info, findings = read_all(path)
    assert findings == []
    assert [s[9] for s in segs] == [b"a", b"b"]
    assert segs[1][1] == (1_800_000_000 + 700_000) * 10**9 + 123 * 10**6
    assert segs[1][2] == bytes.fromhex("fe800000000000000000000000000001")
    assert info.link_types == [1, 229]


def test_pcapng_spb_opb_and_other_blocks(tmp_path):
    isb = struct.pack("<IIIII", 5, 20, 0, 0, 20)  # an Interface Statistics Block, skipped
    blocks = [
        shb(),
        idb(1, snaplen=0),
        epb(0, ts_units(T0_NS), tcp_frame(1, b"epb")),
        spb(tcp_frame(2, b"spb")),
        isb,
        opb(0, ts_units(T0_NS + 5_000_000), tcp_frame(3, b"opb")),
    ]
    path = tmp_path / "k.pcapng"
    path.write_bytes(b"".join(blocks))
    segs, info, findings = read_all(path)
    assert findings == []
    assert [(s[0], s[9]) for s in segs] == [(1, b"epb"), (2, b"spb"), (3, b"opb")]
    assert segs[1][1] == segs[0][1]  # an SPB has no timestamp: the previous packet's is used
    assert segs[2][1] == T0_NS // 1000 * 1000 + 5_000_000
    assert info.packets == 3


def test_pcapng_spb_snaplen_and_first_packet(tmp_path):
    frame = tcp_frame(5, b"0123456789")
    blocks = [shb(), idb(1, snaplen=len(frame) - 4), spb(frame)]
    path = tmp_path / "s.pcapng"
    path.write_bytes(b"".join(blocks))
    segs, info, findings = read_all(path)
    assert segs[0][1] == 0 and segs[0][9] == b"012345" and segs[0][10] == 4
    assert codes(findings) == ["pcap.snaplen-truncated"]
    assert info.first_ts is None


def test_pcapng_unknown_interface_is_reported_and_counted(tmp_path):
    blocks = [shb(), idb(1), epb(3, 0, tcp_frame(1, b"x")), epb(0, 0, tcp_frame(2, b"y"))]
    path = tmp_path / "u.pcapng"
    path.write_bytes(b"".join(blocks))
    segs, info, findings = read_all(path)
    assert [s[0] for s in segs] == [2]
    assert codes(findings) == ["pcap.malformed-record"] and findings[0].frame == 1
    assert (info.packets, info.non_tcp_packets) == (2, 1)


def test_pcapng_absurd_block_length_stops(tmp_path):
    good = shb() + idb(1) + epb(0, 0, tcp_frame(1, b"ok"))
    bad = struct.pack("<II", 6, 0x7FFFFFFC) + b"\0" * 64
    path = tmp_path / "a.pcapng"
    path.write_bytes(good + bad)
    segs, info, findings = read_all(path)
    assert [s[9] for s in segs] == [b"ok"]
    assert codes(findings) == ["pcap.corrupt"] and info.truncated


def test_pcapng_mismatched_trailing_length_stops(tmp_path):
    block = bytearray(epb(0, 0, tcp_frame(2, b"no")))
    struct.pack_into("<I", block, len(block) - 4, len(block) + 4)
    path = tmp_path / "m.pcapng"
    path.write_bytes(shb() + idb(1) + epb(0, 0, tcp_frame(1, b"ok")) + bytes(block))
    segs, _, findings = read_all(path)
    assert [s[9] for s in segs] == [b"ok"] and codes(findings) == ["pcap.corrupt"]


def test_pcapng_truncated_mid_block(tmp_path):
    data = shb() + idb(1) + b"".join(epb(0, i, f) for i, f in enumerate(frames(3)))
    path = tmp_path / "t.pcapng"
    path.write_bytes(data[:-10])
    segs, info, findings = read_all(path)
    assert [s[0] for s in segs] == [1, 2]
    assert codes(findings) == ["pcap.truncated"] and findings[0].frame == 3 and info.truncated


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_pcapng_timestamps_match_tshark(tmp_path):
    pkts = [
        (0, (T0_NS + 1, tcp_frame(1, b"a"))),
        (1, (T0_NS + 987_654_321, tcp_frame(2, b"b", link="raw"))),
        (2, (T0_NS + 5_555_555_555, tcp_frame(3, b"c", link="ether"))),
        (3, (T0_NS + 42, tcp_frame(4, b"d", link="sll2"))),
    ]
    interfaces = [(1, None), (101, 9), (1, 0x80 | 20), (276, 10)]
    path = write_pcapng(tmp_path / "ts.pcapng", pkts, interfaces)
    out = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.time_epoch", "-e", "tcp.seq_raw"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    theirs = [(int(Decimal(line.split("\t")[0]) * 10**9), int(line.split("\t")[1])) for line in out if line]
    segs, _, _ = read_all(path)
    assert [(s[1], s[6]) for s in segs] == theirs


# ------------------------------------------------------------------ fuzz


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300), pcapng=st.booleans())
def test_arbitrary_bytes_after_a_valid_header_never_raise(tmp_path, data, pcapng):
    head = shb() + idb(1) if pcapng else pcap_bytes([])
    path = tmp_path / "f.cap"
    path.write_bytes(head + data)
    segs, info, findings = read_all(path)
    assert info.packets >= len(segs)
    assert all(f.code.split(".")[0] in ("pcap", "ip", "tcp") for f in findings)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=24, max_value=10_000), pcapng=st.booleans())
def test_every_truncation_keeps_what_came_before(tmp_path, cut, pcapng):
    fs = frames(6)
    data = shb() + idb(1) + b"".join(epb(0, i, f) for i, f in enumerate(fs)) if pcapng else pcap_bytes(fs)
    cut = min(cut, len(data))
    path = tmp_path / "t.cap"
    path.write_bytes(data[:cut])
    segs, info, findings = read_all(path)
    assert [s[9] for s in segs] == [b"payload%03d" % i for i in range(len(segs))]
    assert info.truncated == ("pcap.truncated" in codes(findings))
    if cut == len(data):
        assert len(segs) == 6 and not info.truncated


def _sample_pcapng() -> bytes:
    return (
        shb()
        + idb(1, tsresol=9)
        + idb(113, tsresol=0x80 | 20)
        + epb(0, 5, tcp_frame(1, b"one"))
        + spb(tcp_frame(2, b"two"))
        + opb(1, 7, tcp_frame(3, b"three", link="sll"))
        + shb(">")
        + idb(101, order=">")
        + epb(0, 9, tcp_frame(4, b"four", link="raw"), order=">")
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    flips=st.lists(st.tuples(st.integers(min_value=0, max_value=10_000), st.integers(0, 255)), max_size=6),
    pcapng=st.booleans(),
)
def test_mutated_captures_never_raise_anything_but_capture_error(tmp_path, flips, pcapng):
    data = bytearray(_sample_pcapng() if pcapng else pcap_bytes(frames(4)))
    for pos, value in flips:
        data[pos % len(data)] = value
    path = tmp_path / "m.cap"
    path.write_bytes(bytes(data))
    try:
        segs, info, _ = read_all(path)
    except CaptureError as e:
        assert "\n" not in str(e)
        return
    assert info.packets >= len(segs) and info.tcp_packets + info.non_tcp_packets == info.packets


def test_sample_pcapng_reads_fully(tmp_path):
    path = tmp_path / "s.pcapng"
    path.write_bytes(_sample_pcapng())
    segs, info, findings = read_all(path)
    assert [s[9] for s in segs] == [b"one", b"two", b"three", b"four"] and findings == []
    assert info.link_types == [1, 101, 113]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    units=st.integers(min_value=0, max_value=2**64 - 1),
    resol=st.one_of(st.integers(0, 19), st.integers(0x80, 0x80 + 63)),
    offset=st.integers(-(2**40), 2**40),
)
def test_pcapng_timestamp_conversion_is_exact(tmp_path, units, resol, offset):
    path = tmp_path / "r.pcapng"
    path.write_bytes(shb() + idb(1, tsresol=resol, tsoffset=offset) + epb(0, units, tcp_frame(1, b"t")))
    segs, info, _ = read_all(path)
    base = 2 if resol & 0x80 else 10
    expected = Fraction(units) / base ** (resol & 0x7F) * 10**9
    exact = math.floor(expected) + offset * 10**9
    saturated = max(-(2**63), min(2**63 - 1, exact))  # int64 ns (the record contract): ±292 years
    assert segs[0][1] == info.first_ts == saturated


def test_pcapng_journal_and_custom_blocks_are_numbered_like_wireshark(tmp_path):
    """tshark 4.0.17 gives Systemd Journal Export (9) and custom blocks a frame number; DSB, ISB,
    NRB and unknown blocks get none."""

    def block(btype: int, body: bytes) -> bytes:
        body += b"\0" * (-len(body) % 4)
        return struct.pack("<II", btype, len(body) + 12) + body + struct.pack("<I", len(body) + 12)

    journal = block(9, b"__REALTIME_TIMESTAMP=1700000000000000\nMESSAGE=hi\n")
    custom = block(0x0BAD, struct.pack("<I", 32473) + b"abcd")
    custom_nocopy = block(0x40000BAD, struct.pack("<I", 32473) + b"efgh")
    dsb = block(10, struct.pack("<II", 0x544C534B, 4) + b"abcd")
    isb = block(5, struct.pack("<III", 0, 0, 0))
    unknown = block(0x1234, b"zzzz")
    path = tmp_path / "j.pcapng"
    path.write_bytes(
        shb()
        + idb(1)
        + epb(0, 1, tcp_frame(1, b"a"))
        + journal
        + epb(0, 2, tcp_frame(2, b"b"))
        + dsb
        + custom
        + isb
        + unknown
        + custom_nocopy
        + epb(0, 3, tcp_frame(3, b"c"))
    )
    segs, info, findings = read_all(path)
    assert [(s[0], s[9]) for s in segs] == [(1, b"a"), (3, b"b"), (6, b"c")]
    assert (info.packets, info.non_tcp_packets) == (6, 3) and findings == []
    if shutil.which("tshark"):
        out = subprocess.run(
            ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number", "-e", "tcp.seq_raw"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert [line.split("\t") for line in out.splitlines()] == [
            ["1", "1"], ["2", ""], ["3", "2"], ["4", ""], ["5", ""], ["6", "3"]
        ]  # fmt: skip


@pytest.mark.parametrize("pcapng", [False, True])
def test_length_within_cap_but_beyond_the_file_is_a_truncation(tmp_path, pcapng):
    if pcapng:
        data = shb() + idb(1) + epb(0, 0, tcp_frame(1, b"ok")) + struct.pack("<II", 6, 200 << 20) + b"\0" * 40
    else:
        data = pcap_bytes([tcp_frame(1, b"ok")], snaplen=256 << 20) + struct.pack("<IIII", 0, 0, 200 << 20, 0)
    path = tmp_path / "l.cap"
    path.write_bytes(data + b"\0" * 40)
    segs, info, findings = read_all(path)
    assert [s[9] for s in segs] == [b"ok"]
    assert codes(findings) == ["pcap.truncated"] and info.truncated
