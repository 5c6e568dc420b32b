"""The adaptive pool's downward fold (issue 19): intervals for models weaker than every source.

A synthetic 3PL world with a guessing floor: the targets sit below every source model, as a
near-random new model sits below a leaderboard. The pool fitted without the downward fold
gives them intervals calibrated on in-population residuals; with it, their residuals as the
weakest fifth of the sources (fitted on the others) join the band.
"""

from __future__ import annotations

import numpy as np
import pytest

from lmeval_microbench.adaptive import pool as pool_module
from lmeval_microbench.adaptive.pool import fit_adaptive_state
from lmeval_microbench.adaptive.scoring import ScoreMap
from lmeval_microbench.adaptive.selection import MaxInfoSelector
from lmeval_microbench.adaptive.simulate import replay
from lmeval_microbench.irt.params import ItemParams
from lmeval_microbench.responses import ResponseMatrix

N_ITEMS, ASKED = 40, 20


def below_world(seed: int = 0) -> tuple[ResponseMatrix, np.ndarray, np.ndarray, np.ndarray]:
    """Sources with abilities uniform on [0.5, 2.5], targets on [-2, -1]; 3PL, floor 0.25."""
    rng = np.random.default_rng(seed)
    ids = tuple(f"i{k}" for k in range(N_ITEMS))
    params = ItemParams(
        ids, rng.lognormal(0.2, 0.3, N_ITEMS), rng.normal(0.0, 1.2, N_ITEMS),
        np.full(N_ITEMS, 0.25), np.ones(N_ITEMS),
    )  # fmt: skip
    theta = np.concatenate([rng.uniform(0.5, 2.5, 250), rng.uniform(-2.0, -1.0, 80)])
    values = (rng.random((theta.size, N_ITEMS)) < params.probability(theta[:, None])).astype(float)
    source = ResponseMatrix(values[:250], [f"s{k}" for k in range(250)], ids, source="world")
    return source, values[:250].mean(axis=1), values[250:], values[250:].mean(axis=1)


def coverage_of_targets(state, params, targets: np.ndarray, truth: np.ndarray) -> float:
    run = replay(
        params,
        targets,
        selector=MaxInfoSelector(),
        max_items=ASKED,
        score_map=state.score_map,
        checkpoints=(ASKED,),
    )
    low, high = state.score_map.interval(run.predictions[ASKED], ASKED, 0.9, run.spans[ASKED])
    return float(np.mean((truth >= low - 1e-9) & (truth <= high + 1e-9)))


@pytest.mark.parametrize("seed", [0, 1])
def test_the_downward_fold_widens_intervals_below_the_sources(monkeypatch, seed):
    """Measured: coverage of the targets 0.19 -> 0.81 (seed 0) and 0.43 -> 0.84 (seed 1)."""
    source, truth, targets, target_truth = below_world(seed)
    params, with_fold = fit_adaptive_state(source, truth)
    assert with_fold.calibration["down_fold_models"] == 50
    monkeypatch.setattr(pool_module, "MIN_DOWN", 10**6)  # no downward fold: as before
    _, without = fit_adaptive_state(source, truth)
    assert without.calibration["down_fold_models"] == 0 and not without.score_map.below
    covered = coverage_of_targets(with_fold, params, targets, target_truth)
    before = coverage_of_targets(without, params, targets, target_truth)
    assert covered >= before + 0.3 and covered >= 0.8, (before, covered)


def test_the_downward_band_only_ever_widens_and_survives_the_pool_state():
    source, truth, _, _ = below_world(0)
    _, state = fit_adaptive_state(source, truth)
    score_map = state.score_map
    grid = np.linspace(0.0, 1.0, 41)
    wider = score_map.half_width(grid, ASKED, 0.9)
    plain = score_map.band_for(ASKED).half_width(grid, 0.9)
    assert (wider >= plain).all() and (
        wider[grid <= score_map.below_top] > plain[grid <= score_map.below_top]
    ).any()
    assert (wider[grid > score_map.below_top] == plain[grid > score_map.below_top]).all()
    stored = state.to_dict()["below"]
    again = ScoreMap.from_parts(score_map.estimator, state.to_dict()["bands"], "shifted", stored)
    np.testing.assert_allclose(
        again.half_width(grid, ASKED, 0.9), wider, atol=1e-5
    )  # stored rounded
    old = ScoreMap.from_parts(score_map.estimator, state.to_dict()["bands"], "shifted")
    np.testing.assert_allclose(old.half_width(grid, ASKED, 0.9), plain, atol=1e-5)  # saved before


def test_the_downward_fold_needs_enough_weak_sources():
    assert pool_module._weakest(np.linspace(0, 1, 40)) is None  # 8 weakest: too few
    mask = pool_module._weakest(np.linspace(1, 0, 100))
    assert mask is not None and mask.sum() == 20 and mask[-20:].all()
