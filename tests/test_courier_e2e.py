"""End to end through `wirelog convert --to json` on crafted pcaps of Log Courier odd cases.

Messages are built with the encoder (checked byte for byte against genuine captures elsewhere) and
laid into real TCP packets, so reassembly, detection, the decoder and the JSON writer all take part.
"""

from __future__ import annotations

import courier_codec as enc
from capture_tools import ndjson, run_cli
from courier_helpers import C2S, GO_HELO, RUBY_VERS, S2C, STUB_VERS, tcp_capture
from pcap_helpers import write_pcap

NONCE = bytes.fromhex("0123456789abcdef0011223344556677")


def events(n: int, start: int = 0) -> list[bytes]:
    return [
        enc.event_json({"host": "vm", "message": f"line {i}", "offset": i * 10}, "go")
        for i in range(start, start + n)
    ]


def convert(path, *extra: str) -> list[dict]:
    code, out, err = run_cli("convert", str(path), "--to", "json", *extra)
    assert code == 0, err
    return ndjson(out)


def courier(rows: list[dict], kind: str | None = None, stream: int | None = None) -> list[dict]:
    return [
        r
        for r in rows
        if r["protocol"] == "courier"
        and r["record"] == "message"
        and (kind is None or r["kind"] == kind)
        and (stream is None or r["stream"] == stream)
    ]


def found(rows: list[dict], code: str) -> list[dict]:
    return [r for r in rows if r["record"] == "finding" and r["code"] == code]


def test_resend_after_reconnect_across_streams(tmp_path):
    first = tcp_capture(
        [
            (C2S, GO_HELO, 0.1),
            (S2C, RUBY_VERS, 0.1),
            (C2S, enc.payload(NONCE, events(4), "go"), 1),
            (S2C, enc.ackn(NONCE, 2), 1.2),
        ],
        sport=40001,
    )
    second = tcp_capture(
        [
            (C2S, GO_HELO, 20.1),
            (S2C, RUBY_VERS, 20.1),
            (C2S, enc.payload(NONCE, events(2, 2), "go"), 21),
            (S2C, enc.ackn(NONCE, 2), 21.2),
        ],
        sport=40002,
    )
    rows = convert(write_pcap(tmp_path / "resend.pcap", first + second))
    ev0, ev1 = courier(rows, "event", 0), courier(rows, "event", 1)
    assert [(e["event"]["message"], e["acked"]) for e in ev0] == [
        ("line 0", True),
        ("line 1", True),
        ("line 2", False),
        ("line 3", False),
    ]
    assert [(e["event"]["message"], e["sequence"], e["acked"]) for e in ev1] == [
        ("line 2", 1, True),
        ("line 3", 2, True),
    ]
    (resend,) = found(rows, "courier.resend")
    assert resend["stream"] == 1 and resend["previous_stream"] == 0 and resend["previous_acked"] == 2
    (unacked,) = found(rows, "courier.unacked-at-close")
    assert unacked["stream"] == 0 and unacked["unacked"] == 2


def test_streamed_evnt_over_many_segments_with_early_ack(tmp_path):
    msg = enc.payload(NONCE, events(40), "go", streamed=True)
    pkts = tcp_capture(
        [
            (C2S, GO_HELO, 0.1),
            (S2C, STUB_VERS, 0.1),
            (C2S, msg[:100], 1.0),
            (S2C, enc.ackn(NONCE, 0), 1.1),
            (C2S, msg[100:], 1.2),
            (S2C, enc.ackn(NONCE, 40), 1.3),
            (C2S, enc.ping(), 11.3),
            (S2C, enc.pong(), 11.4),
        ],
        mss=64,
    )
    rows = convert(write_pcap(tmp_path / "evnt.pcap", pkts))
    (evnt,) = courier(rows, "evnt")
    assert evnt["length"] == len(msg) and evnt["events"] == 40 and evnt["zlib_header"] == "785e"
    assert len(courier(rows, "event")) == 40 and all(e["acked"] for e in courier(rows, "event"))
    assert [f["code"] for f in rows if f["record"] == "finding" and f["protocol"] == "courier"] == []
    conn = courier(rows, "connection")[0]
    assert conn["evnt_negotiated"] is True and conn["server_class"] == "Go receiver (Log Carver) >= 2.6.4"


def test_back_pressure_run_reported_with_interval(tmp_path):
    exchange = [(C2S, GO_HELO, 0), (S2C, RUBY_VERS, 0), (C2S, enc.payload(NONCE, events(3)), 1)]
    exchange += [(S2C, enc.ackn(NONCE, 0), 6 + 5 * i) for i in range(5)]
    exchange += [(S2C, enc.ackn(NONCE, 3), 30)]
    rows = convert(write_pcap(tmp_path / "backpressure.pcap", tcp_capture(exchange)))
    (run,) = found(rows, "courier.ack-repeated")
    assert run["count"] == 5 and run["interval_s"] == 5.0 and run["sequence"] == 0
    assert all(e["acked"] for e in courier(rows, "event"))


def test_tls_client_to_plain_server_with_decode_as(tmp_path):
    hello = bytes.fromhex("1603010087010000830303") + bytes(128)
    pkts = tcp_capture([(C2S, hello, 0.1)], dport=12345)
    path = write_pcap(tmp_path / "tls.pcap", pkts)
    assert not found(convert(path), "courier.tls-mismatch")  # detected as TLS, reported by the TLS layer
    (f,) = found(convert(path, "--decode-as", "12345=courier"), "courier.tls-mismatch")
    assert f["bogus_length"] == 2264989696 and f["direction"] == "c2s"


def test_ping_first_only_when_the_capture_holds_the_connection_start(tmp_path):
    exchange = [
        (C2S, enc.ping(), 0.1),
        (S2C, enc.pong(), 0.2),
        (C2S, enc.payload(NONCE, events(1), "go"), 0.3),
    ]
    pkts = tcp_capture(exchange, dport=7000)
    whole = convert(write_pcap(tmp_path / "whole.pcap", pkts), "--decode-as", "7000=courier")
    (f,) = found(whole, "courier.ping-first")
    assert (f["frame"], f["offset"]) == (4, 0)
    no_syn = pkts[3:]  # the capture starts after the handshake: mid-stream
    late = convert(write_pcap(tmp_path / "late.pcap", no_syn), "--decode-as", "7000=courier")
    assert courier(late, "ping") and not found(late, "courier.ping-first")
