"""Lumberjack detection: content decides on any port; TLS stays TLS; junk on 5044 gets the
Logstash-style diagnosis."""

from __future__ import annotations

import pytest
from lumberjack_helpers import ack, cframe, dframe, jframe, window

from tests.detect_helpers import Sample, choose, detector

detect = detector("lumberjack")


CLIENT_STARTS = [
    window(3, "1") + dframe(1, {"line": "x"}),
    window(2) + jframe(1, {"message": "x"}),
    dframe(1, {"line": "x"}),
    jframe(1, {"message": "x"}),
    cframe(jframe(1, {"a": 1}), v="1"),
    cframe(jframe(1, {"a": 1})),
]
TLS_HELLO = bytes.fromhex("16030100f4010000f00303") + bytes(40)


def sample(c2s: bytes, s2c: bytes = b"", port: int = 40123, closed: bool = False) -> Sample:
    return Sample(c2s, s2c, 50000, port, closed)


@pytest.mark.parametrize("c2s", CLIENT_STARTS)
def test_client_starts_claimed_on_any_port(c2s):
    assert detect(sample(c2s, ack(1))) >= 0.9
    assert choose(sample(c2s, ack(1))) == "lumberjack"
    assert choose(sample(c2s, b"", closed=True)) == "lumberjack"


def test_needs_more_bytes_when_unsure():
    assert detect(sample(b"2")) is None
    assert detect(sample(b"2W\x00")) is None
    assert detect(sample(b"", ack(0)[:3])) is None


def test_server_side_acks_alone():
    assert detect(sample(b"", ack(2) + ack(0))) == 0.6
    assert detect(sample(b"", b"HTTP/1.1 200 OK\r\n")) == 0.0


def test_tls_is_never_lumberjack():
    assert detect(sample(TLS_HELLO, port=5044)) == 0.0
    assert choose(sample(TLS_HELLO, port=5044, closed=True)) == "tls"


@pytest.mark.parametrize(
    "c2s",
    [b'{"message":"hi"}\n', b"POST /_bulk HTTP/1.1\r\nHost: x\r\n\r\n", b"<13>Nov 21 host app: hi\n"],
)
def test_wrong_client_on_beats_port_is_claimed_for_diagnosis(c2s):
    assert choose(sample(c2s, port=5044, closed=True)) == "lumberjack"
    assert detect(sample(c2s, port=8080, closed=True)) == 0.0


def test_other_protocols_are_not_lumberjack():
    courier = b"HELO\x00\x00\x00\x14" + bytes(20)
    cql = bytes.fromhex("0400000005000000 00".replace(" ", ""))
    for data in (courier, cql, b"2W\xff\xff\xff\xff"):
        assert (detect(sample(data, closed=True)) or 0) < 0.5
