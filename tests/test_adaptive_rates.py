"""The adaptive score map's IRT-free reading (source success rates shifted to the run's hit
rate): hand-checked imputation, its pool fields, where it enters a run's span, and what it does
for the strongest fifth of IFEval (real answers), which a 2PL fitted on the rest misreads."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from adaptive_support import coverage_by_map, saved_before
from test_adaptive_side_folds import coverage_of_targets, world

from lmeval_microbench.adaptive import build_pool, pool_state
from lmeval_microbench.adaptive.estimation import impute_from_rates
from lmeval_microbench.adaptive.pool import ADAPTIVE, AdaptiveState, fit_adaptive_state
from lmeval_microbench.adaptive.refresh import with_source_rates
from lmeval_microbench.adaptive.scoring import RATES_KEYS
from lmeval_microbench.errors import BundleError, InputError
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.synthetic import random_item_params, simulate_responses


def test_rates_are_shifted_to_the_hit_rate_by_hand():
    """One item asked and answered right, one pseudo answer at its rate 0.5: the hit rate to
    match is (1 + 0.5) / 2 = 0.75, so the logit shift is log 3 and an item the sources got
    right 20 % of the time is imputed at 0.2 * 3 / (0.8 + 0.2 * 3) = 3 / 7."""
    rates = np.array([0.2, 0.5, 0.8])
    asked = np.array([[False, True, False], [False, False, False]])
    scores = np.array([[np.nan, 1.0, np.nan], [np.nan] * 3])
    out = impute_from_rates(rates, asked, scores)
    np.testing.assert_allclose(out[0], [3 / 7, 1.0, 12 / 13], atol=1e-9)
    np.testing.assert_allclose(out[1], rates, atol=1e-12)  # nothing asked: the rates as they are


def _pool(seed: int = 3):
    params = random_item_params(20, seed=seed)
    matrix, _ = simulate_responses(params, 200, seed=seed + 1)
    truth = matrix.mean_scores()
    return matrix, truth, build_pool(matrix, truth, name="p", benchmark="toy", estimator="ridge")


def test_a_new_pool_stores_the_rates_by_item_and_loads_them_back():
    matrix, truth, bundle = _pool()
    score_map = pool_state(bundle).state.score_map
    order = [matrix.item_ids.index(i) for i in score_map.item_ids]
    # smoothed as the static readings' rates are: (right + 0.5) / (answered + 1)
    smoothed = (matrix.values.sum(axis=0) + 0.5) / (matrix.n_models + 1.0)
    np.testing.assert_allclose(score_map.rates, smoothed[order], atol=1e-6)
    assert score_map.truth_range == pytest.approx((truth.min(), truth.max()), abs=1e-6)
    state = bundle.estimator_state(ADAPTIVE)
    assert set(state["source_rates"]) == {str(i) for i in matrix.item_ids}


def test_pools_saved_before_the_rates_keep_their_spans_and_bad_rates_are_refused():
    _, _, bundle = _pool()
    state = bundle.estimator_state(ADAPTIVE)
    # saved before the rates, so before the move towards them and the lower reach (both
    # need the rates)
    before = (*RATES_KEYS, "toward_reading", "lower_reach")
    older = {k: v for k, v in state.items() if k not in before}
    assert AdaptiveState.from_bundle(bundle, older).score_map.rates is None
    short = dict(state, source_rates=dict(list(state["source_rates"].items())[:-1]))
    with pytest.raises(BundleError, match=r"bundle 'p'.*source_rates do not match"):
        AdaptiveState.from_bundle(bundle, short)
    outside = dict(state, source_range=[0.2, 1.5])
    with pytest.raises(BundleError, match=r"bundle 'p'.*must lie in \[0, 1\]"):
        AdaptiveState.from_bundle(bundle, outside)


def test_the_reading_enters_a_span_only_beyond_the_sources():
    matrix, truth, bundle = _pool()
    # sources that top out at 80 % (the toy's best model scores more)
    score_map = replace(pool_state(bundle).state.score_map, truth_range=(truth.min(), 0.8))
    without = replace(score_map, rates=None)
    hardest = np.argsort(score_map.rates)[:8]
    asked = np.zeros((2, matrix.n_items), dtype=bool)
    asked[:, hardest] = True
    scores = np.full(asked.shape, np.nan)
    pool_order = [matrix.item_ids.index(i) for i in score_map.item_ids]
    median_model = matrix.values[np.argsort(truth)[100]][pool_order]
    scores[0, hardest] = median_model[hardest]  # a source model's answers
    scores[1, hardest] = 1.0  # every one of the hardest items right
    expected = np.full(asked.shape, 0.3)  # a posterior that reads both runs low
    value, low, high = score_map.predict_run(expected, asked, scores)
    value0, low0, high0 = without.predict_run(expected, asked, scores)
    np.testing.assert_allclose(value, value0)  # the estimate does not move
    reading = score_map.predict(impute_from_rates(score_map.rates, asked, scores))
    assert reading[0] <= 0.8 < reading[1]
    assert (low[0], high[0]) == (low0[0], high0[0])  # inside: the span as without the reading
    assert high[1] == pytest.approx(max(high0[1], reading[1]), abs=1e-12)  # beyond: it joins
    assert low[1] == pytest.approx(min(low0[1], reading[1]), abs=1e-12)


@pytest.fixture(scope="module")
def ifeval_strongest(shared_data):
    values = ResponseMatrix.read(shared_data / "openllm_v2" / "responses" / "ifeval.parquet")
    truth = values.mean_scores()
    strongest = np.argsort(-truth, kind="stable")[: round(0.2 * truth.size)]
    held = set(strongest.tolist())
    source = values.select_models([m for k, m in enumerate(values.model_ids) if k not in held])
    params, state = fit_adaptive_state(source, source.mean_scores())
    return params, state, values.values[strongest], truth[strongest]


@pytest.mark.slow
@pytest.mark.parametrize("asked", [10, 25])
def test_the_reading_covers_ifeval_models_stronger_than_every_source(ifeval_strongest, asked):
    """Measured (50 items too, ``bench/adaptive.md``): coverage of the strongest fifth 0.53 /
    0.70 at 10 / 25 items before the reading, 0.97 / 0.97 with it; the estimate unchanged.
    Here the same runs are read by the same pool with and without it."""
    params, state, targets, truth = ifeval_strongest
    maps = {"with": state.score_map, "without": replace(state.score_map, rates=None)}
    covered, values = coverage_by_map(params, targets, truth, asked, maps)
    np.testing.assert_allclose(values["with"], values["without"])
    assert covered["with"] >= 0.9 and covered["with"] >= covered["without"] + 0.15, covered


def test_an_older_pool_gets_the_rates_of_a_new_build_without_refitting():
    matrix, truth, bundle = _pool()
    older = saved_before(bundle, (*RATES_KEYS, "toward_reading", "lower_reach"))
    assert pool_state(older).state.score_map.rates is None
    again = pool_state(with_source_rates(older, matrix, truth)).state.score_map
    fresh = pool_state(bundle).state.score_map
    np.testing.assert_allclose(again.rates, fresh.rates, atol=1e-6)
    assert again.truth_range == pytest.approx(fresh.truth_range)
    assert [b.to_dict() for b in again.bands] == [b.to_dict() for b in fresh.bands]  # no refit
    other, _ = simulate_responses(random_item_params(20, seed=9), 50, seed=9)
    with pytest.raises(InputError, match="built from another source matrix"):
        with_source_rates(older, other, other.mean_scores())
    with pytest.raises(InputError, match="already has its source rates; rebuild it"):
        with_source_rates(bundle, matrix, truth)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_reading_widens_runs_below_the_sources_in_a_3pl_world(seed):
    """Guessers below every source (``test_adaptive_side_folds.world``), one pool read with and
    without the reading. Measured: 0.78 -> 0.90 (seed 0), 0.80 -> 0.94 (seed 1)."""
    source, truth, targets, target_truth = world(seed)
    params, state = fit_adaptive_state(source, truth)
    without = replace(state, score_map=replace(state.score_map, rates=None))
    covered = coverage_of_targets(state, params, targets, target_truth)
    before = coverage_of_targets(without, params, targets, target_truth)
    assert covered >= before + 0.1 and covered >= 0.85, (before, covered)
