"""`wirelog report` on many short connections: the page stays bounded and memory flat.

Writes captures of N short connections (gen_capture.short: handshake, a 200-byte request, a
300-byte reply, FINs; 64 open at a time) for each N of --connections (default 50,000, 100,000 and 200,000)
and prints, for each, the report's wall time, peak RSS and page size (target: <= 5 MB whatever N),
beside `wirelog streams --json` on the same capture (the reader and reassembler alone) and the
core's own share (the same pipeline run with no summary, no fold, no page).

The report folds the stream list (export/report/streams.py): the 100 worst streams are rows, the
others are counted with the command that lists them. Before the fold, the page held every stream:
17.5 MB and 222 MiB at 50,000 connections, 66.5 MB and 683 MiB at 200,000
(after: 1.34 MB and 89 MiB, 1.34 MB and 179 MiB, of which the core 58 and 117 MiB). With the
timeline's lanes folded as connections end (native/src/report/lanes.rs) and the stream ids seen
kept as bits: 1.25 MB and 76.7 MiB, 1.26 MB and 102.8 MiB (1.34x), of which the core 48.8 and
58.9 MiB (reassembly alone grows as much: `streams --json` 43.4 and 57.6 MiB). With each block of
streams folded once its streams are settled (StreamInfo.settled) instead of at the end of the input:
71.9 and 81.9 MiB (1.14x), of which the core 48.7 and 64.6 MiB; the core's own RSS, sampled along
one run of 200,000, rises to ~75,000 connections (41.5 MiB in summary form) and is flat after.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_streams import core_only, measure
from gen_capture import short

WIRELOG = [sys.executable, "-m", "wirelog.cli"]
MAX_PAGE = 5 * 1024 * 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--connections", type=int, nargs="+", default=[50_000, 100_000, 200_000])
    args = ap.parse_args()
    first_rss = None
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.connections:
            pcap = Path(tmp) / f"short{n}.pcap"
            page = pcap.with_suffix(".html")
            packets = short(str(pcap), n)
            seconds, rss = measure([*WIRELOG, "report", str(pcap), "-o", str(page)], 1)
            size = page.stat().st_size
            streams, streams_rss = measure([*WIRELOG, "streams", "--json", str(pcap)], 1)
            _, core_rss = measure([*core_only("report"), str(pcap)], 1)
            page.unlink()
            first_rss = first_rss or (n, rss)
            print(f"{n:,} short connections ({packets:,} packets, {pcap.stat().st_size / 1e6:.0f} MB):")
            print(
                f"  wirelog report        : {seconds:6.2f} s  peak RSS {rss / 1024:6.1f} MiB  "
                f"page {size / 1e6:5.2f} MB (<= 5 MB: {size <= MAX_PAGE})"
            )
            print(f"  of which the core     :           peak RSS {core_rss / 1024:6.1f} MiB")
            print(f"  wirelog streams --json: {streams:6.2f} s  peak RSS {streams_rss / 1024:6.1f} MiB")
            if first_rss[0] != n:
                print(
                    f"  RSS / RSS at {first_rss[0]:,}: {rss / first_rss[1]:.2f}x for {n / first_rss[0]:.0f}x the connections"
                )


if __name__ == "__main__":
    main()
