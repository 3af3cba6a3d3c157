"""Throughput of `wirelog convert` on CQL: a v5 LZ4-framed capture against tshark on v4.

tshark cannot decode v5 frames, so the peer runs on a v4 capture of the same messages (same queries
and results, unframed, uncompressed). Both captures: N connections with TCP handshakes, the v5 one
with the unframed OPTIONS/STARTUP handshake, then one QUERY and one RESULT Rows per packet. Prints
messages/s for wirelog (v5 and v4, JSON; v5 Parquet; peak RSS of the v5 capture and of one twice
its size) and tshark (v4), and the ratios: against `tshark -T fields` with two
fields (the issue's peer), and against `tshark -T json`, which writes every decoded field as
`convert --to json` does. Last, the floor of any CPython decoder: wirelog's packet reader, the 9-byte
envelope header and one JSON line per message (no reassembly, no bodies, no pairing), in process.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from bench_streams import measure
from gen_capture import Connection, PcapWriter

from tests import cql_wire as wire


def string(text: str) -> bytes:
    """A CQL [string]: u16 length + UTF-8."""
    b = text.encode()
    return struct.pack(">H", len(b)) + b


def query(version: int, stream: int, i: int) -> bytes:
    text = f"SELECT host, message, ts FROM logs.events WHERE day = '2026-11-21' AND id = {i}".encode()
    flags = struct.pack(">i", 0) if version >= 5 else b"\x00"
    return wire.envelope(
        version, False, 0, stream, 0x07, struct.pack(">i", len(text)) + text + b"\x00\x01" + flags
    )


def result(version: int, stream: int, i: int, rows: int = 1) -> bytes:
    """RESULT Rows (host text, message text, ts timestamp) of `rows` rows, the first for `i`."""
    body = struct.pack(">iii", 2, 1, 3) + string("logs") + string("events")
    body += string("host") + b"\x00\x0d" + string("message") + b"\x00\x0d" + string("ts") + b"\x00\x0b"
    cells = [
        cell
        for n in range(i, i + rows)
        for cell in (
            b"web-%03d" % (n % 100),
            b"GET /api/items/%d 200 %d ms" % (n, n % 97),
            struct.pack(">q", 1_763_700_000_000 + n),
        )
    ]
    body += struct.pack(">i", rows) + b"".join(struct.pack(">i", len(c)) + c for c in cells)
    return wire.envelope(version | 0, True, 0, stream, 0x08, body)


def open_connection(writer: PcapWriter, c: int, version: int, mss: int = 1 << 20) -> Connection:
    """Client `c`'s connection to 10.1.0.1:9042: TCP handshake, STARTUP (LZ4 from v5) and READY."""
    conn = Connection(writer, 0x0A020001 + c, 30000 + c, 0x0A010001, 9042, mss=mss)
    conn.handshake()
    startup = {"CQL_VERSION": "3.4.7"} | ({"COMPRESSION": "lz4"} if version >= 5 else {})
    body = struct.pack(">H", len(startup)) + b"".join(string(k) + string(v) for k, v in startup.items())
    conn.send(True, wire.envelope(version, False, 0, 0, 0x01, body))
    conn.send(False, wire.envelope(version, True, 0, 0, 0x02, b""))
    return conn


def write_capture(path: Path, version: int, connections: int, pairs: int, rows: int = 1) -> int:
    """A capture with connections × pairs QUERY/RESULT pairs (one message a packet, results of
    `rows` rows); returns the number of CQL messages."""
    messages = 0
    with path.open("wb") as f:
        writer = PcapWriter(f)
        for c in range(connections):
            conn = open_connection(writer, c, version)
            messages += 2
            for i in range(pairs):
                stream = 1 + i % 1000
                q, r = query(version, stream, i), result(version, stream, i, rows)
                if version >= 5:
                    q, r = wire.frame(q, lz4=True), wire.frame(r, lz4=True)
                conn.send(True, q)
                conn.send(False, r)
                messages += 2
    return messages


