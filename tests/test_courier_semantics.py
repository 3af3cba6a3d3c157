"""Log Courier odd cases, built with the encoder (checked against genuine bytes in test_courier_vectors):
streamed EVNT, resends, partial and repeated ACKNs, bad lengths, broken zlib, TLS mismatches, order rules.
"""

from __future__ import annotations

import struct
import zlib
from collections import Counter

import courier_codec as enc
import pytest
from courier_helpers import (
    C2S,
    GO_HELO,
    RUBY_HELO,
    RUBY_VERS,
    S2C,
    Conversation,
    codes,
    context,
    conversation,
    findings,
    messages,
)

from wirelog.model import Severity

N1 = bytes(range(16))
N2 = bytes(range(16, 32))
GO_VERS_EVNT = enc.vers(32, 1, (2, 12, 0), b"LCVR")


def events(n: int, start: int = 0) -> list[bytes]:
    return [enc.event_json({"message": f"line {i}", "offset": i}, "go") for i in range(start, start + n)]


def handshaken(**kw):
    conv = conversation(**kw)
    conv.c(GO_HELO)
    conv.s(RUBY_VERS)
    return conv


def acked_by(recs) -> list:
    return [(e.fields["index"], e.acked, e.fields["ack_frame"]) for e in messages(recs, "event")]


# -- EVNT -------------------------------------------------------------------------------------------


def test_evnt_acked_before_it_finishes_streaming():
    conv = conversation(split=3)
    conv.c(GO_HELO)
    conv.s(GO_VERS_EVNT)
    msg = enc.payload(N1, events(3), "go", streamed=True)
    conv.c(msg[:40])
    ack1 = conv.frame + 1
    conv.s(enc.ackn(N1, 1))  # "an ACKN may arrive before an EVNT has finished being sent"
    conv.c(msg[40:] + enc.ping())
    ack3 = conv.frame + 1
    conv.s(enc.ackn(N1, 3))
    recs = conv.records + conv.close()
    assert messages(recs, "evnt")[0].length == len(msg)
    assert acked_by(recs) == [(0, True, ack1), (1, True, ack3), (2, True, ack3)]
    assert messages(recs, "ping")[0].offset == 40 + len(msg)
    assert "courier.evnt-not-negotiated" not in codes(recs)
    assert messages(recs, "delivery")[0].fields["ack_frames"] == [ack1, ack3]


def test_evnt_without_negotiation():
    conv = handshaken()
    conv.c(enc.payload(N1, events(1), "go", streamed=True))
    assert "courier.evnt-not-negotiated" in codes(conv.records)
    assert len(messages(conv.records, "evnt")) == 1


def test_evnt_with_a_finite_length_is_flagged_but_decoded():
    conv = conversation()
    conv.c(GO_HELO)
    conv.s(GO_VERS_EVNT)
    body = N1 + enc.deflate(enc.event_block(events(2)), "go")
    conv.c(enc.message(b"EVNT", body))
    assert "courier.bad-length" in codes(conv.records)
    assert len(messages(conv.records + conv.close(), "event")) == 2


def test_evnt_corrupt_zlib_resyncs_to_next_message():
    conv = conversation()
    conv.c(GO_HELO)
    conv.s(GO_VERS_EVNT)
    good = enc.payload(N1, events(2), "go", streamed=True)
    bad = good[:24] + b"\x78\x5e\xff\xff\xff\xff" + good[30:]
    conv.c(bad + enc.payload(N2, events(1), "go"))
    recs = conv.records + conv.close()
    assert "courier.decompress-failed" in codes(recs)
    assert "courier.desync" in codes(recs)
    assert [m.fields["nonce"] for m in messages(recs, "jdat")] == [N2.hex()]


def test_evnt_cut_by_end_of_capture():
    conv = conversation()
    conv.c(GO_HELO)
    conv.s(GO_VERS_EVNT)
    conv.c(enc.payload(N1, events(50), "go", streamed=True)[:-30])
    recs = conv.records + conv.close()
    assert "courier.truncated" in codes(recs)
    assert "courier.decompress-failed" not in codes(recs)  # cut by the capture, not a zlib failure
    assert messages(recs, "evnt")
    assert all(e.acked is False for e in messages(recs, "event"))


