"""Old code against new code on the same captures, alternated: what a change to a shared path costs.

    git worktree add ../old REV && (cd ../old/native && cargo build --release --features python) \\
        && cp ../old/native/target/release/lib_core.so ../old/wirelog/_core.abi3.so
    .venv/bin/python bench/bench_ab.py ../old [--runs 5] [--only cql] [--instructions [--scale 0.05]]

Generates one capture per protocol with the other benches' generators (Lumberjack and Log Courier
windows of Filebeat-shaped events, CQL v4 QUERY/RESULT pairs, Hercules Gate requests), then runs each
job with the old tree and this one in turn (`PYTHONPATH=<tree> python -m wirelog.cli ...`, the same
interpreter and packages), alternating which goes first, and prints the median CPU time (user + sys)
and wall time of each and their ratio. CPU time because this machine drifts ±10 % in wall time;
still run it on a quiet machine and read ratios within ±0.05 as noise.

`--instructions` counts instead of timing: each tree runs each job once under valgrind's callgrind,
counting only inside the core's Python entry points (`__pymethod_*`: feeding, finishing, taking
records), and the ratio is of those counts. The counts repeat within 0.1 % (the core's hash seeds
are random), so a change of 1 % shows where timing needs dozens of alternated runs (this machine has
no hardware counters for `perf stat`); a few tenths of a percent either way is code layout (which
functions the compiler inlines where) as often as the change. They are instructions, not time: callgrind counts each step of a `rep movsb`/`rep stosb`
copy or fill as one, so a change to large copies weighs more here than in time; confirm a gain by
timing. Under callgrind a run takes ~50x as long: `--scale` shrinks every capture (0.05 runs the
whole set in a few minutes).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_cql
import bench_hercules
import bench_lumberjack

NEW = Path(__file__).resolve().parents[1]


def _n(full: int, scale: float) -> int:
    return max(1, round(full * scale))


# Each protocol's capture at `scale` (its windows, pairs or requests per connection).
CAPTURES = {
    "lumberjack": lambda p, scale: bench_lumberjack.write_capture(p, "lumberjack", 40, _n(75, scale), 512),
    "courier": lambda p, scale: bench_lumberjack.write_capture(p, "courier", 40, _n(75, scale), 512),
    "cql": lambda p, scale: bench_cql.write_capture(p, 4, 250, _n(1000, scale)),
    "hercules": lambda p, scale: bench_hercules.write_capture(p, 100, _n(50, scale), 100),
}

JOBS = [
    ("lumberjack", "convert {} --events --to json -o /dev/null"),
    ("lumberjack", "convert {} --to parquet -o {out}"),
    ("courier", "convert {} --events --to json -o /dev/null"),
    ("courier", "convert {} --to parquet -o {out}"),
    ("cql", "convert {} --to json -o /dev/null"),
    ("cql", "convert {} --to parquet -o {out}"),
    ("hercules", "convert {} --to json -o /dev/null"),
    ("hercules", "convert {} --to hercules -o /dev/null"),
    ("lumberjack", "inspect --json {}"),
]


def run(tree: Path, args: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of wirelog from `tree`."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "wirelog.cli", *args],
        env=env,
        # `-m` puts the working directory first on sys.path: run from a checkout, it would shadow
        # PYTHONPATH and both trees would run that checkout's code
        cwd=tempfile.gettempdir(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{tree}: wirelog {' '.join(args)} failed: {done.stderr.decode()[-500:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return cpu, wall


def instructions(tree: Path, args: list[str]) -> int:
    """Instructions executed inside the core's Python entry points in one run of wirelog from `tree`
    (callgrind; Python's start-up and imports, the same for both trees, are left out)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--collect-atstart=no",
                "--toggle-collect=*__pymethod_*",
                f"--callgrind-out-file={tmp}/callgrind.out",
                sys.executable,
                "-m",
                "wirelog.cli",
                *args,
            ],
            env=env,
            cwd=tmp,  # as in `run`: the working directory must not shadow PYTHONPATH
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    collected = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or collected is None:
        sys.exit(f"{tree}: callgrind of wirelog {' '.join(args)} failed: {done.stderr[-500:]}")
    return int(collected.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path, help="the old tree (a worktree with its core built in wirelog/)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default="", help="jobs whose text contains this")
    ap.add_argument(
        "--instructions", action="store_true", help="count the core's instructions (callgrind), once a tree"
    )
    ap.add_argument(
        "--scale", type=float, default=1.0, help="every capture's size, as a share of the default"
    )
    args = ap.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        sys.exit("--instructions needs valgrind (Debian: apt-get install valgrind)")
    trees = {"old": args.old.resolve(), "new": NEW}
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "out.parquet")
        for protocol, cmd in JOBS:
            if args.only not in f"{protocol} {cmd}":
                continue
            pcap = Path(tmp) / f"{protocol}.pcap"
            if not pcap.exists():
                CAPTURES[protocol](pcap, args.scale)
            job = cmd.format(pcap, out=out).split()
            label = cmd.split(" {}")[0] + cmd.split("{}")[1].split(" -o")[0]
            if args.instructions:
                count = {n: instructions(trees[n], job) for n in ("old", "new")}
                print(
                    f"{protocol:10} {label:32} instructions old {count['old'] / 1e6:9.1f} M"
                    f" new {count['new'] / 1e6:9.1f} M ({count['new'] / count['old']:6.4f}x)",
                    flush=True,
                )
                continue
            times: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
            for i in range(args.runs):
                for name in ("old", "new") if i % 2 == 0 else ("new", "old"):
                    times[name].append(run(trees[name], job))
            cpu = {n: statistics.median(t[0] for t in v) for n, v in times.items()}
            wall = {n: statistics.median(t[1] for t in v) for n, v in times.items()}
            print(
                f"{protocol:10} {label:32}"
                f" CPU old {cpu['old']:6.2f} s new {cpu['new']:6.2f} s ({cpu['new'] / cpu['old']:4.2f}x)"
                f"  wall old {wall['old']:6.2f} s new {wall['new']:6.2f} s ({wall['new'] / wall['old']:4.2f}x)",
                flush=True,
            )


if __name__ == "__main__":
    main()
