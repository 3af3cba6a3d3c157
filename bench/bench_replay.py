"""`wirelog replay` to go-lumber's server on loopback (the real receiver, tests/peers/go, `make
peers`) against the target of issue #45: >= 100,000 events/s with acknowledged windows.

N Filebeat-shaped events from wirelog's own NDJSON (gen_replay.py), windows of 2048, zlib 3,
pipelining 2 (Filebeat's defaults), a fresh journal each run; the rate is the replay's own
`events_per_second` (events acknowledged over the send loop's time), median of the runs, and
the whole process's (start, reading, sending) beside it. On a shared machine both follow the load;
the events per CPU second of the replay process (its user + system time, the receiver on another
core) say what it does with a core of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from gen_replay import write_records

ROOT = Path(__file__).resolve().parent.parent
GOLUMBER = ROOT / "tests" / "peers" / "go" / "bin" / "golumber"
TARGET = 100_000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    if not GOLUMBER.is_file():
        print(f"{GOLUMBER} not built: run `make peers`", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "events.ndjson"
        write_records(src, args.events)
        server = subprocess.Popen([str(GOLUMBER), "server", "-addr", "127.0.0.1:0"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            port = json.loads(server.stdout.readline())["port"]
            drain = subprocess.Popen(["cat"], stdin=server.stdout, stdout=subprocess.DEVNULL)  # its reports
            loop, whole, per_cpu = [], [], []
            for run in range(args.runs):
                journal = Path(tmp) / f"journal{run}"
                started = time.monotonic()
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                done = subprocess.run(
                    [sys.executable, "-m", "wirelog.cli", "replay", str(src), "--to", f"lumberjack://127.0.0.1:{port}",
                     "--journal", str(journal), "--json"],
                    capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                )  # fmt: skip
                seconds = time.monotonic() - started
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
                s = json.loads(done.stdout.strip().splitlines()[-1])
                if done.returncode or s["acknowledged"] != args.events:
                    print(f"run {run}: status {done.returncode}: {done.stderr.strip()}", file=sys.stderr)
                    return 1
                loop.append(s["events_per_second"])
                whole.append(args.events / seconds)
                per_cpu.append(args.events / cpu)
        finally:
            server.stdin.close()
            server.wait(timeout=10)
            drain.wait(timeout=10)
    rate = statistics.median(loop)
    verdict = "met" if rate >= TARGET else "MISSED"
    print(f"replay to go-lumber, {args.events:,} events x {args.runs}: {rate:,.0f} events/s in the send loop "
          f"(runs: {', '.join(f'{r:,}' for r in loop)}), {statistics.median(whole):,.0f}/s with process start; "
          f"target >= {TARGET:,}: {verdict} (load average {os.getloadavg()[0]:.1f}); "
          f"{statistics.median(per_cpu):,.0f} events per CPU second of the whole replay process")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
