"""StreamBuffer: offsets, frame attribution, and linear-cost consumption."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from wirelog.decoders.buffer import StreamBuffer
from wirelog.model import Chunk, Direction


def chunk(offset: int, data: bytes, frame: int) -> Chunk:
    return Chunk(0, Direction.C2S, offset, data, frame, frame * 10)


def test_offsets_and_origin_across_chunks():
    b = StreamBuffer()
    b.append(chunk(100, b"abcd", 1))
    b.append(chunk(104, b"efgh", 2))
    assert (b.offset, b.end, len(b)) == (100, 108, 8)
    assert b.peek(3, at=2) == b"cde"
    assert b.origin() == (1, 10)
    assert b.consume(5) == b"abcde"
    assert b.offset == 105 and b.origin() == (2, 20)
    assert b.origin(107) == (2, 20)  # any unconsumed offset
    assert b.find(b"gh") == 1 and b.find(b"zz") == -1
    assert bytes(b.view()) == b"fgh"


def test_reset_after_gap_jumps_offset():
    b = StreamBuffer()
    b.append(chunk(0, b"abc", 1))
    b.reset(50)
    assert len(b) == 0 and b.offset == 50
    b.append(chunk(50, b"xyz", 3))
    assert b.consume(3) == b"xyz" and b.origin(50) == (3, 30)


def test_consuming_small_frames_from_a_long_buffer_is_linear():
    """Many 4-byte reads from 8 MiB must not copy the tail each time (that would take minutes)."""
    b = StreamBuffer()
    b.append(chunk(0, bytes(8 * 1024 * 1024), 1))
    start = time.process_time()
    while len(b):
        b.skip(4)
    assert time.process_time() - start < 5


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=50), max_size=20), st.lists(st.integers(0, 60), max_size=40))
def test_consume_returns_the_bytes_in_order(pieces, reads):
    b = StreamBuffer()
    off = 0
    for i, p in enumerate(pieces):
        b.append(chunk(off, p, i + 1))
        off += len(p)
    whole = b"".join(pieces)
    got = bytearray()
    for n in reads:
        got += b.consume(n)
    got += b.consume(len(b))
    assert bytes(got) == whole and b.offset == len(whole)
