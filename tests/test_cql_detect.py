"""CQL content detection: positives from real encoders, negatives from neighbouring protocols."""

from __future__ import annotations

from cassandra import ConsistencyLevel
from cassandra.protocol import OptionsMessage, QueryMessage
from cql_helpers import driver_envelope, driver_frames

from tests.detect_helpers import Sample, choose, detector

detect = detector("cql")


QUERY5 = driver_envelope(QueryMessage("SELECT * FROM system.local", ConsistencyLevel.ONE), 3, 5)


def sample(c2s: bytes = b"", s2c: bytes = b"", closed: bool = True, port: int = 19042) -> Sample:
    return Sample(c2s, s2c, 40000, port, closed)


def test_envelope_start_on_any_port() -> None:
    assert detect(sample(driver_envelope(OptionsMessage(), 0, 4))) >= 0.9
    assert choose(sample(driver_envelope(OptionsMessage(), 0, 5), port=1234)) == "cql"


def test_v5_frames_mid_connection() -> None:
    frames = driver_frames(QUERY5, False) * 3
    assert detect(sample(frames)) >= 0.9  # CRC24-valid header at the first byte
    assert (
        detect(sample(driver_frames(QUERY5, True)[5:] + driver_frames(QUERY5, True))) >= 0.9
    )  # found inside


def test_v4_envelopes_mid_envelope() -> None:
    q4 = driver_envelope(QueryMessage("SELECT 1", ConsistencyLevel.ONE), 3, 4)
    assert detect(sample(q4[4:] + q4 + q4)) >= 0.5


def test_waits_for_bytes_then_decides() -> None:
    assert detect(sample(b"\x04\x00", closed=False)) is None
    assert detect(sample(b"\x04\x00", closed=True)) == 0.0


def test_not_cql() -> None:
    thrift = bytes.fromhex("0000002580010001") + b"\x00\x00\x00\x0cset_keyspace" + b"\x00" * 20
    internode = bytes.fromhex("ca552dfa") + b"\x00" * 15
    http = b"GET /_nodes HTTP/1.1\r\nHost: localhost:9200\r\n\r\n"
    tls = bytes.fromhex("160301002a0100002603") + b"\x00" * 40
    lumberjack = b"2W\x00\x00\x03\xe82C\x00\x00\x00\x10" + b"x" * 16
    for data in (thrift, internode, http, tls, lumberjack):
        assert detect(sample(data, port=9042)) < 0.5, data[:8]
