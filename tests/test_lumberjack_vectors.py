"""The byte-level vectors of reference/lumberjack.md §9 (hex copied from the reference)."""

from __future__ import annotations

import zlib

from lumberjack_helpers import C2S, S2C, codes, decoder, findings, messages, run

from tests.detect_helpers import Sample, detector
from wirelog.model import Chunk, Severity

detect = detector("lumberjack")

H = bytes.fromhex

# §9 A: logstash-input-beats BeatsParserTest.testInvalidCompression
INVALID_COMPRESSION = H("32570000000132430000000978 9c33f26260606004626617ff600007e00167".replace(" ", ""))
# §9 D: pylogbeat 2.1.0, second send(): W and C in separate TCP segments, seq continues at 3
PYLOGBEAT_W = H("325700000001")
PYLOGBEAT_C = H(
    "32430000002e789c33f2626060600662b96aa5dcd4e2e2c4f454252ba5a2c472dde292a2ccbc74ddd4b2d4bc12a55a00bf210b9a"
)
# §9 C: go-lumber v2 client with compression 0 (event documents as printed in the reference)
GO_LUMBER_DOC = (
    '{{"@metadata":{{"beat":"filebeat","type":"_doc","version":"8.11.0"}},'
    '"@timestamp":"2024-01-02T03:04:05.000Z","message":"ev","n":{n}}}'
)


def test_invalid_compression_declared_length_is_truncated():
    out = run([(C2S, INVALID_COMPRESSION)])
    assert findings(out, "compressed-truncated"), out
    assert not messages(out, "event")
    (comp,) = messages(out, "compressed")
    assert comp.fields["compressed_length"] == 9
    assert comp.fields["zlib_header"] == "789c" and comp.fields["zlib_level"] == "6"
    # the 10 bytes after the declared length are not a frame: reported, then skipped to the end
    (bad,) = findings(out, "invalid-version")
    assert bad.offset == 6 + 6 + 9 and bad.severity is Severity.ERROR
    assert findings(out, "resync")[0].fields["skipped"] == 10
    (win,) = messages(out, "window")
    assert win.fields["count"] == 1 and win.fields["received"] == 0


def test_invalid_compression_full_body_holds_one_non_json_event():
    body = INVALID_COMPRESSION[12:]
    assert len(body) == 19
    frame = b"2C" + len(body).to_bytes(4, "big") + body
    out = run([(C2S, INVALID_COMPRESSION[:6] + frame), (S2C, H("324100000001"))])
    (ev,) = messages(out, "event")
    assert ev.fields["seq"] == 1 and ev.event is None and ev.fields["raw"] == "DOS"
    assert ev.acked is True
    assert "json-invalid" in codes(out)
    assert "compressed-truncated" not in codes(out)


def test_real_filebeat_prefix():
    prefix = H("3257000000013243000005917 85e8c56516f".replace(" ", ""))
    assert detect(Sample(prefix, b"", 40000, 5044, False)) >= 0.9
    dec = decoder()
    assert dec.feed(Chunk(0, C2S, 0, prefix, 1, 1)) == []  # waits for the rest of the 1425-byte C frame
    out = dec.close()
    (trunc,) = findings(out, "truncated")
    assert trunc.offset == 6 and trunc.fields == {"have": 12, "need": 6 + 0x591}


def test_go_lumber_plain_window():
    docs = [GO_LUMBER_DOC.format(n=n).encode() for n in (0, 1)]
    assert all(len(d) == 0x7F for d in docs)
    c2s = H("325700000002") + b"".join(
        H("324a") + seq.to_bytes(4, "big") + H("0000007f") + doc
        for seq, doc in zip((1, 2), docs, strict=True)
    )
    out = run([(C2S, c2s), (S2C, H("324100000002"))])
    evs = messages(out, "event")
    assert [e.fields["seq"] for e in evs] == [1, 2]
    assert [e.event["n"] for e in evs] == [0, 1]
    assert evs[0].event["@metadata"] == {"beat": "filebeat", "type": "_doc", "version": "8.11.0"}
    assert all(e.acked is True and e.fields["compressed"] is False for e in evs)
    assert [e.offset for e in evs] == [6, 6 + 10 + 127]
    (a,) = messages(out, "ack")
    assert a.fields["interpretation"] == "count=highest-seq"
    assert not [f for f in findings(out) if f.severity is not Severity.INFO]


