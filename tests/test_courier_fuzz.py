"""Property tests: arbitrary, truncated and mutated bytes never raise; segmentation never changes records."""

from __future__ import annotations

import courier_codec as enc
from courier_helpers import C2S, GO_HELO, RUBY_VERS, S2C, Segment, context, decode_segments
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core_decoders import CoreDecoder
from tests.detect_helpers import Sample, detector
from wirelog.model import Chunk, Direction, Gap, Message

detect = detector("courier")

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
N1, N2 = bytes(range(16)), bytes(range(1, 17))


def valid_conversation() -> list[tuple[Direction, bytes]]:
    evs = [enc.event_json({"message": f"m{i}", "n": i}) for i in range(4)]
    return [
        (C2S, GO_HELO),
        (S2C, enc.vers(32, 1, (2, 12, 0), b"LCVR")),
        (C2S, enc.payload(N1, evs[:2], "go", streamed=True)),
        (S2C, enc.ackn(N1, 1)),
        (C2S, enc.payload(N2, evs[2:], "ruby")),
        (S2C, enc.ackn(N1, 2)),
        (C2S, enc.ping()),
        (S2C, enc.ackn(N2, 2)),
        (S2C, enc.pong()),
    ]


CONVERSATION = valid_conversation()
BASELINE = decode_segments([Segment(d, b, i + 1, i) for i, (d, b) in enumerate(CONVERSATION)])


def run(pieces: list[tuple[Direction, bytes]], gaps: bool = False) -> list:
    dec = CoreDecoder("courier", context())
    offsets = {C2S: 0, S2C: 0}
    out = []
    for i, (d, data) in enumerate(pieces):
        if gaps and i % 3 == 2:
            out += dec.gap(Gap(0, d, offsets[d], 5, i))
            offsets[d] += 5
        out += dec.feed(Chunk(0, d, offsets[d], data, i, i))
        offsets[d] += len(data)
    return out + dec.close()


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from([C2S, S2C]), st.binary(max_size=300)), max_size=12), st.booleans())
def test_arbitrary_bytes_never_raise(pieces, gaps):
    run(pieces, gaps)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from([C2S, S2C]), st.binary(max_size=64)), max_size=8))
def test_arbitrary_bytes_after_a_valid_handshake(pieces):
    records = run([(C2S, GO_HELO), (S2C, RUBY_VERS), *pieces])
    assert [r.kind for r in records[:2]] == ["helo", "vers"]


@SETTINGS
@given(st.data())
def test_random_segmentation_gives_identical_records(data):
    segs = []
    for i, (d, msg) in enumerate(CONVERSATION):
        cuts = sorted(data.draw(st.sets(st.integers(1, len(msg) - 1), max_size=6)))
        for a, b in zip([0, *cuts], [*cuts, len(msg)], strict=True):
            segs.append(Segment(d, msg[a:b], i + 1, i))
    assert decode_segments(segs) == BASELINE


@SETTINGS
@given(st.integers(0, sum(len(m) for _, m in CONVERSATION)))
def test_truncation_keeps_what_came_before(cut):
    segs, left = [], cut
    for i, (d, msg) in enumerate(CONVERSATION):
        if left <= 0:
            break
        segs.append(Segment(d, msg[:left], i + 1, i))
        left -= len(msg)
    records = decode_segments(segs)
    complete = [
        m for m in BASELINE if isinstance(m, Message) and m.kind in ("helo", "vers", "ackn", "ping", "pong")
    ]
    got = {(m.kind, m.offset, m.direction) for m in records if isinstance(m, Message)}
    whole = {
        i for i, (_, msg) in enumerate(CONVERSATION) if sum(len(m) for _, m in CONVERSATION[: i + 1]) <= cut
    }
    for m in complete:
        if m.frame - 1 in whole:
            assert (m.kind, m.offset, m.direction) in got


@SETTINGS
@given(st.data())
def test_mutated_conversation_never_raises(data):
    pieces = []
    for d, msg in CONVERSATION:
        raw = bytearray(msg)
        for _ in range(data.draw(st.integers(0, 3))):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        pieces.append((d, bytes(raw)))
    run(pieces)


@SETTINGS
@given(st.binary(max_size=64), st.binary(max_size=64), st.booleans())
def test_detect_is_total(c2s, s2c, closed):
    score = detect(Sample(c2s, s2c, 40000, 12345, closed))
    assert score is None or 0.0 <= score <= 1.0
    if closed:
        assert score is not None


@SETTINGS
@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 9)), max_size=20),
)
def test_delivery_follows_the_ack_rules(sizes, acks):
    """Each event is emitted once; payload k's acked events are the first min(max sequence, count),
    each credited to the first ACKN whose sequence covered it (reference/courier.md §3)."""
    from courier_helpers import conversation, messages

    nonces = [bytes([k + 1]) * 16 for k in range(len(sizes))]
    conv = conversation()
    conv.c(GO_HELO)
    conv.s(RUBY_VERS)
    for k, n in enumerate(sizes):
        conv.c(enc.payload(nonces[k], [enc.event_json({"k": k, "i": i}) for i in range(n)]))
    expect: dict[tuple[int, int], int] = {}
    for k, seq in acks:
        conv.s(enc.ackn(bytes([k + 1]) * 16, seq))
        if k < len(sizes):
            for i in range(min(seq, sizes[k])):
                expect.setdefault((k, i), conv.frame)
    evs = messages(conv.records + conv.close(), "event")
    assert sorted((e.event["k"], e.event["i"]) for e in evs) == [
        (k, i) for k, n in enumerate(sizes) for i in range(n)
    ]
    for e in evs:
        key = (e.event["k"], e.event["i"])
        assert e.acked is (key in expect)
        assert e.fields["ack_frame"] == expect.get(key)
