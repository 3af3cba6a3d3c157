"""Throughput of `wirelog streams --json` (read + full TCP reassembly, in the native core) against tshark.

Generates a ~1M-packet capture (2,000 connections, 100–600-byte segments, ~2 % of adjacent segments
swapped), one twice as large (to show memory stays flat) and a copy with 5 % of its packets written
1–3 places late (the cost of causal ordering across directions), then runs
    wirelog streams --json FILE            (our reader + reassembler)
    wirelog convert FILE --to json         (the same plus detection and the NDJSON writer)
    tshark -r FILE -T fields -e tcp.stream (tshark's reader + TCP analysis, the peer)
on the same file, each several times (median), and prints packets/s, the ratios and peak RSS.
`--short N` adds captures of N/2 and N short connections (handshake, request, reply, FINs; 64 open
at a time): time must grow linearly with the number of connections and memory must stay bounded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from gen_capture import generate, reorder, short

# A child's ru_maxrss starts from its parent's RSS at fork (Linux keeps the pre-exec peak), so a bench
# process holding a big table would inflate every number: a small fresh interpreter starts the command
# and reports its wall time and peak RSS on the pipe whose fd is its first argument.
_LAUNCH = """
import os, sys, time
start = time.perf_counter()
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
os.write(int(sys.argv[1]), f"{os.waitstatus_to_exitcode(status)} {wall} {usage.ru_maxrss}".encode())
"""


def timed(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one command, output discarded."""
    read, write = os.pipe()
    argv = [sys.executable, "-S", "-c", _LAUNCH, str(write), shutil.which(cmd[0]) or cmd[0], *cmd[1:]]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(write,))
    os.close(write)
    with os.fdopen(read, "rb") as f:
        report = f.read().decode().split()
    proc.wait()
    if len(report) != 3 or report[0] != "0":
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return float(report[1]), int(report[2])


def core_only(records: str) -> list[str]:
    """The command of the engine decoding a capture (its path appended) with nothing kept in Python,
    records in form `records` (e.g. "summary", "report"): a floor for commands that print views."""
    code = (
        "import sys\n"
        "from wirelog.engine.local import Options, run\n"
        f"for _ in run([sys.argv[1]], options=Options(records={records!r})): pass\n"
    )
    return [sys.executable, "-c", code]


def measure(cmd: list[str], runs: int) -> tuple[float, int]:
    results = [timed(cmd) for _ in range(runs)]
    return statistics.median(r[0] for r in results), max(r[1] for r in results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--packets", type=int, default=1_000_000)
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--short", type=int, default=0, metavar="N", help="also N short connections")
    args = ap.parse_args()
    wirelog = [sys.executable, "-m", "wirelog.cli", "streams", "--json"]
    convert = [sys.executable, "-m", "wirelog.cli", "convert", "--to", "json"]
    tshark = shutil.which("tshark")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "bench.pcap"
        double = Path(tmp) / "bench2.pcap"
        n = generate(str(base), args.packets, args.connections)
        n2 = generate(str(double), args.packets * 2, args.connections, seed=2)  # twice the data
        print(
            f"capture: {n} packets, {base.stat().st_size / 1e6:.1f} MB "
            f"(Ethernet/IPv4/TCP, {args.connections} connections)"
        )
        ours, rss = measure([*wirelog, str(base)], args.runs)
        ours2, rss2 = measure([*wirelog, str(double)], 1)
        print(
            f"wirelog streams --json : {ours:6.2f} s  {n / ours:10,.0f} pkt/s  peak RSS {rss / 1024:6.1f} MiB"
        )
        print(
            f"  twice the capture    : {ours2:6.2f} s  {n2 / ours2:10,.0f} pkt/s  peak RSS {rss2 / 1024:6.1f} MiB"
        )
        conv, crss = measure([*convert, str(base)], args.runs)
        print(
            f"wirelog convert --to json: {conv:4.2f} s  {n / conv:10,.0f} pkt/s  peak RSS {crss / 1024:6.1f} MiB"
        )
        # Both directions reach the decoders in the order TCP's ACKs prove (tcp/causal.rs): what a
        # capture with 5 % of its packets written 1-3 places late costs against the same in order.
        late = Path(tmp) / "bench-reordered.pcap"
        reorder(str(base), str(late))
        rconv, rrss = measure([*convert, str(late)], args.runs)
        print(
            f"  5 % of packets late    : {rconv:4.2f} s  {n / rconv:10,.0f} pkt/s  peak RSS {rrss / 1024:6.1f} MiB"
            f"  ({rconv / conv:.2f}x the capture in order)"
        )
        if args.short:
            for count in (args.short // 2, args.short):
                path = Path(tmp) / f"short{count}.pcap"
                m = short(str(path), count)
                t, r = measure([*wirelog, str(path)], 1)
                print(
                    f"{count:,} short connections ({m:,} packets): {t:6.2f} s  "
                    f"{count / t:10,.0f} conn/s  peak RSS {r / 1024:6.1f} MiB"
                )
        if tshark:
            theirs, trss = measure([tshark, "-r", str(base), "-T", "fields", "-e", "tcp.stream"], args.runs)
            print(
                f"tshark -T fields       : {theirs:6.2f} s  {n / theirs:10,.0f} pkt/s  peak RSS {trss / 1024:6.1f} MiB"
            )
            print(f"ratio streams --json / tshark throughput: {theirs / ours:.2f}x")
            print(f"ratio convert --to json / tshark throughput: {theirs / conv:.2f}x")
        else:
            print("tshark not installed: no reference run")


if __name__ == "__main__":
    main()
