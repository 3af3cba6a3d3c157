"""Captures as they come off real machines: the same traffic written with packets out of order or
twice decodes to the same messages, findings, `acked` flags and delivery verdicts.

The copies are made here from real captures (`../shared/captures`, the bundled example, and loopback
captures of real peers recorded by the test); `impair.normalise` says what "the same" is: equal up
to frame numbers (mapped back to the original's) and stream ids (which follow the file's order).
Decoders get each connection's two directions in the order TCP's acknowledgments prove
(tcp/causal.rs), so an answer never reaches its decoder before its question.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from impair import assert_same_when_impaired, convert_json, impaired_copy, read_pcap

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "captures"
CAPTURES = [
    "peers/courier-ruby2.12-client-server.pcap",
    "peers/courier-go2.12-client-ruby2.12-server.pcap",
    "peers/courier-go2.0.6-legacy-client-ruby-server.pcap",
    "public/cql-packetbeat/cassandra_compressed.pcap",
    "public/cql-packetbeat/cassandra_mixed_frame.pcap",
    "public/ndpi_cassandra.pcap",
]


def messages(records: list[dict]) -> list[dict]:
    return [r for r in records if r["record"] == "message"]


@pytest.mark.parametrize("name", CAPTURES)
def test_shared_captures_decode_the_same_when_impaired(name: str, tmp_path: Path) -> None:
    path = SHARED / name
    if not path.exists():
        pytest.skip(f"{path} not present (../shared is beside the repository only for developers and CI)")
    assert messages(assert_same_when_impaired(path, tmp_path))


# Loopback captures of real peers kept with the tests: pylogbeat to Logstash, pylogbeat against a
# server that stalled then a resend on a new connection, a Hercules Gate session.
BUNDLED = [
    "examples/lumberjack-pylogbeat.pcap",
    "tests/data/lumberjack/pylogbeat-logstash.pcap",
    "tests/data/lumberjack/pylogbeat-stalled-resend.pcap",
    "tests/data/hercules/gate-session.pcap",
]


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_captures_decode_the_same_when_impaired(name: str, tmp_path: Path) -> None:
    records = assert_same_when_impaired(ROOT / name, tmp_path)
    assert any(r.get("event") for r in messages(records))


def test_pipelined_gate_requests_decode_the_same_when_impaired(tmp_path: Path) -> None:
    """Gate requests sent before their answers: the newest two wait kept, older ones held, one
    connection never answered; reordered, duplicated and dropped copies keep every verdict."""
    from hercules_helpers import pipelined_gate

    pcap = tmp_path / "pipelined.pcap"
    pipelined_gate(pcap)
    records = assert_same_when_impaired(pcap, tmp_path)
    delivered = {r["delivery"] for r in messages(records) if r["kind"] == "event"}
    assert {"delivered", "never_acknowledged", "unknown"} <= delivered, delivered


def test_a_reply_written_before_its_request_changes_nothing(tmp_path: Path) -> None:
    """Every reply of the Log Courier capture swapped with the packet before it."""
    path = SHARED / "peers" / "courier-go2.12-client-ruby2.12-server.pcap"
    if not path.exists():
        pytest.skip(f"{path} not present")
    records = convert_json(path)
    replies = sorted({r["frame"] for r in messages(records) if r["direction"] == "s2c"})
    order = list(range(len(read_pcap(path)[1])))
    for frame in replies:
        i = frame - 1
        order[i - 1], order[i] = order[i], order[i - 1]
    copy = tmp_path / "swapped.pcap"
    frames = impaired_copy(path, copy, order)
    from impair import normalise

    got = convert_json(copy)
    assert normalise(got, frames) == normalise(records)
    assert not [r for r in got if r["record"] == "finding" and r["severity"] != "info"]


@pytest.mark.parametrize("skew_ms", [-5, 5])
@pytest.mark.parametrize(
    "name",
    [
        "tests/data/lumberjack/pylogbeat-logstash.pcap",
        "tests/data/lumberjack/pylogbeat-stalled-resend.pcap",
        "tests/data/hercules/gate-session.pcap",
        "../shared/captures/peers/courier-go2.12-client-ruby2.12-server.pcap",
        "../shared/captures/public/cql-packetbeat/cassandra_compressed.pcap",
    ],
)
def test_a_capture_taken_on_both_ends_gives_the_verdicts_of_one_end(
    name: str, skew_ms: int, tmp_path: Path
) -> None:
    """Each packet captured on both ends (the far end's clock 5 ms off, each end missing 3 % of
    the packets, different ones) and merged by timestamp: the verdicts of one end (the times are
    those of whichever copy came first)."""
    from impair import normalise, two_ended

    path = ROOT / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    want = normalise(convert_json(path), timing=False)
    for seed in (1, 2, 3):
        copy = tmp_path / f"merged-{seed}.pcap"
        frames = two_ended(path, copy, skew_ms * 1_000_000, seed)
        assert normalise(convert_json(copy), frames, timing=False) == want, f"seed {seed}"


def patched(src: Path, dst: Path, frame: int, old: bytes, new: bytes) -> Path:
    """A copy of `src` whose packet `frame` has `old` replaced by `new` (same length)."""
    from impair import write_pcap

    header, records = read_pcap(src)
    assert records[frame - 1].count(old) == 1, f"{old!r} in frame {frame}"
    records[frame - 1] = records[frame - 1].replace(old, new)
    write_pcap(dst, header, records)
    return dst


# (capture, frame, bytes, replacement, the fault's finding)
FAULTS = {
    "ack-above-the-window": (
        "examples/lumberjack-pylogbeat.pcap", 8, b"2A\x00\x00\x00\x04", b"2A\x00\x00\x00\x09",
        "lumberjack.ack-too-high",
    ),
    "pong-without-ping": (
        "../shared/captures/peers/courier-go2.12-client-ruby2.12-server.pcap", 11, b"PING", b"PXNG",
        "courier.pong-without-ping",
    ),
    "response-without-request": (
        "../shared/captures/public/cql-packetbeat/cassandra_compressed.pcap", 9,
        b"\x04\x01\x00\x40\x0b", b"\x04\x01\x00\x41\x0b", "cql.response-without-request",
    ),
}  # fmt: skip


@pytest.mark.parametrize("fault", list(FAULTS))
def test_real_faults_are_still_reported_when_impaired(fault: str, tmp_path: Path) -> None:
    """Causal ordering waits only for bytes the ACKs prove: a real fault (an ACK above anything
    sent, a PONG to no PING, a response to a request never sent) is reported in the capture and in
    every impaired copy of it, the same way."""
    name, frame, old, new, code = FAULTS[fault]
    src = ROOT / name
    if not src.exists():
        pytest.skip(f"{src} not present")
    faulty = patched(src, tmp_path / "faulty.pcap", frame, old, new)
    records = assert_same_when_impaired(faulty, tmp_path)
    assert code in {r.get("code") for r in records}
    assert code not in {r.get("code") for r in convert_json(src)}
