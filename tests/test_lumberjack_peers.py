"""Real clients nobody here wrote, over loopback, captured with tcpdump and decoded from the pcap.

pylogbeat (PyPI, v2, compressed, continuing seq), npm lumberjack-client (v2, compressed, seq per
window, never reads ACKs) and npm lumberjack-protocol (v1 over TLS) talk to the test receiver in
lumberjack_helpers (ACKs in highest-seq, count and keep-alive styles). Every event sent must be
decoded exactly once, with its content and its ACK state.
"""

from __future__ import annotations

import json
import shutil
import socket
import ssl
from pathlib import Path

import pytest
from lumberjack_helpers import (
    LumberjackServer,
    capture,
    codes,
    findings,
    messages,
    node_peer,
    run,
    run_node,
    self_signed,
)

from wirelog.engine.local import run as engine_run
from wirelog.model import Finding, Message, Severity

pylogbeat = pytest.importorskip("pylogbeat")

pytestmark = pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed")


def decode(path: Path) -> list[Message | Finding]:
    return [r for r in engine_run([str(path)]) if isinstance(r, Message | Finding)]


def beat_event(n: int, text: str) -> dict:
    return {
        "@timestamp": f"2026-11-21T06:00:{n:02d}.000Z",
        "@metadata": {"beat": "filebeat", "type": "_doc", "version": "8.11.0"},
        "message": text,
        "log": {"offset": n * 64, "file": {"path": "/var/log/app.log"}},
        "host": {"name": "web-1"},
    }


def send_batches(port: int, batches: list[list[dict]], timeout: float = 2.0) -> None:
    with pylogbeat.PyLogBeatClient("127.0.0.1", port, timeout=timeout) as client:
        for batch in batches:
            client.send(batch)


def lj(records):
    return [r for r in records if r.protocol == "lumberjack"]


def test_pylogbeat_highest_seq_server(tmp_path):
    batches = [
        [beat_event(0, "GET /index.html 200"), beat_event(1, "GET /app.js 200")],
        [beat_event(2, "POST /login 302")],
        # incompressible payload: the C frame spans several 8192-byte send()s and TCP segments
        [
            beat_event(3 + i, (f"blob {i} " + "".join(f"{(i * 7919 + k) ** 3:x}" for k in range(600))))
            for i in range(4)
        ],
    ]
    pcap = tmp_path / "pylogbeat.pcap"
    with LumberjackServer("highest-seq") as server, capture(pcap, server.port):
        send_batches(server.port, batches)
    out = lj(decode(pcap))
    sent = [e for b in batches for e in b]
    evs = messages(out, "event")
    assert [e.event for e in evs] == sent
    assert [e.fields["seq"] for e in evs] == list(range(1, len(sent) + 1))
    assert all(e.acked is True and e.fields["ack_frame"] for e in evs)
    assert [json.loads(p) for _, p in server.connections[0].events] == sent
    wins = messages(out, "window")
    assert [w.fields["count"] for w in wins] == [2, 1, 4] and all(w.acked for w in wins)
    assert [a.fields["value"] for a in messages(out, "ack")] == server.connections[0].acks == [2, 3, 7]
    assert {c.fields["zlib_level"] for c in messages(out, "compressed")} == {"6"}
    assert {"seq-profile", "server-kind"} <= codes(out)
    assert findings(out, "seq-profile")[0].fields["profile"] == "continuing"
    assert findings(out, "server-kind")[0].fields["server_kind"] == "highest-seq"
    assert not [f for f in findings(out) if f.severity is not Severity.INFO]
    big = messages(out, "compressed")[2]
    assert big.length > 8192


def test_pylogbeat_against_count_server_stalls(tmp_path):
    """reference §5: pylogbeat's window 2 (seq 3) gets ACK 1 from a go-lumber-style server and hangs."""
    pcap = tmp_path / "stall.pcap"
    with LumberjackServer("count") as server, capture(pcap, server.port):
        client = pylogbeat.PyLogBeatClient("127.0.0.1", server.port, timeout=0.5)
        client.send([beat_event(0, "a"), beat_event(1, "b")])
        with pytest.raises((TimeoutError, socket.timeout)):
            client.send([beat_event(2, "c")])
        client.close()
    out = lj(decode(pcap))
    (stall,) = findings(out, "ack-stall")
    assert stall.fields == {"value": 1, "expected_seq": 3, "window": 2}
    assert findings(out, "server-kind")[0].fields["server_kind"] == "count"
    assert [e.acked for e in messages(out, "event")] == [True, True, True]


