"""scapy-crafted captures through the CLI: the hard TCP cases over every link type and container."""

from __future__ import annotations

import gzip

import pytest
from scapy.layers.inet import fragment

from tests.capture_tools import ndjson, run_cli
from tests.pcap_helpers import LINKTYPES, T0_NS, epb, idb, link_frame, shb, tcp_frame, tcp_packet, write_pcap

CISN, SISN = 1000, 9000


def conversation(request: bytes, reply: bytes, *, cisn: int = CISN, link: str = "ether", **kw) -> list[bytes]:
    """Handshake, request in 3 segments, reply, FINs: the frames of one clean connection."""
    c = {"link": link, **kw}
    s = {"link": link, "src": kw.get("dst", "10.0.0.2"), "dst": kw.get("src", "10.0.0.1"),
         "sport": kw.get("dport", 5044), "dport": kw.get("sport", 40000)}  # fmt: skip
    third = max(1, len(request) // 3)
    parts = [request[:third], request[third : 2 * third], request[2 * third :]]
    frames = [
        tcp_frame(cisn, flags="S", **c),
        tcp_frame(SISN, flags="SA", ack=cisn + 1, **s),
        tcp_frame(cisn + 1, flags="A", ack=SISN + 1, **c),
    ]
    seq = cisn + 1
    for p in parts:
        frames.append(tcp_frame(seq % 2**32, p, ack=SISN + 1, **c))
        seq += len(p)
    frames.append(tcp_frame(SISN + 1, reply, ack=seq % 2**32, **s))
    frames.append(tcp_frame(seq % 2**32, flags="FA", ack=SISN + 1 + len(reply), **c))
    frames.append(tcp_frame(SISN + 1 + len(reply), flags="FA", ack=(seq + 1) % 2**32, **s))
    return frames


def dump(path, stream=0, direction="c2s", *extra) -> bytes:
    code, out, err = run_cli("streams", str(path), "--dump", str(stream), "--direction", direction, *extra)
    assert code == 0, err
    return out


def rows(path, *extra) -> list[dict]:
    code, out, err = run_cli("streams", "--json", str(path), *extra)
    assert code == 0, err
    return ndjson(out)


def records(path, *extra) -> list[dict]:
    code, out, err = run_cli("convert", str(path), "--to", "json", *extra)
    assert code == 0, err
    return ndjson(out)


REQ, REP = b"request bytes: " + bytes(range(40)), b"the reply"


@pytest.mark.parametrize("link", ["ether", "vlan", "qinq", "null", "null-be", "loop", "raw", "sll", "sll2"])
@pytest.mark.parametrize("v6", [False, True])
def test_every_link_type_and_ip_version(tmp_path, link, v6):
    addrs = {"src": "fd00::1", "dst": "fd00::2"} if v6 else {}
    path = write_pcap(tmp_path / "c.pcap", conversation(REQ, REP, link=link, **addrs), LINKTYPES[link])
    (row,) = rows(path)
    assert (row["bytes_c2s"], row["bytes_s2c"], row["handshake"], row["fin_s2c"]) == (
        len(REQ),
        len(REP),
        True,
        True,
    )
    assert row["client"] == ("[fd00::1]:40000" if v6 else "10.0.0.1:40000")
    assert dump(path) == REQ and dump(path, 0, "s2c") == REP


def test_reordering_and_duplicates(tmp_path):
    f = conversation(REQ, REP)
    frames = [f[0], f[1], f[2], f[5], f[3], f[4], f[4], f[3], f[6], f[7], f[8]]
    path = write_pcap(tmp_path / "r.pcap", frames)
    assert dump(path) == REQ
    (row,) = rows(path)
    assert row["out_of_order"] >= 1 and row["retransmissions"] == 2 and row["gaps"] == 0
    assert not [r for r in records(path) if r["protocol"] == "tcp"]


@pytest.mark.parametrize(("policy", "expected"), [("first", b"GOOD"), ("last", b"EVIL")])
def test_overlap_with_different_bytes(tmp_path, policy, expected):
    f = conversation(b"", b"")
    good = tcp_frame(CISN + 1, b"GOOD", ack=SISN + 1)
    evil = tcp_frame(CISN + 1, b"EVIL", ack=SISN + 1)
    ack = tcp_frame(
        SISN + 1, b"", flags="A", src="10.0.0.2", dst="10.0.0.1", sport=5044, dport=40000, ack=CISN + 5
    )
    frames = [*f[:3], good, evil, ack]
    path = write_pcap(tmp_path / "o.pcap", frames)
    assert dump(path, 0, "c2s", "--overlap", policy) == expected
    (conflict,) = [r for r in records(path, "--overlap", policy) if r["protocol"] == "tcp"]
    assert conflict["code"] == "tcp.overlap-conflict"
    assert (conflict["first_frame"], conflict["frame"], conflict["kept"]) == (4, 5, policy)


def test_gap_in_the_middle_and_at_the_start(tmp_path):
    c = {"ack": SISN + 1}
    s = {"src": "10.0.0.2", "dst": "10.0.0.1", "sport": 5044, "dport": 40000}
    frames = [
        tcp_frame(CISN, flags="S"),
        tcp_frame(SISN, flags="SA", ack=CISN + 1, **s),
        tcp_frame(CISN + 5, b"BBBB", **c),  # bytes 0..3 never captured
        tcp_frame(CISN + 13, b"DDDD", **c),  # bytes 8..11 never captured
        tcp_frame(SISN + 1, b"", flags="A", ack=CISN + 17, **s),
    ]
    path = write_pcap(tmp_path / "g.pcap", frames)
    gaps = [r for r in records(path) if r["record"] == "finding" and r["code"] == "tcp.gap"]
    assert [(g["offset"], g["length"], g["frame"]) for g in gaps] == [(0, 4, 5), (8, 4, 5)]
    assert dump(path) == b"BBBBDDDD"


def test_sequence_wraparound(tmp_path):
    isn = 2**32 - 20
    path = write_pcap(tmp_path / "w.pcap", conversation(bytes(range(60)), b"ok", cisn=isn))
    assert dump(path) == bytes(range(60))
    assert rows(path)[0]["gaps"] == 0


def test_port_reuse_opens_a_second_stream(tmp_path):
    first = conversation(b"first", b"1")
    second = conversation(b"second", b"2", cisn=777777)
    path = write_pcap(tmp_path / "p.pcap", first + second)
    a, b = rows(path)
    assert (a["stream"], b["stream"], b["port_reuse"]) == (0, 1, True)
    assert dump(path, 0) == b"first" and dump(path, 1) == b"second"


def test_no_syn_midstream(tmp_path):
    frames = conversation(REQ, REP)[3:]  # capture starts after the handshake
    path = write_pcap(tmp_path / "m.pcap", frames)
    (row,) = rows(path)
    assert row["midstream"] and not row["handshake"] and row["client_by"] == "port"
    assert dump(path) == REQ


def test_pcapng_two_interfaces_with_different_link_types(tmp_path):
    frames_a = conversation(b"over ethernet", b"A")
    frames_b = conversation(b"over raw ip", b"B", link="raw", sport=40001)
    blocks = [shb(), idb(1, tsresol=6), idb(101, tsresol=9)]
    for i, fr in enumerate(frames_a):
        blocks.append(epb(0, (T0_NS // 1000) + i, fr))
    for i, fr in enumerate(frames_b):
        blocks.append(epb(1, T0_NS + 5_000_000 + i, fr))
    path = tmp_path / "two.pcapng"
    path.write_bytes(b"".join(blocks))
    r = rows(path)
    assert [x["bytes_c2s"] for x in r] == [len(b"over ethernet"), len(b"over raw ip")]
    assert dump(path, 1) == b"over raw ip"
    assert r[1]["first_frame"] == len(frames_a) + 1


def test_fragmented_ipv4(tmp_path):
    big = bytes(range(256)) * 12
    pkt = tcp_packet(CISN + 1, big, ack=SISN + 1)
    pkt.flags = 0  # allow fragmentation
    frags = [link_frame(fr) for fr in fragment(pkt, fragsize=512)]
    frames = conversation(b"", b"")[:3] + frags[::-1]  # fragments out of order
    path = write_pcap(tmp_path / "f.pcap", frames)
    assert dump(path) == big


def test_gzip_compressed_capture_from_stdin(tmp_path):
    path = write_pcap(tmp_path / "c.pcap", conversation(REQ, REP))
    packed = gzip.compress(path.read_bytes())
    code, out, err = run_cli("streams", "-", "--dump", "0", input=packed)
    assert code == 0, err
    assert out == REQ


def test_truncated_capture_keeps_everything_before_the_cut(tmp_path):
    path = write_pcap(tmp_path / "c.pcap", conversation(REQ, REP))
    data = path.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) - 30])  # inside the last record
    recs = records(cut)
    assert "pcap.truncated" in [r.get("code") for r in recs]
    assert dump(cut, 0, "s2c") == REP
    assert dump(cut) == REQ
