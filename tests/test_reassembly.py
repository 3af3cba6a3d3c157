"""TCP reassembly (the core's, through `_core.Reassembler`) on hand-built segments: ordering,
overlaps, gaps, wraparound, reuse, limits."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wirelog.engine.capture import Reassembler
from wirelog.model import Chunk, Direction, Finding, Gap, StreamInfo

FIN, SYN, RST, ACK = 0x01, 0x02, 0x04, 0x10

C = bytes([10, 0, 0, 1])
S = bytes([10, 0, 0, 2])
CP, SP = 40000, 5044


class Conv:
    """Drives a Reassembler like a capture of one connection would."""

    def __init__(self, overlap="first", cisn=1000, sisn=5000, ports=frozenset({5044}), **kw):
        self.r = Reassembler("t", sorted(ports), overlap, **kw)
        self.frame = 0
        self.cisn, self.sisn = cisn, sisn
        self.items: list = []

    def send(
        self, c2s: bool, seq: int, data: bytes = b"", flags: int = ACK, ack: int | None = None, missing=0
    ):
        self.frame += 1
        src, sport, dst, dport = (C, CP, S, SP) if c2s else (S, SP, C, CP)
        if ack is None:
            ack = 0
            flags &= ~ACK
        self.r.segment(self.frame, self.frame * 1000, src, sport, dst, dport, seq % 2**32, ack % 2**32, flags,
                       data, missing)  # fmt: skip
        self.items += self.r.drain()

    def handshake(self):
        self.send(True, self.cisn, flags=SYN)
        self.send(False, self.sisn, flags=SYN | ACK, ack=self.cisn + 1)
        self.send(True, self.cisn + 1, ack=self.sisn + 1)

    def finish(self):
        self.r.finish()
        self.items += self.r.drain()
        return self

    def data(self, direction=Direction.C2S, stream=None) -> bytes:
        return b"".join(
            c.data
            for c in self.items
            if isinstance(c, Chunk) and c.direction is direction and (stream is None or c.stream == stream)
        )

    def of(self, kind):
        return [i for i in self.items if isinstance(i, kind)]

    def codes(self):
        return [f.code for f in self.of(Finding)]


def test_in_order_with_handshake():
    t = Conv()
    t.handshake()
    t.send(True, 1001, b"hello ", ack=5001)
    t.send(True, 1007, b"world", ack=5001)
    t.send(False, 5001, b"ok", ack=1012)
    t.finish()
    assert t.data() == b"hello world"
    assert t.data(Direction.S2C) == b"ok"
    (info,) = t.of(StreamInfo)
    assert info.handshake and not info.midstream
    assert (info.client, info.server, info.client_by) == ("10.0.0.1:40000", "10.0.0.2:5044", "syn")
    assert (info.bytes_c2s, info.bytes_s2c, info.gaps) == (11, 2, 0)
    offsets = [c.offset for c in t.of(Chunk) if c.direction is Direction.C2S]
    assert offsets == [0, 6]
    assert t.codes() == []


def test_reordering_and_duplicates():
    t = Conv()
    t.handshake()
    t.send(True, 1006, b"BBBBB")  # out of order
    t.send(True, 1001, b"AAAAA")
    t.send(True, 1001, b"AAAAA")  # duplicate
    t.send(True, 1011, b"CC")
    t.finish()
    assert t.data() == b"AAAAABBBBBCC"
    (info,) = t.of(StreamInfo)
    assert info.out_of_order == 1 and info.retransmissions == 1 and info.gaps == 0
    assert t.codes() == []
    # the chunk keeps the frame that carried it
    frames = {c.data: c.frame for c in t.of(Chunk)}
    assert frames[b"BBBBB"] == 4 and frames[b"AAAAA"] == 5


@pytest.mark.parametrize(
    ("policy", "expected", "kept"), [("first", b"GOOD", "first"), ("last", b"EVIL", "last")]
)
def test_exact_overlap_with_different_bytes(policy, expected, kept):
    t = Conv(overlap=policy)
    t.handshake()
    t.send(True, 1001, b"GOOD", ack=5001)
    t.send(True, 1001, b"EVIL", ack=5001)
    t.send(False, 5001, flags=ACK, ack=1005)
    t.finish()
    assert t.data() == expected
    (f,) = t.of(Finding)
    assert f.code == "tcp.overlap-conflict" and f.fields["kept"] == kept
    assert (f.fields["first_frame"], f.frame) == (4, 5)
    assert bytes.fromhex(f.fields["first_bytes"]) == b"GOOD"


@pytest.mark.parametrize(("policy", "expected"), [("first", b"GOOD"), ("last", b"GXXX")])
def test_partial_overlap(policy, expected):
    t = Conv(overlap=policy)
    t.handshake()
    t.send(True, 1001, b"GOOD", ack=5001)
    t.send(True, 1002, b"XXX", ack=5001)
    t.send(False, 5001, flags=ACK, ack=1005)
    t.finish()
    assert t.data() == expected
    assert t.codes() == ["tcp.overlap-conflict"]


def test_overlap_in_out_of_order_buffer_first_wins():
    t = Conv()
    t.handshake()
    t.send(True, 1005, b"efgh")  # pending
    t.send(True, 1003, b"cdXY")  # overlaps pending "ef" with "XY"
    t.send(True, 1001, b"ab")
    t.finish()
    assert t.data() == b"abcdefgh"
    (f,) = t.of(Finding)
    assert f.code == "tcp.overlap-conflict" and f.offset == 4


def test_gap_in_the_middle_declared_once_the_reorder_window_after_the_ack_passed():
    t = Conv(reorder_packets=2)
    t.handshake()
    t.send(True, 1001, b"VERY", ack=5001)
    t.send(True, 1009, b"DATA", ack=5001)
    assert not t.of(Gap)  # not yet: the bytes may still come
    t.send(False, 5001, flags=ACK, ack=1013)  # frame 6 proves the hole
    t.send(False, 5001, flags=ACK, ack=1013)
    t.send(False, 5001, flags=ACK, ack=1013)
    assert not t.of(Gap)  # the missing segment may still come later in the file
    t.send(False, 5001, flags=ACK, ack=1013)
    gap = t.of(Gap)
    assert [(g.offset, g.length, g.frame) for g in gap] == [(4, 4, 6)]
    assert t.data() == b"VERYDATA"
    chunks = [i for i in t.items if isinstance(i, Chunk | Gap)]
    assert [type(i).__name__ for i in chunks] == ["Chunk", "Gap", "Chunk"]  # gap sits between
    assert "tcp.gap" in t.codes()


def test_gap_at_start_and_at_close():
    t = Conv()
    t.handshake()
    t.send(True, 1005, b"GOOD")
    t.finish()
    gaps = t.of(Gap)
    assert [(g.offset, g.length) for g in gaps] == [(0, 4)]
    assert t.data() == b"GOOD"
    assert t.of(StreamInfo)[0].gap_bytes == 4


def test_trailing_bytes_acked_but_never_captured():
    t = Conv()
    t.handshake()
    t.send(True, 1001, b"abc", ack=5001)
    t.send(False, 5001, flags=ACK, ack=1010)  # server got 6 more bytes than we saw
    t.finish()
    assert [(g.offset, g.length) for g in t.of(Gap)] == [(3, 6)]


def test_sequence_wraparound():
    isn = 2**32 - 6
    t = Conv(cisn=isn)
    t.handshake()
    t.send(True, isn + 1, b"01234")
    t.send(True, isn + 6, b"56789")  # crosses 2^32
    t.send(True, isn + 11, b"ab", ack=5001)
    t.finish()
    assert t.data() == b"0123456789ab"
    assert [c.offset for c in t.of(Chunk)] == [0, 5, 10]
    assert t.codes() == []


def test_midstream_client_by_port():
    t = Conv()
    t.send(False, 7000, b"response", ack=3000)  # server speaks first, no SYN
    t.send(True, 3000, b"req", ack=7008)
    t.finish()
    (info,) = t.of(StreamInfo)
    assert info.midstream and not info.handshake and info.client_by == "port"
    assert info.server == "10.0.0.2:5044"
    assert t.data(Direction.S2C) == b"response" and t.data() == b"req"


def test_midstream_first_sender_without_known_port():
    t = Conv(ports=frozenset())
    t.send(False, 7000, b"x")
    t.finish()
    (info,) = t.of(StreamInfo)
    assert info.client_by == "first" and info.client == "10.0.0.2:5044"


def test_port_reuse_after_reset_opens_new_stream():
    t = Conv()
    t.handshake()
    t.send(True, 1001, b"first", ack=5001)
    t.send(False, 5001, flags=RST | ACK, ack=1006)
    t.send(True, 90000, flags=SYN)
    t.send(False, 70000, flags=SYN | ACK, ack=90001)
    t.send(True, 90001, b"second", ack=70001)
    t.finish()
    infos = t.of(StreamInfo)
    assert [i.stream for i in infos] == [0, 1]
    assert infos[0].reset and infos[1].port_reuse and infos[1].handshake
    assert t.data(stream=0) == b"first" and t.data(stream=1) == b"second"
    assert "tcp.port-reuse" in t.codes()


def test_retransmitted_syn_is_not_a_new_stream():
    t = Conv()
    t.send(True, 1000, flags=SYN)
    t.send(True, 1000, flags=SYN)
    t.send(False, 5000, flags=SYN | ACK, ack=1001)
    t.finish()
    assert len(t.of(StreamInfo)) == 1


def test_retransmission_with_different_bytes_after_delivery():
    t = Conv()
    t.handshake()
    t.send(True, 1001, b"hello world", ack=5001)
    t.send(True, 1007, b"WORLD", ack=5001)
    t.finish()
    (f,) = t.of(Finding)
    assert f.code == "tcp.overlap-conflict" and f.offset == 6 and f.fields["first_frame"] == 4
    assert t.data() == b"hello world"


def test_snaplen_truncated_segment_becomes_gap():
    t = Conv()
    t.handshake()
    t.send(True, 1001, b"abc", missing=7)
    t.send(True, 1011, b"xyz")
    t.finish()
    assert [(g.offset, g.length) for g in t.of(Gap)] == [(3, 7)]
    assert t.data() == b"abcxyz"


def test_fin_both_sides_ends_at_the_last_ack_else_after_grace():
    """A clean close (FIN both ways, both acknowledged) ends the stream at its last ACK (issue 28:
    its held events wait for no timer); without that ACK it waits its grace period for late packets."""
    t = Conv(close_grace=0, sweep_every=1)
    t.handshake()
    t.send(True, 1001, b"bye", flags=FIN | ACK, ack=5001)
    t.send(False, 5001, flags=FIN | ACK, ack=1005)
    assert not t.of(StreamInfo)  # the server's FIN is not acknowledged yet
    t.send(True, 1005, flags=ACK, ack=5002)
    infos = t.of(StreamInfo)
    assert len(infos) == 1 and infos[0].fin_c2s and infos[0].fin_s2c
    assert not t.of(Gap)  # the FIN's sequence number is not a missing byte

    t = Conv(close_grace=0, sweep_every=1)
    t.handshake()
    t.send(True, 1001, b"bye", flags=FIN | ACK, ack=5001)
    t.send(False, 5001, flags=FIN | ACK, ack=1005)  # the last ACK is not in the capture
    t.items += t.r.drain()
    assert not t.of(StreamInfo)  # still within its grace period
    t.r.segment(99, 10**9, C, 1, S, 2, 1, 0, SYN, b"")  # another connection, later: sweep
    t.items += t.r.drain()
    infos = t.of(StreamInfo)
    assert len(infos) == 1 and infos[0].fin_c2s and infos[0].fin_s2c


def test_buffer_limit_forces_delivery_with_gap():
    t = Conv(max_pending=100)
    t.handshake()
    for i in range(5):
        t.send(True, 1011 + 30 * i, bytes([65 + i]) * 30)  # 10 bytes missing at the start
    assert "tcp.buffer-full" in t.codes()
    assert [(g.offset, g.length) for g in t.of(Gap)] == [(0, 10)]
    assert len(t.data()) == 150


def test_connection_cap_evicts_oldest():
    r = Reassembler("t", [], max_connections=2)
    for port in (1, 2, 3):
        r.segment(port, port, C, port, S, 80, 1, 0, SYN, b"")
    infos = [i for i in r.drain() if isinstance(i, StreamInfo)]
    assert [i.client_port for i in infos] == [1]


def test_one_sided_capture_reports_unseen_peer_data():
    t = Conv()
    t.send(True, 3000, b"GET /", ack=9000)
    t.send(True, 3005, b" HTTP", ack=12000)
    t.finish()
    assert "tcp.unseen-data" in t.codes()
    f = next(f for f in t.of(Finding) if f.code == "tcp.unseen-data")
    assert f.fields["length"] == 3000 and f.direction is Direction.S2C
    assert [(g.direction, g.offset, g.length) for g in t.of(Gap)] == [(Direction.S2C, 0, 3000)]


def test_rejects_unknown_policy():
    with pytest.raises(ValueError):
        Reassembler("t", overlap="bsd")


@settings(max_examples=150, deadline=None)
@given(
    data=st.binary(min_size=1, max_size=400),
    cuts=st.lists(st.integers(min_value=1, max_value=399), max_size=12),
    seed=st.integers(0, 2**16),
    isn=st.integers(0, 2**32 - 1),
    dup=st.booleans(),
)
def test_any_segmentation_and_order_gives_the_same_bytes(data, cuts, seed, isn, dup):
    """Whatever the cuts, order and duplicates, the client stream is the bytes sent, no gaps."""
    bounds = sorted({0, len(data), *[c for c in cuts if c < len(data)]})
    segs = [(a, data[a:b]) for a, b in itertools.pairwise(bounds)]
    rng = random.Random(seed)
    rng.shuffle(segs)
    if dup:
        segs += segs[: len(segs) // 2]
    t = Conv(cisn=isn)
    t.handshake()
    for off, piece in segs:
        t.send(True, isn + 1 + off, piece)
    t.finish()
    assert t.data() == data
    assert not t.of(Gap)
    assert t.codes() == []


def test_many_tiny_out_of_order_segments_hit_the_segment_cap():
    """Hostile input: one-byte segments each leaving a hole are bounded by count, not only bytes."""
    t = Conv(max_segments=50)
    t.handshake()
    for i in range(200):
        t.send(True, 1001 + 1 + 2 * i, b"x")  # every other byte missing, never acknowledged
    assert "tcp.buffer-full" in t.codes()
    assert t.of(Gap) and len(t.data()) > 50
