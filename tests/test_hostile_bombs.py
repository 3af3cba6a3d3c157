"""Decompression bombs through the CLI, as real processes (issue 29): a small capture whose payload
inflates to tens of MiB ends with the documented status, a finding that names the cap, the records
of the rest of its stream, and a peak RSS of at most 400 MB (it was gigabytes, or SIGABRT)."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import lz4.block
import pytest

from tests import courier_codec as courier
from tests.fault_helpers import measured
from tests.hercules_helpers import README_EVENT
from tests.pcap_helpers import tcp_conversation, write_pcap

MAX_RSS = 400 * 1024 * 1024
CAP = 64 * 1024 * 1024  # Limits.max_inflated, the default
NONCE = bytes(range(16))


def _findings(ndjson: bytes, code: str) -> list[dict]:
    lines = (json.loads(line) for line in ndjson.splitlines())
    return [r for r in lines if r.get("code") == code]


def _kinds(ndjson: bytes) -> list[str]:
    return [json.loads(line).get("kind") for line in ndjson.splitlines()]


@pytest.fixture(scope="module")
def courier_bomb(tmp_path_factory) -> Path:
    """A Log Courier connection: HELO/VERS, a 16 KB JDAT inflating to 16 MiB of zeros (four million
    empty events to the framing), then a PING answered by PONG."""
    zeros = zlib.compress(bytes(16 << 20), 9)
    assert len(zeros) < 17_000
    turns = [
        ("c", courier.helo()),
        ("s", courier.vers()),
        ("c", courier.jdat(NONCE, zeros)),
        ("c", courier.ping()),
        ("s", courier.pong()),
    ]
    path = tmp_path_factory.mktemp("bombs") / "courier-zeros.pcap"
    return write_pcap(path, tcp_conversation(turns, server=("10.1.0.9", 5043), mss=1400))


@pytest.fixture(scope="module")
def hercules_bomb(tmp_path_factory) -> Path:
    """A Gate connection: a ~259 KB lz4 request whose body inflates to 60 MiB of events, then an
    ordinary request; both answered 200."""
    event = bytes.fromhex(README_EVENT)
    n = (60 << 20) // len(event)
    body = struct.pack(">i", n) + event * n
    packed = lz4.block.compress(body, store_size=False)
    assert 240_000 < len(packed) < 270_000

    def post(data: bytes, extra: str = "") -> bytes:
        head = (
            "POST /stream/send?stream=logs HTTP/1.1\r\nContent-Type: application/octet-stream\r\n"
            f"{extra}Content-Length: {len(data)}\r\n\r\n"
        )
        return head.encode() + data

    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
    bomb = post(packed, f"Content-Encoding: lz4\r\nOriginal-Content-Length: {len(body)}\r\n")
    turns = [("c", bomb), ("s", ok), ("c", post(struct.pack(">i", 1) + event)), ("s", ok)]
    path = tmp_path_factory.mktemp("bombs") / "hercules-lz4.pcap"
    return write_pcap(path, tcp_conversation(turns, server=("10.1.0.9", 6306), mss=1400))


def test_courier_zeros_bomb_stops_at_the_cap(courier_bomb):
    status, rss, out = measured("convert", str(courier_bomb), "--to", "json")
    assert status == 0  # findings do not change convert's status (README, "Exit status")
    assert rss <= MAX_RSS, f"peak RSS {rss >> 20} MiB"
    [limit] = _findings(out, "courier.inflate-limit")
    assert limit["cap"] == CAP and str(CAP) in limit["message"]
    [jdat] = [json.loads(line) for line in out.splitlines() if b'"kind":"jdat"' in line]
    assert (limit["stream"], limit["frame"]) == (jdat["stream"], jdat["frame"])
    assert 0 < limit["events"] < 100_000
    assert _kinds(out).count("event") == limit["events"]
    assert {"ping", "pong"} <= set(_kinds(out)), "the stream is decoded after the bomb"


def test_many_bombs_in_one_capture_stay_under_the_bound(tmp_path):
    """Ten connections, each with the zeros bomb: each is capped, and the output leaves the core in
    steps (native/src/pipeline/mod.rs), so memory is one bomb's, not ten (it was 876 MB)."""
    zeros = zlib.compress(bytes(16 << 20), 9)
    packets = []
    for i in range(10):
        turns = [("c", courier.helo()), ("s", courier.vers()), ("c", courier.jdat(NONCE, zeros))]
        packets += tcp_conversation(
            turns, client=("10.1.0.5", 41000 + i), server=("10.1.0.9", 5043), mss=1400
        )
    path = write_pcap(tmp_path / "bombs.pcap", packets)
    status, rss, out = measured("convert", str(path), "--to", "json")
    assert status == 0
    assert rss <= MAX_RSS, f"peak RSS {rss >> 20} MiB"
    assert len(_findings(out, "courier.inflate-limit")) == 10


def test_courier_zeros_bomb_fails_validate(courier_bomb):
    status, rss, out = measured("validate", str(courier_bomb), "--json")
    assert status == 1  # an error finding (docs/commands/validate.md)
    assert rss <= MAX_RSS, f"peak RSS {rss >> 20} MiB"
    assert _findings(out, "courier.inflate-limit")


def test_hercules_lz4_bomb_stops_at_the_cap(hercules_bomb):
    status, rss, out = measured("convert", str(hercules_bomb), "--to", "json")
    assert status == 0
    assert rss <= MAX_RSS, f"peak RSS {rss >> 20} MiB"
    [limit] = _findings(out, "hercules.inflate-limit")
    assert limit["cap"] == CAP and str(CAP) in limit["message"]
    requests = [json.loads(line) for line in out.splitlines() if b'"kind":"request"' in line]
    assert (limit["stream"], limit["frame"]) == (requests[0]["stream"], requests[0]["frame"])
    assert [r["status"] for r in requests] == [200, 200], "the request after the bomb is decoded"
    assert requests[1]["events"] == 1
    assert _kinds(out).count("event") == limit["events"] + 1
