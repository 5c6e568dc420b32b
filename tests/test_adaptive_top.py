"""The top band of an adaptive pool (:class:`~lmeval_microbench.adaptive.bands.TopBand`): how far
above its span a model lies that the map reads as among the sources while it is stronger than
all of them, and the runs whose upper edge it raises (:meth:`.scoring.ScoreMap.interval`).

Hand-checked quantiles and checkpoints, the rule of where it applies, saving and refusing it, an
older pool refreshed without refitting, and the case it was built for: ARC's strongest
leaderboard models held out, read by a pool fitted on the rest."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from adaptive_support import coverage_by_map, saved_before, strongest_fifth
from scipy.special import expit

from lmeval_microbench.adaptive import build_pool, pool_state
from lmeval_microbench.adaptive.bands import LEVELS, MIN_TOP_MODELS, TopBand
from lmeval_microbench.adaptive.pool import ADAPTIVE, AdaptiveState
from lmeval_microbench.adaptive.refresh import with_top_band
from lmeval_microbench.errors import BundleError, InputError
from lmeval_microbench.synthetic import random_item_params, simulate_responses


def _fold(n: int, top: float = 0.6):
    """``n`` fold models: half estimated at 0.5 (inside a map whose sources end at ``top``),
    half at 0.7; spans +- 0.01; the truth of the k-th inside model k / 100 above its span."""
    prediction = np.r_[np.full(n // 2, 0.5), np.full(n - n // 2, 0.7)]
    high = prediction + 0.01
    truth = high.copy()
    truth[: n // 2] += np.arange(n // 2) / 100
    return prediction, (prediction - 0.01, high), truth, top


def test_the_band_by_hand():
    """40 models read inside (distances 0.00-0.39 above the span): the 90 % conformal
    quantile is the ceil(41 * 0.9) = 37th smallest, 0.36. At 10 items only 19 are inside:
    no band there, the first checkpoint is the next one. Models read above the top and
    truths under the span (distance 0) count as they are."""
    prediction, span, truth, top = _fold(80)
    few = _fold(2 * (MIN_TOP_MODELS - 1))
    band = TopBand.fit({25: prediction, 50: prediction}, {25: span, 50: span}, truth, top)
    assert band is not None and band.n_items == (25, 50)
    for level in LEVELS:
        rank = math.ceil(41 * level)
        assert band.reach(25, level) == pytest.approx((rank - 1) / 100, abs=1e-12)
    small = TopBand.fit({10: few[0]}, {10: few[1]}, few[2], few[3])
    assert small is None  # 19 models inside: fewer than the least with a finite 95 % quantile
    below = truth.copy()
    below[:40] = span[0][:40] - 0.5  # every inside truth under its span: distance 0
    assert TopBand.fit({25: prediction}, {25: span}, below, top).reach(25, 0.9) == 0.0


def test_the_checkpoint_of_a_run():
    band = TopBand((10, 25), {level: np.array([0.08, 0.03]) for level in LEVELS})
    assert band.reach(5, 0.9) == 0.08  # under the first checkpoint: the first, the widest
    assert band.reach(24, 0.9) == 0.08 and band.reach(25, 0.9) == 0.03
    assert band.reach(400, 0.9) == 0.03
    with pytest.raises(InputError, match=r"level 0\.5 not stored"):
        band.reach(25, 0.5)


def _toy_bundle(seed: int = 3):
    """A pool whose target is not the mean over its items, with noise: the strongest fifth's
    fold reads some of its models inside the range of the rest."""
    params = random_item_params(20, seed=seed)
    matrix, theta = simulate_responses(params, 200, seed=seed + 1)
    noise = np.random.default_rng(seed).normal(0.0, 0.03, matrix.n_models)
    truth = 0.2 + 0.6 * expit(np.asarray(theta).reshape(-1)) + noise
    return matrix, truth, build_pool(matrix, truth, name="p", benchmark="toy", estimator="ridge")


def test_the_upper_edge_rises_only_where_the_run_reaches_the_top():
    """A map whose strongest source scores 0.6, with a 30-point top band: a run whose 90 %
    upper edge reaches 0.6 gets its upper edge at least 30 points above its span; one that
    does not keeps its interval. Lower edges never move."""
    bundle = _toy_bundle()[2]
    top = 0.6
    score_map = replace(pool_state(bundle).state.score_map, truth_range=(0.2, top))
    band = TopBand((1,), {level: np.array([0.3]) for level in LEVELS})
    plain, topped = score_map.with_top(None), score_map.with_top(band)
    prediction = np.array([top - 0.3, top - 0.003])
    span = (prediction - 0.01, prediction + 0.005)  # the second one's span reaches the top
    low0, high0 = plain.interval(prediction, 20, 0.9, span)
    low1, high1 = topped.interval(prediction, 20, 0.9, span)
    np.testing.assert_array_equal(low0, low1)
    assert high1[0] == high0[0]  # far under the top: untouched
    assert high1[1] == pytest.approx(span[1][1] + 0.3, abs=1e-12) and high1[1] > high0[1]


def test_a_pool_saves_its_top_band_and_refuses_a_bad_one():
    _, _, bundle = _toy_bundle()
    state = bundle.estimator_state(ADAPTIVE)
    assert "top_band" in state
    found = pool_state(bundle).state.score_map.top
    assert found is not None and found.n_items[0] >= 1
    assert found.to_dict() == state["top_band"]
    older = {k: v for k, v in state.items() if k != "top_band"}
    assert AdaptiveState.from_bundle(bundle, older).score_map.top is None
    bad = dict(state["top_band"], quantiles={"0.9": [-0.1] * len(found.n_items)})
    with pytest.raises(BundleError, match=r"bundle 'p'.*top band: quantiles must be"):
        AdaptiveState.from_bundle(bundle, dict(state, top_band=bad))
    unordered = dict(state["top_band"], n_items=list(reversed(found.n_items)))
    if len(found.n_items) > 1:
        with pytest.raises(BundleError, match="increasing checkpoints"):
            AdaptiveState.from_bundle(bundle, dict(state, top_band=unordered))
    without_range = replace(pool_state(bundle).state.score_map, truth_range=None)
    with pytest.raises(InputError, match="top_band needs the pool's source_range"):
        without_range.with_top(found)


def test_an_older_pool_gets_the_top_band_without_refitting():
    matrix, truth, bundle = _toy_bundle()
    state = bundle.estimator_state(ADAPTIVE)
    older = saved_before(bundle, ["top_band"])
    assert pool_state(older).state.score_map.top is None
    again = with_top_band(older, matrix, truth)
    assert again.estimator_state(ADAPTIVE) == state  # the fold the build replayed, replayed
    other, _, _ = _toy_bundle(seed=9)
    with pytest.raises(InputError, match="built from another source matrix"):
        with_top_band(older, other, truth)


@pytest.fixture(scope="module")
def arc_strongest(shared_data):
    """ARC (Open LLM Leaderboard v1, metabench's items against the whole benchmark's score):
    the strongest fifth of the models held out, a pool fitted on 1,000 of the rest."""
    return strongest_fifth(shared_data, "arc", 1000)


@pytest.mark.slow
@pytest.mark.parametrize("asked", [25, 50])
def test_the_top_band_covers_arc_models_stronger_than_every_source(arc_strongest, asked):
    """Measured on the peer split (every other model a source, ``bench/adaptive.md``): the
    strongest fifth covered 0.77 / 0.81 at 25 / 50 items without the band, 0.89 / 0.86 with
    it. Here the same runs are read with and without it; the estimates do not move."""
    params, score_map, targets, truth = arc_strongest
    assert score_map.top is not None
    maps = {"with": score_map, "without": score_map.with_top(None)}
    covered, values = coverage_by_map(params, targets, truth, asked, maps)
    np.testing.assert_allclose(values["with"], values["without"])
    assert covered["with"] >= 0.85 and covered["with"] >= covered["without"] + 0.05, covered
