"""Conversion on the event and message shapes the other benches do not have (issue 42), each against
a floor measured on the same file in the same run, the runs of the commands compared alternated (the
machine drifts). CPU time (user + system) of the child, median of the runs; floors: the least run.

Lumberjack (v2 windows, one zlib `2C` frame of `2J` events each, cut into 1448-byte segments):
  python-sender  small events written as a Python sender writes them (`json.dumps` defaults: `", "`
                 and `": "` separators, `\\u` escapes of every non-ASCII character), the windows of 7
                 connections in 8 never acknowledged (their events wait for a fate until the end);
                 the same windows all acknowledged, in a second capture, for µs per event.
  stack-traces   Beats-shaped events whose message is a multi-line Java stack trace of 4-16 KB.
    wirelog convert --events --to json / --to parquet   against the floor: Python zlib.decompress +
    orjson.loads of every event (bench_lumberjack.floor), and inflating alone.
    Goals (issue 42): python-sender json <= 1.0x the floor, parquet <= 2.0x, json <= 2x inflating
    alone; acknowledged <= 1.5 µs an event.

CQL v4 (TCP handshake, STARTUP/READY, 1448-byte segments unless said):
  wide           QUERY → RESULT Rows of 100 rows x 24 columns (text, int, bigint, timestamp, uuid,
                 double, boolean, a null every so often), one exchange at a time.
  small          many small results: bursts of 32 pipelined requests, an INSERT answered Void and a
                 SELECT answered by one row of one bigint, in turn.
  three-rows     the issue's shape: 1.1M messages, QUERY + RESULT Rows of 3 rows (bench_cql's
                 columns), one message a packet.
    wirelog convert --to json / --to parquet   against
    tshark -r FILE -d tcp.port==9042,cql -T fields -e cql.opcode -e cql.stream   (goal: >= 10x)

    .venv/bin/python bench/bench_shapes.py [--shape NAME] [--runs 3] [--scale 1.0] [--quick] [--keep DIR]

`--quick` is a smoke run: every shape at 2 % of its size, one run. `--keep DIR` writes the captures
into DIR and leaves them there (to profile or time them again), instead of a temporary directory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import statistics
import struct
import sys
import tempfile
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
import bench_cql
from bench_lumberjack import MSS, cpu_seconds, floor, inflate_only, send_window, window_body, wirelog
from gen_capture import Connection, PcapWriter

from tests import cql_wire as wire

Event = Callable[[random.Random, int], bytes]
Exchange = Callable[[int, int], tuple[bytes, bytes]]  # (stream id, exchange number) → (request, response)

# ---------------------------------------------------------------- Lumberjack events

NAMES = ("Zoë", "José", "Chloé", "Łukasz", "Ana", "Bob")


def python_event(rng: random.Random, n: int) -> bytes:
    """A small log event as Python's `json.dumps(record)` writes it (python-logstash style fields)."""
    ms = rng.randrange(1, 2000)
    name = rng.choice(NAMES)
    doc = {
        "@timestamp": f"2026-11-21T06:{n // 60 % 60:02d}:{n % 60:02d}.{n % 1000:03d}Z",
        "@version": "1",
        "host": f"app-{n % 8}",
        "level": "WARNING" if ms > 1500 else "INFO",
        "logger_name": "shop.orders",
        "message": f"Commande {n} expédiée à {name} en {ms} ms" if n % 2 else f"order {n} shipped to {name}",
        "duration": ms / 1000,
        "pid": 4242,
    }
    return json.dumps(doc).encode()


def _frames(rng: random.Random) -> list[str]:
    """A pool of Java stack frames, so a trace is a slice of it (cheap to generate)."""
    classes = ("OrderService", "PaymentGateway", "InventoryClient", "RetryTemplate", "DispatcherServlet")
    methods = ("process", "charge", "reserve", "doWithRetry", "invoke", "lambda$handle$3", "<init>")
    return [
        f"\tat com.shop.{rng.choice(('orders', 'payments', 'web'))}.{c}.{m}({c}.java:{rng.randrange(20, 900)})"
        for c, m in ((rng.choice(classes), rng.choice(methods)) for _ in range(600))
    ]


FRAMES = _frames(random.Random(42))


