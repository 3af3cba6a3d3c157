"""CRC24/CRC32 and v5 frames: reference vectors, the real driver's segment codec, and the core's verdicts.

The tests' frame encoder (tests/cql_wire.py: crcmod, zlib, python-lz4) must reproduce the reference
vectors and the driver byte for byte; the core must accept what the driver frames and name the exact
CRCs of what it rejects.
"""

from __future__ import annotations

import io
import zlib

import pytest
from cassandra import ConsistencyLevel
from cassandra.connection import segment_codec_lz4, segment_codec_no_compression
from cassandra.protocol import QueryMessage, StartupMessage
from cassandra.segment import CRC32_INITIAL as DRIVER_CRC32_INITIAL
from cql_helpers import C2S, S2C, codes, driver_envelope, driver_frames, findings, messages, run
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import cql_wire as wire

H = bytes.fromhex


def test_crc24_check_value() -> None:
    assert wire.crc24(b"123456789") == 0x4B3F02


def test_crc32_primed_seed() -> None:
    assert wire.CRC32_INITIAL == 0x44777ED3 == DRIVER_CRC32_INITIAL
    assert wire.crc32(b"") == 0x44777ED3
    assert wire.crc32(b"abc") == zlib.crc32(b"\xfa\x2d\x55\xcaabc")


VECTOR_A = H("320002a5ffee" + "62" * 50 + "7aaeeb7c")
VECTOR_D = H("0b006400042dacc4" + "1f62010019506262626262" + "25c4f9e0")
VECTOR_E = H("010000000406a587" + "62" + "e91b206e")


def test_reference_vectors() -> None:
    assert wire.frame(b"b" * 50) == VECTOR_A
    assert wire.header(131071, 0, False, False) == H("ffff013891fe")  # B
    assert wire.header(5, 0, True, False) == H("05000219999a")  # C
    assert wire.header(5, 12, True, True) == H("05001800049e0838")
    assert wire.header(5, 131071, True, True) == H("0500feff07ae6cdc")
    assert wire.frame(b"b" * 50, lz4=True) == VECTOR_D
    assert wire.frame(b"b", lz4=True) == VECTOR_E  # not smaller compressed: stored raw


def _driver_decode(data: bytes, lz4: bool) -> list[tuple[bytes, bool]]:
    codec = segment_codec_lz4 if lz4 else segment_codec_no_compression
    buf = io.BytesIO(data)
    out = []
    while buf.tell() < len(data):
        header = codec.decode_header(buf)
        seg = codec.decode(buf, header)
        out.append((bytes(seg.payload), seg.is_self_contained))
    return out


texts = st.one_of(
    st.text(min_size=1, max_size=3000),
    st.builds(lambda b, n: b * n, st.text(min_size=1, max_size=4), st.integers(1, 2000)),
)


def _query(text: str) -> bytes:
    return driver_envelope(QueryMessage(text, ConsistencyLevel.ONE), 3, 5)


@given(texts, st.booleans())
@settings(max_examples=150, deadline=None)
def test_driver_frames_decode_in_the_core(text: str, lz4: bool) -> None:
    recs = run([(C2S, driver_frames(_query(text), lz4))])
    (m,) = messages(recs, "query")
    assert m.fields["query"] == text and m.fields["framing"] == ("lz4" if lz4 else "crc")
    assert codes(recs) == ["cql.unanswered-request"]


@given(texts, st.booleans())
@settings(max_examples=150, deadline=None)
def test_test_frames_are_the_drivers(text: str, lz4: bool) -> None:
    envelope = _query(text)
    assert wire.frame(envelope, lz4=lz4) == driver_frames(envelope, lz4)
    assert _driver_decode(wire.frame(envelope, lz4=lz4), lz4) == [(envelope, True)]


@pytest.mark.parametrize("lz4", [False, True])
def test_large_envelope_split_like_the_driver(lz4: bool) -> None:
    big = _query("x" * 204800)
    ours = wire.frames(big, lz4)
    assert ours == driver_frames(big, lz4)
    parts = _driver_decode(ours, lz4)
    assert [len(p) for p, _ in parts] == [131071, len(big) - 131071]
    assert [sc for _, sc in parts] == [False, False]
    (m,) = messages(run([(C2S, ours)]), "query")
    assert m.fields["frames"] == 2 and m.length == len(big)


@pytest.mark.parametrize("lz4", [False, True])
def test_the_core_names_the_crcs_it_rejects(lz4: bool) -> None:
    startup = driver_envelope(StartupMessage("3.4.7", {"COMPRESSION": "lz4"} if lz4 else {}), 1, 5)
    handshake = [(C2S, startup), (S2C, wire.envelope(5, True, 0, 1, 0x02, b""))]
    good = wire.frame(_query("SELECT 1"), lz4=lz4)
    n = 5 if lz4 else 3
    bad_header = bytes([good[0] ^ 0x01]) + good[1:]
    recs = run([*handshake, (C2S, bad_header)])
    crc24 = next(f for f in findings(recs) if f.code == "cql.crc24-mismatch")
    assert crc24.fields["computed"] == f"{wire.crc24(bad_header[:n]):06x}"
    assert crc24.fields["stored"] == good[n : n + 3][::-1].hex()
    bad_trailer = good[:-1] + bytes([good[-1] ^ 0x80])
    crc32 = next(f for f in findings(run([*handshake, (C2S, bad_trailer)])) if f.code == "cql.crc32-mismatch")
    assert crc32.fields["computed"] == f"{wire.crc32(good[n + 3 : -4]):08x}"
    assert crc32.fields["stored"] == bad_trailer[-4:][::-1].hex()
