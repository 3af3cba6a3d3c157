"""Every validation finding of the Lumberjack decoder, on frames built with the test encoder."""

from __future__ import annotations

import zlib

import pytest
from lumberjack_helpers import (
    C2S,
    S2C,
    ack,
    cframe,
    codes,
    decoder,
    dframe,
    feed_chunks,
    findings,
    jframe,
    messages,
    run,
    window,
)

from wirelog.engine.protocols import Limits
from wirelog.model import Gap, Severity


def ev(n: int) -> dict:
    return {"message": f"line {n}", "n": n}


def js(*seqs: int) -> bytes:
    return b"".join(jframe(s, ev(s)) for s in seqs)


def events(out):
    return messages(out, "event")


# windows ------------------------------------------------------------------------------------------


def test_window_exceeded():
    out = run([(C2S, window(1) + js(1, 2)), (S2C, ack(2))])
    (f,) = findings(out, "window-exceeded")
    assert f.severity is Severity.ERROR and f.fields["seq"] == 2
    assert [e.fields["window"] for e in events(out)] == [1, 1]
    assert all(e.acked for e in events(out))


def test_window_truncated_by_new_window():
    out = run([(C2S, window(3) + js(1) + window(1) + js(1)), (S2C, ack(1) + ack(1))])
    (f,) = findings(out, "window-truncated")
    assert f.fields == {"window": 1, "received": 1, "count": 3} and f.severity is Severity.WARNING
    w1, w2 = messages(out, "window")
    assert w1.fields["truncated"] is True and w2.fields["truncated"] is False
    assert [e.acked for e in events(out)] == [True, True]


def test_window_empty_and_too_large():
    out = run([(C2S, window(0) + window(20_000))])
    assert {"window-empty", "window-too-large"} <= codes(out)
    assert findings(out, "window-too-large")[0].fields["count"] == 20_000
    (w0, _) = messages(out, "window")
    assert w0.acked is None and w0.fields["received"] == 0


def test_window_split_over_two_compressed_frames():
    out = run([(C2S, window(2) + cframe(js(1)) + cframe(js(2))), (S2C, ack(2))])
    assert findings(out, "window-split-compressed")[0].fields == {"window": 1, "received": 1, "count": 2}
    assert [e.acked for e in events(out)] == [True, True]
    assert messages(out, "window")[0].fields["compressed_frames"] == 2


def test_frames_left_in_compressed_after_window_full():
    out = run([(C2S, window(1) + cframe(js(1, 2, 3))), (S2C, ack(1))])
    assert len(findings(out, "compressed-extra-frames")) == 1
    assert "window-exceeded" not in codes(out)
    assert [e.fields["seq"] for e in events(out)] == [1, 2, 3]
    assert [e.acked for e in events(out)] == [True, False, False]


def test_window_inside_compressed():
    out = run([(C2S, window(1) + cframe(window(1) + js(1)))])
    assert findings(out, "window-in-compressed")[0].severity is Severity.ERROR
    assert messages(out, "window")[1].fields["inflated_offset"] == 0


def test_nested_compressed_is_decoded_and_flagged():
    out = run([(C2S, window(2) + cframe(cframe(js(1, 2)))), (S2C, ack(2))])
    assert findings(out, "nested-compressed")[0].fields["depth"] == 2
    assert [c.fields["depth"] for c in messages(out, "compressed")] == [1, 2]
    assert [e.acked for e in events(out)] == [True, True]


def test_compression_depth_cap():
    body = js(1)
    for _ in range(5):
        body = cframe(body)
    out = run([(C2S, window(1) + body)], dec=decoder(limits=Limits(max_depth=3)))
    assert findings(out, "compressed-too-deep")[0].fields["depth"] == 4
    assert not events(out)


def test_inflate_cap_stops_a_bomb():
    bomb = cframe(jframe(1, b'"' + b"a" * 8_000_000 + b'"'), level=9)
    assert len(bomb) < 20_000
    out = run([(C2S, window(1) + bomb)], dec=decoder(limits=Limits(max_inflated=1 << 20)))
    assert findings(out, "inflate-limit")[0].severity is Severity.ERROR
    assert not events(out)