# -- ACKN semantics ---------------------------------------------------------------------------------


def test_go_payload_test_vector_newly_acked_counts():
    """payload_test.go: 1024 events acked 64, 132, 132, 148, 192, 1024 → 64, 68, 0, 16, 44, 832 new."""
    conv = handshaken()
    conv.c(enc.payload(N1, events(1024), "go"))
    frames = []
    for seq in (64, 132, 132, 148, 192, 1024):
        conv.s(enc.ackn(N1, seq))
        frames.append(conv.frame)
    recs = conv.records + conv.close()
    per_frame = Counter(e.fields["ack_frame"] for e in messages(recs, "event"))
    assert [per_frame[f] for f in frames] == [64, 68, 0, 16, 44, 832]
    (rep,) = findings(recs)  # the repeated 132 is reported (info), nothing else
    assert (rep.code, rep.fields["sequence"], rep.fields["count"]) == ("courier.ack-repeated", 132, 2)


def test_ruby_partial_acks_record_their_frames():
    conv = handshaken()
    conv.c(enc.payload(N1, events(4)))
    frames = []
    for seq, t in ((2, 5), (3, 10), (4, 12)):  # observed: slow consumer, ACKN 2 / 3 / 4
        conv.s(enc.ackn(N1, seq), ts=t * 10**9)
        frames.append(conv.frame)
    recs = conv.records + conv.close()
    assert acked_by(recs) == [
        (0, True, frames[0]),
        (1, True, frames[0]),
        (2, True, frames[1]),
        (3, True, frames[2]),
    ]
    assert messages(recs, "delivery")[0].fields["ack_frames"] == frames


def test_back_pressure_run_of_sequence_zero():
    conv = handshaken()
    conv.c(enc.payload(N1, events(2)))
    for i in range(6):
        conv.s(enc.ackn(N1, 0), ts=(100 + 5 * i) * 10**9)
    conv.s(enc.ackn(N1, 2), ts=140 * 10**9)
    recs = conv.records + conv.close()
    (rep,) = findings(recs, "courier.ack-repeated")
    assert rep.severity is Severity.INFO
    assert rep.fields["count"] == 6 and rep.fields["sequence"] == 0 and rep.fields["interval_s"] == 5.0
    assert "back-pressure" in rep.message
    assert all(e.acked for e in messages(recs, "event"))


def test_ack_regressed_and_over_count():
    conv = handshaken()
    conv.c(enc.payload(N1, events(3)))
    conv.s(enc.ackn(N1, 2), enc.ackn(N1, 1))
    assert codes(conv.records) == ["courier.ack-regressed"]
    conv.s(enc.ackn(N1, 9))
    recs = conv.records + conv.close()
    over = findings(recs, "courier.ack-over-count")
    assert len(over) == 1 and over[0].severity is Severity.WARNING
    assert messages(recs, "delivery")[0].fields["complete"] is True
    assert all(e.acked for e in messages(recs, "event"))


def test_ack_out_of_payload_order():
    conv = handshaken()
    conv.c(enc.payload(N1, events(2)), enc.payload(N2, events(2, 2)))
    conv.s(enc.ackn(N2, 2))
    assert codes(conv.records) == ["courier.ack-out-of-order"]
    conv.s(enc.ackn(N1, 2))
    assert codes(conv.records + conv.close()) == ["courier.ack-out-of-order"]


def test_ack_past_a_payload_whose_ackn_is_in_a_server_gap_is_the_captures():
    """The first payload's ACKN fell in a server→client capture gap: the second one's ACKN is not
    the server acknowledging out of order (an info that names the gap), and the first payload's
    fate stays unknown."""
    conv = handshaken()
    conv.c(enc.payload(N1, events(2)), enc.payload(N2, events(2, 2)))
    conv.gap(S2C, len(enc.ackn(N1, 2)))
    conv.s(enc.ackn(N2, 2))
    recs = conv.records + conv.close()
    (f,) = findings(recs, "courier.ack-after-gap")
    assert f.severity is Severity.INFO and not findings(recs, "courier.ack-out-of-order")
    delivered = {(d.fields["nonce"], d.fields["complete"]) for d in messages(recs, "delivery")}
    assert delivered == {(N1.hex(), False), (N2.hex(), True)}
    assert [a for _, a, _ in acked_by(recs)] == [True, True, None, None]  # N2 is resolved first


