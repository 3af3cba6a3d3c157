"""`wirelog report` against `wirelog convert --to json` on the same capture, same run.

For the Lumberjack bench capture (bench_lumberjack.py's: Beats windows of compressed events,
acknowledged) and the CQL one (bench_cql.py's, v4 QUERY/RESULT pairs), each several times
(median):

    wirelog report FILE -o page.html      wall time as a multiple of
    wirelog convert FILE --to json        (target: <= 1.5x)

and the page's size (target: <= 5 MB whatever the capture), peak RSS of the report on the capture
and on one twice as long (flat, as convert's), and, when Chromium is installed, the time from
loading the page to every chart drawn (target: <= 2 s).

The first report of a machine also bundles Vega for vl-convert's version (~4 s, then cached in
~/.cache/wirelog): a warm-up run is made before the timed ones.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_cql
import bench_lumberjack
from bench_streams import measure

WIRELOG = [sys.executable, "-m", "wirelog.cli"]


def chromium_seconds(page: Path) -> tuple[float, float] | None:
    """(seconds from navigation to every chart drawn, as the page measures it; wall seconds of the
    whole headless Chromium run, its start included), None without Chromium or when a chart failed."""
    exe = shutil.which("chromium")
    if exe is None:
        return None
    start = time.perf_counter()
    dom = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=60000", "--dump-dom",
         page.as_uri()],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    wall = time.perf_counter() - start
    m = re.search(r'data-rendered-ms="(\d+)"', dom.stdout)
    return (int(m[1]) / 1000, wall) if m and 'class="chart-error"' not in dom.stdout else None


def bench(name: str, base: Path, double: Path, runs: int) -> None:
    page = base.with_suffix(".html")
    report = [*WIRELOG, "report", str(base), "-o", str(page)]
    convert = [*WIRELOG, "convert", str(base), "--to", "json", "-o", "/dev/null"]
    measure(report, 1)  # warm-up: the Vega bundle is cached after the first run
    ours, rss = measure(report, runs)
    theirs, convert_rss = measure(convert, runs)
    _, rss2 = measure([*WIRELOG, "report", str(double), "-o", str(double.with_suffix(".html"))], 1)
    size = page.stat().st_size
    print(f"{name}: capture {base.stat().st_size / 1e6:.1f} MB")
    print(
        f"  wirelog report          : {ours:6.2f} s  peak RSS {rss / 1024:6.1f} MiB  page {size / 1e6:.2f} MB"
    )
    print(f"  wirelog convert --to json: {theirs:6.2f} s  peak RSS {convert_rss / 1024:6.1f} MiB")
    print(
        f"  ratio report / convert  : {ours / theirs:6.2f}x (target <= 1.5x); page <= 5 MB: {size <= 5 << 20}"
    )
    print(f"  twice the capture       : peak RSS {rss2 / 1024:6.1f} MiB (flat: {rss2 < rss * 1.3})")
    load = chromium_seconds(page)
    if load is None:
        print("  chromium                : not installed (or a chart failed)")
    else:
        print(f"  chromium load to drawn  : {load[0]:6.2f} s (target <= 2 s); whole run {load[1]:.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--connections", type=int, default=40, help="Lumberjack connections")
    ap.add_argument("--windows", type=int, default=75, help="windows per Lumberjack connection")
    ap.add_argument("--size", type=int, default=512, help="events per window")
    ap.add_argument("--cql-connections", type=int, default=250)
    ap.add_argument("--pairs", type=int, default=1000, help="QUERY/RESULT pairs per CQL connection")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        lj, lj2 = t / "lumberjack.pcap", t / "lumberjack2.pcap"
        events, _ = bench_lumberjack.write_capture(
            lj, "lumberjack", args.connections, args.windows, args.size
        )
        bench_lumberjack.write_capture(lj2, "lumberjack", args.connections, args.windows * 2, args.size)
        print(f"lumberjack: {events:,} events")
        bench("lumberjack", lj, lj2, args.runs)
        cql, cql2 = t / "cql.pcap", t / "cql2.pcap"
        messages = bench_cql.write_capture(cql, 4, args.cql_connections, args.pairs)
        bench_cql.write_capture(cql2, 4, args.cql_connections, args.pairs * 2)
        print(f"cql: {messages:,} messages")
        bench("cql", cql, cql2, args.runs)


if __name__ == "__main__":
    main()
