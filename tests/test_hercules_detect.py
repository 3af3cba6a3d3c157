"""Detection of Hercules streams: Gate requests by path, bare events by structure."""

from __future__ import annotations

import struct

from hercules_helpers import README_EVENT

from tests.detect_helpers import THRESHOLD, Sample, choose, detector

detect = detector("hercules")


EV = bytes.fromhex(README_EVENT)


def sample(c2s: bytes, s2c: bytes = b"", port: int = 8080, closed: bool = False) -> Sample:
    return Sample(c2s, s2c, 40000, port, closed)


def test_gate_posts_on_any_port():
    req = b"POST /stream/sendAsync?stream=x HTTP/1.1\r\nHost: g\r\n\r\n"
    assert detect(sample(req)) >= 0.9
    assert choose(sample(req, port=12345)) == "hercules"


def test_other_http_is_not_claimed_and_partial_lines_wait():
    assert detect(sample(b"GET /index.html HTTP/1.1\r\n\r\n")) == 0.0
    assert detect(sample(b"POST /stream/se")) is None
    assert detect(sample(b"GET /ping HTTP/1.1\r\n\r\n")) < THRESHOLD
    assert choose(sample(b"GET /ping HTTP/1.1\r\n\r\n", port=6306)) == "hercules"


def test_bare_events_and_batches():
    assert detect(sample(EV * 2)) >= 0.9
    assert detect(sample(struct.pack(">i", 1) + EV)) >= 0.9
    assert detect(sample(EV[:40])) == 0.7  # plausible so far, waiting would tell more
    assert detect(sample(EV[:10])) is None
    assert choose(sample(EV, closed=True)) == "hercules"


def test_other_protocols_and_garbage_are_not_events():
    lumberjack = b"2W\x00\x00\x00\x01" + b"2J\x00\x00\x00\x01\x00\x00\x00\x02{}"
    cql_startup = bytes.fromhex("0400000001000000160001000b43514c5f56455253494f4e0005332e302e30")
    tls = bytes.fromhex("160301020001000200")
    for data in (lumberjack, cql_startup, tls, b"\x00\xff" * 300, b"\x01" * 100):
        assert not detect(sample(data, closed=True))


def test_stream_api_reads():
    assert detect(sample(b"POST /stream/read?stream=s&take=1 HTTP/1.1\r\n\r\n")) == 0.7
