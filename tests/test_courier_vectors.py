"""The genuine hex vectors of reference/courier.md §4: decoded field by field, and rebuilt by the encoder."""

from __future__ import annotations

import json
import zlib

import courier_codec as enc
import pytest
from courier_helpers import (
    C2S,
    GO_ACKN,
    GO_EVNT,
    GO_HELO,
    LEGACY_GO_PREFIX,
    PING,
    PONG,
    RUBY_ACKN,
    RUBY_HELO,
    RUBY_JDAT,
    RUBY_JDAT_EVENTS,
    RUBY_VERS,
    S2C,
    STUB_VERS,
    UNKNOWN_REPLY,
    codes,
    conversation,
    findings,
    messages,
    split_events,
)

GO_EVNT_NONCE = bytes.fromhex("1f8050fb57c75276df775331e97c67b5")
RUBY_NONCE = bytes.fromhex("b7b84ca035a49023405f0ced89ed4cb4")
GO_NONCE = bytes.fromhex("ca832a423b8577145701d58137607427")


def handshake(side: str, message: bytes) -> dict:
    """The fields of the helo/vers record the core's decoder makes of one handshake message."""
    conv = conversation()
    getattr(conv, side)(message)
    (record,) = [m for m in messages(conv.records) if m.kind in ("helo", "vers")]
    return record.fields


def test_go_helo_layout_32():
    hs = handshake("c", GO_HELO)
    assert (hs["layout"], hs["flags"], hs["software_version"], hs["client_id"]) == (32, 0, "2.12.0", "LCOR")
    assert GO_HELO[8 + 20 :] == bytes(12)  # reserved
    assert hs["evnt"] is False


def test_ruby_vers_layout_20():
    hs = handshake("s", RUBY_VERS)
    assert (hs["layout"], hs["flags"], hs["software_version"], hs["client_id"]) == (20, 0, "2.12.0", "RYLC")
    assert hs["client_name"] == "Ruby Log Courier"


def test_stub_vers_advertises_evnt():
    hs = handshake("s", STUB_VERS)
    assert (hs["layout"], hs["evnt"], hs["client_id"]) == (32, True, "LCVR")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"", (0, 0, None, None)),
        (b"\x01", (1, 1, None, None)),
        (bytes([1, 2, 7, 1]) + b"RYLC", (8, 1, "2.7.1", "RYLC")),
    ],
)
def test_older_handshake_layouts(body, expected):
    hs = handshake("c", b"HELO" + len(body).to_bytes(4, "big") + body)
    assert (hs["layout"], hs["flags"], hs["software_version"], hs["client_id"]) == expected


def test_go_handshake_ping_pong_ackn_decoded():
    conv = conversation()
    conv.c(GO_HELO)
    conv.s(RUBY_VERS)
    conv.s(GO_ACKN)  # an ACKN for a payload this conversation never saw
    conv.c(PING)
    conv.s(PONG)
    recs = conv.records + conv.close()
    kinds = [(m.kind, m.direction, m.length) for m in messages(recs) if m.kind not in ("connection",)]
    assert kinds == [
        ("helo", C2S, 40),
        ("vers", S2C, 28),
        ("ackn", S2C, 28),
        ("ping", C2S, 8),
        ("pong", S2C, 8),
    ]
    ackn = messages(recs, "ackn")[0]
    assert ackn.fields["nonce"] == GO_NONCE.hex() and ackn.fields["sequence"] == 2
    assert codes(recs) == ["courier.unknown-nonce"]
    assert findings(recs)[0].severity.value == "info"


