"""Shared test fixtures: where ../shared is, and a skip when it is absent (a user's clone)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CAPTURES = SHARED / "captures"


def shared_capture(relative: str) -> Path:
    """Path of a capture under ../shared/captures, or skip the test when it is not there."""
    path = CAPTURES / relative
    if not path.exists():
        pytest.skip(f"../shared/captures/{relative} not available")
    return path
