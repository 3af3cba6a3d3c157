"""`wirelog replay` at scale, to go-lumber's server (the real receiver): the speed floor, and
memory that does not grow with the number of events (issue #45, item 5).

The input is wirelog's own NDJSON of Filebeat-shaped never-acknowledged events
(bench/gen_replay.py). The floor is far under the target (>= 100,000 events/s on a quiet machine,
bench/bench_replay.py prints the rate against it) so that it holds on a loaded CI machine; a
replay that lost its window pipelining or encoded per event in Python falls under it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from go_peer_helpers import require_golumber
from replay_helpers import KillableGoServer, replay_cmd, replay_env, summary

from bench.gen_replay import event_ids, write_records

FLOOR = 30_000  # events/s acknowledged, in the send loop (`events_per_second`)
SPEED_EVENTS = 50_000
N = SPEED_EVENTS  # the memory test's runs: N events, then 4N
GROWTH_KIB = 4096  # peak RSS of 4N may exceed that of N by this much (the journal's ids of 3N
# more events held in memory, as they were, are ~13 MiB; the index's page cache is 2 MiB)


@pytest.fixture(autouse=True)
def _golumber() -> None:
    require_golumber()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    where = tmp_path_factory.mktemp("scale")
    out = {}
    for n in (N, 4 * N):
        out[n] = where / f"{n}.ndjson"
        write_records(out[n], n)
    return out


# Runs the command given and writes its peak RSS (KiB) on stderr. A process's ru_maxrss counts
# what it had before exec, i.e. what it inherited from the process that forked it: a small
# wrapper forks the replay, so the figure is the replay's and not the test process's.
PEAK_RSS = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
sys.stderr.write(f"{usage.ru_maxrss}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def replay_rss(*args: str) -> tuple[int, dict, int]:
    """(status, --json summary, peak RSS in KiB) of `wirelog replay ARGS` in its own process."""
    done = subprocess.run([sys.executable, "-c", PEAK_RSS, *replay_cmd(*args, "--json")], capture_output=True,
                          text=True, env=replay_env(), timeout=300)  # fmt: skip
    return done.returncode, summary(done.stdout), int(done.stderr.split()[-1])


def test_replay_is_over_the_speed_floor(inputs: dict[int, Path], tmp_path: Path) -> None:
    with KillableGoServer(keep=False) as server:
        code, s, _ = replay_rss(str(inputs[N]), "--to", f"lumberjack://127.0.0.1:{server.port}",
                                "--journal", str(tmp_path / "journal"))  # fmt: skip
    assert code == 0, s
    assert s["acknowledged"] == s["selected"] >= SPEED_EVENTS
    rate = s["events_per_second"]
    print(
        f"replay to go-lumber: {rate:,} events/s ({s['acknowledged']:,} events, floor {FLOOR:,}, target 100,000)"
    )
    assert rate >= FLOOR


def test_memory_is_flat_in_the_number_of_events(inputs: dict[int, Path], tmp_path: Path) -> None:
    """A replay of N events and of 4N (its journal growing to N and 4N ids), then a rerun of each
    against that journal (every event already in it: the ids read back, none sent): the peak RSS
    of 4N stays within GROWTH_KIB of N's."""
    sent, rerun = {}, {}
    with KillableGoServer(keep=False) as server:
        to = f"lumberjack://127.0.0.1:{server.port}"
        for n, src in inputs.items():
            journal = tmp_path / f"{n}.journal"
            code, s, sent[n] = replay_rss(str(src), "--to", to, "--journal", str(journal))
            assert code == 0 and s["acknowledged"] == n, s
            ids = [x for x in journal.read_text().splitlines() if not x.startswith("#")]
            assert sorted(ids) == sorted(event_ids(n))
            code, s, rerun[n] = replay_rss(str(src), "--to", to, "--journal", str(journal))
            assert code == 0 and (s["already_in_journal"], s["sent"], s["connections"]) == (n, 0, 0), s
    print(f"peak RSS KiB: sent {sent}, rerun {rerun}")
    assert sent[4 * N] - sent[N] <= GROWTH_KIB
    assert rerun[4 * N] - rerun[N] <= GROWTH_KIB