@pytest.mark.parametrize(
    ("body", "text"),
    [(b"\x1f\x8b\x08\x00garbage", "gzip"), (zlib.compress(js(1))[:2] + b"\xff" * 20, "invalid")],
)
def test_zlib_errors(body, text):
    frame = b"2C" + len(body).to_bytes(4, "big") + body
    out = run([(C2S, window(1) + frame + window(1) + js(1))])
    (f,) = findings(out, "zlib-error")
    assert text in f.message
    assert len(events(out)) == 1  # the stream carries on after the bad C frame


def test_compressed_trailing_bytes_and_inner_truncation():
    body = zlib.compress(js(1)) + b"junk"
    out = run([(C2S, window(1) + b"2C" + len(body).to_bytes(4, "big") + body)])
    assert findings(out, "compressed-trailing-bytes")[0].fields["trailing"] == 4
    cut = cframe(js(1) + js(2)[:-3])
    out = run([(C2S, window(2) + cut)])
    (f,) = findings(out, "compressed-truncated")
    assert "inside a frame" in f.message
    assert len(events(out)) == 1


def test_event_without_window():
    out = run([(C2S, js(1, 2)), (S2C, ack(2))])
    assert findings(out, "event-without-window")[0].severity is Severity.ERROR
    (w,) = messages(out, "window")
    assert w.fields["implicit"] is True and w.fields["count"] is None
    assert [e.acked for e in events(out)] == [True, True]


# sequence numbers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seqs", "code", "fields", "at"),
    [
        ((1, 2, 5), "seq-gap", {"seq": 5, "previous": 2, "missing": 2}, 2),
        ((1, 1, 2), "seq-duplicate", {"seq": 1}, 1),
        ((1, 3, 2), "seq-non-monotonic", {"seq": 2, "previous": 3}, 2),
        ((0xFFFFFFFE, 0xFFFFFFFF, 0), "seq-rollover", {"seq": 0, "previous": 0xFFFFFFFF}, 2),
        ((0xFFFFFFFF, 1, 2), "seq-rollover", {"seq": 1, "previous": 0xFFFFFFFF}, 1),
    ],
)
def test_sequence_anomalies_within_window(seqs, code, fields, at):
    out = run([(C2S, window(3) + js(*seqs))])
    (f,) = findings(out, code)
    assert f.fields == fields
    assert f.offset == 6 + sum(len(jframe(s, ev(s))) for s in seqs[:at])


def test_signed_overflow_noted_once():
    out = run([(C2S, window(2) + js(1 << 31, (1 << 31) + 1))])
    assert len(findings(out, "seq-signed-overflow")) == 1


def test_profiles_and_window_start():
    beats = run([(C2S, window(2) + js(1, 2) + window(2) + js(1, 2) + window(1) + js(7))])
    assert findings(beats, "seq-profile")[0].fields == {"profile": "per-window"}
    assert findings(beats, "seq-window-start")[0].fields["expected"] == 1
    cont = run([(C2S, window(2) + js(1, 2) + window(2) + js(3, 4) + window(1) + js(1))])
    assert findings(cont, "seq-profile")[0].fields == {"profile": "continuing"}
    assert findings(cont, "seq-window-start")[0].fields["expected"] == 5


# ACKs ------------------------------------------------------------------------------------------


def test_pipelined_windows_acked_fifo():
    c2s = window(2) + js(1, 2) + window(2) + js(1, 2) + window(2) + js(1, 2)
    out = run([(C2S, c2s), (S2C, ack(2)), (S2C, ack(2)), (S2C, ack(2))])
    assert [a.fields["window"] for a in messages(out, "ack")] == [1, 2, 3]
    assert [e.fields["ack_frame"] for e in events(out)] == [2, 2, 3, 3, 4, 4]
    assert not findings(out, "unacked")


