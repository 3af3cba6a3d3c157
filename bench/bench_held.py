"""Memory and CPU of events held for their fate (docs/protocols/lumberjack.md: an event is emitted
once its window is acknowledged or its connection ends), in three Lumberjack shapes of the same
~1M events, each also twice as long:

    acked    every window acknowledged, connections closed
    lost     7 of 8 connections never acknowledged, connections closed (FIN both ways)
    stalled  nothing acknowledged, nothing closed (a stalled Logstash: held to the capture's end)

`wirelog convert FILE --to json` on each; prints peak RSS, CPU and each shape's CPU per event against
the acknowledged one's (the same packets carry more events when no ACK takes their place) (issue
targets: RSS <= 300 MB and flat when the capture doubles, unacknowledged shapes <= 1.3x the
acknowledged CPU).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from gen_capture import generate

SHAPES = {"acked": (1, True), "lost": (8, True), "stalled": (0, False)}


def run(path: Path) -> tuple[float, int, int]:
    """CPU seconds (user + sys), peak RSS (KiB) and event records of one conversion."""
    out = path.with_suffix(".ndjson")
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 2)
        convert = ["convert", str(path), "--to", "json", "-o", str(out)]
        os.execv(sys.executable, [sys.executable, "-m", "wirelog.cli", *convert])
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"convert {path} failed")
    with out.open("rb") as f:
        events = sum(line.count(b'"kind":"event"') for line in f)
    out.unlink()
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss, events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--packets", type=int, default=100_000, help="~1M events at the default")
    ap.add_argument("--connections", type=int, default=400)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base_cpu = None
        for shape, (ack_every, close) in SHAPES.items():
            for scale in (1, 2):
                path = Path(tmp) / f"{shape}-{scale}.pcap"
                generate(str(path), args.packets * scale, args.connections, 1, "lumberjack", ack_every, close)
                cpu, rss, events = run(path)
                path.unlink()
                per_event = cpu / max(events, 1)
                if scale == 1 and base_cpu is None:
                    base_cpu = per_event
                ratio = f"{per_event / base_cpu:.2f}x acked per event" if base_cpu else ""
                print(
                    f"{shape:8} x{scale}: {events:8} events  CPU {cpu:6.2f} s  "
                    f"peak RSS {rss / 1024:7.1f} MiB  {ratio}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
