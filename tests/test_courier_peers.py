"""The genuine Log Courier captures in ../shared/captures/peers: every fact of captures/README.md.

Go 2.12.0 client → Ruby 2.12.0 server, Ruby 2.12.0 client ↔ server, and the legacy Go 2.0.6 client
without handshake. Also: the encoder rebuilds every message of these captures byte for byte, and
the CLI converts them end to end.
"""

from __future__ import annotations

import json
import zlib

import courier_codec as enc
import pytest
from courier_helpers import (
    C2S,
    PEERS,
    S2C,
    Segment,
    codes,
    decode_segments,
    messages,
    pcap_segments,
    split_events,
)

from tests.detect_helpers import Sample, choose

RUBY = "courier-ruby2.12-client-server.pcap"
GO = "courier-go2.12-client-ruby2.12-server.pcap"
LEGACY = "courier-go2.0.6-legacy-client-ruby-server.pcap"
PORTS = {RUBY: 12345, GO: 12347, LEGACY: 12346}

GO_ALPHA = (
    '{"@timestamp":"2026-11-21T04:41:22.700273042Z","host":"vm","message":"alpha","offset":0,'
    '"path":"stdin","tags":[],"type":"demo"}'
)


def segments(name: str) -> list[Segment]:
    path = PEERS / name
    if not path.exists():
        pytest.skip(f"../shared/captures/peers/{name} not available")
    return pcap_segments(path)


def t0(name: str) -> int:
    from scapy.utils import rdpcap

    return int(rdpcap(str(PEERS / name))[0].time * 1_000_000_000)


def wire(name: str) -> list[tuple]:
    """(direction, type, length field, nonce hex or None, seconds since the first packet) per message."""
    segs = segments(name)  # skips when the capture is absent
    base = t0(name)
    out = []
    for seg in segs:
        mtype, length = seg.data[:4], int.from_bytes(seg.data[4:8], "big")
        assert len(seg.data) == 8 + length  # each message sits in exactly one segment
        nonce = seg.data[8:24].hex() if mtype in (b"JDAT", b"ACKN") else None
        out.append((seg.direction, mtype.decode(), length, nonce, (seg.ts - base) / 1e9))
    return out


def assert_times(got: list[tuple], expected: list[float]) -> None:
    assert [round(m[4], 4) for m in got] == pytest.approx(expected, abs=0.001)


# -- the wire facts ------------------------------------------------------------------------------


def test_ruby_wire_sequence():
    got = wire(RUBY)
    assert [m[:4] for m in got] == [
        (C2S, "HELO", 20, None),
        (S2C, "VERS", 20, None),
        (C2S, "JDAT", 71, "b7b84ca035a49023405f0ced89ed4cb4"),
        (S2C, "ACKN", 20, "b7b84ca035a49023405f0ced89ed4cb4"),
        (C2S, "JDAT", 68, "970582b55b27389cabe336e74f400fe8"),
        (S2C, "ACKN", 20, "970582b55b27389cabe336e74f400fe8"),
    ]
    assert_times(got, [0.0001, 0.0004, 0.0344, 0.0360, 1.0085, 1.0088])
    helo = segments(RUBY)[0].data
    assert helo == bytes.fromhex("48454c4f0000001400000000000000020000000c0000000052594c43")


def test_go_wire_sequence():
    got = wire(GO)
    assert [m[:4] for m in got] == [
        (C2S, "HELO", 32, None),
        (S2C, "VERS", 20, None),
        (C2S, "JDAT", 161, "ca832a423b8577145701d58137607427"),
        (S2C, "ACKN", 20, "ca832a423b8577145701d58137607427"),
        (C2S, "PING", 0, None),
        (S2C, "PONG", 0, None),
        (C2S, "JDAT", 141, "107cb835f7e57cd6026fa335056a42d9"),
        (S2C, "ACKN", 20, "107cb835f7e57cd6026fa335056a42d9"),
    ]
    assert_times(got, [0.0004, 0.0008, 5.0016, 5.0337, 15.0340, 15.0342, 25.0044, 25.0048])
    assert got[4][4] - got[3][4] == pytest.approx(10.0, abs=0.01)  # idle keepalive 10 s after the ACKN


def test_legacy_wire_sequence():
    got = wire(LEGACY)
    assert [m[:4] for m in got] == [
        (C2S, "JDAT", 126, "56847afe9799739b3d9677972a3b58ef"),
        (S2C, "ACKN", 20, "56847afe9799739b3d9677972a3b58ef"),
    ]
    assert_times(got, [1.0011, 1.0278])


@pytest.mark.parametrize("name", [RUBY, GO, LEGACY])
def test_detected_by_content_on_a_nonstandard_port(name):
    segs = segments(name)
    c2s = b"".join(s.data for s in segs if s.direction is C2S)
    s2c = b"".join(s.data for s in segs if s.direction is S2C)
    sample = Sample(c2s[:512], s2c[:512], 40000, PORTS[name], closed=True)
    chosen = choose(sample)
    assert chosen == "courier"
    first_only = Sample(segs[0].data, b"", 40000, PORTS[name], closed=False)
    assert choose(first_only) == "courier"


