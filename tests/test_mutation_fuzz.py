"""Real captures with random byte flips through the whole pipeline: findings, never an exception.

`decoder.internal-error` is the engine's safety net for decoder bugs; a mutated capture must never
reach it (this fuzzer found a crash on bytes a stream flushes as it ends)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import CAPTURES, REPO
from wirelog.engine.local import Options, run
from wirelog.model import Finding

SOURCES = sorted(
    p
    for p in [
        *CAPTURES.glob("**/*.pcap"),
        *(REPO / "tests" / "data").glob("**/*.pcap"),
        *REPO.glob("examples/*.pcap"),
    ]
    if p.stat().st_size < 64 * 1024
)
DATA = {p: p.read_bytes() for p in SOURCES}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(SOURCES),
    flips=st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=24
    ),
    cut=st.one_of(st.none(), st.floats(0.3, 1)),
)
def test_mutated_captures_give_findings_not_crashes(tmp_path_factory, source: Path, flips, cut):
    data = bytearray(DATA[source])
    for where, value in flips:
        data[24 + int(where * (len(data) - 24))] = value  # keep the file header, flip anything else
    if cut is not None:
        del data[int(cut * len(data)) :]
    path = tmp_path_factory.mktemp("mut") / "m.pcap"
    path.write_bytes(bytes(data))
    crashes = [
        i
        for i in run([str(path)], (), Options())
        if isinstance(i, Finding) and i.code == "decoder.internal-error"
    ]
    assert crashes == []
