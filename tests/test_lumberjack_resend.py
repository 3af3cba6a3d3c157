"""The cross-connection resend registry: where a payload was first sent, remembered compactly."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from wirelog.decoders.base import StreamContext
from wirelog.decoders.lumberjack import resend
from wirelog.decoders.lumberjack.resend import FirstCopy, ResendRegistry


def registry(stream: int, shared: dict) -> ResendRegistry:
    return ResendRegistry(
        StreamContext(stream, "10.0.0.1:40000", "10.0.0.2:5044", 40000, 5044, shared=shared)
    )


@given(
    stream=st.integers(0, 1 << 40),
    frame=st.none() | st.integers(1, (1 << 48) - 2),
    seq=st.integers(0, (1 << 32) - 1),
)
def test_a_resend_on_another_connection_names_the_first_place_exactly(stream, frame, seq):
    shared: dict = {}
    assert registry(stream, shared).first_copy(b"event", frame, seq) is None
    assert registry(stream, shared).first_copy(b"event", 7, 1) is None  # same connection: not a resend
    assert registry(stream + 1, shared).first_copy(b"event", 9, 2) == FirstCopy(stream, frame, seq)
    assert registry(stream + 1, shared).first_copy(b"other", 9, 3) is None


def test_recent_payloads_are_remembered_however_long_the_capture(monkeypatch):
    monkeypatch.setattr(resend, "GENERATION", 3)
    shared: dict = {}
    first = registry(0, shared)
    for i in range(10):
        assert first.first_copy(b"%d" % i, i + 1, i + 1) is None
    assert sum(len(g) for g in shared["events"]) <= 2 * 3  # bounded
    later = registry(1, shared)
    assert later.first_copy(b"9", 20, 1) == FirstCopy(0, 10, 10)  # the newest are known
    assert later.first_copy(b"6", 21, 2) == FirstCopy(0, 7, 7)  # in the older generation
    assert later.first_copy(b"6", 22, 3) == FirstCopy(0, 7, 7)  # still the first place, not the last
    assert later.first_copy(b"0", 23, 4) is None  # forgotten: long before the last two generations