def test_ruby_jdat_vector_three_events_acked():
    conv = conversation()
    conv.c(RUBY_HELO)
    conv.s(RUBY_VERS)
    conv.c(RUBY_JDAT)
    conv.s(RUBY_ACKN)
    recs = conv.records + conv.close()
    assert codes(recs) == []
    jdat = messages(recs, "jdat")[0]
    assert jdat.length == 79 and jdat.fields["nonce"] == RUBY_NONCE.hex()
    assert jdat.fields["zlib_header"] == "789c" and jdat.fields["zlib_level"] == "default"
    assert jdat.fields["events"] == 3 and jdat.fields["inflated_length"] == 3 * (4 + 0x23)
    events = messages(recs, "event")
    assert [e.event for e in events] == [{"message": f"hello {n}", "host": "demo"} for n in range(3)]
    assert [e.length for e in events] == [0x23] * 3
    assert [(e.fields["index"], e.fields["sequence"]) for e in events] == [(0, 1), (1, 2), (2, 3)]
    assert all(e.acked is True and e.fields["ack_frame"] == 4 for e in events)
    assert messages(recs, "ackn")[0].fields["sequence"] == 3


def test_go_evnt_vector_streams_and_ends_where_zlib_ends():
    conv = conversation(split=7)  # the EVNT arrives in 7-byte pieces
    conv.c(GO_HELO)
    conv.s(STUB_VERS)
    conv.c(GO_EVNT + PING)  # the next message starts right after the Adler-32
    conv.s(enc.ackn(GO_EVNT_NONCE, 3))
    recs = conv.records + conv.close()
    evnt = messages(recs, "evnt")[0]
    assert evnt.length == 186 and evnt.fields["compressed_length"] == 162
    assert evnt.fields["zlib_header"] == "785e"
    events = messages(recs, "event")
    assert [e.length for e in events] == [125, 125, 127]
    assert [e.event["message"] for e in events] == ["one", "two", "three"]
    assert all(e.acked for e in events)
    ping = messages(recs, "ping")[0]
    assert ping.offset == 40 + 186
    assert "courier.evnt-not-negotiated" not in codes(recs)
    assert "courier.ping-while-pending" in codes(recs)  # PING before the EVNT's ACKN


def test_legacy_go_prefix_is_jdat_with_unseeded_nonce():
    assert LEGACY_GO_PREFIX[:4] == b"JDAT"
    assert LEGACY_GO_PREFIX[8:24].hex() == "56847afe9799739b3d9677972a3b58ef"
    assert LEGACY_GO_PREFIX[24:26] == b"\x78\x5e"


# -- the encoder against the genuine bytes -------------------------------------------------------


def test_encoder_handshakes_match_vectors():
    assert enc.helo(32, 0, (2, 12, 0), b"LCOR") == GO_HELO
    assert enc.vers(20, 0, (2, 12, 0), b"RYLC") == RUBY_VERS
    assert enc.helo(20, 0, (2, 12, 0), b"RYLC") == RUBY_HELO
    assert enc.vers(32, 1, (2, 12, 0), b"LCVR") == STUB_VERS


def test_encoder_control_messages_match_vectors():
    assert enc.ping() == PING
    assert enc.pong() == PONG
    assert enc.unknown_reply() == UNKNOWN_REPLY
    assert enc.ackn(GO_NONCE, 2) == GO_ACKN
    assert enc.ackn(RUBY_NONCE, 3) == RUBY_ACKN


def test_encoder_ruby_jdat_byte_for_byte():
    assert enc.payload(RUBY_NONCE, RUBY_JDAT_EVENTS, "ruby") == RUBY_JDAT
    docs = [json.loads(e) for e in RUBY_JDAT_EVENTS]
    assert [enc.event_json(d, "ruby") for d in docs] == RUBY_JDAT_EVENTS  # insertion order kept


def test_encoder_go_evnt_framing_and_event_block():
    compressed = GO_EVNT[24:]
    assert enc.evnt(GO_EVNT_NONCE, compressed) == GO_EVNT
    inflated = zlib.decompress(compressed)
    raw = split_events(inflated)
    assert enc.event_block(raw) == inflated
    assert [enc.event_json(json.loads(e), "go") for e in raw] == raw  # Go: sorted keys, compact


def test_go_style_deflate_has_go_fingerprint():
    data = enc.event_block(RUBY_JDAT_EVENTS)
    z = enc.deflate(data, "go")
    assert z[:2] == b"\x78\x5e" and z[-8:-4] == b"\x00\x00\xff\xff"
    assert z[-8:-4] == GO_EVNT[-8:-4]
    assert zlib.decompress(z) == data