def test_pylogbeat_second_send_split_segments():
    out = run([(C2S, PYLOGBEAT_W), (C2S, PYLOGBEAT_C), (S2C, H("324100000003"))])
    (ev,) = messages(out, "event")
    assert ev.event == {"message": "raw-string-event"} and ev.fields["seq"] == 3
    assert ev.frame == 2 and ev.fields["compressed"] is True and ev.acked is True
    assert ev.fields["ack_frame"] == 3
    (comp,) = messages(out, "compressed")
    assert comp.fields["inflated_length"] == 10 + 30 and comp.fields["zlib_level"] == "6"
    assert zlib.decompress(PYLOGBEAT_C[6:]) == H("324a000000030000001e") + b'{"message":"raw-string-event"}'


def test_lumberjack_protocol_v1_window():
    pairs = H(
        "00000004" + b"line".hex() + "00000008" + b"hello v1".hex() + "00000004" + b"file".hex()
        + "0000000e" + b"/var/log/a.log".hex() + "00000006" + b"offset".hex() + "00000001" + b"0".hex()
    )  # fmt: skip
    c2s = H("315700000003") + b"".join(
        H("3144") + s.to_bytes(4, "big") + H("00000003") + pairs for s in (1, 2, 3)
    )
    out = run([(C2S, c2s), (S2C, H("314100000003"))])
    evs = messages(out, "event")
    assert [e.fields["seq"] for e in evs] == [1, 2, 3]
    assert evs[0].event == {"line": "hello v1", "file": "/var/log/a.log", "offset": "0"}
    assert all(e.version == "1" and e.acked is True for e in evs)
    assert messages(out, "ack")[0].version == "1"
    assert not [f for f in findings(out) if f.severity is not Severity.INFO]


def test_keepalive_timeline_go_lumber():
    """§9 F: two windows of 4; ACK 0 at +3.0 s, final ACK 4 at +3.29 s; same for window 2."""
    inner = b"".join(H("324a") + s.to_bytes(4, "big") + H("00000002") + b"{}" for s in (1, 2, 3, 4))
    win = H("325700000004") + b"2C" + len(c := zlib.compress(inner, 3)).to_bytes(4, "big") + c
    assert c[:2] == H("785e")
    timeline = [
        (1_000_000, C2S, win),
        (3_002_000_000, S2C, H("324100000000")),
        (3_293_000_000, S2C, H("324100000004")),
        (3_294_000_000, C2S, win),
        (6_294_000_000, S2C, H("324100000000")),
        (7_293_000_000, S2C, H("324100000004")),
    ]
    dec = decoder()
    offsets = {C2S: 0, S2C: 0}
    out = []
    for frame, (ts, d, data) in enumerate(timeline, 1):
        out += dec.feed(Chunk(0, d, offsets[d], data, frame, ts))
        offsets[d] += len(data)
    out += dec.close()
    acks = messages(out, "ack")
    assert [a.fields["keepalive"] for a in acks] == [True, False, True, False]
    assert [a.fields["window"] for a in acks] == [None, 1, None, 2]
    assert [round(acks[i].fields["interval_ms"]) for i in (0, 2)] == [3001, 3000]
    (summary,) = findings(out, "keepalive")
    assert summary.fields["count"] == 2
    assert all(e.acked is True for e in messages(out, "event"))
    assert [e.fields["ack_frame"] for e in messages(out, "event")] == [3] * 4 + [6] * 4
