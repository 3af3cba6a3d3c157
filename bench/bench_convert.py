"""End-to-end `wirelog convert --to parquet` (read, reassemble, decode, write) against tshark.

For each protocol (Lumberjack v2 Beats traffic, CQL v4) a capture of ~N packets is generated, then
    wirelog convert FILE --to parquet -o out.parquet
    wirelog convert FILE --to json -o /dev/null
    tshark -r FILE -T fields -e frame.number -e tcp.stream [-e cql.opcode]   (the peer)
run on the same file (median of --runs); packets/s, events/s, the ratio to tshark and peak RSS are
printed, and the capture is doubled once to show that memory stays flat.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from bench_streams import measure
from gen_capture import generate

TSHARK_FIELDS = {"lumberjack": [], "cql": ["-e", "cql.opcode"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--packets", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--protocols", nargs="+", default=["lumberjack", "cql"])
    args = ap.parse_args()
    wirelog = [sys.executable, "-m", "wirelog.cli", "convert"]
    tshark = shutil.which("tshark")
    with tempfile.TemporaryDirectory() as tmp:
        for proto in args.protocols:
            cap, cap2 = Path(tmp) / f"{proto}.pcap", Path(tmp) / f"{proto}2.pcap"
            out = Path(tmp) / f"{proto}.parquet"
            n = generate(str(cap), args.packets, payload=proto)
            n2 = generate(str(cap2), args.packets * 2, payload=proto, seed=2)
            secs, rss = measure([*wirelog, str(cap), "--to", "parquet", "-o", str(out)], args.runs)
            table = pq.read_table(out, columns=["kind", "record"])
            rows = table.num_rows
            events = sum(1 for k in table.column("kind").to_pylist() if k == "event")
            jsecs, jrss = measure([*wirelog, str(cap), "--to", "json", "-o", "/dev/null"], args.runs)
            secs2, rss2 = measure([*wirelog, str(cap2), "--to", "parquet", "-o", str(out)], 1)
            print(f"{proto}: {n} packets, {cap.stat().st_size / 1e6:.1f} MB, {rows} records, {events} events")
            print(f"  convert --to parquet : {secs:6.2f} s {n / secs:9,.0f} pkt/s {events / secs:10,.0f} events/s "
                  f"{rows / secs:10,.0f} records/s  peak RSS {rss / 1024:6.1f} MiB")  # fmt: skip
            print(
                f"  convert --to json    : {jsecs:6.2f} s {n / jsecs:9,.0f} pkt/s  peak RSS {jrss / 1024:6.1f} MiB"
            )
            print(
                f"  twice the capture    : {secs2:6.2f} s {n2 / secs2:9,.0f} pkt/s  peak RSS {rss2 / 1024:6.1f} MiB"
            )
            if tshark:
                cmd = [tshark, "-r", str(cap), "-T", "fields", "-e", "frame.number", "-e", "tcp.stream"]
                tsecs, trss = measure(cmd + TSHARK_FIELDS[proto], args.runs)
                print(
                    f"  tshark -T fields     : {tsecs:6.2f} s {n / tsecs:9,.0f} pkt/s  peak RSS {trss / 1024:6.1f} MiB"
                )
                print(f"  ratio (wirelog parquet / tshark throughput): {tsecs / secs:.2f}x")


if __name__ == "__main__":
    main()
