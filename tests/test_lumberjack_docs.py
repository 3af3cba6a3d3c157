"""Every finding code the Lumberjack decoder (native core) and the delivery verdict can emit is
documented, and every documented one exists in their sources."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DECODERS = REPO / "native" / "src" / "decoders"
SOURCE = "\n".join(
    p.read_text()
    for p in [*sorted((DECODERS / "lumberjack").glob("*.rs")), DECODERS / "delivery.rs"]
    if p.name not in ("tests.rs", "fuzz.rs")
)
DOC = (REPO / "docs" / "protocols" / "lumberjack.md").read_text()


def test_codes_documented_both_ways():
    documented = set(re.findall(r"^\| `lumberjack\.([a-z0-9-]+)` \|", DOC, re.M))
    emitted = set(re.findall(r"\"lumberjack\.([a-z0-9-]+)\"", SOURCE))
    assert len(emitted) > 20, "no codes found: the pattern is stale"
    assert emitted == documented, (emitted - documented, documented - emitted)
