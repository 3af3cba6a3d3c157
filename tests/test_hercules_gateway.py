"""Hercules Gate HTTP traffic: framing, lz4, pairing, rejections, secrets, gaps, loopback capture."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import lz4.block
import pytest
from hercules_codec import encode_batch
from hercules_helpers import EVENTS, README_EVENT, codes, decode_stream, messages, record_gate_session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core_decoders import CoreDecoder
from wirelog.engine.hercules_events import decode_event_stream
from wirelog.engine.local import run
from wirelog.engine.protocols import Limits, StreamContext
from wirelog.model import COMMON_MESSAGE_KEYS, Chunk, Direction, Finding, Gap, Message, Severity

EV = bytes.fromhex(README_EVENT)
BODY = struct.pack(">i", 2) + EV + EV


def post(body: bytes, stream: str = "logs_app", path: str = "/stream/send", headers: str = "") -> bytes:
    head = (
        f"POST {path}?stream={stream} HTTP/1.1\r\nHost: gate\r\n"
        "Authorization: Hercules apiKey 0123-secret\r\nContent-Type: application/octet-stream\r\n"
        f"{headers}Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def lz4_post(body: bytes, ocl: str | None = None, **kw) -> bytes:
    packed = lz4.block.compress(body, store_size=False)
    extra = f"Content-Encoding: lz4\r\nOriginal-Content-Length: {len(body) if ocl is None else ocl}\r\n"
    return post(packed, headers=extra, **kw)


def answer(status: int = 200, text: bytes = b"") -> bytes:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}[status]
    return f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(text)}\r\n\r\n".encode() + text


def test_send_with_content_length_paired_with_200():
    req = post(BODY)
    recs = decode_stream(req, answer(200))
    assert [getattr(r, "kind", None) or r.code for r in recs] == ["request", "event", "event", "response"]
    r = recs[0]
    assert r.fields["method"] == "POST" and r.fields["path"] == "/stream/send"
    assert r.fields["stream_name"] == "logs_app"
    assert r.fields["api_key"] == "<redacted>" and r.fields["api_key_header"] == "Authorization"
    assert (r.fields["count"], r.fields["events"], r.fields["status"]) == (2, 2, 200)
    assert (r.offset, r.length) == (0, len(req))
    body_at = len(req) - len(BODY)
    assert [e.offset for e in recs[1:3]] == [body_at + 4, body_at + 69]
    assert all(e.acked is True for e in recs[1:3])
    assert recs[1].fields["stream_name"] == "logs_app" and recs[1].fields["batch_index"] == 0
    assert recs[3].fields["request_offset"] == 0


def test_secrets_shown_on_request_and_legacy_header():
    req = post(BODY).replace(b"Authorization: Hercules apiKey 0123-secret", b"apiKey: legacy-key")
    recs = decode_stream(req, answer(), show_secrets=True)
    assert recs[0].fields["api_key"] == "legacy-key" and recs[0].fields["api_key_header"] == "apiKey"
    hidden = decode_stream(req, answer())
    assert "legacy-key" not in repr(hidden)


def test_pipelined_requests_pair_in_order_and_name_rejected_events():
    c2s = post(BODY, "a") + post(BODY, "bad") + lz4_post(BODY, stream="c", path="/stream/sendAsync")
    s2c = answer(200) + answer(400, b"Invalid event data") + answer(200)
    recs = decode_stream(c2s, s2c, step=37)
    reqs = messages(recs, "request")
    assert [(r.fields["stream_name"], r.fields["status"]) for r in reqs] == [
        ("a", 200),
        ("bad", 400),
        ("c", 200),
    ]
    assert [e.acked for e in messages(recs, "event")] == [True, True, False, False, True, True]
    rejected = [r for r in recs if getattr(r, "code", "") == "hercules.request-rejected"]
    assert len(rejected) == 1
    f = rejected[0]
    assert f.fields["status"] == 400 and f.fields["events"] == 2
    assert f.fields["uuids"] == ["11203800-63fd-11e8-83e2-3a587d902000"] * 2
    assert f.fields["request_offset"] == reqs[1].offset
    assert "Invalid event data" in f.message and "stream bad" in f.message
    assert reqs[2].fields["content_encoding"] == "lz4" and reqs[2].fields["body_length"] == len(BODY)


def test_chunked_request_body():
    chunks = BODY[:10], BODY[10:100], BODY[100:]
    body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    head = b"POST /stream/send?stream=s HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    recs = decode_stream(head + body + post(BODY), answer() + answer(), step=11)
    reqs = messages(recs, "request")
    assert [r.fields["chunked"] for r in reqs] == [True, False]
    assert reqs[0].length == len(head + body) and reqs[0].fields["events"] == 2
    assert len(messages(recs, "event")) == 4
    assert codes(recs) == ["hercules.no-content-length"]


@pytest.mark.parametrize(
    ("request_bytes", "code"),
    [
        (lz4_post(BODY, ocl="x"), "hercules.original-length"),
        (lz4_post(BODY, ocl=str(200 * 1024 * 1024)), "hercules.original-length"),
        (
            post(b"\x00garbage", headers="Content-Encoding: lz4\r\nOriginal-Content-Length: 100\r\n"),
            "hercules.lz4-error",
        ),
        (post(BODY, headers="Content-Encoding: gzip\r\n"), "hercules.content-encoding"),
        (post(struct.pack(">i", 3) + EV), "hercules.count-mismatch"),
        (post(b"\x00\x00"), "hercules.batch-malformed"),
        (b"POST /stream/send?stream=s HTTP/1.1\r\n\r\n", "hercules.no-content-length"),
    ],
)
def test_body_problems(request_bytes: bytes, code: str):
    recs = decode_stream(request_bytes, answer(400))
    assert code in codes(recs)
    assert "hercules.request-rejected" in codes(recs)


def test_non_ascii_digits_in_lengths_are_malformed_not_a_crash():
    # latin-1 "²" is a digit to str.isdigit() but not to int(): found by hypothesis
    bad_length = b"POST /stream/send?stream=s HTTP/1.1\r\nContent-Length: \xb218\r\n\r\n"
    assert "hercules.http-malformed" in codes(decode_stream(bad_length, b""))
    bad_original = post(b"abc", headers="Content-Encoding: lz4\r\n").replace(
        b"Content-Length", b"Original-Content-Length: \xb2\r\nContent-Length"
    )
    assert "hercules.original-length" in codes(decode_stream(bad_original, answer(400)))


def test_lz4_declared_size_larger_than_inflated():
    packed = lz4.block.compress(BODY, store_size=False)
    req = post(packed, headers=f"Content-Encoding: lz4\r\nOriginal-Content-Length: {len(BODY) + 10}\r\n")
    recs = decode_stream(req, answer())
    assert codes(recs) == ["hercules.original-length"]
    assert len(messages(recs, "event")) == 2


def test_no_response_leaves_delivery_unknown():
    recs = decode_stream(post(BODY))
    assert [getattr(r, "kind", None) or r.code for r in recs] == [
        "request",
        "event",
        "event",
        "hercules.no-response",
    ]
    assert all(e.acked is None for e in messages(recs, "event"))


def test_malformed_request_then_resync():
    recs = decode_stream(b"POST /x HTTP/1.1\r\nbad header line\r\n\r\n" + post(BODY), answer(404) + answer())
    assert codes(recs)[0] == "hercules.http-malformed"
    reqs = messages(recs, "request")
    assert len(reqs) == 1 and reqs[0].fields["events"] == 2


def test_body_over_the_limit_is_skipped_not_buffered():
    dec = CoreDecoder("hercules", StreamContext(0, "c", "s", 1, 6306, limits=Limits(max_frame=100)))
    req = post(BODY) + post(b"\x00\x00\x00\x00")
    out = dec.feed(Chunk(0, Direction.C2S, 0, req)) + dec.feed(Chunk(0, Direction.S2C, 0, answer() * 2))
    out += dec.close()
    assert codes(out) == ["hercules.body-too-large"]
    assert [r.fields.get("count") for r in messages(out, "request")] == [None, 0]


def test_gap_inside_a_request_keeps_pairing_aligned():
    first, second = post(BODY, "a"), post(BODY, "b")
    dec = CoreDecoder("hercules", StreamContext(0, "c", "s", 1, 6306))
    out = dec.feed(Chunk(0, Direction.C2S, 0, first[:100], frame=1))
    out += dec.gap(Gap(0, Direction.C2S, 100, 50, frame=3))
    out += dec.feed(Chunk(0, Direction.C2S, 150, first[150:] + second, frame=4))
    out += dec.feed(Chunk(0, Direction.S2C, 0, answer(500, b"kafka") + answer(200), frame=5))
    out += dec.close()
    assert codes(out)[0] == "hercules.request-in-gap"
    assert next(r for r in out if isinstance(r, Finding)).severity is Severity.WARNING  # the capture's loss
    reqs = messages(out, "request")
    assert [r.fields.get("incomplete", False) for r in reqs] == [True, False]
    assert reqs[0].fields["status"] == 500 and reqs[1].fields["status"] == 200
    assert reqs[1].fields["stream_name"] == "b"
    assert [e.acked for e in messages(out, "event")] == [True, True]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)  # a core call per piece
@given(st.lists(EVENTS, max_size=3), st.integers(1, 97), st.booleans())
def test_chunking_invariance(events, step, packed):
    body = encode_batch(events)
    req = lz4_post(body) if packed else post(body)
    whole = decode_stream(req, answer())
    split = decode_stream(req, answer(), step=step)
    assert [(getattr(r, "kind", None), r.offset, getattr(r, "event", None)) for r in split] == [
        (getattr(r, "kind", None), r.offset, getattr(r, "event", None)) for r in whole
    ]
    assert messages(whole, "request")[0].fields["events"] == len(events)


# --- a real client (http.client) and server (http.server) over loopback, captured with tcpdump ---

FIXTURE = Path(__file__).resolve().parent / "data" / "hercules" / "gate-session.pcap"


def check_session(pcap: Path) -> None:
    """What the recorded session (hercules_helpers.gate_session) must decode to."""
    recs = [r for r in run([str(pcap)]) if isinstance(r, Message)]
    reqs = [r for r in recs if r.kind == "request"]
    assert [r.protocol for r in reqs] == ["hercules"] * 4
    assert [(r.fields["stream_name"], r.fields["status"], r.fields["events"]) for r in reqs] == [
        ("s0", 200, 1), ("s1", 200, 3), ("s2", 200, 2), ("bad", 400, 1),
    ]  # fmt: skip
    assert [r.fields.get("content_encoding") for r in reqs] == [None, "lz4", None, None]
    assert reqs[2].fields["chunked"] is True and reqs[2].fields["path"] == "/stream/sendAsync"
    events = [r for r in recs if r.kind == "event"]
    assert [e.acked for e in events] == [True] * 6 + [False]
    assert all(e.event == {"host": "localhost", "timestamp": 1_527_679_920_000_000} for e in events)
    assert all(e.frame is not None and e.stream == reqs[0].stream for e in events)
    assert "loop-key" not in repr(recs)


def test_recorded_gate_session():
    check_session(FIXTURE)


def test_live_gate_session(tmp_path):
    pcap = tmp_path / "gate.pcap"
    try:
        sent, received = record_gate_session(pcap)
    except RuntimeError as exc:
        pytest.skip(str(exc))
    assert received == sent
    check_session(pcap)


def test_pending_overflow_emits_early_with_unknown_delivery():
    dec = CoreDecoder("hercules", StreamContext(0, "c", "s", 1, 6306, limits=Limits(max_pending_events=4)))
    out = dec.feed(Chunk(0, Direction.C2S, 0, post(BODY, "a") + post(BODY, "b") + post(BODY, "c")))
    assert codes(out) == ["hercules.pending-overflow"]
    assert [r.kind for r in messages(out)] == ["request", "event", "event"]
    assert messages(out)[0].fields["stream_name"] == "a" and messages(out)[1].acked is None
    out = dec.feed(Chunk(0, Direction.S2C, 0, answer(200) + answer(200)))
    assert [r.fields["stream_name"] for r in messages(out, "request")] == ["b", "c"]


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_recorded_session_agrees_with_tshark():
    out = subprocess.run(
        ["tshark", "-r", str(FIXTURE), "-Y", "http", "-T", "fields", "-e", "frame.number",
         "-e", "http.request.uri", "-e", "http.response.code"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    rows = [line.split("\t") for line in out.splitlines()]
    recs = [r for r in run([str(FIXTURE)]) if isinstance(r, Message)]
    uris = [f"{r.fields['path']}?stream={r.fields['stream_name']}" for r in recs if r.kind == "request"]
    assert uris == [uri for _, uri, _ in rows if uri]
    # tshark names a message by its last segment, wirelog by its first
    responses = [(r.frame, r.fields["status"]) for r in recs if r.kind == "response"]
    tshark_responses = [(int(frame), int(code)) for frame, _, code in rows if code]
    assert [s for _, s in responses] == [s for _, s in tshark_responses] == [200, 200, 200, 400]
    assert all(a <= b < a + 3 for (a, _), (b, _) in zip(responses, tshark_responses, strict=True))
    requests = [r for r in recs if r.kind == "request"]
    assert all(
        r.frame <= int(frame) for r, (frame, uri, _) in zip(requests, [x for x in rows if x[1]], strict=True)
    )


SESSION_C2S = post(BODY, "a") + lz4_post(BODY, stream="b") + post(BODY, "c")
SESSION_S2C = answer(200) + answer(400, b"Invalid event data") + answer(200)


@settings(max_examples=200)
@given(st.binary(max_size=300), st.integers(1, 64))
def test_arbitrary_http_bytes_become_findings_not_exceptions(data, step):
    recs = decode_stream(b"POST /stream/send?stream=x HTTP/1.1\r\n" + data, b"HTTP/1.1 " + data, step=step)
    assert all(r.protocol == "hercules" for r in recs)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_corrupted_sessions_never_raise(data):
    c2s, s2c = bytearray(SESSION_C2S), bytearray(SESSION_S2C)
    for buf in (c2s, s2c):
        for _ in range(data.draw(st.integers(0, 4))):
            i = data.draw(st.integers(0, len(buf) - 1))
            buf[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(c2s)))
    recs = decode_stream(bytes(c2s[:cut]), bytes(s2c), step=data.draw(st.integers(1, 200)))
    assert all(r.protocol == "hercules" for r in recs)


def test_field_names_never_collide_with_common_columns():
    recs = decode_stream(SESSION_C2S, SESSION_S2C) + list(decode_event_stream(struct.pack(">i", 1) + EV))
    for r in recs:
        assert not set(r.fields) & COMMON_MESSAGE_KEYS, r


def test_interim_answers_trailers_and_a_body_that_runs_to_the_close():
    body = b"%x\r\n%s\r\n0\r\nX-Trailer: 1\r\n\r\n" % (len(BODY), BODY)
    c2s = (
        b"POST /stream/send?stream=t HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
        + body
    )
    c2s += b"GET /about HTTP/1.1\r\nHost: g\r\n\r\n"
    s2c = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        + answer(200)
        + b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"v":1}'
    )
    recs = decode_stream(c2s, s2c, step=9)
    assert [r.fields["status"] for r in messages(recs, "response")] == [100, 200, 200]
    reqs = messages(recs, "request")
    assert [(r.fields["path"], r.fields["status"]) for r in reqs] == [("/stream/send", 200), ("/about", 200)]
    assert reqs[0].length == len(c2s) - len(b"GET /about HTTP/1.1\r\nHost: g\r\n\r\n")
    assert messages(recs, "response")[-1].fields["body"] == '{"v":1}'
    assert [e.acked for e in messages(recs, "event")] == [True, True]


def test_stream_and_timeline_reads_return_events():
    state = struct.pack(">i", 2) + struct.pack(">iq", 0, 10) + struct.pack(">iq", 1, 20)
    answer_body = state + BODY
    packed = lz4.block.compress(answer_body, store_size=False)
    event_id = struct.pack(">q", 15_276_799_200_000_000) + EV[9:25]  # Timestamp + UUID (§3)
    timeline_body = struct.pack(">i", 1) + struct.pack(">iq", 3, 7) + event_id + BODY
    c2s = (
        b"POST /stream/read?stream=logs&shardIndex=0&shardCount=1&take=2 HTTP/1.1\r\nAccept-Encoding: lz4\r\n"
        b"Content-Length: 4\r\n\r\n\x00\x00\x00\x00"
        b"POST /timeline/read?timeline=tl&shardIndex=0&shardCount=1&take=2&from=0&to=1 HTTP/1.1\r\n\r\n"
    )
    octets = "Content-Type: application/octet-stream\r\n"
    s2c = (
        f"HTTP/1.1 200 OK\r\n{octets}Content-Encoding: lz4\r\nOriginal-Content-Length: {len(answer_body)}\r\n"
        f"Content-Length: {len(packed)}\r\n\r\n".encode()
        + packed
        + f"HTTP/1.1 200 OK\r\n{octets}Content-Length: {len(timeline_body)}\r\n\r\n".encode()
        + timeline_body
    )
    recs = decode_stream(c2s, s2c, step=23)
    assert codes(recs) == []
    resp = messages(recs, "response")
    assert resp[0].fields["state"] == [{"partition": 0, "offset": 10}, {"partition": 1, "offset": 20}]
    assert resp[1].fields["state"] == [{"slice": 3, "offset": 7, "event_id": event_id.hex()}]
    assert [(r.fields["count"], r.fields["events"], r.fields["body"]) for r in resp] == [
        (2, 2, ""),
        (2, 2, ""),
    ]
    events = messages(recs, "event")
    assert [(e.direction, e.acked, e.fields.get("stream_name"), e.fields.get("timeline")) for e in events] == [
        (Direction.S2C, None, "logs", None)] * 2 + [(Direction.S2C, None, None, "tl")] * 2  # fmt: skip
    s2c_body_at = len(s2c) - len(timeline_body)
    assert [e.offset for e in events[2:]] == [s2c_body_at + 40 + 4, s2c_body_at + 40 + 69]
    assert events[2].event == {"host": "localhost", "timestamp": 1_527_679_920_000_000}


def test_read_answer_without_room_for_its_state():
    c2s = b"POST /stream/read?stream=s&take=1 HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
    body = struct.pack(">i", 5) + b"\x00" * 10
    recs = decode_stream(c2s, f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    assert codes(recs) == ["hercules.read-state"]
