"""The local engine over the core: detection with held-back bytes, --decode-as, unknown streams,
chunks mode, bytes that reach the engine only as their stream ends."""

from __future__ import annotations

from tests.pcap_helpers import tcp_frame, write_pcap
from wirelog.engine.local import Options, run
from wirelog.model import Chunk, Finding, Message, StreamInfo

S = {"src": "10.0.0.2", "dst": "10.0.0.1", "sport": 7777, "dport": 40000}
C = {"sport": 40000, "dport": 7777}
HELO = b"HELO\x00\x00\x00\x14" + bytes(20)  # Log Courier's handshake: no well-known port
VERS = b"VERS\x00\x00\x00\x14" + bytes(20)
TLS_HELLO = b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x03"  # a (truncated) ClientHello in a TLS record


def capture(tmp_path, *payloads: bytes, dport: int = 7777, reply: bytes = b"reply"):
    frames, seq = [], 1
    for p in payloads:
        frames.append(tcp_frame(seq, p, dport=dport, sport=40000, ack=1))
        seq += len(p)
    frames.append(tcp_frame(1, reply, flags="PA", ack=seq, **{**S, "sport": dport}))
    return str(write_pcap(tmp_path / "e.pcap", frames))


def items(path, **opts):
    return list(run([path], (), Options(**opts)))


def test_detection_waits_then_replays_held_bytes_in_order(tmp_path):
    path = capture(tmp_path, HELO[:2], HELO[2:5], HELO[5:], reply=VERS)
    out = items(path)
    msgs = [m for m in out if isinstance(m, Message)]
    # a message is placed where it starts: the HELO at frame 1, though detection decided at frame 3
    assert [(m.kind, m.offset, m.frame, m.length) for m in msgs[:2]] == [
        ("helo", 0, 1, 28),
        ("vers", 0, 4, 28),
    ]
    assert msgs[0].stream == 0 and msgs[0].client == "10.0.0.1:40000" and msgs[0].capture == path
    (info,) = [i for i in out if isinstance(i, StreamInfo)]
    assert info.protocol == "courier"


def test_unknown_protocol_is_one_finding_with_a_preview(tmp_path):
    out = items(capture(tmp_path, b"\x00\x01garbage"))
    (f,) = [f for f in out if isinstance(f, Finding)]
    assert f.code == "stream.unknown-protocol" and "00 01 67" in f.message
    assert "--decode-as 7777=PROTOCOL, the capture starts mid-stream" in f.message  # no SYN in it
    assert (f.stream, f.client, f.frame, f.offset) == (0, "10.0.0.1:40000", 1, 0)
    assert not [m for m in out if isinstance(m, Message)]
    assert [i.protocol for i in out if isinstance(i, StreamInfo)] == ["unknown"]


def test_decode_as_overrides_content(tmp_path):
    out = items(capture(tmp_path, b"\x00\x01garbage", dport=9999), decode_as={9999: "lumberjack"})
    found = [f for f in out if isinstance(f, Finding)]
    assert found and all(f.protocol == "lumberjack" for f in found)
    assert "Invalid version of beats protocol: 0" in found[0].message
    assert [i.protocol for i in out if isinstance(i, StreamInfo)] == ["lumberjack"]


def test_streams_mode_does_not_decode(tmp_path):
    out = items(capture(tmp_path, HELO), decode=False)
    assert not [m for m in out if isinstance(m, Message | Finding)]
    assert [i.protocol for i in out if isinstance(i, StreamInfo)] == [None]


def test_chunks_mode_shows_every_byte_and_still_decodes(tmp_path):
    out = items(capture(tmp_path, HELO[:5], HELO[5:], reply=VERS), chunks=True)
    chunks = [i for i in out if isinstance(i, Chunk)]
    assert [(c.direction.value, c.offset, len(c.data)) for c in chunks] == [
        ("c2s", 0, 5),
        ("c2s", 5, 23),
        ("s2c", 0, 28),
    ]
    assert [m.kind for m in out if isinstance(m, Message)] == ["helo", "vers", "connection"]


def test_stream_whose_bytes_only_flush_at_its_end(tmp_path):
    """A leading gap never acknowledged: the bytes reach the engine only as the stream ends,
    after the reassembler has forgotten it (found by mutating real captures)."""
    frames = [
        tcp_frame(100, b"", flags="S", **C),
        tcp_frame(105, TLS_HELLO, **C),  # 4 bytes before it were never captured nor acked
    ]
    out = items(str(write_pcap(tmp_path / "late.pcap", frames)))
    msgs = [m for m in out if isinstance(m, Message)]
    assert [(m.kind, m.offset) for m in msgs] == [("client_hello", 4)]
    assert all(m.client == "10.0.0.1:40000" for m in msgs)
    gap = next(f for f in out if isinstance(f, Finding) and f.code == "tcp.gap")
    assert gap.client == "10.0.0.1:40000" and gap.server == "10.0.0.2:7777"
