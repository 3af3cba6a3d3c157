"""The `2J` fast path inside C frames must decode exactly like the general frame parser."""

from __future__ import annotations

import contextlib
import struct
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.lumberjack_helpers import C2S, S2C, ack, cframe, dframe, jframe, run, window
from tests.lumberjack_helpers import decoder as make_decoder
from wirelog.decoders.base import Limits
from wirelog.decoders.lumberjack import decoder as decoder_module

inner_frames = st.one_of(
    st.builds(jframe, st.integers(0, 2**32 - 1), st.sampled_from([b'{"m":1}', b"[1]", b"{bad", b'"s"'])),
    st.builds(lambda seq: b"2J" + struct.pack(">II", seq, 0), st.integers(0, 9)),  # empty payload
    st.builds(lambda seq: b"2J" + struct.pack(">II", seq, 500) + b"{}", st.integers(0, 9)),  # cut short
    st.builds(lambda seq: b"2J" + struct.pack(">II", seq, 2**31), st.integers(0, 9)),  # above the limit
    st.builds(jframe, st.integers(0, 9), st.just(b'{"p":"' + b"x" * 300 + b'"}')),  # whole, above it
    st.builds(jframe, st.integers(0, 9), st.just({"v1": 1}), st.just("1")),  # J with version byte 1
    st.builds(dframe, st.integers(0, 9), st.just({"k": "v"}), st.sampled_from(["1", "2"])),
    st.builds(window, st.integers(0, 4)),
    st.binary(max_size=3),
)


def decode(session: list[tuple], fast: bool) -> list[str]:
    """Records as text; `fast=False` sends every inner frame through `parse`."""
    skip = mock.patch.object(decoder_module, "whole_j2", lambda *_: None)
    with contextlib.nullcontext() if fast else skip:
        records = run(session, dec=make_decoder(limits=Limits(max_frame=256)))
    return [repr(r) for r in records]


@settings(max_examples=150)
@given(
    st.sampled_from(["1", "2"]),
    st.lists(st.lists(inner_frames, max_size=6), min_size=1, max_size=3),
)
def test_fast_path_records_equal_the_general_parser(version, bodies):
    session = [(C2S, window(3, version))]
    for body in bodies:
        session += [(C2S, cframe(b"".join(body), v=version)), (S2C, ack(2, version))]
    assert decode(session, True) == decode(session, False)
