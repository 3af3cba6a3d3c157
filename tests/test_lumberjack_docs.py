"""Every finding code the Lumberjack decoder can emit is documented, and every documented one exists."""

from __future__ import annotations

import re
from pathlib import Path

from wirelog.engine.delivery import CODES

REPO = Path(__file__).resolve().parents[1]
SOURCE = "\n".join(p.read_text() for p in sorted((REPO / "wirelog" / "decoders" / "lumberjack").glob("*.py")))
SOURCE += (REPO / "wirelog" / "engine" / "delivery.py").read_text()  # the capture-level delivery verdict
DOC = (REPO / "docs" / "protocols" / "lumberjack.md").read_text()


def test_codes_documented_both_ways():
    documented = set(re.findall(r"^\| `lumberjack\.([a-z0-9-]+)` \|", DOC, re.M))
    emitted = set(re.findall(r"(?:finding|FrameError|SeqIssue)\(\s*\"([a-z0-9-]+)\"", SOURCE))
    emitted |= set(re.findall(r"Inflated\([^)]*\"([a-z-]+)\"", SOURCE))
    emitted |= set(CODES)
    assert emitted, "no codes found: the pattern is stale"
    assert emitted <= documented, emitted - documented
    assert all(f'"{code}"' in SOURCE for code in documented), [
        c for c in documented if f'"{c}"' not in SOURCE
    ]
