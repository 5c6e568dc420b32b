"""Shared fixtures: the real data folder (tests skip when it is absent) and small matrices."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lmeval_microbench.responses import ResponseMatrix

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


def _flat(flat_everywhere: bool) -> tuple[ResponseMatrix, np.ndarray]:
    """60 models whose scores (not the matrix mean) span 0.3-0.7; the stronger half answers at
    its score, the weaker half (or every model) half of the items right whatever its score:
    among them the matrix mean does not move with the score."""
    rng = np.random.default_rng(0)
    score = np.sort(rng.uniform(0.3, 0.7, 60))
    values = (rng.random((60, 80)) < score[:, None]).astype(float)
    flat = np.ones(60, bool) if flat_everywhere else score < np.median(score)
    values[flat] = rng.permuted(np.tile(np.arange(80) % 2, (int(flat.sum()), 1)), axis=1)
    ids = [f"f.{k}" for k in range(80)]
    return ResponseMatrix(values, [f"m{k}" for k in range(60)], ids, source="flat.csv"), score


@pytest.fixture(scope="session")
def flat_below() -> tuple[ResponseMatrix, np.ndarray]:
    """Models and scores where the weaker half's matrix means do not move with their scores."""
    return _flat(False)


@pytest.fixture(scope="session")
def flat_everywhere() -> tuple[ResponseMatrix, np.ndarray]:
    """Models and scores where no model's matrix mean moves with its score."""
    return _flat(True)


@pytest.fixture(scope="session")
def coin_flip_pool() -> tuple[Any, np.ndarray, np.ndarray]:
    """A 30-item pool with chance 0.5 and its max-information runs (20 items) on 20 ordinary
    models and 20 coin-flip responders (answers independent of the items): the pool state,
    the answers and the order each run asked its items in."""
    from lmeval_microbench.adaptive import build_pool, pool_state
    from lmeval_microbench.adaptive.selection import MaxInfoSelector
    from lmeval_microbench.adaptive.simulate import replay
    from lmeval_microbench.synthetic import random_item_params, simulate_responses

    params = random_item_params(30, seed=3)
    matrix, _ = simulate_responses(params, 200, seed=4)
    bundle = build_pool(matrix, matrix.mean_scores(), name="p", benchmark="toy", chance=0.5)
    pool = pool_state(bundle)
    ordinary, _ = simulate_responses(params, 20, seed=5)
    positions = ordinary.item_positions(list(pool.item_ids))
    coins = np.random.default_rng(6).integers(0, 2, size=(20, len(positions))).astype(float)
    values = np.vstack([ordinary.values[:, positions], coins])
    result = replay(pool.params, values, selector=MaxInfoSelector(), max_items=20)
    return pool, values, result.order