# -- the decoder on the genuine bytes -----------------------------------------------------------


def decoded(name: str):
    return decode_segments(segments(name))


@pytest.mark.parametrize("name", [RUBY, GO, LEGACY])
def test_every_payload_fully_acknowledged_no_findings(name):
    recs = decoded(name)
    assert codes(recs) == []
    assert not messages(recs, "evnt")
    payloads = messages(recs, "jdat")
    acks = messages(recs, "ackn")
    assert [a.fields["nonce"] for a in acks] == [p.fields["nonce"] for p in payloads]
    assert [a.fields["sequence"] for a in acks] == [p.fields["events"] for p in payloads]
    assert all(e.acked is True for e in messages(recs, "event"))
    deliveries = messages(recs, "delivery")
    assert [d.fields["complete"] for d in deliveries] == [True] * len(payloads)
    conn = messages(recs, "connection")[0].fields
    assert conn["unacked_events"] == 0 and conn["acked_events"] == conn["events"]


def test_ruby_capture_events_and_fingerprint():
    recs = decoded(RUBY)
    events = messages(recs, "event")
    assert [e.event for e in events] == [{"message": f"hello {n}", "host": "demo"} for n in range(5)]
    assert [e.length for e in events[:3]] == [35, 35, 35]
    assert [list(e.event) for e in events] == [["message", "host"]] * 5  # Ruby: insertion order
    assert [e.fields["ack_frame"] for e in events] == [9, 9, 9, 12, 12]
    assert {p.fields["zlib_header"] for p in messages(recs, "jdat")} == {"789c"}
    hs = {m.kind: m.fields for m in messages(recs) if m.kind in ("helo", "vers")}
    assert (hs["helo"]["layout"], hs["helo"]["client_id"], hs["helo"]["software_version"]) == (
        20,
        "RYLC",
        "2.12.0",
    )
    assert (hs["vers"]["layout"], hs["vers"]["flags"], hs["vers"]["evnt"]) == (20, 0, False)
    conn = messages(recs, "connection")[0].fields
    assert conn["client_impl"] == conn["server_impl"] == "ruby"
    assert conn["client_class"] == conn["server_class"] == "Ruby gem >= 2.7.2"
    assert conn["zlib_levels"] == ["default"] and conn["handshake"] == "helo+vers"


def test_go_capture_events_and_fingerprint():
    recs = decoded(GO)
    jdats = messages(recs, "jdat")
    raw = [bytes.fromhex(s.data[24:].hex()) for s in segments(GO) if s.data[:4] == b"JDAT"]
    for z in raw:
        assert z[:2] == b"\x78\x5e" and z[-8:-4] == b"\x00\x00\xff\xff"
        assert int.from_bytes(z[-4:], "big") == zlib.adler32(zlib.decompress(z))
    assert all(b"\xff" not in bytes.fromhex(p.fields["nonce"]) for p in jdats)
    events = messages(recs, "event")
    assert [e.length for e in events] == [127, 126, 127]
    first = split_events(zlib.decompress(raw[0]))[0]
    assert first.decode() == GO_ALPHA
    assert events[0].event == json.loads(GO_ALPHA)
    assert [(e.event["message"], e.event["offset"]) for e in events] == [
        ("alpha", 0),
        ("beta", 6),
        ("gamma", 11),
    ]
    assert all(list(e.event) == sorted(e.event) for e in events)  # Go: keys sorted
    stamp = events[2].event["@timestamp"]
    assert stamp.endswith("47.69717422Z") and len(stamp.split(".")[1]) == 9  # 8 digits + "Z"
    helo = messages(recs, "helo")[0].fields
    assert (helo["layout"], helo["flags"], helo["client_id"], helo["software_version"]) == (
        32,
        0,
        "LCOR",
        "2.12.0",
    )
    assert messages(recs, "vers")[0].fields["evnt"] is False
    ping, pong = messages(recs, "ping")[0], messages(recs, "pong")[0]
    assert (ping.frame, pong.frame) == (11, 12)
    conn = messages(recs, "connection")[0].fields
    assert (conn["client_impl"], conn["client_class"]) == ("go", "Go log-courier >= 2.6.4")
    assert (conn["server_impl"], conn["server_class"]) == ("ruby", "Ruby gem >= 2.7.2")
    assert conn["zlib_levels"] == ["fast"] and conn["zlib_go_tail"] and not conn["nonce_with_ff"]
    assert (conn["helo_length"], conn["vers_length"], conn["evnt_negotiated"]) == (32, 20, False)