def test_unknown_nonce_reported_once():
    conv = handshaken()
    conv.s(enc.ackn(N1, 1), enc.ackn(N1, 1))
    recs = conv.records + conv.close()
    assert codes(recs).count("courier.unknown-nonce") == 1
    assert findings(recs, "courier.unknown-nonce")[0].severity is Severity.INFO


def test_unacked_events_at_close():
    conv = handshaken()
    conv.c(enc.payload(N1, events(3)))
    conv.s(enc.ackn(N1, 1))
    recs = conv.records + conv.close()
    assert [(i, a) for i, a, _ in acked_by(recs)] == [(0, True), (1, False), (2, False)]
    (f,) = findings(recs, "courier.unacked-at-close")
    assert f.fields["unacked"] == 2
    d = messages(recs, "delivery")[0].fields
    assert (d["events"], d["acked_events"], d["unacked_events"], d["complete"]) == (3, 1, 2, False)


def test_server_side_gap_makes_unacked_unknown():
    conv = handshaken()
    conv.c(enc.payload(N1, events(2)))
    conv.gap(S2C, 28)
    recs = conv.records + conv.close()
    assert [a for _, a, _ in acked_by(recs)] == [None, None]
    assert messages(recs, "connection")[0].fields["acks_lost"] is True


def test_pending_events_bounded():
    conv = handshaken(max_pending_events=5)
    conv.c(enc.payload(N1, events(8)))
    early = messages(conv.records, "event")
    assert len(early) == 3 and all(e.acked is None for e in early)
    assert "courier.pending-overflow" in codes(conv.records)
    conv.s(enc.ackn(N1, 8))
    recs = conv.records + conv.close()
    assert [e.acked for e in messages(recs, "event")] == [None] * 3 + [True] * 5


# -- resends and nonces -----------------------------------------------------------------------------


def test_resend_across_connections():
    shared: dict = {}
    first = conversation(stream=0, shared=shared)
    first.c(GO_HELO)
    first.s(RUBY_VERS)
    first.c(enc.payload(N1, events(4)))
    first.s(enc.ackn(N1, 2))
    recs1 = first.records + first.close()
    assert [a for _, a, _ in acked_by(recs1)] == [True, True, False, False]
    second = conversation(stream=1, shared=shared)
    second.c(GO_HELO)
    second.s(RUBY_VERS)
    second.c(enc.payload(N1, events(2, 2)))  # only the unacked events, numbered from 1 again
    second.s(enc.ackn(N1, 2))
    recs2 = second.records + second.close()
    (f,) = findings(recs2, "courier.resend")
    assert f.severity is Severity.INFO
    assert (f.fields["previous_stream"], f.fields["previous_events"], f.fields["previous_acked"]) == (0, 4, 2)
    assert [(e.fields["sequence"], e.event["offset"], e.acked) for e in messages(recs2, "event")] == [
        (1, 2, True),
        (2, 3, True),
    ]
    assert (
        messages(recs2, "connection")[0].fields["resends"] == 0
    )  # a new connection, not a same-connection resend


def test_nonce_reused_for_different_content():
    shared: dict = {}
    for stream, start in ((0, 0), (1, 100)):
        conv = conversation(stream=stream, shared=shared)
        conv.c(GO_HELO)
        conv.s(RUBY_VERS)
        conv.c(enc.payload(N1, events(2, start)))
        recs = conv.records + conv.close()
    (f,) = findings(recs, "courier.nonce-reused")
    assert f.severity is Severity.WARNING


