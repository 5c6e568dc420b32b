"""Shared fixtures: the real data folder (tests skip when it is absent) and small matrices."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

SHARED_DATA = Path(
    os.environ.get(
        "MICROBENCH_SHARED_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    )
).resolve()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ``../shared/data``; skips the test with the reason when it is missing."""
    if not (SHARED_DATA / "README.md").exists():
        pytest.skip(
            f"real data not found at {SHARED_DATA} (set MICROBENCH_SHARED_DATA): real-data test"
        )
    return SHARED_DATA