def test_ack_too_high_unexpected_and_stale():
    out = run([(C2S, window(2) + js(1, 2)), (S2C, ack(5))])
    assert findings(out, "ack-too-high")[0].fields == {"value": 5, "window": 1, "events": 2}
    out = run([(S2C, ack(3))])
    assert findings(out, "ack-unexpected")[0].fields == {"value": 3}
    out = run([(C2S, window(4) + js(1, 2, 3, 4)), (S2C, ack(3) + ack(2) + ack(4))])
    assert findings(out, "ack-stale")[0].fields["value"] == 2
    assert [e.acked for e in events(out)] == [True] * 4


def test_partial_acks_old_ruby_server():
    out = run([(C2S, window(10) + js(*range(1, 11))), (S2C, ack(2) + ack(4) + ack(6) + ack(8) + ack(10))])
    assert len(findings(out, "ack-partial")) == 4
    evs = events(out)
    assert all(e.acked for e in evs)
    assert [e.fields["ack_offset"] for e in evs] == [0, 0, 6, 6, 12, 12, 18, 18, 24, 24]


def test_count_server_with_continuing_seqs_is_a_stall():
    out = run([(C2S, window(2) + js(1, 2)), (S2C, ack(2)), (C2S, window(1) + js(3)), (S2C, ack(1))])
    assert findings(out, "server-kind")[0].fields == {"server_kind": "count"}
    assert findings(out, "ack-stall")[0].fields == {"value": 1, "expected_seq": 3, "window": 2}
    assert messages(out, "ack")[1].fields["interpretation"] == "count"


def test_highest_seq_server_identified():
    out = run([(C2S, window(2) + js(5, 6)), (S2C, ack(6))])
    assert findings(out, "server-kind")[0].fields == {"server_kind": "highest-seq"}
    assert "ack-stall" not in codes(out)


def test_keepalives_never_acknowledge():
    out = run([(C2S, window(1) + js(1)), (S2C, ack(0)), (S2C, ack(0))])
    assert [e.acked for e in events(out)] == [False]
    assert findings(out, "keepalive")[0].fields["count"] == 2
    assert findings(out, "unacked")[0].fields["events"] == 1


def test_v2_keepalive_on_v1_connection():
    out = run([(C2S, window(1, "1") + dframe(1, {"line": "x"})), (S2C, ack(0, "2") + ack(1, "1"))])
    assert "keepalive-v2-on-v1" in codes(out) and "version-changed" not in codes(out)
    assert events(out)[0].acked is True


# protocol ------------------------------------------------------------------------------------------


def test_version_changed_and_type_mismatch():
    out = run([(C2S, window(1) + js(1) + window(1, "1") + jframe(1, ev(1), v="1"))])
    assert findings(out, "version-changed")[0].fields == {"connection_version": "2", "frame_version": "1"}
    assert findings(out, "frame-version-mismatch")[0].fields == {"frame_type": "J", "frame_version": "1"}
    assert len(events(out)) == 2


def test_unknown_frame_type_then_resync():
    out = run([(C2S, window(1) + b"2X\x00\x00\x00\x01" + js(1))])
    assert findings(out, "unknown-frame-type")[0].fields == {"type_byte": ord("X")}
    assert findings(out, "resync")[0].fields == {"skipped": 6}
    assert len(events(out)) == 1


@pytest.mark.parametrize(
    ("data", "byte", "hint"),
    [
        (b'{"message":"hello"}\n', 123, "raw JSON"),
        (b"POST /_bulk HTTP/1.1\r\n\r\n", 80, "HTTP"),
        (b"<13>Nov 21 06:00:00 host app: hi\n", 60, "syslog"),
        (bytes.fromhex("160301020001"), 22, "TLS"),
    ],
)
def test_invalid_version_hints(data, byte, hint):
    out = run([(C2S, data)])
    (f,) = findings(out, "invalid-version")
    assert f.fields == {"byte": byte} and hint in f.message
    assert f"Invalid version of beats protocol: {byte}" in f.message
    assert findings(out, "resync")[0].fields["skipped"] == len(data)