def test_nonce_repeat_is_normal_for_unseeded_legacy_go():
    shared: dict = {}
    unseeded = bytes.fromhex("56847afe9799739b3d9677972a3b58ef")
    for stream, start in ((0, 0), (1, 100)):
        conv = conversation(stream=stream, shared=shared)
        conv.c(enc.payload(unseeded, events(3, start), "go"))  # no HELO: Go 2.0.6
        conv.s(enc.ackn(unseeded, 3))
        recs = conv.records + conv.close()
    (f,) = findings(recs, "courier.nonce-reused")
    assert f.severity is Severity.INFO and "unseeded" in f.message
    assert messages(recs, "connection")[0].fields["unseeded_go_nonce"] is True


def test_resend_on_the_same_connection_supersedes():
    conv = handshaken()
    conv.c(enc.payload(N1, events(3)), enc.payload(N2, events(1, 3)))
    conv.s(enc.ackn(N1, 1), enc.ackn(N2, 1))
    conv.c(enc.payload(N1, events(2, 1)))  # Go 1.x checkResend: same nonce, unacked tail
    conv.s(enc.ackn(N1, 2))
    recs = conv.records + conv.close()
    assert "courier.resend" in codes(recs)
    sup = [d.fields for d in messages(recs, "delivery") if d.fields["superseded"]]
    assert len(sup) == 1 and sup[0]["acked_events"] == 1
    n1 = [e for e in messages(recs, "event") if e.fields["nonce"] == N1.hex()]
    assert [(e.event["offset"], e.acked, e.fields.get("resent", False)) for e in n1] == [
        (0, True, False),
        (1, False, True),
        (2, False, True),
        (1, True, False),
        (2, True, False),
    ]
    assert messages(recs, "connection")[0].fields["resends"] == 1


# -- lengths, zlib, event framing -------------------------------------------------------------------


def test_bad_ackn_length_then_recovery():
    conv = handshaken()
    conv.c(enc.payload(N1, events(1)))
    conv.s(enc.message(b"ACKN", N1), enc.ackn(N1, 1))
    recs = conv.records + conv.close()
    assert codes(recs) == ["courier.bad-length"]
    assert all(e.acked for e in messages(recs, "event"))


def test_ping_pong_with_nonzero_length():
    conv = handshaken()
    conv.c(enc.message(b"PING", b"xxxx"))
    conv.s(enc.message(b"PONG", b"yy"))
    assert codes(conv.records) == ["courier.nonzero-length", "courier.nonzero-length"]
    assert [m.kind for m in messages(conv.records)][-2:] == ["ping", "pong"]


@pytest.mark.parametrize("length", [0, 16])
def test_jdat_too_short(length):
    conv = handshaken()
    conv.c(enc.message(b"JDAT", bytes(length)), enc.ping())
    assert "courier.bad-length" in codes(conv.records)
    assert messages(conv.records, "ping")


def test_hostile_length_is_not_allocated_and_resyncs():
    conv = handshaken(max_frame=1 << 20)
    conv.c(enc.jdat(N1, b"\x78\x9c", length=0x87010000), enc.ping())
    recs = conv.records
    assert "courier.length-over-limit" in codes(recs)
    assert messages(recs, "ping")


def test_jdat_over_the_10_mib_packet_limit_is_flagged_and_decoded():
    half = enc.event_json({"message": "x" * (5 << 20)})
    big = enc.jdat(N1, zlib.compress(enc.event_block([half, half]), 0))  # stored blocks: no shrinking
    assert len(big) - 8 > 10 * 1024 * 1024
    conv = handshaken()
    conv.c(big)
    recs = conv.records + conv.close()
    assert "courier.length-over-limit" in codes(recs)
    assert len(messages(recs, "event")) == 2


def test_truncated_zlib_inside_jdat():
    z = enc.deflate(enc.event_block(events(5)))
    conv = handshaken()
    conv.c(enc.jdat(N1, z[:-12]), enc.ping())
    recs = conv.records
    assert "courier.decompress-failed" in codes(recs)
    assert "courier.bad-event-framing" not in codes(recs)  # a cut tail is the zlib error's consequence
    assert messages(recs, "ping")


