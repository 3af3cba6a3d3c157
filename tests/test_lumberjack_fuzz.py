"""Property tests: arbitrary bytes never raise, segmentation never changes the records, and no
complete frame is ever lost (truncation keeps everything before the cut)."""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lumberjack_helpers import (
    C2S,
    S2C,
    ack,
    canonical,
    cframe,
    dframe,
    feed_chunks,
    jframe,
    messages,
    run,
    window,
)

from wirelog.model import Finding, Gap, Message

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
cuts = st.lists(st.integers(min_value=1, max_value=3000), max_size=40)


def assert_exportable(records) -> None:
    for r in records:
        assert isinstance(r, Message | Finding)
        orjson.dumps(r.fields)
        if isinstance(r, Message):
            orjson.dumps(r.event)
            assert not set(r.fields) & {"offset", "length", "frame", "kind", "version", "message"}


@SETTINGS
@given(c2s=st.binary(max_size=1500), s2c=st.binary(max_size=200), cut=cuts)
def test_arbitrary_bytes_never_raise(c2s, s2c, cut):
    out = run([(C2S, c2s), (S2C, s2c)], cuts=cut)
    assert_exportable(out)


@SETTINGS
@given(
    body=st.binary(max_size=400),
    prefix=st.sampled_from([b"2W\x00\x00\x00\x01", b"1W\x00\x00\x00\x02", b""]),
    kind=st.sampled_from(b"WJDCA"),
    version=st.sampled_from(b"12"),
    cut=cuts,
)
def test_frame_shaped_garbage_never_raises(body, prefix, kind, version, cut):
    data = prefix + bytes([version, kind]) + body
    out = run([(C2S, data), (S2C, bytes([version]) + b"A" + body[:4])], cuts=cut)
    assert_exportable(out)


@dataclass
class Session:
    """A valid exchange built with the test encoder, and where each event-carrying frame ends."""

    turns: list[tuple]
    docs: list[dict]
    ends: list[tuple[int, int]]  # (C2S offset just after a frame, events that frame carries)


@st.composite
def sessions(draw) -> Session:
    v1 = draw(st.booleans())
    version = "1" if v1 else "2"
    turns, docs, ends = [], [], []
    offset, seq = 0, 0
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, 5))
        mode = draw(st.sampled_from(["plain", "compressed", "nested"]))
        batch = [{"message": draw(st.text(max_size=30)), "n": len(docs) + i} for i in range(n)]
        restart = draw(st.booleans())
        seq = 0 if restart else seq
        frames = []
        for doc in batch:
            seq += 1
            if v1:
                frames.append(dframe(seq, {"line": doc["message"], "n": str(doc["n"])}))
            else:
                frames.append(jframe(seq, doc))
        head = window(n, version)
        if mode == "plain":
            body, pieces = b"".join(frames), [(len(f), 1) for f in frames]
        else:
            inner = b"".join(frames)
            body = cframe(cframe(inner, v=version) if mode == "nested" else inner, v=version)
            pieces = [(len(body), n)]
        offset += len(head)
        for size, count in pieces:
            offset += size
            ends.append((offset, count))
        turns.append((C2S, head + body))
        turns.append((S2C, ack(n, version)))
        docs += [{"line": d["message"], "n": str(d["n"])} if v1 else d for d in batch]
    return Session(turns, docs, ends)


@SETTINGS
@given(session=sessions(), cut=cuts)
def test_segmentation_never_changes_records(session, cut):
    whole = run(session.turns)
    split = run(session.turns, cuts=cut)
    assert canonical(split) == canonical(whole)
    evs = messages(whole, "event")
    assert [e.event for e in evs] == session.docs
    assert all(e.acked is True for e in evs)
    assert_exportable(whole)


@SETTINGS
@given(session=sessions(), data=st.data())
def test_truncation_keeps_every_complete_frame(session, data):
    c2s = b"".join(d for direction, d in session.turns if direction is C2S)
    stop = data.draw(st.integers(0, len(c2s)))
    out = run([(C2S, c2s[:stop])], cuts=data.draw(cuts))
    complete = sum(count for end, count in session.ends if end <= stop)
    evs = messages(out, "event")
    assert [e.event for e in evs] == session.docs[:complete]
    assert all(e.acked is False for e in evs)
    assert_exportable(out)


@SETTINGS
@given(
    texts=st.lists(st.text(max_size=40), min_size=1, max_size=12),
    per_window=st.integers(1, 4),
    data=st.data(),
)
def test_gap_loses_only_the_frames_it_touches(texts, per_window, data):
    """Plain v2 J frames (JSON text never holds a header's NUL bytes, so resync cannot lock onto a
    false header): every frame wholly before or wholly after the gap is decoded, and nothing else."""
    stream, spans = b"", []
    for i, text in enumerate(texts):
        if i % per_window == 0:
            stream += window(min(per_window, len(texts) - i))
        frame = jframe(i + 1, {"message": text})
        spans.append((len(stream), len(stream) + len(frame)))
        stream += frame
    a = data.draw(st.integers(0, len(stream) - 1))
    b = data.draw(st.integers(a + 1, len(stream)))
    out = feed_chunks([(C2S, stream[:a]), Gap(0, C2S, a, b - a), (C2S, stream[b:])])
    kept = [i for i, (start, end) in enumerate(spans) if end <= a or start >= b]
    assert [e.event["message"] for e in messages(out, "event")] == [texts[i] for i in kept]
    assert_exportable(out)
