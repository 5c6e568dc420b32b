"""Runs above the sources of a whole-benchmark pool (issue 19, adaptive inherits it): the
upward folds, replayed on IRT refitted without their held-out models, choose how far an
estimate above the sources moves to the IRT-free reading, and the move is applied, saved and
refused as the pool state says. Checked by hand, on synthetic pools, and on IFEval's strongest
fifth (real answers, a pool fitted on the rest)."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest

from lmeval_microbench.adaptive import beyond as beyond_module
from lmeval_microbench.adaptive import build_pool, pool_state
from lmeval_microbench.adaptive.bands import ABOVE, SideBands
from lmeval_microbench.adaptive.beyond import TOWARD_CANDIDATES, choose_toward
from lmeval_microbench.adaptive.pool import (
    ADAPTIVE,
    AdaptiveState,
    _upward_refits,
    directed_runs,
    fit_adaptive_state,
)
from lmeval_microbench.adaptive.scoring import ScoreMap
from lmeval_microbench.adaptive.selection import MaxInfoSelector
from lmeval_microbench.adaptive.simulate import replay
from lmeval_microbench.errors import BundleError, InputError
from lmeval_microbench.outside.folds import UP
from lmeval_microbench.reliability import complete_models, extrapolation_splits
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.synthetic import random_item_params, simulate_responses


def _world(seed: int = 4) -> tuple[ResponseMatrix, np.ndarray]:
    params = random_item_params(20, seed=3)
    matrix, _ = simulate_responses(params, 200, seed=seed)
    return matrix, matrix.mean_scores()


def _score_map(toward: float) -> ScoreMap:
    """The plain mean of 4 items whose 10 sources scored 25-75 %, with the reading's inputs
    (item i1: 1 source of 10 right)."""
    values = np.array(
        [[1, 0, 1, 0], [0, 0, 1, 1], [1, 0, 0, 1], [1, 1, 1, 0], [0, 0, 1, 0]] * 2, dtype=float
    )
    values[5:, 1] = 0.0
    ids = ["i0", "i1", "i2", "i3"]
    source = ResponseMatrix(values, [f"m{k}" for k in range(10)], ids, source="toy")
    with warnings.catch_warnings():  # 10 sources: too few for a calibration line, as meant
        warnings.simplefilter("ignore")
        smap = ScoreMap.fit("mean", source, source.mean_scores())
    return smap.with_toward(toward)


def test_an_estimate_above_the_sources_moves_its_share_to_the_reading_by_hand():
    """Two runs, both answered item i1 (which 1 of 10 sources got right): one right, one wrong.
    The plain mean of the imputed answers is the estimate; the reading fills the unasked items
    with the sources' rates shifted to the run's hit rate. The run that got i1 right reads
    above every source (75 %): with ``toward`` 0.5 and its ability surely above the sources'
    edge, its estimate lies half-way to the reading; at the edge (probability 1/2), a quarter
    of the way; far below it, or without an ability, it does not move. The other run never
    moves, and no span moves."""
    expected = np.full((2, 4), 0.5)
    asked = np.array([[False, True, False, False]] * 2)
    scores = np.array([[np.nan, 1.0, np.nan, np.nan], [np.nan, 0.0, np.nan, np.nan]])
    edge = SideBands(ABOVE, 0.75, (), ability_edge=1.0)
    still, low0, high0 = _score_map(0.0).predict_run(expected, asked, scores)
    score_map = replace(_score_map(0.5), sides=(edge,))
    reading = score_map.above_reading(still, asked, scores)
    assert reading[0] > 0.75 and reading[1] == still[1]  # only the first lies above
    sd = np.full(2, 0.01)
    for theta, share in [(5.0, 0.5), (1.0, 0.25), (-3.0, 0.0)]:
        moved, low, high = score_map.predict_run(expected, asked, scores, (np.full(2, theta), sd))
        assert moved[0] == pytest.approx(still[0] + share * (reading[0] - still[0]), abs=1e-6)
        assert moved[1] == still[1]
        np.testing.assert_array_equal(low, low0)
        np.testing.assert_array_equal(high, high0)
        assert low[0] <= moved[0] <= high[0]
    np.testing.assert_array_equal(score_map.predict_run(expected, asked, scores)[0], still)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_a_bad_share_is_refused(bad):
    with pytest.raises(InputError, match="toward_reading must lie in"):
        _score_map(bad)


def test_a_move_needs_the_reading():
    with pytest.raises(InputError, match="needs the pool's source_rates"):
        replace(_score_map(0.0), rates=None).with_toward(0.3)


def test_only_whole_benchmark_pools_choose_a_move():
    source, truth = _world()
    whole = fit_adaptive_state(source, truth)[1].calibration
    other = fit_adaptive_state(source, 0.05 + 0.9 * truth)[1].calibration
    assert set(whole["toward_mae_by_share"]) == {str(s) for s in TOWARD_CANDIDATES}
    assert other["toward_reading"] == 0.0 and other["toward_mae_by_share"] == {}


def test_refitted_folds_replay_on_their_own_item_parameters():
    source, truth = _world()
    params, _ = fit_adaptive_state(source, truth)
    values = source.values
    shared = directed_runs(source, truth, values, params, "ridge")
    assert all(
        run.params is params and run.above_edge is None for r in shared.values() for run in r
    )
    refit = _upward_refits(source, truth, values, params, "ridge", 0)
    assert [run.rows.tolist() for run in refit] == [run.rows.tolist() for run in shared[UP]]
    for run in refit:
        assert run.params.item_ids == params.item_ids
        assert not np.allclose(run.params.d, params.d)  # fitted without the held models
        assert run.above_edge is not None


def test_the_share_with_the_least_fold_error_is_chosen(monkeypatch):
    """The recorded errors are those of each share on the upward folds; the least wins, ties
    to the smaller move; without upward folds nothing moves."""
    source, truth = _world()
    params, _ = fit_adaptive_state(source, truth)
    runs = _upward_refits(source, truth, source.values, params, "ridge", 0)
    chosen, errors = choose_toward(runs, truth, (10, 20), 1.0)
    best = min(errors.values())
    assert errors[str(chosen)] == best
    assert all(float(s) >= chosen for s, e in errors.items() if e == best)
    assert choose_toward([], truth, (10, 20), 1.0) == (0.0, {})
    monkeypatch.setattr(beyond_module, "TOWARD_CANDIDATES", (0.0, 0.0))
    assert choose_toward(runs, truth, (10, 20), 1.0)[0] == 0.0


def test_the_share_is_saved_and_old_pools_do_not_move():
    bundle = build_pool(*_world(), name="p", benchmark="toy", estimator="ridge", chance=0.25)
    saved = dict(bundle.estimator_state(ADAPTIVE))
    pool = pool_state(bundle)
    toward = pool.state.calibration["toward_reading"]
    assert pool.state.score_map.toward == toward
    assert saved.get("toward_reading", 0.0) == toward
    saved["toward_reading"] = 0.4
    assert AdaptiveState.from_bundle(bundle, saved).score_map.toward == 0.4
    saved.pop("toward_reading")  # a pool saved before the move
    assert AdaptiveState.from_bundle(bundle, saved).score_map.toward == 0.0
    saved["toward_reading"] = 2.0
    with pytest.raises(BundleError, match="toward_reading must lie in"):
        AdaptiveState.from_bundle(bundle, saved)


@pytest.mark.slow
def test_ifevals_strongest_fifth_is_read_better_with_the_move(shared_data):
    """IFEval, the strongest fifth held out, a pool fitted on the rest: the move its upward
    folds chose cuts the error of max-information runs at 25 and 50 items (measured: 8.8 ->
    5.3 and 8.2 -> 5.1 points, ``bench/adaptive.md``), and the intervals still hold."""
    matrix = ResponseMatrix.read(shared_data / "openllm_v2" / "responses" / "ifeval.parquet")
    matrix, truth = complete_models(matrix, matrix.mean_scores())
    split = next(extrapolation_splits(matrix, truth, repeats=1, seed=0))
    params, state = fit_adaptive_state(split.source, split.source_truth)
    smap = state.score_map
    assert smap.toward > 0.0
    marks = (25, 50)
    values, target = split.target.values, split.target_truth
    runs = {
        share: replay(
            params,
            values,
            selector=MaxInfoSelector(),
            max_items=50,
            score_map=smap.with_toward(share),
            checkpoints=marks,
        )
        for share in (smap.toward, 0.0)
    }
    with_move, without = runs[smap.toward], runs[0.0]
    for n in marks:
        error = np.mean(np.abs(with_move.predictions[n] - target))
        assert error < np.mean(np.abs(without.predictions[n] - target)) - 0.01
        low, high = smap.interval(
            with_move.predictions[n], n, span=with_move.spans[n], ability=with_move.ability_at(n)
        )
        assert np.mean((low <= target) & (target <= high)) >= 0.85


def test_without_a_side_band_the_move_is_weighted_at_the_pools_own_edge():
    """A pool too small for upward folds has no side band to carry the ability edge: the move
    is weighted at ``toward_edge`` (the same by-hand case as above), and without an edge at all
    nothing moves."""
    expected = np.full((2, 4), 0.5)
    asked = np.array([[False, True, False, False]] * 2)
    scores = np.array([[np.nan, 1.0, np.nan, np.nan], [np.nan, 0.0, np.nan, np.nan]])
    still = _score_map(0.0).predict_run(expected, asked, scores)[0]
    score_map = _score_map(0.0).with_toward(0.5, edge=1.0)
    reading = score_map.above_reading(still, asked, scores)
    sd = np.full(2, 0.01)
    for theta, share in [(5.0, 0.5), (1.0, 0.25), (-3.0, 0.0)]:
        moved = score_map.predict_run(expected, asked, scores, (np.full(2, theta), sd))[0]
        assert moved[0] == pytest.approx(still[0] + share * (reading[0] - still[0]), abs=1e-6)
    no_edge = _score_map(0.5)
    ability = (np.full(2, 5.0), sd)
    np.testing.assert_array_equal(no_edge.predict_run(expected, asked, scores, ability)[0], still)
    with pytest.raises(InputError, match="toward_edge must be a finite ability"):
        _score_map(0.0).with_toward(0.5, edge=float("inf"))


def test_a_whole_benchmark_pool_without_upward_folds_takes_the_static_guards_move():
    """40 sources: the strongest fifth holds 8 models, too few for a fold. A whole-benchmark
    pool then moves the whole way (by the probability of lying above its strongest sources'
    ability), saves that edge and reads it back; a pool whose target is not the matrix mean
    does not move."""
    params = random_item_params(20, seed=3)
    source, _ = simulate_responses(params, 40, seed=4)
    truth = source.mean_scores()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the few-sources warning, as meant
        _, state = fit_adaptive_state(source, truth, estimator="ridge")
        _, other = fit_adaptive_state(source, 0.05 + 0.9 * truth, estimator="ridge")
    smap = state.score_map
    assert not smap.has_upward_folds and smap.toward == beyond_module.UNCHOSEN_TOWARD
    assert smap.toward_edge is not None and np.isfinite(smap.toward_edge)
    assert state.calibration["toward_reading"] == beyond_module.UNCHOSEN_TOWARD
    assert other.score_map.toward == 0.0 and other.score_map.toward_edge is None
    saved = state.to_dict()
    assert saved["toward_edge"] == smap.toward_edge
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bundle = build_pool(source, truth, name="few", benchmark="toy", estimator="ridge")
    loaded = AdaptiveState.from_bundle(bundle, saved).score_map
    assert loaded.toward_edge == smap.toward_edge and loaded.toward == smap.toward
    assert pool_state(bundle).state.score_map.toward_edge == smap.toward_edge


def test_a_new_share_keeps_the_saved_edge():
    smap = _score_map(0.0).with_toward(0.5, edge=1.0)
    assert smap.with_toward(0.3).toward_edge == 1.0
    assert smap.with_toward(0.3, edge=2.0).toward_edge == 2.0