def test_corrupt_zlib_and_trailing_bytes():
    conv = handshaken()
    conv.c(enc.jdat(N1, b"\x78\x9c\xff\xff\xff\xff"))
    conv.c(enc.jdat(N2, enc.deflate(enc.event_block(events(1))) + b"junk"))
    recs = conv.records
    assert codes(recs) == ["courier.decompress-failed", "courier.trailing-data"]


def test_malformed_event_framing_and_invalid_json():
    block = enc.event_block([b'{"ok":1}', b"not json", b"[1,2]"]) + struct.pack(">I", 99) + b"short"
    conv = handshaken()
    conv.c(enc.jdat(N1, enc.deflate(block)))
    recs = conv.records + conv.close()
    assert "courier.bad-event-framing" in codes(recs)
    (bad,) = findings(recs, "courier.invalid-json")
    assert bad.fields["count"] == 2 and bad.fields["first_index"] == 1
    evs = messages(recs, "event")
    assert [e.event for e in evs] == [{"ok": 1}, {"message": "not json"}, {"message": "[1,2]"}]
    assert "json_error" in evs[1].fields


def test_event_over_the_10_mib_limit():
    block = struct.pack(">I", 11 * 1024 * 1024) + b"{}"
    conv = handshaken()
    conv.c(enc.jdat(N1, enc.deflate(block)))
    assert "courier.event-over-limit" in codes(conv.records)


def test_inflate_cap():
    # past the cap in inflated bytes: nothing is left to pay for events (1 KiB each)
    conv = handshaken(max_inflated=1000)
    conv.c(enc.payload(N1, events(100)), enc.ping())
    recs = conv.records + conv.close()
    assert "courier.inflate-limit" in codes(recs)
    assert not messages(recs, "event")
    assert messages(recs, "ping")
    # within it, but its events cost more than what the inflated bytes left: the first ten
    block = enc.event_block(events(100))
    conv = handshaken(max_inflated=len(block) + 10 * 1024 + 1)
    conv.c(enc.payload(N1, events(100)), enc.ping())
    recs = conv.records + conv.close()
    [limit] = [f for f in recs if getattr(f, "code", None) == "courier.inflate-limit"]
    assert (limit.fields["events"], limit.fields["cap"]) == (10, len(block) + 10 * 1024 + 1)
    assert [e.fields["index"] for e in messages(recs, "event")] == list(range(10))
    assert messages(recs, "ping")


# -- TLS, unknown types, desync, gaps ---------------------------------------------------------------


def test_tls_client_to_plain_server_is_explained():
    hello = bytes.fromhex("1603010087010000830303") + bytes(128)
    conv = conversation()
    conv.c(hello)
    (f,) = findings(conv.records, "courier.tls-mismatch")
    assert f.direction is C2S and f.fields["bogus_length"] == 2264989696
    assert "2264989696" in f.message and "packet too large" in f.message
    conv.c(b"more TLS bytes")
    conv.s(bytes.fromhex("160303007a02000076"))  # a ServerHello: both sides TLS, nothing more to say
    assert len(findings(conv.records + conv.close())) == 1


def test_plain_client_to_tls_server():
    conv = conversation()
    conv.c(GO_HELO)
    conv.s(bytes.fromhex("15030300020228"))
    (f,) = findings(conv.records, "courier.tls-mismatch")
    assert f.direction is S2C


def test_unknown_type_skipped_and_answered_with_unknown_reply():
    conv = handshaken()
    conv.c(enc.message(b"ABCD", b"1234"), enc.ping())
    conv.s(enc.unknown_reply(), enc.pong())
    recs = conv.records
    assert codes(recs) == ["courier.unknown-type"]
    assert [m.kind for m in messages(recs)][-4:] == ["unknown_type", "ping", "unknown_reply", "pong"]


def test_garbage_desync_then_resync():
    conv = handshaken()
    conv.c(b"\x00\x01garbage!" * 5 + enc.payload(N1, events(1)))
    recs = conv.records
    (f,) = findings(recs, "courier.desync")
    assert f.fields["skipped"] == 50 and f.offset == 40
    assert messages(recs, "jdat")[0].offset == 90


