"""Bare Hercules events in a stream or file: chunking, batches, corruption and resync, limits."""

from __future__ import annotations

import struct

from hercules_codec import encode_event
from hercules_helpers import EVENTS, README_EVENT, codes, decode_stream, event_bytes, messages
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core_decoders import CoreDecoder
from wirelog.engine.hercules_events import decode_event_stream
from wirelog.engine.protocols import Limits, StreamContext
from wirelog.model import Chunk, Direction, Finding, Message

EV = bytes.fromhex(README_EVENT)


def summary(records) -> list[tuple]:
    out = []
    for r in records:
        if isinstance(r, Message):
            out.append((r.kind, r.offset, r.length, r.fields.get("uuid"), repr(r.event)))
        else:
            out.append((r.code, r.offset))
    return out


def test_concatenated_events_with_offsets():
    recs = list(decode_event_stream(EV * 3))
    assert [(m.kind, m.offset, m.length) for m in recs] == [("event", i * 65, 65) for i in range(3)]
    assert recs[0].event == {"host": "localhost", "timestamp": 1_527_679_920_000_000}
    assert recs[0].fields["time"] == "2018-05-30T11:32:00.0000000Z"
    assert recs[0].fields["uuid"] == "11203800-63fd-11e8-83e2-3a587d902000"
    assert recs[0].version == "1" and recs[0].acked is None


def test_gate_body_file_is_read_as_a_batch():
    # v1.event.1.txt of the reference: Count 1 + the README event, 69 bytes
    recs = list(decode_event_stream(bytes.fromhex("00000001" + README_EVENT)))
    assert [(m.kind, m.offset) for m in recs] == [("batch", 0), ("event", 4)]
    assert recs[0].fields == {"count": 1}
    assert recs[1].fields["batch_index"] == 0


def test_batches_back_to_back_and_a_short_one():
    data = struct.pack(">i", 2) + EV * 2 + struct.pack(">i", 2) + EV
    recs = list(decode_event_stream(data))
    assert [getattr(r, "kind", None) or r.code for r in recs] == [
        "batch", "event", "event", "batch", "event", "hercules.count-mismatch",
    ]  # fmt: skip


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)  # a core call per piece
@given(st.lists(EVENTS, min_size=1, max_size=4), st.lists(st.integers(1, 200), min_size=1, max_size=30))
def test_chunking_does_not_change_the_records(events, sizes):
    data = b"".join(encode_event(ev) for ev in events)
    whole = summary(decode_event_stream(data))
    pieces, pos, i = [], 0, 0
    while pos < len(data):
        pieces.append(data[pos : pos + sizes[i % len(sizes)]])
        pos += sizes[i % len(sizes)]
        i += 1
    assert summary(decode_event_stream(pieces)) == whole
    assert [r.kind for r in messages(whole and list(decode_event_stream(data)))] == ["event"] * len(events)


def test_corrupt_event_then_resync_to_the_next_one():
    bad = event_bytes("0001" + "0161" + "0e" + "00" * 10)
    recs = list(decode_event_stream(EV + bad + EV))
    assert [getattr(r, "kind", None) or r.code for r in recs] == [
        "event", "hercules.unknown-type", "hercules.resync", "event",
    ]  # fmt: skip
    corrupt, resync = recs[1], recs[2]
    assert corrupt.offset == 65 + 25 + 2 + 2  # the type byte
    assert corrupt.fields["event_offset"] == 65 and corrupt.fields["path"] == "a"
    assert resync.offset == 65 and resync.fields["skipped"] == len(bad)
    assert recs[3].offset == 65 + len(bad)


def test_truncated_tail_is_reported_once():
    recs = list(decode_event_stream(EV + EV[:40]))
    assert [getattr(r, "kind", None) or r.code for r in recs] == ["event", "hercules.truncated"]
    assert recs[1].offset == 65 and recs[1].fields["bytes"] == 40


@settings(max_examples=200)
@given(st.binary(max_size=400), st.integers(1, 64))
def test_arbitrary_bytes_become_findings_not_exceptions(data, step):
    recs = decode_stream(b"\x01" + data, b"\x00" + data, step=step)
    for r in recs:
        assert isinstance(r, Message | Finding)


def test_tag_name_findings_once_per_capture():
    ev = event_bytes("0001" + "03612062" + "0b")  # key "a b"
    shared: dict = {}
    found = []
    for stream in range(2):
        dec = CoreDecoder("hercules", StreamContext(stream, "c", "s", 1, 2, shared=shared))
        found += dec.feed(Chunk(stream, Direction.C2S, 0, ev * 3)) + dec.close()
    assert codes(found) == ["hercules.tag-name"]


def test_event_size_limit_from_context():
    big = event_bytes("0001" + "0173" + "09" + struct.pack(">i", 5000).hex() + "61" * 5000)
    recs = list(decode_event_stream(big + EV, limits=Limits(max_frame=1000)))
    assert [getattr(r, "kind", None) or r.code for r in recs] == [
        "hercules.absurd-length", "hercules.resync", "event",
    ]  # fmt: skip


def test_gap_resynchronises():
    dec = CoreDecoder("hercules", StreamContext(0, "c", "s", 1, 2))
    from wirelog.model import Gap

    out = dec.feed(Chunk(0, Direction.C2S, 0, EV + EV[:30]))
    out += dec.gap(Gap(0, Direction.C2S, 95, 20))
    out += dec.feed(Chunk(0, Direction.C2S, 115, EV[50:] + EV + EV))
    out += dec.close()
    assert [getattr(r, "kind", None) or r.code for r in out] == ["event", "hercules.resync", "event", "event"]
    assert [m.offset for m in messages(out)] == [0, 130, 195]
    assert out[1].offset == 65


def test_tag_name_reported_when_the_event_arrives_in_pieces():
    ev = event_bytes("0002" + "03612062" + "0b" + "0173" + "09" + "00000003" + "616263")  # "a b": Null
    assert codes(decode_stream(ev * 2, step=5)) == ["hercules.tag-name"]
