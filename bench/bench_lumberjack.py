"""Log event conversion (Lumberjack and Log Courier) against in-run floors and tshark, same file, same run.

For each protocol a capture of N connections is generated: Beats-style windows (`2W n` + one `2C`
frame of `2J` events, zlib level 3 like Filebeat, answered by `2A n`) or Log Courier `JDAT` payloads
(nonce + zlib of length-prefixed events, answered by `ACKN`), Filebeat-shaped JSON events, cut into
1448-byte segments. Then, each several times (median):

    wirelog convert FILE --events --to json        CPU time against the floor: a Python loop that
                                                   only does zlib.decompress + orjson.loads of the
                                                   same payloads (target: ratio <= 1.0)
    wirelog convert FILE --to json / --to parquet  wall time against
    tshark -r FILE -T fields -e tcp.stream         (targets: >= 6x and >= 4x)

and peak RSS of the conversion on the capture and on one twice as long (it must stay flat), and the
CPU time of `wirelog inspect --json` (its summary counts events in the core) beside the conversion's.

tshark's `-e tcp.stream` only reassembles; it never inflates the events. So the CPU time of
inflating them alone (`zlib.decompress`, C zlib) is printed as a multiple of tshark's: a
conversion cannot be faster against tshark than that multiple allows.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from bench_streams import measure
from gen_capture import Connection, PcapWriter

MSS = 1448


def _event(i: int) -> bytes:
    """A Filebeat event, as `json.dumps(separators=(",", ":"))` writes it (written out here: nothing
    in it needs an escape but the message's quotes, and the encoder was most of the generation)."""
    return (
        f'{{"@timestamp":"2026-11-21T06:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z",'
        '"@metadata":{"beat":"filebeat","type":"_doc","version":"8.11.0"},'
        f'"message":"10.0.{i % 7}.{i % 250} - - [21/Nov/2026:06:00:01 +0000] \\"GET /api/orders?page={i} '
        f'HTTP/1.1\\" {200 + i % 3} {i * 7 % 9000}",'
        f'"log":{{"offset":{i * 96},"file":{{"path":"/var/log/nginx/access.log"}}}},'
        '"input":{"type":"filestream"},"ecs":{"version":"8.0.0"},'
        f'"host":{{"name":"web-{i % 5}"}},'
        f'"agent":{{"type":"filebeat","version":"8.11.0","name":"web-{i % 5}"}}}}'
    ).encode()


def window_body(events: Iterable[bytes]) -> bytes:
    """The `2C` body of a window: its `2J` frames (sequence from 1), zlib level 3 like Filebeat."""
    inner = b"".join(b"2J" + struct.pack(">II", k + 1, len(e)) + e for k, e in enumerate(events))
    return zlib.compress(inner, 3)


def send_window(conn: Connection, body: bytes, size: int, acked: bool = True) -> None:
    """`2W size` + the `2C` frame of `body`, then the server's `2A size` unless it never answers."""
    conn.send(True, b"2W" + struct.pack(">I", size) + b"2C" + struct.pack(">I", len(body)) + body)
    if acked:
        conn.send(False, b"2A" + struct.pack(">I", size))


def lumberjack_window(conn: Connection, first: int, size: int) -> bytes:
    body = window_body(_event(first + k) for k in range(size))
    send_window(conn, body, size)
    return body


def _courier_payload(conn: Connection, first: int, size: int) -> bytes:
    nonce = first.to_bytes(16, "big")
    body = zlib.compress(
        b"".join(struct.pack(">I", len(e)) + e for e in map(_event, range(first, first + size))), 3
    )
    conn.send(True, b"JDAT" + struct.pack(">I", 16 + len(body)) + nonce + body)
    conn.send(False, b"ACKN" + struct.pack(">I", 20) + nonce + struct.pack(">I", size))
    return body


PROTOCOLS: dict[str, tuple[int, Callable[[Connection, int, int], bytes]]] = {
    "lumberjack": (5044, lumberjack_window),
    "courier": (5043, _courier_payload),
}


def write_capture(
    path: Path, protocol: str, connections: int, windows: int, size: int
) -> tuple[int, list[bytes]]:
    """Write the capture; returns (events, the zlib bodies) for the floor measurement."""
    port, window = PROTOCOLS[protocol]
    bodies: list[bytes] = []
    n = 0
    with path.open("wb") as f:
        writer = PcapWriter(f, step_ns=20_000)
        for c in range(connections):
            conn = Connection(writer, 0x0A020001 + c, 40000 + c, 0x0A010001, port, mss=MSS)
            conn.handshake()
            for _ in range(windows):
                bodies.append(window(conn, n, size))
                n += size
    return n, bodies


def floor(protocol: str, bodies: list[bytes]) -> float:
    """CPU seconds of the irreducible work: inflate every body, parse every event with orjson."""
    skip, start = (6, 10) if protocol == "lumberjack" else (0, 4)  # 2J seq len | len
    loads = orjson.loads
    t0 = time.process_time()
    for body in bodies:
        inner = zlib.decompress(body)
        p, end = 0, len(inner)
        while p < end:
            length = int.from_bytes(inner[p + skip : p + start], "big")
            loads(inner[p + start : p + start + length])
            p += start + length
    return time.process_time() - t0


def inflate_only(bodies: list[bytes]) -> float:
    """CPU seconds of inflating every body, nothing else (the least any conversion must do)."""
    t0 = time.process_time()
    for body in bodies:
        zlib.decompress(body)
    return time.process_time() - t0


def cpu_seconds(cmd: list[str]) -> float:
    """User + system CPU of one run: on a shared machine wall time mostly measures the neighbours."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def wirelog(pcap: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "wirelog.cli", "convert", str(pcap), *args]


def bench(protocol: str, tmp: Path, args: argparse.Namespace) -> None:
    pcap, big = tmp / f"{protocol}.pcap", tmp / f"{protocol}-x2.pcap"
    n, bodies = write_capture(pcap, protocol, args.connections, args.windows, args.size)
    # Twice as long, not twice as many connections: none of them closes, and an open connection
    # holds its receive buffer and up to 64 KiB of history for retransmission checks.
    write_capture(big, protocol, args.connections, args.windows * 2, args.size)
    mb = pcap.stat().st_size / 1e6
    events_json = wirelog(pcap, "--events", "--to", "json", "-o", os.devnull)
    cpu = statistics.median(cpu_seconds(events_json) for _ in range(args.runs))
    low = min(floor(protocol, bodies) for _ in range(args.runs))
    inflating = min(inflate_only(bodies) for _ in range(args.runs))
    to_json, rss = measure(wirelog(pcap, "--to", "json", "-o", os.devnull), args.runs)
    to_parquet, _ = measure(wirelog(pcap, "--to", "parquet", "-o", str(tmp / "out.parquet")), args.runs)
    _, rss_big = measure(wirelog(big, "--to", "json", "-o", os.devnull), 1)
    print(f"{protocol}: {n:,} events, {mb:.0f} MB capture")
    print(f"  convert --events --to json : {cpu:.2f} s CPU = {n / cpu:,.0f} events/s")
    print(f"  floor zlib + orjson (Python): {low:.2f} s CPU   ratio {cpu / low:.2f} (target <= 1.0)")
    line = f"  convert --to json {to_json:.2f} s, --to parquet {to_parquet:.2f} s"
    if shutil.which("tshark"):
        tshark_cmd = ["tshark", "-r", str(pcap), "-T", "fields", "-e", "tcp.stream"]
        tshark, _ = measure(tshark_cmd, args.runs)
        tshark_cpu = statistics.median(cpu_seconds(tshark_cmd) for _ in range(args.runs))
        print(
            f"  inflating alone: {inflating:.2f} s CPU = {inflating / tshark_cpu:.2f}x tshark's "
            f"{tshark_cpu:.2f} s CPU: no conversion can beat tshark by more than {tshark_cpu / inflating:.1f}x"
        )
        line += (
            f"; tshark -T fields -e tcp.stream {tshark:.2f} s: json {tshark / to_json:.1f}x (target >= 6),"
            f" parquet {tshark / to_parquet:.1f}x (target >= 4)"
        )
    print(line)
    inspected = statistics.median(
        cpu_seconds([sys.executable, "-m", "wirelog.cli", "inspect", "--json", str(pcap)])
        for _ in range(args.runs)
    )
    print(f"  inspect --json {inspected:.2f} s CPU = {inspected / cpu:.2f}x the --events conversion's")
    print(f"  peak RSS {rss // 1024} MiB; capture doubled: {rss_big // 1024} MiB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--connections", type=int, default=40)
    ap.add_argument("--windows", type=int, default=75, help="windows (payloads) per connection")
    ap.add_argument("--size", type=int, default=512, help="events per window")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--protocol", choices=[*PROTOCOLS, "both"], default="both")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for protocol in PROTOCOLS if args.protocol == "both" else [args.protocol]:
            bench(protocol, Path(tmp), args)


if __name__ == "__main__":
    main()