def python_floor(path: Path) -> float:
    """CPU seconds of the least a Python CQL converter does per message (one packet = one message here)."""
    import time

    import orjson

    from wirelog.engine.capture import iter_segments
    from wirelog.model import CaptureInfo

    header = struct.Struct(">BBhBi").unpack_from
    start = time.process_time()
    with open(os.devnull, "wb") as out:
        for seg in iter_segments(str(path), CaptureInfo(capture=str(path)), []):
            payload = seg[9]
            if len(payload) >= 9:
                version, flags, stream, opcode, length = header(payload)
                record = {"frame": seg[0], "ts": seg[1], "version": version & 0x7F, "response": version >> 7,
                          "flags": flags, "stream": stream, "opcode": opcode, "length": length}  # fmt: skip
                out.write(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))
    return time.process_time() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--connections", type=int, default=250)
    ap.add_argument("--pairs", type=int, default=1000, help="QUERY/RESULT pairs per connection")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    wirelog = [sys.executable, "-m", "wirelog.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        v5, v4 = Path(tmp) / "v5-lz4.pcap", Path(tmp) / "v4.pcap"
        n5 = write_capture(v5, 5, args.connections, args.pairs)
        n4 = write_capture(v4, 4, args.connections, args.pairs)
        w5, rss5 = measure([*wirelog, "convert", str(v5), "--to", "json", "-o", "/dev/null"], args.runs)
        w4, rss4 = measure([*wirelog, "convert", str(v4), "--to", "json", "-o", "/dev/null"], args.runs)
        print(
            f"wirelog v5 LZ4: {n5} messages in {w5:.2f} s = {n5 / w5:,.0f} msg/s (peak RSS {rss5 // 1024} MiB)"
        )
        print(
            f"wirelog v4    : {n4} messages in {w4:.2f} s = {n4 / w4:,.0f} msg/s (peak RSS {rss4 // 1024} MiB)"
        )
        wp, rssp = measure(
            [*wirelog, "convert", str(v5), "--to", "parquet", "-o", str(Path(tmp) / "o.parquet")], args.runs
        )
        print(
            f"wirelog v5 LZ4 --to parquet: {n5} messages in {wp:.2f} s = {n5 / wp:,.0f} msg/s "
            f"(peak RSS {rssp // 1024} MiB)"
        )
        tiny = Path(tmp) / "v5-lz4-tiny.pcap"
        write_capture(tiny, 5, 1, 1)
        w0, _ = measure([*wirelog, "convert", str(tiny), "--to", "json", "-o", "/dev/null"], args.runs)
        print(f"wirelog start-up (a capture of 4 messages): {w0:.2f} s")
        # Twice as long, not twice as many connections: none of them closes, and an open connection
        # holds up to 64 KiB of history for retransmission checks (tcp::Config::history).
        double = Path(tmp) / "v5-lz4-double.pcap"
        n2 = write_capture(double, 5, args.connections, args.pairs * 2)
        w2, rss2 = measure([*wirelog, "convert", str(double), "--to", "json", "-o", "/dev/null"], 1)
        print(
            f"twice the v5 LZ4 capture: {n2} messages in {w2:.2f} s (peak RSS {rss2 // 1024} MiB; "
            f"once: {rss5 // 1024} MiB)"
        )
        if shutil.which("tshark") is None:
            print("tshark not installed: no ratio")
            return
        cql = ["-d", "tcp.port==9042,cql"]  # the peer: the same dissection, two fields written
        cmd = ["tshark", "-r", str(v4), *cql, "-T", "fields", "-e", "cql.opcode", "-e", "cql.stream"]
        wt, rsst = measure(cmd, args.runs)
        print(
            f"tshark v4     : {n4} messages in {wt:.2f} s = {n4 / wt:,.0f} msg/s (peak RSS {rsst // 1024} MiB)"
        )
        print(f"ratio wirelog v5 LZ4 / tshark v4: {wt / w5:.1f}x; wirelog v4 / tshark v4: {wt / w4:.1f}x")
        # like for like: tshark writing every field it decoded, as `convert --to json` does
        wj, rssj = measure(["tshark", "-r", str(v4), "-Y", "cql", "-T", "json"], 1)  # ~1 min a run
        print(
            f"tshark v4 -T json: {n4} messages in {wj:.2f} s = {n4 / wj:,.0f} msg/s (peak RSS {rssj // 1024} MiB)"
        )
        print(f"ratio wirelog v5 LZ4 / tshark v4 -T json: {wj / w5:.1f}x")
        floor = min(python_floor(v4) for _ in range(args.runs))
        print(
            f"floor of a Python decoder (reader + header + JSON line, no bodies): {floor:.2f} s CPU = "
            f"{n4 / floor:,.0f} msg/s = {wt / floor:.1f}x tshark v4 (the 10x target leaves {wt / 10:.2f} s for everything)"
        )


if __name__ == "__main__":
    main()
