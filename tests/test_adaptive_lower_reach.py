"""The lower reach of an adaptive run's span (:attr:`.scoring.ScoreMap.lower_reach`): where
even the IRT-free reading at :data:`REACH_Z` binomial sds above the run's hit count lies under
every source, the span reaches that reading as many sds below it, the static guard's
:func:`~lmeval_microbench.outside.guard.reached_below` for a run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from lmeval_microbench.adaptive import build_pool, pool_state
from lmeval_microbench.adaptive.estimation import rates_raised
from lmeval_microbench.adaptive.pool import ADAPTIVE, AdaptiveState
from lmeval_microbench.adaptive.scoring import ScoreMap
from lmeval_microbench.errors import BundleError, InputError
from lmeval_microbench.outside.guard import REACH_Z
from lmeval_microbench.synthetic import random_item_params, simulate_responses


def _toy_pool():
    params = random_item_params(20, seed=3)
    matrix, _ = simulate_responses(params, 200, seed=4)
    bundle = build_pool(matrix, matrix.mean_scores(), name="p", benchmark="toy", estimator="ridge")
    return matrix, bundle


def _runs(score_map: ScoreMap, n_items: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two runs asked the six easiest items: one answered none right, one all but one."""
    easy = np.argsort(-score_map.rates)[:6]
    asked = np.zeros((2, n_items), dtype=bool)
    asked[:, easy] = True
    scores = np.full(asked.shape, np.nan)
    scores[0, easy] = 0.0
    scores[1, easy] = np.array([1, 1, 1, 1, 1, 0], dtype=float)
    return np.full(asked.shape, 0.5), asked, scores


def test_the_reach_joins_the_span_only_where_the_whole_spread_lies_below():
    """The sources' range starting between the two runs' raised readings: only the run that
    answered none right reaches down, to its lowered reading. Starting just under its raised
    reading: neither does. The estimate and the upper edge never move."""
    matrix, bundle = _toy_pool()
    score_map = pool_state(bundle).state.score_map
    assert score_map.lower_reach == pytest.approx(REACH_Z)
    expected, asked, scores = _runs(score_map, matrix.n_items)
    up, down = (
        score_map.predict(rates_raised(score_map.rates, asked, scores, z))
        for z in (REACH_Z, -REACH_Z)
    )
    assert up[0] < up[1] and down[0] < up[0]
    bottom = float((up[0] + up[1]) / 2)  # the weak run's whole spread lies below it
    below = replace(score_map, truth_range=(bottom, 1.0))
    value, low, high = below.predict_run(expected, asked, scores)
    value0, low0, high0 = replace(below, lower_reach=0.0).predict_run(expected, asked, scores)
    np.testing.assert_allclose(value, value0)
    np.testing.assert_allclose(high, high0)
    assert low[0] == pytest.approx(min(low0[0], down[0]), abs=1e-12)
    assert low[0] < low0[0] - 1e-6  # the reach lowered it
    assert low[1] == low0[1]  # its raised reading lies over the bottom: no reach
    above = replace(score_map, truth_range=(float(up[0]) - 1e-6, 1.0))
    _, low_above, _ = above.predict_run(expected, asked, scores)
    _, low_none, _ = replace(above, lower_reach=0.0).predict_run(expected, asked, scores)
    np.testing.assert_allclose(low_above, low_none)


def test_the_reach_is_saved_with_the_pool_and_older_pools_load_without_it():
    _, bundle = _toy_pool()
    state = bundle.estimator_state(ADAPTIVE)
    assert state["lower_reach"] == pytest.approx(REACH_Z)
    older = {k: v for k, v in state.items() if k != "lower_reach"}
    assert AdaptiveState.from_bundle(bundle, older).score_map.lower_reach == 0.0
    with pytest.raises(BundleError, match=r"bundle 'p'.*lower_reach must lie in \[0, 10\]"):
        AdaptiveState.from_bundle(bundle, dict(state, lower_reach=11.0))
    without_rates = replace(pool_state(bundle).state.score_map, rates=None)
    with pytest.raises(InputError, match="lower_reach needs the pool's source_rates"):
        without_rates.with_lower_reach(REACH_Z)
