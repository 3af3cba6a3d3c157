"""CRC24/CRC32 and v5 frame codec: reference vectors and the real driver's segment codec both ways."""

from __future__ import annotations

import io
import zlib

import lz4.block as lz4_block
import pytest
from cassandra.connection import segment_codec_lz4, segment_codec_no_compression
from cassandra.segment import CRC32_INITIAL as DRIVER_CRC32_INITIAL
from cql_helpers import driver_frames
from hypothesis import given, settings
from hypothesis import strategies as st

from wirelog.decoders.cql import crc, framing

H = bytes.fromhex


def test_crc24_check_value_both_backends() -> None:
    assert crc.crc24(b"123456789") == 0x4B3F02
    assert crc.crc24_table(b"123456789") == 0x4B3F02


def test_crc24_backend_is_crcmod_c_extension() -> None:
    import importlib

    if importlib.import_module("crcmod.crcmod")._usingExtension:
        assert crc.CRC24_BACKEND == "crcmod-c"
    else:
        assert crc.CRC24_BACKEND == "table"


@given(st.binary(max_size=16))
@settings(max_examples=200)
def test_crc24_backends_agree(data: bytes) -> None:
    assert crc.crc24(data) == crc.crc24_table(data)


def test_crc32_primed_seed() -> None:
    assert crc.CRC32_INITIAL == 0x44777ED3 == DRIVER_CRC32_INITIAL
    assert crc.crc32(b"") == 0x44777ED3
    assert crc.crc32(b"abc") == zlib.crc32(b"\xfa\x2d\x55\xcaabc")


VECTOR_A = H("320002a5ffee" + "62" * 50 + "7aaeeb7c")
VECTOR_D = H("0b006400042dacc4" + "1f62010019506262626262" + "25c4f9e0")
VECTOR_E = H("010000000406a587" + "62" + "e91b206e")


def test_vector_a_crc_frame() -> None:
    assert framing.encode_frame(b"b" * 50) == VECTOR_A
    h = framing.parse_header(VECTOR_A, False)
    assert (h.payload_length, h.self_contained, h.crc_ok, h.stored_crc24) == (50, True, True, 0xEEFFA5)
    assert framing.trailer_crc32(VECTOR_A, h) == (0x7CEBAE7A, 0x7CEBAE7A)


def test_vector_b_header_only() -> None:
    assert framing.encode_header(131071, 0, False, False) == H("ffff013891fe")


@pytest.mark.parametrize(
    ("raw", "lz4", "length", "uncompressed"),
    [
        ("05000219999a", False, 5, 0),
        ("05001800049e0838", True, 5, 12),
        ("0500feff07ae6cdc", True, 5, 131071),
    ],
)
def test_vector_c_native_protocol_headers(raw: str, lz4: bool, length: int, uncompressed: int) -> None:
    h = framing.parse_header(H(raw), lz4)
    assert h.crc_ok and h.self_contained and h.padding == 0
    assert (h.payload_length, h.uncompressed_length) == (length, uncompressed)
    assert framing.encode_header(length, uncompressed, True, lz4) == H(raw)


def test_vectors_d_e_lz4_frames() -> None:
    assert framing.encode_frame(b"b" * 50, lz4=True) == VECTOR_D
    assert framing.encode_frame(b"b", lz4=True) == VECTOR_E  # not smaller compressed: stored raw
    h = framing.parse_header(VECTOR_E, True)
    assert (h.payload_length, h.uncompressed_length, h.total) == (1, 0, 13)


def test_corrupt_header_fails_crc24() -> None:
    bad = bytes([VECTOR_A[0] ^ 0x01]) + VECTOR_A[1:]
    assert not framing.parse_header(bad, False).crc_ok


def _driver_decode(data: bytes, lz4: bool) -> list[tuple[bytes, bool]]:
    codec = segment_codec_lz4 if lz4 else segment_codec_no_compression
    buf = io.BytesIO(data)
    out = []
    while buf.tell() < len(data):
        header = codec.decode_header(buf)
        seg = codec.decode(buf, header)
        out.append((bytes(seg.payload), seg.is_self_contained))
    return out


def _our_decode(data: bytes, lz4: bool) -> list[tuple[bytes, bool]]:
    out, pos = [], 0
    while pos < len(data):
        h = framing.parse_header(data[pos:], lz4)
        assert h.crc_ok
        stored, computed = framing.trailer_crc32(data[pos:], h)
        assert stored == computed
        payload = data[pos + h.size : pos + h.size + h.payload_length]
        if h.uncompressed_length:
            payload = lz4_block.decompress(payload, uncompressed_size=h.uncompressed_length)
        out.append((payload, h.self_contained))
        pos += h.total
    return out


payloads = st.one_of(
    st.binary(min_size=1, max_size=3000),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=4), st.integers(1, 2000)),
)


@given(payloads, st.booleans())
@settings(max_examples=150, deadline=None)
def test_driver_frames_decode_with_ours(payload: bytes, lz4: bool) -> None:
    assert _our_decode(driver_frames(payload, lz4), lz4) == [(payload, True)]


@given(payloads, st.booleans())
@settings(max_examples=150, deadline=None)
def test_our_frames_decode_with_driver(payload: bytes, lz4: bool) -> None:
    assert _driver_decode(framing.encode_frame(payload, lz4=lz4), lz4) == [(payload, True)]


@pytest.mark.parametrize("lz4", [False, True])
def test_large_envelope_split_like_the_driver(lz4: bool) -> None:
    big = bytes(range(256)) * 800  # 204800 bytes > 131071
    ours = framing.encode_frames(big, lz4)
    assert ours == driver_frames(big, lz4)
    parts = _driver_decode(ours, lz4)
    assert [len(p) for p, _ in parts] == [131071, len(big) - 131071]
    assert [sc for _, sc in parts] == [False, False]


def test_candidate_prefilter_matches_padding_rule() -> None:
    data = b"\xff" * 10 + framing.encode_frame(b"x")
    assert framing.next_candidate(data, 0, False) <= 10
    assert framing.next_candidate(b"\xff" * 32, 0, False) == -1