def stack_trace_event(rng: random.Random, n: int) -> bytes:
    """A Beats-shaped event whose message is a multi-line stack trace of 4-16 KB."""
    lines = [
        f"2026-11-21 06:00:{n % 60:02d}.{n % 1000:03d} ERROR [http-nio-8080-exec-{n % 200}] "
        f"c.s.o.OrderService - order {n} failed",
        f"java.lang.IllegalStateException: order {n} has no line items",
    ]
    target, size = rng.randrange(4096, 16385), sum(map(len, lines))
    while size < target:
        start = rng.randrange(len(FRAMES) - 40)
        part = FRAMES[start : start + min(rng.randrange(10, 40), (target - size) // 60 + 1)]
        cause = f"Caused by: java.io.IOException: upstream reset after {rng.randrange(1, 30000)} ms"
        lines += [*part, f"\t... {rng.randrange(5, 90)} more", cause]
        size += sum(map(len, part)) + 60
    doc = {
        "@timestamp": f"2026-11-21T06:00:{n % 60:02d}.{n % 1000:03d}Z",
        "message": "\n".join(lines),
        "log": {"offset": n * 9000, "file": {"path": "/var/log/shop/app.log"}, "flags": ["multiline"]},
        "host": {"name": f"app-{n % 8}"},
        "agent": {"type": "filebeat", "version": "8.11.0"},
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def write_lumberjack(
    captures: dict[Path, int], event: Event, connections: int, windows: int, size: int
) -> tuple[int, list[bytes]]:
    """The same windows of `event`s into each capture of `captures` (path → ack_every: only the
    windows of every ack_every-th connection are acknowledged); returns (events, the zlib bodies)."""
    rng = random.Random(1)
    bodies: list[bytes] = []
    n = 0
    with contextlib.ExitStack() as files:
        writers = [PcapWriter(files.enter_context(path.open("wb")), step_ns=20_000) for path in captures]
        for c in range(connections):
            ends = (0x0A020001 + c, 40000 + c, 0x0A010001, 5044)
            conns = [Connection(w, *ends, mss=MSS) for w in writers]
            for conn in conns:
                conn.handshake()
            for _ in range(windows):
                body = window_body(event(rng, n + k) for k in range(size))
                for conn, ack_every in zip(conns, captures.values(), strict=True):
                    send_window(conn, body, size, acked=c % ack_every == 0)
                bodies.append(body)
                n += size
    return n, bodies


# event, connections, windows a connection (at scale 1), events a window
LUMBERJACK_SHAPES: dict[str, tuple[Event, int, int, int]] = {
    "python-sender": (python_event, 40, 250, 250),  # 2.5M events, as the issue's
    "stack-traces": (stack_trace_event, 20, 40, 50),  # 40,000 events, ~400 MB of them
}


def lumberjack_shape(name: str, captures: dict[Path, int], scale: float) -> tuple[int, list[bytes]]:
    """The captures of a Lumberjack shape at `scale` (see write_lumberjack)."""
    event, connections, windows, size = LUMBERJACK_SHAPES[name]
    return write_lumberjack(captures, event, connections, max(1, round(windows * scale)), size)


# ---------------------------------------------------------------- CQL messages

# (name, CQL type id, the cell of row n; None: a null cell)
WIDE_COLUMNS: list[tuple[str, int, Callable[[int], bytes | None]]] = [
    (f"{kind}_{k}", type_id, cell)
    for k in range(3)
    for kind, type_id, cell in (
        ("name", 0x0D, lambda n: b"customer-%06d" % n),
        ("qty", 0x09, lambda n: struct.pack(">i", n % 1000)),
        ("total", 0x02, lambda n: struct.pack(">q", n * 1299)),
        ("at", 0x0B, lambda n: struct.pack(">q", 1_763_700_000_000 + n)),
        ("id", 0x0C, lambda n: uuid.UUID(int=n * 0x9E3779B97F4A7C15 % (1 << 128)).bytes),
        ("price", 0x07, lambda n: struct.pack(">d", n / 7)),
        ("paid", 0x04, lambda n: b"\x01" if n % 3 else b"\x00"),
        ("note", 0x0D, lambda n: None if n % 5 else b"gift wrap, leave at the door"),
    )
]


def _cell(value: bytes | None) -> bytes:
    return struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value


def _query(stream: int, text: str) -> bytes:
    body = text.encode()
    return wire.envelope(4, False, 0, stream, 0x07, struct.pack(">i", len(body)) + body + b"\x00\x01\x00")


def rows_result(stream: int, columns: list, rows: range) -> bytes:
    """RESULT Rows with global table spec shop.orders, one cell a column for each row of `rows`."""
    spec = b"".join(bench_cql.string(name) + struct.pack(">H", type_id) for name, type_id, _ in columns)
    body = struct.pack(">iii", 2, 1, len(columns)) + bench_cql.string("shop") + bench_cql.string("orders")
    body += spec + struct.pack(">i", len(rows))
    body += b"".join(_cell(cell(n)) for n in rows for _, _, cell in columns)
    return wire.envelope(4, True, 0, stream, 0x08, body)


def wide_exchange(stream: int, i: int) -> tuple[bytes, bytes]:
    text = f"SELECT * FROM shop.orders WHERE day = '2026-11-21' AND shard = {i} LIMIT 100"
    return _query(stream, text), rows_result(stream, WIDE_COLUMNS, range(i * 100, i * 100 + 100))


COUNT = [("count", 0x02, lambda n: struct.pack(">q", n))]


def small_exchange(stream: int, i: int) -> tuple[bytes, bytes]:
    """An INSERT answered Void, or a SELECT count(*) answered by one bigint, in turn."""
    if i % 2:
        text = f"SELECT count(*) FROM shop.orders WHERE customer = {i}"
        return _query(stream, text), rows_result(stream, COUNT, range(i, i + 1))
    text = f"INSERT INTO shop.orders (id, customer, total) VALUES ({i}, {i % 977}, {i * 13})"
    return _query(stream, text), wire.envelope(4, True, 0, stream, 0x08, struct.pack(">i", 1))


def write_cql(path: Path, connections: int, exchanges: int, burst: int, exchange: Exchange) -> int:
    """Per connection `exchanges` of `exchange`, `burst` requests sent before their responses
    (stream ids 1..burst); returns the number of CQL messages."""
    with path.open("wb") as f:
        writer = PcapWriter(f)
        for c in range(connections):
            conn = bench_cql.open_connection(writer, c, 4, mss=MSS)
            for first in range(0, exchanges, burst):
                pairs = [exchange(1 + i - first, i) for i in range(first, min(first + burst, exchanges))]
                conn.send(True, b"".join(q for q, _ in pairs))
                conn.send(False, b"".join(r for _, r in pairs))
    return connections * (2 + 2 * exchanges)


# The shape is three-rows: 1.1M messages at scale 1.
CQL_SHAPES: dict[str, Callable[[Path, float], int]] = {
    "wide": lambda p, scale: write_cql(p, 40, max(1, round(100 * scale)), 1, wide_exchange),
    "small": lambda p, scale: write_cql(p, 100, max(1, round(5000 * scale)), 32, small_exchange),
    "three-rows": lambda p, scale: bench_cql.write_capture(p, 4, 250, max(1, round(2200 * scale)), rows=3),
}


# ---------------------------------------------------------------- measuring


def alternate(commands: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Median CPU seconds of each command, the commands run in turn `runs` times."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, cmd in commands.items():
            times[name].append(cpu_seconds(cmd))
    return {name: statistics.median(t) for name, t in times.items()}


def floors(bodies: list[bytes], runs: int) -> tuple[float, float]:
    """CPU seconds, the least of `runs`, of the zlib + orjson floor and of inflating alone; printed."""
    low = min(floor("lumberjack", bodies) for _ in range(runs))
    inflating = min(inflate_only(bodies) for _ in range(runs))
    print(f"  floor zlib + orjson (Python): {low:.2f} s CPU; inflating alone {inflating:.2f} s")
    return low, inflating


def bench_python_sender(tmp: Path, scale: float, runs: int) -> None:
    stalled, acked = tmp / "python-sender.pcap", tmp / "python-sender-acked.pcap"
    n, bodies = lumberjack_shape("python-sender", {stalled: 8, acked: 1}, scale)
    print(
        f"python-sender: {n:,} events, {stalled.stat().st_size / 1e6:.0f} MB capture, "
        "7 of 8 connections never acknowledged"
    )
    got = alternate(
        {
            "json": wirelog(stalled, "--events", "--to", "json", "-o", "/dev/null"),
            "parquet": wirelog(stalled, "--events", "--to", "parquet", "-o", str(tmp / "out.parquet")),
            "acked": wirelog(acked, "--events", "--to", "json", "-o", "/dev/null"),
        },
        runs,
    )
    low, inflating = floors(bodies, runs)
    for name, goal in (("json", 1.0), ("parquet", 2.0)):
        cpu = got[name]
        print(
            f"  convert --events --to {name:8}: {cpu:6.2f} s CPU = {cpu / low:.2f}x the floor (goal <= {goal}),"
            f" {cpu / inflating:.2f}x inflating alone"
        )
    print(f"  all acknowledged, --events --to json: {got['acked']:.2f} s CPU = "
          f"{got['acked'] / n * 1e6:.2f} µs an event (goal <= 1.5)")  # fmt: skip


def bench_stack_traces(tmp: Path, scale: float, runs: int) -> None:
    pcap = tmp / "stack-traces.pcap"
    n, bodies = lumberjack_shape("stack-traces", {pcap: 1}, scale)
    inflated = sum(len(zlib.decompress(b)) for b in bodies)
    print(
        f"stack-traces: {n:,} events ({inflated / 1e6:.0f} MB inflated), {pcap.stat().st_size / 1e6:.0f} MB capture"
    )
    got = alternate(
        {
            "json": wirelog(pcap, "--events", "--to", "json", "-o", "/dev/null"),
            "parquet": wirelog(pcap, "--events", "--to", "parquet", "-o", str(tmp / "out.parquet")),
        },
        runs,
    )
    low, inflating = floors(bodies, runs)
    for name, cpu in got.items():
        print(
            f"  convert --events --to {name:8}: {cpu:6.2f} s CPU = {cpu / low:.2f}x the floor,"
            f" {cpu / inflating:.2f}x inflating alone, {inflated / cpu / 1e6:.0f} MB of events/s"
        )


def bench_cql_shape(name: str, tmp: Path, scale: float, runs: int) -> None:
    pcap = tmp / f"cql-{name}.pcap"
    messages = CQL_SHAPES[name](pcap, scale)
    print(f"cql {name}: {messages:,} messages, {pcap.stat().st_size / 1e6:.0f} MB capture")
    commands = {
        "json": wirelog(pcap, "--to", "json", "-o", "/dev/null"),
        "parquet": wirelog(pcap, "--to", "parquet", "-o", str(tmp / "out.parquet")),
    }
    if shutil.which("tshark"):
        commands["tshark"] = ["tshark", "-r", str(pcap), "-d", "tcp.port==9042,cql", "-T", "fields",
                              "-e", "cql.opcode", "-e", "cql.stream"]  # fmt: skip
    got = alternate(commands, runs)
    tshark = got.get("tshark")
    if tshark:
        print(f"  tshark -T fields -e cql.opcode -e cql.stream: {tshark:6.2f} s CPU")
    for out in ("json", "parquet"):
        cpu = got[out]
        line = f"  convert --to {out:8}: {cpu:6.2f} s CPU = {messages / cpu:,.0f} msg/s"
        print(line + (f"; tshark / wirelog {tshark / cpu:.1f}x (goal >= 10)" if tshark else ""))
    if not tshark:
        print("  tshark not installed: no ratio")


SHAPES = [*LUMBERJACK_SHAPES, *CQL_SHAPES]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=SHAPES, action="append", help="only these shapes (repeatable)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="size of every capture, 1.0 = the issue's")
    ap.add_argument("--quick", action="store_true", help="smoke run: scale 0.02, one run")
    ap.add_argument("--keep", type=Path, metavar="DIR", help="write the captures into DIR and keep them")
    args = ap.parse_args()
    scale, runs = (0.02, 1) if args.quick else (args.scale, args.runs)
    with contextlib.ExitStack() as stack:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
        tmp = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for shape in args.shape or SHAPES:
            if shape == "python-sender":
                bench_python_sender(tmp, scale, runs)
            elif shape == "stack-traces":
                bench_stack_traces(tmp, scale, runs)
            else:
                bench_cql_shape(shape, tmp, scale, runs)
            if not args.keep:
                for leftover in tmp.iterdir():  # the next shape's captures need the room
                    leftover.unlink()


if __name__ == "__main__":
    main()
