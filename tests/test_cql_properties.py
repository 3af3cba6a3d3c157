"""Hypothesis: arbitrary or corrupted bytes never raise, and chunking never changes the records."""

from __future__ import annotations

import itertools

from cassandra import ConsistencyLevel
from cassandra.protocol import OptionsMessage, QueryMessage, StartupMessage
from cql_helpers import C2S, S2C, ctx, driver_envelope, driver_frames, s_bytes, s_int, s_string
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import cql_wire as wire
from tests.core_decoders import CoreDecoder
from wirelog.model import Chunk, Finding, Message

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CUTS = st.lists(st.integers(0, 10**6), max_size=40)


def _rows(stream: int, text: str) -> bytes:
    body = s_int(2) + s_int(1) + s_int(1) + s_string("ks") + s_string("t") + s_string("v") + b"\x00\x0d"
    body += s_int(1) + s_bytes(text.encode())
    return wire.envelope(5, True, 0, stream, 0x08, body)


def _conversation(lz4: bool) -> list[tuple]:
    """A v5 connection in causal order: unframed handshake, then frames both ways (LZ4 or CRC)."""
    startup = StartupMessage("3.4.7", {"COMPRESSION": "lz4"} if lz4 else {})
    units = [
        (C2S, driver_envelope(OptionsMessage(), 0, 5)),
        (S2C, wire.envelope(5, True, 0, 0, 0x06, b"\x00\x00")),
        (C2S, driver_envelope(startup, 1, 5)),
        (S2C, wire.envelope(5, True, 0, 1, 0x02, b"")),
    ]
    for i in range(2, 6):
        query = QueryMessage(f"SELECT v FROM ks.t WHERE k={i}" * i, ConsistencyLevel.ONE)
        units.append((C2S, driver_frames(driver_envelope(query, i, 5), lz4)))
        units.append((S2C, driver_frames(_rows(i, "value" * i * 7), lz4)))
    return units


CONVERSATIONS = [_conversation(False), _conversation(True)]
V4 = b"".join(driver_envelope(QueryMessage(f"SELECT {i}", ConsistencyLevel.ONE), i, 4) for i in range(4))


def _c2s(units: list[tuple]) -> bytes:
    return b"".join(data for d, data in units if d is C2S)


def _normal(records: list) -> list:
    """Records without the chunk-dependent parts (frame numbers, timestamps, latency)."""
    out = []
    for r in records:
        if isinstance(r, Message):
            fields = {k: v for k, v in r.fields.items() if k not in ("latency_ns", "request_frame")}
            out.append(("m", r.kind, r.direction, r.offset, r.length, r.version, fields))
        else:
            assert isinstance(r, Finding)
            out.append(("f", r.code, r.direction, r.offset, r.fields.get("bytes")))
    return out


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted(set(cuts) | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


def _feed(units: list[tuple], raw_cuts: list[int]) -> list:
    """Feed each unit cut into pieces (cut positions are global), units in their causal order."""
    total = sum(len(data) for _, data in units)
    cuts = [c % (total + 1) for c in raw_cuts]
    dec = CoreDecoder("cql", ctx())
    out: list = []
    offsets = {C2S: 0, S2C: 0}
    start = 0
    for d, data in units:
        local = [c - start for c in cuts if start < c < start + len(data)]
        start += len(data)
        for piece in _split(data, local):
            out += dec.feed(Chunk(0, d, offsets[d], piece, 1, 0))
            offsets[d] += len(piece)
    return out + dec.close()


@given(st.sampled_from([0, 1]), CUTS)
@SETTINGS
def test_chunking_does_not_change_records(which: int, cuts: list[int]) -> None:
    units = CONVERSATIONS[which]
    whole = _normal(_feed(units, []))
    assert [r[1] for r in whole if r[0] == "m"].count("query") == 4
    assert [r for r in whole if r[0] == "f"] == []
    assert _normal(_feed(units, cuts)) == whole


@given(
    st.sampled_from([0, 1, 2]),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4),
    CUTS,
    st.integers(0, 40),
)
@SETTINGS
def test_corruption_never_raises_and_chunking_still_irrelevant(
    which: int, flips: list[tuple[int, int]], cuts: list[int], drop: int
) -> None:
    c2s = bytearray(V4 if which == 2 else _c2s(CONVERSATIONS[which]))
    for pos, mask in flips:
        c2s[pos % len(c2s)] ^= mask
    units = [(C2S, bytes(c2s[drop:]))]  # also start mid-stream
    assert _normal(_feed(units, cuts)) == _normal(_feed(units, []))


@given(st.binary(max_size=600), st.binary(max_size=600), CUTS)
@SETTINGS
def test_arbitrary_bytes_never_raise(c2s: bytes, s2c: bytes, cuts: list[int]) -> None:
    for r in _feed([(C2S, c2s), (S2C, s2c)], cuts):
        assert isinstance(r, (Message, Finding))


@given(st.sampled_from([0, 1]), st.integers(0, 10**6))
@SETTINGS
def test_truncated_stream_keeps_what_came_before(which: int, cut: int) -> None:
    c2s = _c2s(CONVERSATIONS[which])
    cut %= len(c2s) + 1
    full = [r for r in _normal(_feed([(C2S, c2s)], [])) if r[0] == "m"]
    part = [r for r in _normal(_feed([(C2S, c2s[:cut])], [])) if r[0] == "m"]
    assert part == full[: len(part)]
    unframed = [r for r in full if "framing" not in r[6] and r[3] + r[4] <= cut]
    assert len(part) >= len(unframed)