def test_legacy_capture_events_and_fingerprint():
    recs = decoded(LEGACY)
    events = messages(recs, "event")
    assert events[0].event == {
        "host": "vm",
        "message": "line one",
        "offset": 0,
        "path": "stdin",
        "type": "demo",
    }
    assert [(e.event["message"], e.event["offset"]) for e in events] == [
        ("line one", 0),
        ("line two", 9),
        ("line three", 18),
    ]
    assert all("@timestamp" not in e.event for e in events)
    jdat = messages(recs, "jdat")[0]
    assert jdat.fields["zlib_header"] == "785e" and jdat.frame == 4
    conn = messages(recs, "connection")[0].fields
    assert conn["handshake"] == "none" and conn["helo_length"] is None and conn["vers_length"] is None
    assert conn["client_impl"] == "go" and conn["unseeded_go_nonce"] is True
    assert conn["client_class"] == "Go log-courier < 2.5 (no handshake)"
    assert conn["zlib_go_tail"] and not conn["nonce_with_ff"]


def test_rechunked_capture_gives_identical_records():
    segs = segments(GO)
    whole = decode_segments(segs)
    pieces = [
        Segment(s.direction, s.data[i : i + 5], s.frame, s.ts) for s in segs for i in range(0, len(s.data), 5)
    ]
    assert decode_segments(pieces) == whole


# -- the encoder rebuilds the captures byte for byte --------------------------------------------


@pytest.mark.parametrize("name", [RUBY, GO, LEGACY])
def test_encoder_rebuilds_every_message(name):
    for seg in segments(name):
        data, mtype = seg.data, seg.data[:4]
        body = data[8:]
        if mtype in (b"HELO", b"VERS"):
            flags, major, minor, patch = (int.from_bytes(body[i : i + 4], "big") for i in range(0, 16, 4))
            build = enc.helo if mtype == b"HELO" else enc.vers
            rebuilt = build(len(body), flags, (major, minor, patch), body[16:20])
        elif mtype == b"ACKN":
            rebuilt = enc.ackn(body[:16], int.from_bytes(body[16:20], "big"))
        elif mtype == b"PING":
            rebuilt = enc.ping()
        elif mtype == b"PONG":
            rebuilt = enc.pong()
        else:
            assert mtype == b"JDAT"
            nonce, z = body[:16], body[16:]
            events = split_events(zlib.decompress(z))
            style = "ruby" if z[:2] == b"\x78\x9c" else "go"
            if style == "ruby":  # zlib's own deflate: reproducible to the byte
                assert enc.payload(nonce, events, "ruby") == data
            assert enc.event_block(enc.event_json(json.loads(e), style) for e in events) == zlib.decompress(z)
            rebuilt = enc.jdat(nonce, z)
        assert rebuilt == data


# -- end to end through the CLI ------------------------------------------------------------------


@pytest.mark.parametrize(("name", "events"), [(RUBY, 5), (GO, 3), (LEGACY, 3)])
def test_cli_convert_json(name, events):
    from capture_tools import ndjson, run_cli

    segments(name)  # skip when absent
    code, out, _ = run_cli("convert", str(PEERS / name), "--to", "json")
    assert code == 0
    rows = ndjson(out)
    courier = [r for r in rows if r["protocol"] == "courier"]
    assert courier and all(r["stream"] == 0 for r in courier)
    evs = [r for r in courier if r["kind"] == "event"]
    assert len(evs) == events and all(r["acked"] is True for r in evs)
    assert all(r["event"]["message"] for r in evs)
    assert not [r for r in rows if r["record"] == "finding" and r["severity"] != "info"]
    conn = [r for r in courier if r["kind"] == "connection"]
    assert len(conn) == 1 and conn[0]["unacked_events"] == 0
    assert conn[0]["server"].endswith(f":{PORTS[name]}")


@pytest.mark.parametrize(
    ("name", "first_fin", "fin_time"),
    [(RUBY, S2C, 15.02), (GO, C2S, 28.998), (LEGACY, C2S, 2.028)],
)
def test_tcp_facts(name, first_fin, fin_time):
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.utils import rdpcap

    segments(name)  # skip when absent
    pkts = rdpcap(str(PEERS / name))
    assert all(p[Ether].src == p[Ether].dst == "00:00:00:00:00:00" for p in pkts)
    assert all(p[IP].src == p[IP].dst == "127.0.0.1" for p in pkts)
    ports = {frozenset((p[TCP].sport, p[TCP].dport)) for p in pkts}
    assert len(ports) == 1 and PORTS[name] in next(iter(ports))  # one connection
    syn = [p for p in pkts if p[TCP].flags.S]
    assert [bool(p[TCP].flags.A) for p in syn] == [False, True]  # one full handshake
    fins = [p for p in pkts if p[TCP].flags.F]
    assert len(fins) == 2  # FIN in both directions
    first = C2S if fins[0][TCP].dport == PORTS[name] else S2C
    assert first is first_fin
    assert float(fins[0].time - pkts[0].time) == pytest.approx(fin_time, abs=0.01)


def test_legacy_go_nonce_has_no_ff():
    nonce = messages(decoded(LEGACY), "jdat")[0].fields["nonce"]
    assert "ff" not in [nonce[i : i + 2] for i in range(0, 32, 2)]
