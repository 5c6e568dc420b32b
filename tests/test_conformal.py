"""Conditional conformal bands (issue 12): hand-checkable residuals, regions, stored bands."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lmeval_microbench._conformal import (
    MAX_REGIONS,
    ConformalBand,
    fit_band,
    region_edges,
)
from lmeval_microbench.errors import InputError
from lmeval_microbench.estimators import make_estimator
from lmeval_microbench.reliability import ResultPool, coverage_by_thirds, summarise
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection.base import Subset


def two_regions() -> tuple[np.ndarray, np.ndarray]:
    """100 low predictions (0.2) with residuals 0.001-0.1, 100 high (0.8) with 0.01-1.0."""
    steps = np.arange(1, 101) / 100.0
    prediction = np.repeat([0.2, 0.8], 100)
    truth = prediction + np.concatenate([steps / 10.0, steps])
    return prediction, np.clip(truth, 0.0, 2.0)


def test_each_region_gets_its_own_finite_sample_quantile() -> None:
    prediction, truth = two_regions()
    band = fit_band(prediction, truth, "constant", min_per_region=100)
    assert band.edges.tolist() == [0.5]
    # ceil(101 * 0.9) = 91st smallest residual of each region
    assert band.half_width(np.array([0.2, 0.8]), 0.9) == pytest.approx([0.091, 0.91])
    # one quantile: 181st smallest of all 200; 110 are <= 0.1 (100 low, 10 high), so the
    # 71st high one above 0.1 = 0.81, too wide for the low models, too narrow for the high
    pooled = fit_band(prediction, truth, "constant", conditional=False)
    assert pooled.half_width(np.array([0.2, 0.8]), 0.9) == pytest.approx([0.81, 0.81])


def test_sparse_regions_are_merged() -> None:
    # 60 distinct predictions and 40 tied at 0: equal-count cuts give regions of 40, 20, 40
    prediction = np.concatenate([np.zeros(40), np.linspace(0.1, 0.9, 60)])
    edges = region_edges(prediction, min_per_region=30)
    counts = np.bincount(np.searchsorted(edges, prediction, "right"))
    assert counts.min() >= 30 and counts.sum() == 100
    assert region_edges(np.arange(30.0), min_per_region=50).size == 0
    assert region_edges(np.arange(10_000.0), min_per_region=50).size == MAX_REGIONS - 1


def test_too_few_residuals_in_a_region_fall_back_to_the_larger_of_pooled_and_own_max() -> None:
    prediction, truth = two_regions()
    band = fit_band(prediction, truth, "constant", min_per_region=100)
    # 99 %: ceil(101 * 0.99) = 100th of the region's 100, its own largest (0.1)
    assert band.half_width(np.array([0.2]), 0.99)[0] == pytest.approx(0.1)
    # 99.5 %: the 101st of 100 does not exist; the pooled 200th of 200 (1.0) is larger
    assert band.half_width(np.array([0.2]), 0.995)[0] == pytest.approx(1.0)


def test_few_models_get_the_distance_term() -> None:
    prediction = np.linspace(0.4, 0.6, 30)
    truth = prediction + 0.01
    band = fit_band(prediction, truth, "constant")
    assert band.edges.size == 0 and band.spread == pytest.approx(prediction.std())
    centre, far = band.half_width(np.array([0.5, 0.5 + 3 * band.spread]), 0.9)
    assert far == pytest.approx(centre * np.sqrt(10.0))
    assert fit_band(prediction, truth, "constant", conditional=False).spread == 0.0


def test_old_band_dicts_load_and_give_identical_intervals() -> None:
    rng = np.random.default_rng(0)
    prediction = rng.uniform(0, 1, 500)
    truth = np.clip(prediction + rng.normal(0, 0.05, 500), 0, 1)
    old = fit_band(prediction, truth, "binned", conditional=False)
    stored = json.loads(json.dumps(old.to_dict()))
    assert set(stored) == {"mode", "knots", "scales", "residuals"}
    loaded = ConformalBand.from_dict(stored)
    grid = np.linspace(0, 1, 101)
    assert np.array_equal(loaded.half_width(grid, 0.9), old.half_width(grid, 0.9))
    # the stored one-quantile rule: the 451st smallest scaled residual times the scale
    assert np.array_equal(
        loaded.half_width(grid, 0.9), np.asarray(stored["residuals"])[450] * loaded.scale(grid)
    )


def test_conditional_bands_round_trip_and_bad_regions_are_refused() -> None:
    prediction, truth = two_regions()
    band = fit_band(prediction, truth, "binned", min_per_region=100)
    loaded = ConformalBand.from_dict(json.loads(json.dumps(band.to_dict())))
    grid = np.linspace(0, 1, 11)
    assert np.array_equal(loaded.half_width(grid, 0.9), band.half_width(grid, 0.9))
    with pytest.raises(InputError, match="cannot be refitted"):
        loaded.refit(conditional=False)
    broken = band.to_dict() | {"edges": [0.5, 0.6]}
    with pytest.raises(InputError, match="region edges"):
        ConformalBand.from_dict(broken)


def test_coverage_by_thirds_on_a_constructed_example() -> None:
    truth = np.array([0.0, 0.1, 0.2, 0.5, 0.5, 0.9, 0.9, 1.0, 1.0])
    value = truth.copy()
    value[0] = 0.9  # a low model estimated high: counted in the high third by estimate
    lower, upper = value - 0.05, value + 0.05
    thirds = coverage_by_thirds(truth, value, lower, upper, min_count=1)
    assert thirds["cov90_low"] == 1.0  # 0.1 and 0.2
    assert thirds["cov90_mid"] == 1.0  # the two 0.5s
    assert thirds["cov90_high"] == pytest.approx(4 / 5)  # 0.9 (truth 0) missed
    assert thirds["cov90_min_third"] == pytest.approx(4 / 5)
    assert thirds["cov90_min_third_truth"] == pytest.approx(2 / 3)  # truth 0, 0.1, 0.2
    assert np.isnan(coverage_by_thirds(truth, value, lower, upper)["cov90_mid"])  # 2 < 5
    pool = ResultPool()
    for repeat in range(3):  # three repeats: every third has at least 5 targets
        pool.add(repeat, truth, value, lower, upper)
    record = summarise(pool)
    assert record["cov90_min_third_truth"] == pytest.approx(2 / 3)
    assert record["cov90_mid"] == 1.0
    assert record["coverage90"] == pytest.approx(8 / 9)


def tied_world(n_models: int, seed: int) -> tuple[ResponseMatrix, np.ndarray]:
    """Six easy items most models get all right, so hundreds share one answer pattern, while
    their full scores (driven by the same ability) still spread by several points."""
    rng = np.random.default_rng(seed)
    ability = rng.normal(0.0, 1.5, n_models)
    easiness = np.linspace(1.0, 3.0, 6)
    answers = rng.random((n_models, 6)) < 1 / (1 + np.exp(-(ability[:, None] + easiness)))
    truth = np.clip(0.5 + 0.1 * ability + rng.normal(0.0, 0.02, n_models), 0.0, 1.0)
    items = [f"item-{k}" for k in range(6)]
    return ResponseMatrix(
        answers.astype(float), [f"m{seed}-{k}" for k in range(n_models)], items
    ), truth


@pytest.mark.parametrize("name", ["ridge", "mean"])
def test_models_sharing_an_answer_pattern_are_covered(name: str) -> None:
    """Residuals are filed under the head's own prediction: cross-fitted jitter inside a tied
    group used to cut it by its own residuals and leave its shared prediction a narrow band
    (ridge on few hellaswag items covered 0.48 of new models, bench/conformal_ties.md)."""
    source, source_truth = tied_world(800, 0)
    new, new_truth = tied_world(2000, 1)
    subset = Subset(source.item_ids, np.full(6, 1 / 6), "all")
    estimator = make_estimator(name).fit(source, subset, source_truth)
    _, lower, upper = estimator.estimate_matrix(new, level=0.9)
    covered = (lower <= new_truth) & (new_truth <= upper)
    assert 0.85 <= covered.mean() <= 0.96
    all_right = new.values.sum(axis=1) == 6
    assert all_right.sum() > 300 and covered[all_right].mean() >= 0.85


def test_key_files_residuals_and_keeps_ties_together() -> None:
    prediction = np.array([0.49, 0.5, 0.51, 0.7, 0.7, 0.7])
    truth = np.array([0.4, 0.5, 0.6, 0.7, 0.7, 0.7])
    key = np.array([0.5, 0.5, 0.5, 0.7, 0.7, 0.7])
    band = fit_band(prediction, truth, "constant", key=key, min_per_region=3)
    assert band.edges.tolist() == [0.6]
    assert band.region_residuals[0].tolist() == pytest.approx([0.0, 0.09, 0.09])
    assert band.refit(conditional=False).fit_data[2] is not None
    with pytest.raises(InputError, match="key"):
        fit_band(prediction, truth, "constant", key=key[:3])
