"""A live capture on stdin (`tcpdump -U -w - | wirelog convert - | jq`): records reach stdout as their
packets arrive, not when the capture ends or a buffer fills."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time

from tests.conftest import REPO

EXAMPLE = (REPO / "examples" / "lumberjack-pylogbeat.pcap").read_bytes()
GUARD_S = 60  # only a guard against hanging: the test waits for lines, it does not time them


def read_records(proc: subprocess.Popen, until) -> list[dict]:
    """Lines of `proc`'s stdout as records, read until `until(records)` holds (stdin stays open)."""
    records: list[dict] = []
    pending = b""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + GUARD_S
    while not until(records):
        assert time.monotonic() < deadline, f"no more output while the capture is open; got {records}"
        if not sel.select(timeout=1):
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        assert chunk, "wirelog ended before its input did"
        pending += chunk
        *lines, pending = pending.split(b"\n")
        records += [json.loads(line) for line in lines]
    assert pending == b""
    return records


def events(records: list[dict]) -> int:
    return sum(r.get("kind") == "event" for r in records)


def test_records_arrive_while_the_capture_is_still_being_written():
    proc = subprocess.Popen(
        [sys.executable, "-m", "wirelog.cli", "convert", "-", "--to", "json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # first the capture up to the middle of a packet record, as a pipe delivers it
        half = len(EXAMPLE) // 2
        proc.stdin.write(EXAMPLE[:half])
        proc.stdin.flush()
        first = read_records(proc, lambda rs: events(rs) > 0)
        assert proc.poll() is None and 0 < events(first) < 9
        proc.stdin.write(EXAMPLE[half:])
        proc.stdin.flush()
        more = read_records(proc, lambda rs: events(first) + events(rs) == 9)
        assert proc.poll() is None  # every event is out, and the input is still open
        proc.stdin.close()
        rest = proc.stdout.read()
        assert proc.wait(timeout=GUARD_S) == 0, proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    records = first + more + [json.loads(line) for line in rest.splitlines()]
    assert [r["seq"] for r in records if r.get("kind") == "event"] == list(range(1, 10))
    assert all(r["acked"] for r in records if r.get("kind") == "event")