def test_pylogbeat_keepalives_then_ack(tmp_path):
    pcap = tmp_path / "keepalive.pcap"
    with LumberjackServer("highest-seq", keepalive=0.1, ack_delay=0.45) as server, capture(pcap, server.port):
        send_batches(server.port, [[beat_event(0, "slow pipeline")]])
    out = lj(decode(pcap))
    acks = messages(out, "ack")
    keep = [a for a in acks if a.fields["keepalive"]]
    assert len(keep) == server.connections[0].acks.count(0) >= 1
    assert all(80 <= a.fields["interval_ms"] <= 1000 for a in keep)  # 100 ms apart, give or take load
    assert acks[-1].fields["value"] == 1 and not acks[-1].fields["keepalive"]
    assert findings(out, "keepalive")[0].fields["count"] == len(keep)
    (ev,) = messages(out, "event")
    assert ev.acked is True and ev.fields["ack_frame"] == acks[-1].frame


def test_unacked_window_then_resend_on_new_connection(tmp_path):
    events = [beat_event(0, "disk full"), beat_event(1, "retrying")]
    pcap = tmp_path / "resend.pcap"
    with LumberjackServer("none", close_after=0.3) as silent, capture(pcap, silent.port):
        with pytest.raises((TimeoutError, socket.timeout, OSError, pylogbeat.ConnectionException)):
            send_batches(silent.port, [events], timeout=1.0)
        silent.ack = "highest-seq"
        send_batches(silent.port, [events])
    out = lj(decode(pcap))
    first, second = sorted({r.stream for r in out})
    s1 = [r for r in out if r.stream == first]
    s2 = [r for r in out if r.stream == second]
    assert [e.acked for e in messages(s1, "event")] == [False, False]
    assert findings(s1, "unacked")[0].fields["events"] == 2
    assert [e.acked for e in messages(s2, "event")] == [True, True]
    assert findings(s2, "resend")[0].fields["first_stream"] == first
    assert all(e.fields["resend_of"]["stream"] == first for e in messages(s2, "event"))


@pytest.mark.skipif(
    node_peer("lumberjack-client") is None, reason="node or npm lumberjack-client not installed"
)
def test_npm_lumberjack_client(tmp_path):
    pcap = tmp_path / "npm-client.pcap"
    with LumberjackServer("highest-seq") as server, capture(pcap, server.port):
        run_node("client.js", server.port, 3, 2)
    out = lj(decode(pcap))
    received = [json.loads(p) for c in server.connections for _, p in c.events]
    evs = messages(out, "event")
    assert len(received) == 5
    assert [e.event for e in evs] == received
    assert [e.event["n"] for e in evs] == [0, 1, 2, 3, 4]
    assert [w.fields["count"] for w in messages(out, "window")] == [3, 1, 1]
    assert [e.fields["seq"] for e in evs] == [1, 2, 3, 1, 1]
    assert all(e.acked is True for e in evs)
    assert findings(out, "seq-profile")[0].fields["profile"] == "per-window"
    assert {c.fields["zlib_header"] for c in messages(out, "compressed")} == {"789c"}
    assert not [f for f in findings(out) if f.severity is not Severity.INFO]


@pytest.mark.skipif(
    node_peer("lumberjack-protocol") is None, reason="node or npm lumberjack-protocol not installed"
)
def test_npm_lumberjack_protocol_over_tls_is_reported_as_tls(tmp_path):
    cert, key = self_signed(tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    pcap = tmp_path / "npm-protocol-tls.pcap"
    with LumberjackServer("highest-seq", partial_every=1, tls=ctx) as server, capture(pcap, server.port):
        run_node("protocol.js", server.port, cert, 3)
    conn = server.connections[0]
    assert [s for s, _ in conn.events] == [1, 2, 3]  # the TLS side did carry v1 D frames
    records = decode(pcap)
    assert {r.protocol for r in records} == {"tls"}
    assert "tls.no-key" in {r.code for r in records if isinstance(r, Finding)}  # no key log given
    # the plaintext inside the TLS session, as the receiver read it, is genuine v1 traffic
    plain = run(conn.turns)
    evs = messages(plain, "event")
    assert [e.fields["seq"] for e in evs] == [1, 2, 3] and all(e.version == "1" for e in evs)
    assert [e.event["line"] for e in evs] == ["hello v1 0", "hello v1 1", "hello v1 2"]
    assert {"file", "offset", "host"} <= set(evs[0].event)
    assert all(e.acked is True for e in evs)
    assert messages(plain, "window")[0].fields["count"] == 3
    assert not [f for f in findings(plain) if f.severity is Severity.ERROR]
