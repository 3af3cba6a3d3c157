"""Record the real pylogbeat loopback captures under tests/data/lumberjack/.

pylogbeat-logstash.pcap ("healthy"): three windows of Filebeat-shaped events (pylogbeat: v2, one
zlib C frame per window, seq continuing across windows) to the test receiver acting like Logstash
(ACK = highest seq; keep-alive ACK 0s while the second window waits), server on the Beats port 5044.
pylogbeat-stalled-resend.pcap ("stalled"): the same events, but the receiver stalls on window 2
(keep-alives, no ACK) and drops the connection; the client reconnects and resends window 2.
Needs root (tcpdump on lo). Run from the repository root, naming the captures to (re)record:
    .venv/bin/python tests/peers/lumberjack/make_sample.py healthy stalled
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS))

import pylogbeat  # noqa: E402
from lumberjack_helpers import LumberjackServer, capture  # noqa: E402

OUT = TESTS / "data" / "lumberjack" / "pylogbeat-logstash.pcap"
STALLED = TESTS / "data" / "lumberjack" / "pylogbeat-stalled-resend.pcap"
LINES = [
    '10.0.4.17 - - [21/Nov/2026:06:00:01 +0000] "GET /api/orders?page=2 HTTP/1.1" 200 5123',
    '10.0.4.17 - - [21/Nov/2026:06:00:01 +0000] "GET /static/app.js HTTP/1.1" 304 0',
    '10.0.9.3 - - [21/Nov/2026:06:00:02 +0000] "POST /api/login HTTP/1.1" 401 87',
    '10.0.9.3 - - [21/Nov/2026:06:00:03 +0000] "POST /api/login HTTP/1.1" 200 412',
    "2026-11-21T06:00:04.112Z ERROR payment-gateway timeout after 3000 ms (order 81723)",
    "2026-11-21T06:00:04.530Z WARN retrying payment for order 81723 (attempt 2/5)",
    "2026-11-21T06:00:05.004Z INFO payment for order 81723 captured",
    '10.0.4.22 - - [21/Nov/2026:06:00:06 +0000] "GET /healthz HTTP/1.1" 200 2',
    '10.0.4.22 - - [21/Nov/2026:06:00:07 +0000] "DELETE /api/cart/81723 HTTP/1.1" 204 0',
]


def event(i: int, line: str) -> dict:
    path = "/var/log/nginx/access.log" if line.startswith("10.") else "/var/log/shop/app.log"
    return {
        "@timestamp": f"2026-11-21T06:00:{i + 1:02d}.{i * 111 % 1000:03d}Z",
        "@metadata": {"beat": "filebeat", "type": "_doc", "version": "8.11.0"},
        "message": line,
        "log": {"offset": i * 96, "file": {"path": path}},
        "input": {"type": "filestream"},
        "ecs": {"version": "8.0.0"},
        "host": {"name": "web-1"},
        "agent": {"type": "filebeat", "version": "8.11.0", "name": "web-1"},
    }


def healthy(batches: list[list[dict]]) -> None:
    """Three windows, all acknowledged; keep-alives while the second one waits."""
    server = LumberjackServer("highest-seq", close_after=10, port=5044)
    client = pylogbeat.PyLogBeatClient("127.0.0.1", server.port, timeout=10)
    with server, capture(OUT, server.port), client:
        client.send(batches[0])
        server.ack_delay, server.keepalive = 2.3, 1.0
        client.send(batches[1])
        server.ack_delay, server.keepalive = 0.0, None
        client.send(batches[2])


def stalled(batches: list[list[dict]]) -> None:
    """The pipeline stalls on window 2 (keep-alives, no ACK) and the server drops the connection;
    the client reconnects and resends window 2, then sends window 3."""
    server = LumberjackServer("highest-seq", close_after=1.0, port=5044)
    with server, capture(STALLED, server.port):
        first = pylogbeat.PyLogBeatClient("127.0.0.1", server.port, timeout=10)
        first.send(batches[0])
        server.ack, server.ack_delay, server.keepalive = "none", 2.3, 1.0
        with contextlib.suppress(pylogbeat.ConnectionException, OSError):
            first.send(batches[1])  # fails: the server closes the connection without an ACK
        first.close()
        server.ack, server.ack_delay, server.keepalive = "highest-seq", 0.0, None
        with pylogbeat.PyLogBeatClient("127.0.0.1", server.port, timeout=10) as second:
            second.send(batches[1])
            second.send(batches[2])


def main() -> None:
    events = [event(i, line) for i, line in enumerate(LINES)]
    batches = [events[:4], events[4:7], events[7:]]
    recorders = {"healthy": (healthy, OUT), "stalled": (stalled, STALLED)}
    for name in sys.argv[1:] or recorders:
        record, path = recorders[name]
        record(batches)
        print(path, path.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
