"""Throughput of `wirelog convert --to json --events` on Lumberjack, beside the zlib + json floor.

The capture: N connections with TCP handshakes, each sending Beats-style windows (`2W n` + one `2C`
frame, zlib level 3 like Filebeat) of Filebeat-shaped JSON events, cut into 1448-byte segments, each
window answered by `2A n`. The floor is what any Python decoder must at least do for the same
payload: `zlib.decompress` every C body and `json.loads` every event (stdlib json; the orjson
floor is printed too). Prints events/s and MB/s of capture for both, and their CPU-time ratio
(target ≤ 2); wall time is printed too but is unreliable on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from bench_streams import measure
from gen_capture import Connection, PcapWriter

MSS = 1448


def _event(i: int) -> bytes:
    doc = {
        "@timestamp": f"2026-11-21T06:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z",
        "@metadata": {"beat": "filebeat", "type": "_doc", "version": "8.11.0"},
        "message": f'10.0.{i % 7}.{i % 250} - - [21/Nov/2026:06:00:01 +0000] "GET /api/orders?page={i} '
        f'HTTP/1.1" {200 + i % 3} {i * 7 % 9000}',
        "log": {"offset": i * 96, "file": {"path": "/var/log/nginx/access.log"}},
        "input": {"type": "filestream"},
        "ecs": {"version": "8.0.0"},
        "host": {"name": f"web-{i % 5}"},
        "agent": {"type": "filebeat", "version": "8.11.0", "name": f"web-{i % 5}"},
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def write_capture(path: Path, connections: int, windows: int, size: int) -> tuple[int, list[bytes]]:
    """Write the capture; returns (events, the C bodies) for the floor measurement."""
    bodies: list[bytes] = []
    n = 0
    with path.open("wb") as f:
        writer = PcapWriter(f, step_ns=20_000)
        for c in range(connections):
            conn = Connection(writer, 0x0A020001 + c, 40000 + c, 0x0A010001, 5044, mss=MSS)
            conn.handshake()
            for _ in range(windows):
                inner = b"".join(
                    b"2J" + struct.pack(">II", k + 1, len(e)) + e
                    for k, e in enumerate(_event(n + k) for k in range(size))
                )
                body = zlib.compress(inner, 3)
                bodies.append(body)
                conn.send(True, b"2W" + struct.pack(">I", size) + b"2C" + struct.pack(">I", len(body)) + body)
                conn.send(False, b"2A" + struct.pack(">I", size))
                n += size
    return n, bodies


def cpu_seconds(cmd: list[str]) -> float:
    """User + system CPU of one run: on a shared machine wall time mostly measures the neighbours."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def floor(bodies: list[bytes], loads) -> float:
    """CPU seconds of the irreducible work: inflate every C body, parse every event."""
    start = time.process_time()
    for body in bodies:
        inner = zlib.decompress(body)
        p, end = 0, len(inner)
        while p < end:
            length = int.from_bytes(inner[p + 6 : p + 10], "big")
            loads(inner[p + 10 : p + 10 + length])
            p += 10 + length
    return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--connections", type=int, default=20)
    ap.add_argument("--windows", type=int, default=10, help="windows per connection")
    ap.add_argument("--size", type=int, default=512, help="events per window")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pcap = Path(tmp) / "lumberjack.pcap"
        n, bodies = write_capture(pcap, args.connections, args.windows, args.size)
        mb = pcap.stat().st_size / 1e6
        cmd = [
            sys.executable,
            "-m",
            "wirelog.cli",
            "convert",
            str(pcap),
            "--to",
            "json",
            "--events",
            "-o",
            "/dev/null",
        ]
        wall, rss = measure(cmd, args.runs)
        cpu = statistics.median(cpu_seconds(cmd) for _ in range(args.runs))
        json_floor = min(floor(bodies, json.loads) for _ in range(args.runs))
        orjson_floor = min(floor(bodies, orjson.loads) for _ in range(args.runs))
    print(f"capture: {n:,} events, {mb:.1f} MB")
    print(f"wirelog convert --events: {wall:.2f} s wall, {cpu:.2f} s CPU (peak RSS {rss // 1024} MiB)")
    print(f"  = {n / cpu:,.0f} events/s, {mb / cpu:.1f} MB/s of capture per CPU second")
    print(
        f"floor zlib + json       : {json_floor:.2f} s CPU = {n / json_floor:,.0f} events/s, {mb / json_floor:.1f} MB/s"
    )
    print(f"floor zlib + orjson     : {orjson_floor:.2f} s CPU = {n / orjson_floor:,.0f} events/s")
    print(f"ratio wirelog / (zlib + json) floor, CPU: {cpu / json_floor:.2f}x (target <= 2)")


if __name__ == "__main__":
    main()
