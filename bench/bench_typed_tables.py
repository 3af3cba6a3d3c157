"""The typed tables' cost (issue 43 item 5): `convert --to parquet --tables -o DIR/` against the
one-file `convert --to parquet` of the same capture, same run, on the Lumberjack and CQL bench
captures (bench_lumberjack.py's Filebeat-shaped windows, bench_cql.py's QUERY/RESULT pairs).

For each capture the two conversions run alternately `--runs` times; printed: the median CPU time
(user + system) of each and their ratio (target <= 1.3), the files' sizes, and the peak RSS of
`--tables` on the capture and on one twice as long (target: flat).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_cql
import bench_lumberjack
from bench_lumberjack import cpu_seconds
from bench_streams import measure

WIRELOG = [sys.executable, "-m", "wirelog.cli", "convert"]


def size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.iterdir()) if path.is_dir() else path.stat().st_size


def compare(name: str, pcap: Path, double: Path, tmp: Path, runs: int) -> float:
    one, tables = tmp / f"{name}.parquet", tmp / f"{name}-tables"
    one_cmd = [*WIRELOG, str(pcap), "--to", "parquet", "-o", str(one)]
    tables_cmd = [*WIRELOG, str(pcap), "--to", "parquet", "--tables", "-o", f"{tables}/"]
    one_cpu, tables_cpu = [], []
    for _ in range(runs):  # alternated: a neighbour's load falls on both alike
        one_cpu.append(cpu_seconds(one_cmd))
        tables_cpu.append(cpu_seconds(tables_cmd))
    a, b = statistics.median(one_cpu), statistics.median(tables_cpu)
    _, rss = measure(tables_cmd, 1)
    _, rss2 = measure([*WIRELOG, str(double), "--to", "parquet", "--tables", "-o", f"{tables}-x2/"], 1)
    mb = pcap.stat().st_size / 1e6
    print(f"{name}: {mb:.0f} MB capture")
    print(f"  --to parquet            {a:.2f} s CPU (median of {runs}), {size(one) / 1e6:.1f} MB")
    print(f"  --to parquet --tables   {b:.2f} s CPU, {size(tables) / 1e6:.1f} MB in 5 files")
    print(f"  ratio {b / a:.2f} (target <= 1.3)")
    print(f"  --tables peak RSS {rss // 1024} MiB; capture doubled: {rss2 // 1024} MiB")
    return b / a


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--connections", type=int, default=40, help="Lumberjack connections")
    ap.add_argument("--windows", type=int, default=75, help="Lumberjack windows per connection")
    ap.add_argument("--size", type=int, default=512, help="events per window")
    ap.add_argument("--cql-connections", type=int, default=250)
    ap.add_argument("--pairs", type=int, default=1000, help="CQL QUERY/RESULT pairs per connection")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        lj, lj2 = tmp / "lumberjack.pcap", tmp / "lumberjack-x2.pcap"
        bench_lumberjack.write_capture(lj, "lumberjack", args.connections, args.windows, args.size)
        bench_lumberjack.write_capture(lj2, "lumberjack", args.connections, args.windows * 2, args.size)
        compare("lumberjack", lj, lj2, tmp, args.runs)
        os.remove(lj2)
        cql, cql2 = tmp / "cql.pcap", tmp / "cql-x2.pcap"
        bench_cql.write_capture(cql, 4, args.cql_connections, args.pairs)
        bench_cql.write_capture(cql2, 4, args.cql_connections, args.pairs * 2)
        compare("cql v4", cql, cql2, tmp, args.runs)


if __name__ == "__main__":
    main()
