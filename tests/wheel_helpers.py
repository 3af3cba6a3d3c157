"""The wheel `make wheel` builds (dist/), for the tests that install it or ship it to executors."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def built_wheel() -> Path:
    """dist/'s wheel, rebuilt by `make wheel` when the sources are newer (a no-op after `make test`'s)."""
    done = subprocess.run(["make", "-s", "wheel"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, f"make wheel failed:\n{done.stdout}\n{done.stderr}"
    [wheel] = sorted((ROOT / "dist").glob("wirelog-*.whl"))
    return wheel
