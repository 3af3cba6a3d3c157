"""Helpers for tests that run wirelog as a real process in a hostile environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "lumberjack-pylogbeat.pcap"
WIRELOG = [sys.executable, "-m", "wirelog.cli"]
FORMATS = {"json": ".ndjson", "parquet": ".parquet", "hercules": ".bin"}  # convert's suffixes
PREVIOUS = b"the previous output\n"  # what an output file held before a run that fails


def wirelog(*args: str, **kw) -> subprocess.CompletedProcess:
    """One run of `python -m wirelog.cli ARGS`, stdout and stderr captured."""
    return subprocess.run([*WIRELOG, *args], capture_output=True, timeout=300, **kw)


def leftovers(directory: Path) -> list[str]:
    """Every temporary file or parts directory of wirelog under `directory`."""
    return sorted(str(p.relative_to(directory)) for p in directory.rglob(".wirelog-*"))
