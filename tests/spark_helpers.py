"""Captures of every protocol and the row comparison the Spark tests share (test_spark.py,
test_spark_cluster.py): the local engine's rows against Spark's, per capture."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
from courier_helpers import RUBY_ACKN, RUBY_HELO, RUBY_JDAT, RUBY_VERS
from hercules_helpers import README_EVENT
from lumberjack_helpers import ack, cframe, jframe, window, write_capture
from pcap_helpers import T0_NS, write_pcap

from wirelog.engine.local import Options, run
from wirelog.export import parquet
from wirelog.model import CaptureInfo, Direction, Finding, Message

C2S, S2C = Direction.C2S, Direction.S2C
ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SHARED = ROOT.parent / "shared" / "captures"
TS = parquet.COLUMNS.index("ts")
TS_NS = parquet.COLUMNS.index("ts_ns")


def conversation(
    path: Path, turns: list[tuple[Direction, bytes]], port: int, drop: int | None = None
) -> Path:
    """write_capture's TCP connection, re-timed into a nanosecond pcap (every ts has 9 digits set)."""
    from scapy.utils import rdpcap

    packets = rdpcap(str(write_capture(path, turns, port, drop)))
    return write_pcap(path, [(T0_NS + i * 1_000_001, bytes(p)) for i, p in enumerate(packets)], nano=True)


def cql_v4_startup_query() -> list[tuple[Direction, bytes]]:
    from cassandra.protocol import QueryMessage, StartupMessage
    from cql_helpers import driver_envelope

    ready = bytes([0x84, 0, 0, 1, 0x02, 0, 0, 0, 0])
    void = bytes([0x84, 0, 0, 2, 0x08, 0, 0, 0, 4, 0, 0, 0, 1])
    return [
        (C2S, driver_envelope(StartupMessage(cqlversion="3.0.0", options={}), 1, 4)),
        (S2C, ready),
        (C2S, driver_envelope(QueryMessage("INSERT INTO t (k) VALUES (1)", 1), 2, 4)),
        (S2C, void),
    ]


def make_captures(tmp: Path) -> list[str]:
    """Captures of every protocol: generated in `tmp`, committed under tests/data, and ../shared's."""
    docs = [{"message": f"line {n}", "@timestamp": "2026-11-21T04:41:22.123456789Z"} for n in range(4)]
    lj = [
        (C2S, window(2) + jframe(1, docs[0]) + jframe(2, docs[1])),
        (S2C, ack(2)),
        (C2S, cframe(window(2) + jframe(3, docs[2]) + jframe(4, docs[3]))),
        (S2C, ack(4)),
    ]
    made = [
        conversation(tmp / "lumberjack.pcap", lj, 5044),
        conversation(tmp / "lumberjack-gap.pcap", lj, 5044, drop=2),
        conversation(
            tmp / "courier.pcap",
            [(C2S, RUBY_HELO), (S2C, RUBY_VERS), (C2S, RUBY_JDAT), (S2C, RUBY_ACKN)],
            12345,
        ),
        conversation(tmp / "hercules-events.pcap", [(C2S, bytes.fromhex(README_EVENT) * 3)], 6306),
        conversation(tmp / "cql.pcap", cql_v4_startup_query(), 9042),
    ]
    whole = made[0].read_bytes()
    (tmp / "truncated.pcap").write_bytes(whole[: len(whole) * 2 // 3])
    (tmp / "garbage.pcap").write_bytes(random.Random(8).randbytes(3000))
    paths = [str(p) for p in made] + [str(tmp / "truncated.pcap"), str(tmp / "garbage.pcap")]
    paths += [str(p) for p in sorted(DATA.glob("*/*.pcap"))]
    if SHARED.is_dir():
        paths += [str(p) for p in sorted(SHARED.rglob("*.pcap"))]
    return paths


def local_rows(paths: list[str], options: Options | None = None) -> tuple[dict[str, list[tuple]], set[str]]:
    """Per capture, the local engine's rows in order (ts as integer microseconds, ts_ns exact), and
    the unreadable captures."""
    rows: dict[str, list[tuple]] = {p: [] for p in paths}
    unreadable = set()
    for item in run(paths, (), options or Options()):
        if isinstance(item, Message | Finding):
            rows[item.capture].append(parquet.row(item))
        elif isinstance(item, CaptureInfo) and item.error and not item.packets:
            unreadable.add(item.capture)
    return rows, unreadable


def spark_rows(table: pa.Table) -> dict[str, list[tuple]]:
    """Per capture, Spark's rows in order, with ts as integer microseconds."""
    table = table.set_column(TS, "ts", table.column("ts").cast(pa.int64()))
    out: dict[str, list[tuple]] = {}
    for r in table.to_pylist():
        out.setdefault(r["capture"], []).append(tuple(r.values()))
    return out