def test_bad_lengths():
    out = run([(C2S, window(2) + b"2J" + (1).to_bytes(4, "big") + bytes(4) + dframe(2, [], v="2"))])
    assert [f.fields["frame_type"] for f in findings(out, "bad-length")] == ["J", "D"]
    assert "Invalid json length" in findings(out, "bad-length")[0].message
    huge = b"2J" + (1).to_bytes(4, "big") + (1 << 30).to_bytes(4, "big")
    out = run([(C2S, window(2) + huge + js(2))], dec=decoder(limits=Limits(max_frame=1 << 20)))
    assert findings(out, "bad-length")[0].fields == {"frame_type": "J", "declared": 1 << 30, "limit": 1 << 20}
    assert [e.fields["seq"] for e in events(out)] == [2]


def test_json_problems_and_kv_utf8():
    out = run(
        [
            (
                C2S,
                window(3)
                + jframe(1, b"{not json")
                + jframe(2, b"[1,2]")
                + dframe(3, [(b"k", b"\xff")], v="2"),
            )
        ]
    )
    assert {"json-invalid", "json-not-object", "kv-invalid-utf8"} <= codes(out)
    e1, e2, e3 = events(out)
    assert e1.event is None and e1.fields["raw"] == "{not json"
    assert e2.event == [1, 2] and e3.event == {"k": "\ufffd"}


def test_wrong_direction_both_ways():
    out = run([(C2S, window(1) + js(1) + ack(1)), (S2C, window(1) + ack(1))])
    assert [f.direction for f in findings(out, "wrong-direction")] == [C2S, S2C]
    assert events(out)[0].acked is True


def test_truncated_frame_at_stream_end():
    data = window(1) + js(1)
    out = run([(C2S, data[:-4])])
    (f,) = findings(out, "truncated")
    assert f.offset == 6 and f.fields["need"] == len(data) - 6


def test_gap_then_resync_keeps_later_windows():
    w1 = window(3) + js(1, 2, 3)
    w2 = window(2) + js(4, 5)
    cut = 6 + len(jframe(1, ev(1))) + 5
    chunks = [
        (C2S, w1[:cut]),
        Gap(0, C2S, cut, 7),
        (C2S, w1[cut + 7 :] + w2),
        (S2C, ack(5)),
    ]
    out = feed_chunks(chunks)
    resync = findings(out, "resync")[0]
    assert resync.offset == cut + 7 and "capture gap" in resync.message
    assert resync.fields["skipped"] == len(w1) - cut - 7 - len(jframe(3, ev(3)))
    assert [e.fields["seq"] for e in events(out)] == [1, 3, 4, 5]
    trunc = findings(out, "window-truncated")[0]
    assert trunc.severity is Severity.INFO and "missing from the capture" in trunc.message


# delivery ------------------------------------------------------------------------------------------


def test_unacked_at_stream_end():
    out = run([(C2S, window(2) + js(1, 2) + window(1) + js(3)), (S2C, ack(2))])
    (f,) = findings(out, "unacked")
    assert f.fields == {"events": 1, "windows": [2], "s2c_gap": False}
    assert [e.acked for e in events(out)] == [True, True, False]
    assert [w.acked for w in messages(out, "window")] == [True, False]


def test_pending_overflow_releases_oldest_window_early():
    dec = decoder(limits=Limits(max_pending_events=3))
    out = run([(C2S, window(2) + js(1, 2) + window(2) + js(1, 2)), (S2C, ack(2) + ack(2))], dec=dec)
    assert len(findings(out, "pending-overflow")) == 1
    assert [e.acked for e in events(out)] == [None, None, True, True]
    assert [a.fields["window"] for a in messages(out, "ack")] == [1, 2]


