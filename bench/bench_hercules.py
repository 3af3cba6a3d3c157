"""Throughput of `wirelog convert` on Hercules Gate traffic, against tshark's HTTP dissection.

tshark has no Hercules dissector: on the same capture it reassembles and parses the HTTP requests
and responses only, while wirelog also decodes every event of every batch (half the requests with
lz4 bodies). The capture: N keep-alive connections with a TCP handshake, each carrying R requests of
B LogEvent-like events, bodies cut into 1460-byte segments, each answered 200. Prints events/s for
wirelog (to JSON and to Hercules) and tshark, the ratios, and wirelog's peak RSS on the capture and on
one with twice the connections (it must stay flat; past `UUIDS_LIMIT` distinct UUIDs the delivery
verdict's table stops growing).

Also an in-run floor for the JSON output, which is ~4x the capture's size: the CPU time orjson takes
only to serialise the same records (wirelog's own output, parsed beforehand, not timed) as NDJSON.
A conversion cannot write its output faster than the fastest serialiser writes it from ready dicts
without being one itself; tshark writes two short fields per HTTP message.
"""

from __future__ import annotations

import argparse
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lz4.block
import orjson

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from bench_streams import measure
from gen_capture import Connection, PcapWriter

from tests.hercules_codec import Event, Type, Variant, Vector, encode_batch

MSS = 1460
TICKS = 17_637_000_000_000_000  # 2025-11-21


def _event(i: int) -> Event:
    def s(text: str) -> Variant:
        return Variant(Type.STRING, text)

    props = (("project", s("shop")), ("environment", s("production")), ("logger", s("OrderService")))
    frames = tuple((("function", s(f"Step{k}")), ("line", Variant(Type.INTEGER, 10 + k))) for k in range(3))
    tags = (
        ("level", s("Info" if i % 5 else "Error")),
        ("message", s(f"order {i} processed in {i % 97} ms")),
        ("utcOffset", Variant(Type.LONG, 0)),
        ("properties", Variant(Type.CONTAINER, props)),
        ("exception", Variant(Type.CONTAINER, (("stackFrames", Variant(Type.VECTOR, Vector(Type.CONTAINER, frames))),))),
    )  # fmt: skip
    return Event(1, TICKS + i * 10_000, struct.pack(">QQ", i, 0x8000_0000_0000_0000 | i), tags)


def _request(body: bytes, packed: bool, i: int) -> bytes:
    headers = f"POST /stream/send?stream=logs_{i % 7} HTTP/1.1\r\nHost: gate\r\nAuthorization: Hercules apiKey k\r\n"
    headers += "Content-Type: application/octet-stream\r\n"
    if packed:
        headers += f"Content-Encoding: lz4\r\nOriginal-Content-Length: {len(body)}\r\n"
        body = lz4.block.compress(body, store_size=False)
    return f"{headers}Content-Length: {len(body)}\r\n\r\n".encode() + body


def write_capture(path: Path, connections: int, requests: int, batch: int) -> tuple[int, int]:
    """The capture; returns (events, HTTP messages)."""
    events = 0
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 0\r\n\r\n"
    with path.open("wb") as f:
        writer = PcapWriter(f, t0=1_763_700_000_000_000_000)
        for c in range(connections):
            conn = Connection(writer, 0x0A020001 + c, 30000 + c, 0x0A010001, 6306, mss=MSS)
            conn.handshake()
            for r in range(requests):
                body = encode_batch([_event(events + k) for k in range(batch)])
                conn.send(True, _request(body, r % 2 == 1, r))
                conn.send(False, answer)
                events += batch
    return events, 2 * connections * requests


def orjson_floor(ndjson: Path, runs: int) -> float:
    """CPU seconds orjson takes to serialise the records of `ndjson`, parsed block by block (not
    timed) so that the floor does not hold gigabytes of dicts."""
    lines = ndjson.read_bytes().splitlines()
    best = float("inf")
    for _ in range(runs):
        spent = 0.0
        for at in range(0, len(lines), 20_000):
            records = [orjson.loads(line) for line in lines[at : at + 20_000]]
            start = time.process_time()
            b"\n".join(orjson.dumps(r) for r in records)
            spent += time.process_time() - start
        best = min(best, spent)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--requests", type=int, default=50, help="requests per connection")
    ap.add_argument("--batch", type=int, default=100, help="events per request")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    wirelog = [sys.executable, "-m", "wirelog.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        pcap, big = Path(tmp) / "gate.pcap", Path(tmp) / "gate2.pcap"
        events, http = write_capture(pcap, args.connections, args.requests, args.batch)
        write_capture(big, 2 * args.connections, args.requests, args.batch)
        print(f"capture: {events} events in {http} HTTP messages, {pcap.stat().st_size / 1e6:.1f} MB")
        wj, rssj = measure([*wirelog, "convert", str(pcap), "--to", "json", "-o", "/dev/null"], args.runs)
        wh, rssh = measure([*wirelog, "convert", str(pcap), "--to", "hercules", "-o", "/dev/null"], args.runs)
        _, rssj2 = measure([*wirelog, "convert", str(big), "--to", "json", "-o", "/dev/null"], 1)
        _, rssh2 = measure([*wirelog, "convert", str(big), "--to", "hercules", "-o", "/dev/null"], 1)
        print(
            f"wirelog --to json    : {wj:6.2f} s  {events / wj:10,.0f} events/s  peak RSS {rssj // 1024} MiB"
            f" (capture doubled: {rssj2 // 1024} MiB)"
        )
        print(
            f"wirelog --to hercules: {wh:6.2f} s  {events / wh:10,.0f} events/s  peak RSS {rssh // 1024} MiB"
            f" (capture doubled: {rssh2 // 1024} MiB)"
        )
        ndjson = Path(tmp) / "gate.ndjson"
        subprocess.run([*wirelog, "convert", str(pcap), "--to", "json", "-o", str(ndjson)], check=True)
        size = ndjson.stat().st_size
        low = orjson_floor(ndjson, args.runs)
        ndjson.unlink()
        print(
            f"floor: orjson serialising the same {size / 1e6:.0f} MB of records: {low:6.2f} s CPU"
            f"  ratio wirelog json / floor {low / wj:.2f}x"
        )

        if shutil.which("tshark") is None:
            print("tshark not installed: no ratio")
            return
        cmd = ["tshark", "-r", str(pcap), "-d", "tcp.port==6306,http", "-Y", "http", "-T", "fields"]
        wt, rsst = measure([*cmd, "-e", "http.request.method", "-e", "http.response.code"], args.runs)
        print(
            f"tshark (HTTP only)   : {wt:6.2f} s  {events / wt:10,.0f} events/s  peak RSS {rsst // 1024} MiB"
        )
        print(f"ratio wirelog json / tshark: {wt / wj:.2f}x; wirelog hercules / tshark: {wt / wh:.2f}x")


if __name__ == "__main__":
    main()