def test_gap_inside_a_payload_resyncs():
    conv = handshaken()
    msg = enc.payload(N1, events(3))
    conv.c(msg[:30])
    conv.gap(C2S, 20)
    conv.c(msg[50:] + enc.payload(N2, events(1)))
    conv.s(enc.ackn(N1, 3), enc.ackn(N2, 1))
    recs = conv.records + conv.close()
    (f,) = findings(recs, "courier.resync-after-gap")
    assert f.fields["dropped"] == 30 and f.fields["skipped"] == len(msg) - 50
    assert [m.fields["nonce"] for m in messages(recs, "jdat")] == [N2.hex()]
    assert "courier.unknown-nonce" in codes(recs)


def test_gap_at_a_message_boundary_is_silent():
    conv = handshaken()
    conv.c(enc.ping())
    conv.gap(C2S, 8)
    conv.c(enc.ping())
    assert codes(conv.records) == []


def test_truncated_message_at_close():
    conv = handshaken()
    conv.c(enc.payload(N1, events(2))[:-5])
    recs = conv.records + conv.close()
    assert codes(recs) == ["courier.truncated"]


# -- order and direction rules ----------------------------------------------------------------------


def test_helo_not_first():
    conv = conversation()
    conv.c(enc.ping(), GO_HELO)
    assert "courier.helo-not-first" in codes(conv.records)


def test_server_first_message_must_be_vers_or_unknown_reply():
    conv = conversation()
    conv.c(GO_HELO)
    conv.s(enc.pong(), RUBY_VERS)
    assert codes(conv.records).count("courier.vers-not-first") == 2
    assert "courier.pong-without-ping" in codes(conv.records)


def test_vers_without_helo():
    conv = conversation()
    conv.c(enc.payload(N1, events(1)))
    conv.s(RUBY_VERS)
    assert codes(conv.records) == ["courier.vers-without-helo"]


def test_handshake_declined_with_unknown_reply():
    conv = conversation()
    conv.c(GO_HELO)
    conv.s(enc.unknown_reply())
    conv.c(enc.payload(N1, events(1)))
    conv.s(enc.ackn(N1, 1))
    recs = conv.records + conv.close()
    assert codes(recs) == []
    conn = messages(recs, "connection")[0].fields
    assert conn["handshake"] == "helo+declined" and conn["server_impl"] == "ruby"


def test_wrong_direction_reported_once_per_type():
    conv = handshaken()
    conv.s(enc.payload(N1, events(1)), enc.payload(N2, events(1)))
    conv.c(enc.ackn(N1, 1))
    recs = conv.records + conv.close()
    assert codes(recs) == ["courier.wrong-direction", "courier.wrong-direction"]
    assert [e.acked for e in messages(recs, "event")] == [None, None]


def test_ping_while_pending_and_pong_pairing():
    conv = handshaken()
    conv.c(enc.ping())
    conv.s(enc.pong())
    assert codes(conv.records) == []
    conv.c(enc.payload(N1, events(1)), enc.ping())
    assert codes(conv.records) == ["courier.ping-while-pending"]
    conv.s(enc.pong(), enc.pong())
    assert codes(conv.records)[-1] == "courier.pong-without-ping"


def test_ruby_270_evnt_flag_bug_and_odd_layouts():
    conv = conversation()
    conv.c(enc.helo(8, 0, (2, 7, 0), b"RYLC"))
    conv.s(enc.vers(8, 1, (2, 7, 0), b"RYLC"))
    assert codes(conv.records) == ["courier.evnt-flag-bug"]
    conn = messages(conv.records + conv.close(), "connection")[0].fields
    assert conn["client_class"] == conn["server_class"] == "Ruby gem 2.7.0-2.7.1"
    odd = conversation()
    odd.c(enc.message(b"HELO", bytes(12)))
    assert codes(odd.records) == ["courier.handshake-layout"]


def test_go_250_handshake_fingerprint():
    conv = conversation()
    conv.c(enc.helo(0))
    conv.s(enc.vers(1, 1))
    conv.c(enc.payload(N1, events(1), "go", streamed=True))
    conv.s(enc.ackn(N1, 1))
    recs = conv.records + conv.close()
    assert codes(recs) == []
    conn = messages(recs, "connection")[0].fields
    assert (
        conn["client_class"] == "Go log-courier 2.5.0-2.6.3"
        and conn["server_class"] == "Go receiver 2.5.0-2.6.3"
    )
    assert conn["evnt_negotiated"] is True


