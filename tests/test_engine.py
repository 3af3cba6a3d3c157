"""The local engine: detection with held-back chunks, --decode-as, unknown streams, decoder failures."""

from __future__ import annotations

import pytest

from tests.pcap_helpers import tcp_frame, write_pcap
from wirelog.decoders import registry
from wirelog.decoders.base import ProtocolSpec, Sample, StreamContext
from wirelog.engine.local import Options, run
from wirelog.model import Chunk, Finding, Gap, Message, StreamInfo

S = {"src": "10.0.0.2", "dst": "10.0.0.1", "sport": 7777, "dport": 40000}
C = {"sport": 40000, "dport": 7777}


class Echo:
    """A toy decoder: one message per chunk, so tests see exactly what the engine fed."""

    def __init__(self, ctx: StreamContext) -> None:
        self.ctx = ctx

    def feed(self, chunk: Chunk) -> list:
        if chunk.data == b"boom":
            raise RuntimeError("decoder bug")
        return [Message("echo", "chunk", chunk.direction, chunk.offset, len(chunk.data), chunk.frame, chunk.ts,
                        fields={"data": chunk.data.decode()})]  # fmt: skip

    def gap(self, gap: Gap) -> list:
        return [Message("echo", "gap", gap.direction, gap.offset, gap.length, gap.frame)]

    def close(self) -> list:
        return [Message("echo", "close", None, None, 0)]


def echo_detect(sample: Sample) -> float | None:
    data = sample.c2s
    if len(data) < 6:
        return None if not sample.closed else (1.0 if data.startswith(b"EC") else 0.0)
    return 1.0 if data.startswith(b"ECHO:") else 0.0


@pytest.fixture
def echo(monkeypatch):
    spec = ProtocolSpec("echo", echo_detect, Echo, frozenset({7777}))
    monkeypatch.setattr(registry, "_SPECS", (*registry._SPECS, spec))
    return spec


def capture(tmp_path, *payloads: bytes, dport: int = 7777):
    frames, seq = [], 1
    for p in payloads:
        frames.append(tcp_frame(seq, p, dport=dport, sport=40000, ack=1))
        seq += len(p)
    frames.append(tcp_frame(1, b"reply", flags="PA", ack=seq, **{**S, "sport": dport}))
    return str(write_pcap(tmp_path / "e.pcap", frames))


def items(path, **opts):
    return list(run([path], (), Options(**opts)))


def test_detection_waits_then_replays_held_chunks_in_order(tmp_path, echo):
    path = capture(tmp_path, b"ECH", b"O:1", b"two")
    out = items(path)
    msgs = [m for m in out if isinstance(m, Message)]
    assert [m.fields.get("data") for m in msgs] == ["ECH", "O:1", "two", "reply", None]
    assert [m.offset for m in msgs[:3]] == [0, 3, 6] and [m.frame for m in msgs[:3]] == [1, 2, 3]
    assert msgs[0].stream == 0 and msgs[0].client == "10.0.0.1:40000" and msgs[0].capture == path
    (info,) = [i for i in out if isinstance(i, StreamInfo)]
    assert info.protocol == "echo"


def test_unknown_protocol_is_one_finding_with_a_preview(tmp_path, echo):
    out = items(capture(tmp_path, b"\x00\x01garbage"))
    (f,) = [f for f in out if isinstance(f, Finding)]
    assert f.code == "stream.unknown-protocol" and "00 01 67" in f.message
    assert "--decode-as 7777=PROTOCOL, the capture starts mid-stream" in f.message  # no SYN in it
    assert not [m for m in out if isinstance(m, Message)]
    assert [i.protocol for i in out if isinstance(i, StreamInfo)] == ["unknown"]


def test_decode_as_overrides_content(tmp_path, echo):
    out = items(capture(tmp_path, b"\x00\x01garbage", dport=9999), decode_as={9999: "echo"})
    assert [m.fields.get("data") for m in out if isinstance(m, Message)][:1] == ["\x00\x01garbage"]


def test_decoder_exception_becomes_a_finding_and_the_run_goes_on(tmp_path, echo):
    out = items(capture(tmp_path, b"ECHO:1", b"boom", b"after"))
    (f,) = [f for f in out if isinstance(f, Finding)]
    assert f.code == "decoder.internal-error" and f.severity.value == "error" and "decoder bug" in f.message
    assert f.frame == 2
    assert [m.fields.get("data") for m in out if isinstance(m, Message)] == ["ECHO:1"]
    assert [i for i in out if isinstance(i, StreamInfo)]


def test_streams_mode_does_not_decode(tmp_path, echo):
    out = items(capture(tmp_path, b"ECHO:1"), decode=False)
    assert not [m for m in out if isinstance(m, Message | Finding)]
    assert len([i for i in out if isinstance(i, StreamInfo)]) == 1


def test_stream_whose_bytes_only_flush_at_its_end(tmp_path, echo):
    """A leading gap never acknowledged: the bytes reach the engine only as the stream ends,
    after the reassembler has forgotten it (found by mutating real captures)."""
    frames = [
        tcp_frame(100, b"", flags="S", **C),
        tcp_frame(105, b"ECHO:late", **C),  # 4 bytes before it were never captured nor acked
    ]
    out = items(str(write_pcap(tmp_path / "late.pcap", frames)))
    msgs = [m for m in out if isinstance(m, Message)]
    assert [(m.kind, m.offset) for m in msgs[:2]] == [("gap", 0), ("chunk", 4)]
    assert all(m.client == "10.0.0.1:40000" for m in msgs)
    gap = next(f for f in out if isinstance(f, Finding) and f.code == "tcp.gap")
    assert gap.client == "10.0.0.1:40000" and gap.server == "10.0.0.2:7777"
