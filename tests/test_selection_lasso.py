"""The lasso-path selector: which items it keeps, in which order, and what it buys on MuSR."""

from pathlib import Path

import numpy as np
import pytest

from lmeval_microbench.build import build_bundle
from lmeval_microbench.crossfit import needs_cross_fit
from lmeval_microbench.estimators import estimator_from_state
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import make_selector
from lmeval_microbench.selection.lasso import path_order

V2 = Path(__file__).resolve().parents[2] / "shared" / "data" / "openllm_v2" / "responses"


def _columns(seed: int = 0, n_models: int = 80) -> tuple[np.ndarray, np.ndarray]:
    """Six noise columns and two that make up the target (columns 2 and 5)."""
    rng = np.random.default_rng(seed)
    columns = (rng.random((n_models, 8)) < 0.5).astype(float)
    target = 0.7 * columns[:, 2] + 0.3 * columns[:, 5]
    return columns, target


def test_path_keeps_the_columns_the_target_is_made_of():
    columns, target = _columns()
    assert path_order(columns, target, 1).tolist() == [2]
    assert sorted(path_order(columns, target, 2).tolist()) == [2, 5]


def test_path_fills_the_budget_with_distinct_columns_constant_ones_last():
    columns, target = _columns()
    columns[:, 0] = 1.0
    order = path_order(columns, target, 8)
    assert sorted(order.tolist()) == list(range(8))
    assert order[-1] == 0
    assert order[:2].tolist() == [2, 5]


def test_selector_ranges_over_items_with_missing_scores():
    columns, target = _columns(1)
    values = columns.copy()
    values[::7, 3] = np.nan
    source = ResponseMatrix(values, [f"m{k}" for k in range(80)], [f"i{k}" for k in range(8)])
    subset = make_selector("lasso").select(source, 2, seed=0, target=target)
    assert set(subset.item_ids) == {"i2", "i5"}
    assert subset.info["pick_order"][0] == "i2"
    assert needs_cross_fit(make_selector("lasso"), source)


@pytest.mark.slow
@pytest.mark.skipif(not V2.is_dir(), reason=f"needs the real MuSR matrix at {V2}")
def test_lasso_items_beat_random_items_for_kridge_on_heldout_musr_models():
    import pandas as pd

    frame = pd.read_parquet(V2 / "musr.parquet")
    values = frame.to_numpy(dtype=float)
    values = values[~np.isnan(values).any(axis=1)]
    truth = values.mean(axis=1)
    order = np.random.default_rng(0).permutation(values.shape[0])
    held, kept = order[:70], order[70:]
    ids = [str(c) for c in frame.columns]
    source = ResponseMatrix(values[kept], [f"m{k}" for k in kept], ids)
    target = ResponseMatrix(values[held], [f"m{k}" for k in held], ids)

    def heldout_mae(method: str, seed: int) -> float:
        bundle = build_bundle(
            source,
            truth[kept],
            name="t",
            benchmark="musr",
            method=method,
            budget=50,
            seed=seed,
            estimators=["kridge"],
            default_estimator="kridge",
        )
        fitted = estimator_from_state(bundle.estimator_state())
        value = fitted.estimate_matrix(target.select_items(bundle.item_ids))[0]
        return float(np.mean(np.abs(value - truth[held])))

    random_mae = np.mean([heldout_mae("random", seed) for seed in range(3)])
    assert heldout_mae("lasso", 0) < 0.85 * random_mae
