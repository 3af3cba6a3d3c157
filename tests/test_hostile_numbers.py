"""Wire numbers at integer limits through the CLI, as real processes (issue 29 item 2): a number
from a capture that used to overflow an addition or subtraction in the core (an `internal.panic`
that lost the rest of its stream) is a finding or is left out, and the stream decodes on."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.fault_helpers import WIRELOG
from tests.pcap_helpers import epb, idb, shb, tcp_conversation

# if_tsoffset in seconds that put a capture time at either end of i64 nanoseconds
EARLIEST, LATEST = -(2**63 // 10**9), 2**63 // 10**9

OPTIONS = bytes.fromhex("04 00 0007 05 00000000")
SUPPORTED = bytes.fromhex("84 00 0007 06 00000002 0000")


def _convert(path: Path) -> tuple[subprocess.CompletedProcess, list[dict]]:
    run = subprocess.run([*WIRELOG, "convert", str(path), "--to", "json"], capture_output=True, timeout=120)
    return run, [json.loads(line) for line in run.stdout.splitlines()]


def test_cql_latency_across_the_whole_time_range(tmp_path):
    """A pcapng whose two interfaces' time offsets put a CQL request at the start of the i64
    nanosecond range and its answer at the end (and the reverse): the answer's latency does not
    fit an i64. It was `internal.panic` ("attempt to subtract with overflow") and the records of
    the stream after it were lost; now the answer has no latency and the next pair has its own."""
    turns = [("c", OPTIONS), ("s", SUPPORTED), ("c", OPTIONS), ("s", SUPPORTED)]
    frames = tcp_conversation(turns, server=("10.1.0.9", 9042))
    sides = ["c", "s", *(side for side, _ in turns), "c", "s"]
    assert len(sides) == len(frames)
    for early, late in (("c", "s"), ("s", "c")):
        blocks = [shb(), idb(1, tsresol=9, tsoffset=EARLIEST), idb(1, tsresol=9, tsoffset=LATEST)]
        # the rest of the connection (the second pair 1 ms apart) is at ordinary times
        for i, (side, frame) in enumerate(zip(sides, frames, strict=True)):
            if i in (2, 3):
                blocks.append(epb(1 if side == late else 0, 0, frame))
            else:
                blocks.append(epb(0, 10**19 + i * 1_000_000, frame))
        path = tmp_path / f"latency-{early}.pcapng"
        path.write_bytes(b"".join(blocks))
        run, records = _convert(path)
        assert run.returncode == 0, run.stderr.decode()
        assert b"Traceback" not in run.stderr
        assert not [r for r in records if r.get("code") == "internal.panic"], records
        answers = [r for r in records if r.get("kind") == "supported"]
        assert len(answers) == 2, records
        assert "latency_ns" not in answers[0]
        assert answers[1]["latency_ns"] == 1_000_000