def test_resend_on_later_connection():
    shared: dict = {}
    first = run([(C2S, window(2) + js(1, 2))], dec=decoder(stream=3, shared=shared))
    second = run([(C2S, window(2) + js(1, 2)), (S2C, ack(2))], dec=decoder(stream=4, shared=shared))
    assert not findings(first, "resend")
    assert findings(second, "resend")[0].fields["first_stream"] == 3
    assert [e.fields["resend_of"]["seq"] for e in events(second)] == [1, 2]
    assert messages(second, "window")[0].fields["resends"] == 2


def test_records_in_order_and_connection_summary():
    out = run([(C2S, window(2) + cframe(js(1, 2)) + window(1) + js(1)), (S2C, ack(0) + ack(2))])
    kinds = [r.kind for r in messages(out)]
    # the keep-alive goes out at once; window 1 is held until its ACK, window 2 until the end
    assert kinds == ["ack", "window", "compressed", "event", "event", "ack", "window", "event", "connection"]
    (summary,) = messages(out, "connection")
    assert summary.version == "2"
    assert summary.fields == {
        "windows": 2,
        "events": 3,
        "acked_events": 2,
        "unacked_events": 1,
        "unknown_events": 0,
        "acks": 1,
        "keepalives": 1,
        "seq_profile": "per-window",
        "server_kind": None,
        "acks_lost": False,
    }


def test_server_gap_leaves_ack_state_unknown():
    chunks = [(C2S, window(2) + js(1, 2)), (S2C, ack(0)), Gap(0, S2C, 6, 6), (C2S, window(1) + js(1))]
    out = feed_chunks(chunks)
    assert [e.acked for e in events(out)] == [None, None, None]
    assert findings(out, "unacked")[0].fields["s2c_gap"] is True
    assert messages(out, "connection")[0].fields["unknown_events"] == 3


def test_ack_after_client_gap_is_explained():
    chunks = [(C2S, window(1) + js(1)), (S2C, ack(1)), Gap(0, C2S, 6 + len(js(1)), 30), (S2C, ack(1))]
    (f,) = findings(feed_chunks(chunks), "ack-unexpected")
    assert f.severity is Severity.INFO and "capture gap" in f.message


def test_midstream_pickup_is_a_resync_not_a_protocol_error():
    tail = js(2)[-10:]  # the capture starts inside a J frame's JSON
    out = run([(C2S, tail + window(1) + js(3)), (S2C, ack(2)[3:] + ack(1))])
    assert "invalid-version" not in codes(out) and "unknown-frame-type" not in codes(out)
    c2s, s2c = findings(out, "resync")
    assert c2s.fields["skipped"] == 10 and "mid-stream" in c2s.message
    assert s2c.fields["skipped"] == 3 and s2c.direction is S2C
    (e,) = events(out)
    assert e.fields["seq"] == 3 and e.acked is True


def test_sliding_window_v1_client_reported_once():
    """npm lumberjack-protocol: `1W 3` once, then D frames forever (reference §2)."""
    c2s = window(3, "1") + b"".join(dframe(s, {"line": f"l{s}"}) for s in range(1, 8))
    out = run([(C2S, c2s), (S2C, ack(3, "1") + ack(5, "1") + ack(7, "1"))])
    (f,) = findings(out, "window-exceeded")
    assert f.fields["seq"] == 4
    assert [e.fields["seq"] for e in events(out)] == list(range(1, 8))
    assert all(e.acked for e in events(out))


def test_compressed_frame_of_length_zero():
    out = run([(C2S, window(1) + b"2C" + bytes(4) + js(1))])
    assert findings(out, "bad-length")[0].fields == {"frame_type": "C", "declared": 0}
    assert len(events(out)) == 1


def test_huge_window_is_streamed_out_not_held():
    dec = decoder(limits=Limits(max_pending_events=10))
    out = run([(C2S, window(1000) + js(*range(1, 1001)))], dec=dec, close=False)
    assert len(events(out)) >= 990  # held back at most the limit, the rest went out as it came
    assert all(e.acked is None for e in events(out))
    out += dec.close()
    assert len(events(out)) == 1000
    assert findings(out, "unacked")[0].fields["events"] == 1000
