"""The table forms at 50,000 and 200,000 connections, against `streams --json` (issue 44 item 2).

For each N of --connections (default 50,000 and 200,000) writes a capture of N short connections
(gen_capture.short, as bench_report_streams.py) and prints wall time and peak RSS of
`wirelog streams --json` (the reader and reassembler, the core writing NDJSON), `wirelog streams`
(the table), `wirelog inspect` (one screen: the worst streams and the others folded) and
`wirelog inspect --all` (every stream), each with its ratio to `streams --json` (targets: <= 3x,
<= 300 MB): the median wall time of `--runs` rounds, each running every command once in turn
(this machine's single runs vary by up to 40 %, in spells that would hit one form's runs only). Then `inspect --stream 0` on one long Lumberjack stream (--messages, default ~300,000):
time, RSS and lines (its rows go out as they come, in frame order, from a bounded heap).

Before (Rich tables measuring every cell), 50,000 connections: `streams` 73.5 s, `inspect` 71.5 s,
410-589 MiB, `streams --json` 0.6 s; `inspect --stream N` on 325,014 messages killed at 60 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_streams import core_only, measure, timed
from gen_capture import generate, short

WIRELOG = [sys.executable, "-m", "wirelog.cli"]
FORMS = (["streams"], ["inspect"], ["inspect", "--all"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--connections", type=int, nargs="+", default=[50_000, 200_000])
    ap.add_argument("--messages", type=int, default=300_000, help="events of the long stream (about)")
    ap.add_argument("--keep", help="directory to keep (and reuse) the captures in")
    ap.add_argument("--runs", type=int, default=3, help="runs of each command (their median is shown)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(args.keep or tmp)
        os.environ.setdefault("COLUMNS", "120")
        for n in args.connections:
            pcap = where / f"short{n}.pcap"
            if not pcap.exists():
                short(str(pcap), n)
            commands = {
                "streams --json": [*WIRELOG, "streams", "--json", str(pcap)],
                "(core decoding)": [*core_only("summary"), str(pcap)],
                **{" ".join(form): [*WIRELOG, *form, str(pcap)] for form in FORMS},
            }
            runs: dict[str, list[tuple[float, int]]] = {name: [] for name in commands}
            for _ in range(args.runs):  # alternated: the machine's slow spells hit every form alike
                for name, cmd in commands.items():
                    runs[name].append(timed(cmd))
            (base, base_rss), *_ = (_median(r) for r in runs.values())
            print(f"{n:,} short connections ({pcap.stat().st_size / 1e6:.0f} MB):")
            print(f"  {'streams --json':16}: {base:6.2f} s  peak RSS {base_rss / 1024:6.1f} MiB")
            core, core_rss = _median(runs["(core decoding)"])
            print(
                f"  {'(core decoding)':16}: {core:6.2f} s  peak RSS {core_rss / 1024:6.1f} MiB  "
                f"{core / base:5.2f}x streams --json (inspect's floor)"
            )
            for form in FORMS:
                seconds, rss = _median(runs[" ".join(form)])
                print(
                    f"  {' '.join(form):16}: {seconds:6.2f} s  peak RSS {rss / 1024:6.1f} MiB  "
                    f"{seconds / base:5.2f}x streams --json (<= 3x: {seconds <= 3 * base}, "
                    f"<= 300 MB: {rss * 1024 <= 300e6})",
                    flush=True,
                )
        long = where / f"long{args.messages}.pcap"
        if not long.exists():  # one connection, ~40 events a window, every window acknowledged
            generate(str(long), args.messages // 9, 1, 1, "lumberjack")
        seconds, rss = measure([*WIRELOG, "inspect", "--stream", "0", str(long)], 1)
        lines = subprocess.run(
            [*WIRELOG, "inspect", "--stream", "0", str(long)], capture_output=True, check=True
        ).stdout.count(b"\n")
        print(
            f"inspect --stream 0 on one stream of {lines - 1:,} records: {seconds:6.2f} s  "
            f"peak RSS {rss / 1024:6.1f} MiB"
        )


def _median(results: list[tuple[float, int]]) -> tuple[float, int]:
    """The median wall time of a command's runs, and their highest peak RSS."""
    return statistics.median(r[0] for r in results), max(r[1] for r in results)


if __name__ == "__main__":
    main()