def test_ruby_client_nonce_with_ff_byte():
    conv = conversation()
    conv.c(RUBY_HELO)
    conv.s(RUBY_VERS)
    conv.c(enc.payload(b"\xff" * 16, events(1)))
    conn = messages(conv.records + conv.close(), "connection")[0].fields
    assert conn["nonce_with_ff"] is True


def test_docs_table_lists_exactly_the_emitted_codes():
    """The codes in the core's Courier decoder and delivery verdict are the documented ones."""
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    decoders = repo / "native" / "src" / "decoders"
    source = "\n".join(
        p.read_text()
        for p in [*sorted((decoders / "courier").glob("*.rs")), decoders / "delivery.rs"]
        if p.name not in ("tests.rs", "fuzz.rs")
    )
    emitted = set(re.findall(r"\"(courier\.[a-z0-9-]+)\"", source))
    doc = (repo / "docs" / "protocols" / "courier.md").read_text()
    table = {line.split("`")[1] for line in doc.splitlines() if line.startswith("| `courier.")}
    assert len(emitted) > 20 and table == emitted, (emitted - table, table - emitted)


def test_resync_over_many_implausible_headers_is_linear():
    junk = b"\x00" * 8 + b"ACKN\xff\xff\xff\xff" * 100_000  # 800 KB of headers that fail their length rule
    conv = handshaken()
    conv.c(junk + enc.ping())
    (f,) = findings(conv.records, "courier.desync")
    assert f.fields["skipped"] == len(junk)
    assert messages(conv.records, "ping")


def test_evnt_streaming_past_the_frame_cap():
    conv = conversation(max_frame=4096, split=1000)  # the EVNT arrives in 1000-byte segments
    conv.c(GO_HELO)
    conv.s(GO_VERS_EVNT)
    stored = zlib.compress(enc.event_block([b'{"m":"' + b"x" * 20_000 + b'"}']), 0)
    conv.c(enc.evnt(N1, stored) + enc.ping())
    recs = conv.records + conv.close()
    assert "courier.length-over-limit" in codes(recs)
    assert "courier.desync" in codes(recs)
    assert messages(recs, "ping")


def test_gap_while_resynchronising_reports_both_losses():
    conv = handshaken()
    conv.c(b"\x01\x02\x03\x04garbage!")
    conv.gap(C2S, 100)
    conv.c(enc.ping())
    recs = conv.records + conv.close()
    assert codes(recs) == ["courier.desync"]  # the gap fell on the PING's boundary: silent
    assert findings(recs, "courier.desync")[0].fields["skipped"] == 12


def test_go_helo_with_a_nonce_go_cannot_make():
    conv = handshaken()
    conv.c(enc.payload(b"\xff" + N1[1:], events(1), "go"), enc.payload(b"\xff" * 16, events(1), "go"))
    (f,) = findings(conv.records, "courier.fingerprint-mismatch")
    assert f.severity is Severity.INFO and f.fields["nonce"].startswith("ff")


def test_a_connection_opening_with_ping_is_the_legacy_client_pitfall():
    conv = conversation()
    conv.c(enc.ping())
    conv.s(enc.pong())
    conv.c(enc.payload(N1, events(1), "go"), enc.ping())  # later PINGs are ordinary keep-alives
    (f,) = findings(conv.records, "courier.ping-first")
    assert (f.frame, f.offset, f.severity) == (1, 0, Severity.WARNING)
    assert "HELO or JDAT" in f.message


def test_ping_first_needs_the_start_of_the_connection():
    ctx = context()
    ctx.midstream = True  # offset 0 is only where the capture began
    conv = Conversation(ctx)
    conv.c(enc.ping())
    assert "courier.ping-first" not in codes(conv.records)
    handshake = handshaken()
    handshake.c(enc.ping())
    assert "courier.ping-first" not in codes(handshake.records)
