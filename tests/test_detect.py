"""Protocol detection, and what the core says of a TLS stream without its key log."""

from __future__ import annotations

import struct

import pytest

from tests.core_decoders import CoreDecoder
from tests.detect_helpers import Sample, choose
from wirelog.engine import protocols
from wirelog.engine.protocols import StreamContext
from wirelog.model import Chunk, Direction, Finding, Message


def client_hello(sni: str) -> bytes:
    name = sni.encode()
    sni_ext = struct.pack(">HHHBH", 0, len(name) + 5, len(name) + 3, 0, len(name)) + name
    alpn = b"\x00\x10\x00\x05\x00\x03\x02h2"
    versions = b"\x00\x2b\x00\x03\x02\x03\x04"
    exts = sni_ext + alpn + versions
    body = (
        b"\x03\x03"
        + bytes(32)
        + b"\x00"
        + b"\x00\x02\x13\x01"
        + b"\x01\x00"
        + struct.pack(">H", len(exts))
        + exts
    )
    hs = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs


def sample(c2s: bytes = b"", s2c: bytes = b"", port: int = 5044, closed: bool = False) -> Sample:
    return Sample(c2s, s2c, 40000, port, closed)


def test_tls_client_hello_is_tls_on_any_port():
    hello = client_hello("logs.example.com")
    for port in (5044, 9042, 31337):
        assert choose(sample(hello, port=port)) == "tls"


def test_undecidable_bytes_wait_then_give_up():
    assert choose(sample(b"\x16\x03")) is False  # too short to tell: wait
    assert choose(sample(b"\x16\x03", port=31337, closed=True)) is None


def test_garbage_is_unknown():
    assert choose(sample(b"\x00\xff" * 300, port=31337, closed=True)) is None


def test_tls_stream_reports_its_client_hello():
    hello = client_hello("logs.example.com")
    dec = CoreDecoder("tls", StreamContext(0, "c", "s", 1, 443))
    records = []
    for i in range(0, len(hello), 7):  # split across many chunks
        records += dec.feed(Chunk(0, Direction.C2S, i, hello[i : i + 7], i + 1, 0))
    msgs = [r for r in records if isinstance(r, Message)]
    assert [m.kind for m in msgs] == ["client_hello"]
    assert msgs[0].fields["sni"] == "logs.example.com"
    assert msgs[0].fields["alpn"] == ["h2"]
    assert msgs[0].fields["supported_versions"] == ["TLS 1.3"]
    # placed at its first byte, stamped with the frame of its last byte's segment (as Wireshark does)
    last_frame = (len(hello) - 1) // 7 * 7 + 1  # the frame numbers are the chunk offsets + 1
    assert msgs[0].offset == 0 and msgs[0].frame == last_frame and msgs[0].length == len(hello)
    assert msgs[0].protocol == "tls" and msgs[0].version == "TLS 1.0"
    assert not [f for f in records if isinstance(f, Finding)]


def test_tls_stream_never_raises_on_garbage():
    dec = CoreDecoder("tls", StreamContext(0, "c", "s", 1, 443))
    out = dec.feed(Chunk(0, Direction.C2S, 0, b"\x16\x03\x01\x00\x05\x01\x00\x00\xff\xff" + b"\x99" * 40))
    codes = [r.code for r in out if isinstance(r, Finding)]
    assert "tls.bad-record" in codes


def test_tls_client_to_plaintext_server_is_explained():
    hello = client_hello("logs.example.com")
    dec = CoreDecoder("tls", StreamContext(0, "c", "s", 1, 5044))
    out = dec.feed(Chunk(0, Direction.C2S, 0, hello, 1, 0))
    out += dec.feed(Chunk(0, Direction.S2C, 0, b"2A\x00\x00\x00\x00", 2, 0))  # a plaintext Lumberjack reply
    out += dec.close()
    (f,) = [r for r in out if isinstance(r, Finding) and r.code == "tls.no-server-hello"]
    assert "32 41 00 00" in f.message and f.frame == 1 and f.fields["reply"] == "324100000000"


def test_tls_answered_handshake_has_no_warning():
    hello = client_hello("x")
    server_hello = b"\x16\x03\x03\x00\x04\x02\x00\x00\x00"
    dec = CoreDecoder("tls", StreamContext(0, "c", "s", 1, 443))
    dec.feed(Chunk(0, Direction.C2S, 0, hello, 1, 0))
    dec.feed(Chunk(0, Direction.S2C, 0, server_hello, 2, 0))
    assert dec.close() == []


def test_port_protocol_is_the_one_decode_as_syntax():
    assert protocols.port_protocol("5044=lumberjack") == (5044, "lumberjack")
    assert protocols.port_protocol(" 9042 = cql ") == (9042, "cql")
    for bad in ("5044", "=cql", "x=cql", "²=cql", "0=cql", "65536=cql", "5044=nope"):
        with pytest.raises(ValueError):
            protocols.port_protocol(bad)
