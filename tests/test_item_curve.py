"""The IRT estimators on a large benchmark read the all-item means off a grid: same answers."""

from __future__ import annotations

import numpy as np
import pytest

from lmeval_microbench.estimators import _item_curve, make_estimator
from lmeval_microbench.estimators._item_curve import ItemCurve
from lmeval_microbench.irt import ItemParams
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.subset import Subset


def _params(n_items: int, seed: int = 0) -> ItemParams:
    rng = np.random.default_rng(seed)
    ids = tuple(f"i{k}" for k in range(n_items))
    a = rng.uniform(0.3, 3.0, (n_items, 1))
    return ItemParams(ids, a, rng.normal(0, 2, n_items), np.full(n_items, 0.2), np.ones(n_items))


def test_small_benchmarks_and_several_dimensions_keep_exact_sums():
    assert ItemCurve.of(_params(_item_curve.MIN_ITEMS - 1)) is None
    wide = _params(_item_curve.MIN_ITEMS)
    two_dims = ItemParams(wide.item_ids, np.hstack([wide.a, wide.a]), wide.d, wide.g, wide.u)
    assert ItemCurve.of(two_dims) is None
    assert ItemCurve.of(wide) is not None


def test_the_curve_matches_the_exact_means_inside_and_beyond_the_grid():
    params = _params(3000)
    curve = ItemCurve.of(params)
    theta = np.array([[-9.5], [-3.21], [0.0], [0.1234], [2.7], [5.99], [8.5]])
    mean_p, mean_slope = curve.read(params, theta)
    exact_p = params.probability(theta).mean(axis=1)
    exact_slope = _item_curve.mean_slope_exact(params, theta)
    assert np.max(np.abs(mean_p - exact_p)) < 1e-5
    assert np.max(np.abs(mean_slope - exact_slope)) < 1e-4
    # beyond the grid: exact
    assert mean_p[0] == exact_p[0] and mean_p[-1] == exact_p[-1]


@pytest.mark.parametrize("name", ["irt", "pirt", "gpirt", "calibrated"])
def test_irt_estimators_give_the_exact_estimates_on_a_large_benchmark(name, monkeypatch):
    params = _params(2500, seed=1)
    rng = np.random.default_rng(2)
    theta = rng.normal(0, 1, (150, 1))
    values = (rng.random((150, params.n_items)) < params.probability(theta)).astype(float)
    source = ResponseMatrix(values, [f"m{k}" for k in range(150)], list(params.item_ids))
    chosen = tuple(params.item_ids[k] for k in rng.choice(params.n_items, 40, replace=False))
    subset = Subset(chosen, np.full(40, 1 / 40), "random")
    truth = values.mean(axis=1)
    rows = source.select_items(list(chosen)).values[:20].copy()
    rows[:5, :10] = np.nan  # partial runs go through pirt's observed-item swap
    fast = make_estimator(name).fit(source, subset, truth, irt=params)
    assert fast._item_curve is not None
    monkeypatch.setattr(_item_curve, "MIN_ITEMS", 10**9)
    exact = make_estimator(name).fit(source, subset, truth, irt=params)
    assert exact._item_curve is None
    for got, want in zip(
        fast.predict_rows(rows[5:], 0.9), exact.predict_rows(rows[5:], 0.9), strict=True
    ):
        assert np.allclose(got, want, atol=1e-5, equal_nan=True)
    theta_hat, theta_se = fast._abilities(rows)
    for got, want in zip(
        fast._pirt(rows, theta_hat, theta_se), exact._pirt(rows, theta_hat, theta_se), strict=True
    ):
        assert np.allclose(got, want, atol=1e-5, equal_nan=True)
