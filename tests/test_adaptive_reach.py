"""The upper reach of an adaptive run's span: the IRT-free reading at a hit count raised by
its binomial spread (:func:`~lmeval_microbench.adaptive.estimation.rates_raised`), joined to
the span where it lies above every source (:meth:`.scoring.ScoreMap.predict_run`).

Hand-checked numbers, where the reach enters and how it shrinks with the items asked, and the
case it was built for: MMLU's strongest leaderboard models held out, read by a pool fitted on
the rest after 10 and 25 items."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from adaptive_support import coverage_by_map, saved_before, strongest_fifth
from scipy.special import expit

from lmeval_microbench.adaptive import build_pool, pool_state
from lmeval_microbench.adaptive.estimation import rates_raised
from lmeval_microbench.adaptive.pool import ADAPTIVE, AdaptiveState
from lmeval_microbench.adaptive.refresh import with_upper_reach
from lmeval_microbench.adaptive.scoring import ScoreMap
from lmeval_microbench.errors import BundleError, InputError
from lmeval_microbench.outside.guard import REACH_Z
from lmeval_microbench.synthetic import random_item_params, simulate_responses


def test_the_raised_rate_by_hand():
    """Four items the sources got right half the time; two asked, one right. The run's own
    shift is 0 (hit rate 0.5), the binomial sd of its hit count sqrt(2 * 0.25); one sd up the
    rate to match is (1 + sqrt(0.5)) / 2 on every item, the asked ones too."""
    rates = np.full(4, 0.5)
    asked = np.array([[True, True, False, False], [True, True, False, False]])
    scores = np.array([[1.0, 0.0, np.nan, np.nan], [1.0, 1.0, np.nan, np.nan]])
    out = rates_raised(rates, asked, scores, z=1.0)
    np.testing.assert_allclose(out[0], (1 + np.sqrt(0.5)) / 2, atol=1e-9)
    assert np.all(out[1] > 0.99)  # every answer right: raised to the shift's bound


def test_the_raise_shrinks_with_the_items_asked():
    """At a hit rate of one half, one sd up is 0.5 + 0.5 / sqrt(n) on items of rate 0.5."""
    raised = {}
    for n in (4, 100):
        rates = np.full(n + 10, 0.5)
        asked = np.zeros((1, n + 10), dtype=bool)
        asked[0, :n] = True
        scores = np.where(asked, np.arange(n + 10) % 2 == 0, np.nan).astype(float)
        raised[n] = rates_raised(rates, asked, scores, z=1.0)[0, -1]
        assert raised[n] == pytest.approx(0.5 + 0.5 / np.sqrt(n), abs=1e-6)
    assert raised[100] < raised[4]


def test_an_unequal_item_mix_is_shifted_on_the_logit_scale():
    """Rates 0.2 and 0.8, both asked, one right: own shift 0, sd sqrt(0.16 + 0.16); half an sd
    up, the raised shift c solves (expit(logit 0.2 + c) + expit(logit 0.8 + c)) / 2 =
    (1 + sd / 2) / 2."""
    rates = np.array([0.2, 0.8, 0.5])
    asked = np.array([[True, True, False]])
    out = rates_raised(rates, asked, np.array([[0.0, 1.0, np.nan]]), z=0.5)
    sd = np.sqrt(0.32)
    c = np.log(out[0, 2] / (1 - out[0, 2]))  # the unasked item at rate 0.5 reads the shift
    mean = (expit(np.log(0.25) + c) + expit(np.log(4.0) + c)) / 2
    assert mean == pytest.approx((1 + sd / 2) / 2, abs=1e-6)


def _toy_pool():
    params = random_item_params(20, seed=3)
    matrix, _ = simulate_responses(params, 200, seed=4)
    truth = matrix.mean_scores()
    bundle = build_pool(matrix, truth, name="p", benchmark="toy", estimator="ridge")
    return matrix, truth, pool_state(bundle).state.score_map


def _no_reach(monkeypatch) -> None:
    monkeypatch.setattr(ScoreMap, "_reach_above", lambda self, value, asked, scores: value)


def test_the_reach_joins_the_span_only_above_the_sources(monkeypatch):
    matrix, truth, score_map = _toy_pool()
    top = float(np.quantile(truth, 0.6))
    capped = replace(score_map, truth_range=(float(truth.min()), top)).with_reach(REACH_Z)
    easy = np.argsort(-capped.rates)[:6]
    asked = np.zeros((2, matrix.n_items), dtype=bool)
    asked[:, easy] = True
    scores = np.full(asked.shape, np.nan)
    scores[0, easy] = 0.0  # a weak run: its raised reading stays under the sources' top
    scores[1, easy] = np.array([1, 1, 1, 1, 1, 0], dtype=float)  # near the top
    expected = np.full(asked.shape, 0.5)
    value, low, high = capped.predict_run(expected, asked, scores)
    _no_reach(monkeypatch)
    value0, low0, high0 = capped.predict_run(expected, asked, scores)
    np.testing.assert_allclose(value, value0)  # the estimate never moves
    reach = capped.predict(rates_raised(capped.rates, asked, scores, REACH_Z))
    assert reach[0] <= top < reach[1]
    assert (low[0], high[0]) == (low0[0], high0[0])
    assert high[1] == pytest.approx(max(high0[1], reach[1]), abs=1e-12) and high[1] > high0[1]
    assert low[1] == pytest.approx(min(low0[1], reach[1]), abs=1e-12)


def _toy_sources(seed: int = 3):
    params = random_item_params(20, seed=seed)
    matrix, theta = simulate_responses(params, 200, seed=seed + 1)
    return matrix, theta


def test_only_a_target_beyond_the_pool_items_gets_the_reach():
    """The sources' mean over the pool (a whole benchmark): no reach, the reading already errs
    above a model beyond them. Another target (a v1 pool read against its whole benchmark):
    :data:`REACH_Z`, saved with the pool and loaded back; older pools load without it."""
    matrix, theta = _toy_sources()
    whole = build_pool(matrix, matrix.mean_scores(), name="w", benchmark="toy", estimator="ridge")
    assert pool_state(whole).state.score_map.reach == 0.0
    assert "upper_reach" not in whole.estimator_state(ADAPTIVE)
    beyond_items = 0.2 + 0.6 * expit(np.asarray(theta).reshape(-1))  # not the items' mean
    other = build_pool(matrix, beyond_items, name="o", benchmark="toy", estimator="ridge")
    state = other.estimator_state(ADAPTIVE)
    assert state["upper_reach"] == pytest.approx(REACH_Z)
    assert pool_state(other).state.score_map.reach == pytest.approx(REACH_Z)
    older = {k: v for k, v in state.items() if k != "upper_reach"}
    assert AdaptiveState.from_bundle(other, older).score_map.reach == 0.0
    with pytest.raises(BundleError, match=r"bundle 'o'.*upper_reach must lie in \[0, 10\]"):
        AdaptiveState.from_bundle(other, dict(state, upper_reach=-1.0))
    without_rates = replace(pool_state(other).state.score_map, rates=None)
    with pytest.raises(InputError, match="upper_reach needs the pool's source_rates"):
        without_rates.with_reach(REACH_Z)


def test_an_older_pool_gets_the_reach_without_refitting():
    matrix, theta = _toy_sources()
    truth = 0.2 + 0.6 * expit(np.asarray(theta).reshape(-1))
    bundle = build_pool(matrix, truth, name="o", benchmark="toy", estimator="ridge")
    state = bundle.estimator_state(ADAPTIVE)
    older = saved_before(bundle, ["upper_reach"])
    assert pool_state(older).state.score_map.reach == 0.0
    again = with_upper_reach(older, matrix, truth)
    assert again.estimator_state(ADAPTIVE) == state  # as fitted with the reach, nothing refitted
    mean = matrix.mean_scores()
    whole = build_pool(matrix, mean, name="w", benchmark="toy", estimator="ridge")
    assert "upper_reach" not in with_upper_reach(whole, matrix, mean).estimator_state(ADAPTIVE)
    other, _ = _toy_sources(seed=9)
    with pytest.raises(InputError, match="built from another source matrix"):
        with_upper_reach(older, other, truth)


@pytest.fixture(scope="module")
def mmlu_strongest(shared_data):
    """MMLU (Open LLM Leaderboard v1, metabench's items against the whole benchmark's score):
    the strongest fifth of the models held out, a pool fitted on 800 of the rest (to keep the
    fit short; their top fifth lies within a point of each other, as in the whole matrix)."""
    return strongest_fifth(shared_data, "mmlu", 800)


@pytest.mark.slow
@pytest.mark.parametrize("asked", [10, 25])
def test_the_reach_covers_mmlu_models_stronger_than_every_source(mmlu_strongest, asked):
    """Measured on the peer split (2,728 sources, ``bench/adaptive.md``): coverage of the
    strongest fifth 0.41 / 0.63 at 10 / 25 items without the reach, 0.96 / 0.93 with it, the
    estimate unchanged. Here the same runs are read with and without it."""
    params, score_map, targets, truth = mmlu_strongest
    assert score_map.reach == pytest.approx(REACH_Z)  # a target beyond the pool's items
    maps = {"with": score_map, "without": replace(score_map, reach=0.0)}
    covered, values = coverage_by_map(params, targets, truth, asked, maps)
    np.testing.assert_allclose(values["with"], values["without"])
    assert covered["with"] >= 0.85 and covered["with"] >= covered["without"] + 0.2, covered
