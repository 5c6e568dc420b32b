"""A pool built from a few dozen source models: its side folds hold too few models for a
95 % conformal quantile (19 at least), which must stay unbounded, save as strict JSON and
load back (a 60-90 model pool once failed to save with ``inf is not valid JSON``)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tools_support import tools_module

from lmeval_microbench.adaptive import build_pool, pool_state
from lmeval_microbench.adaptive.bands import quantiles_from_json, quantiles_to_json
from lmeval_microbench.adaptive.pool import estimate_pool
from lmeval_microbench.adaptive.selection import MaxInfoSelector
from lmeval_microbench.adaptive.simulate import replay
from lmeval_microbench.bundle import BUNDLE_FILE, load_bundle, save_bundle
from lmeval_microbench.errors import FewSourcesWarning, InputError
from lmeval_microbench.outside.guard import REACH_Z
from lmeval_microbench.synthetic import random_item_params, simulate_responses

PARAMS = random_item_params(30, seed=4)


def _unbounded_fold_quantiles(state) -> int:
    return sum(
        int(np.isinf(quantiles).sum())
        for side in state.score_map.sides
        for fold in side.folds
        for band in fold
        for quantiles in band.quantiles.values()
    )


@pytest.fixture(scope="module")
def small_pool():
    matrix, _ = simulate_responses(PARAMS, 60, seed=5)
    return build_pool(
        matrix, matrix.mean_scores(), name="small-pool", benchmark="toy", estimator="ridge"
    )


def test_a_pool_of_60_models_saves_as_strict_json_and_loads_back(small_pool, tmp_path):
    assert _unbounded_fold_quantiles(pool_state(small_pool).state) > 0  # the case under test
    folder = save_bundle(small_pool, tmp_path / "pool")
    json.loads((folder / BUNDLE_FILE).read_text(), parse_constant=pytest.fail)
    loaded = pool_state(load_bundle(folder))
    assert _unbounded_fold_quantiles(loaded.state) == _unbounded_fold_quantiles(
        pool_state(small_pool).state
    )


def test_an_unbounded_band_gives_the_whole_range_not_nan(small_pool):
    view = pool_state(small_pool)
    everything_right = {item: 1.0 for item in PARAMS.item_ids}
    at_90 = estimate_pool(view, everything_right, level=0.9)
    at_95 = estimate_pool(view, everything_right, level=0.95)
    for found in (at_90, at_95):
        assert 0.0 <= found.lower <= found.value <= found.upper <= 1.0
    assert at_95.lower <= at_90.lower and at_95.upper >= at_90.upper


def test_stored_quantiles_write_unbounded_as_null_and_refuse_garbage():
    assert quantiles_to_json(np.array([0.5, np.inf])) == [0.5, None]
    np.testing.assert_array_equal(quantiles_from_json([0.5, None], "b"), [0.5, np.inf])
    for bad in ([-1.0], ["x"], [float("nan")]):
        with pytest.raises(InputError, match="b: quantiles must be numbers"):
            quantiles_from_json(bad, "b")


def test_too_few_models_for_the_folds_are_refused_with_the_users_count():
    matrix, _ = simulate_responses(PARAMS, 14, seed=6)
    with pytest.raises(InputError, match="at least 15 source models, got 14"):
        build_pool(matrix, matrix.mean_scores(), name="p", benchmark="toy", estimator="ridge")
    matrix, _ = simulate_responses(PARAMS, 15, seed=6)
    built = build_pool(matrix, matrix.mean_scores(), name="p", benchmark="toy", estimator="ridge")
    assert pool_state(built).state.calibration["n_source_models"] == 15


def test_fold_run_refits_the_item_parameters_on_the_fold_models_alone():
    """``refit_seed``: the replay uses item parameters fitted without the held-out models, as
    a new model meets them (what a pool of fewer than FOLD_IRT_BELOW sources calibrates on)."""
    from lmeval_microbench.adaptive.calibrate import fold_run
    from lmeval_microbench.build import fit_source_irt

    matrix, _ = simulate_responses(PARAMS, 40, seed=6)
    shared = fit_source_irt(matrix, seed=0)
    held = np.arange(40) < 10
    truth = matrix.mean_scores()
    kept = fold_run(matrix, truth, matrix.values, shared, held, "ridge")
    refit = fold_run(matrix, truth, matrix.values, shared, held, "ridge", refit_seed=0)
    alone = fit_source_irt(matrix.select_models(list(np.array(matrix.model_ids)[~held])), seed=0)
    assert kept.params is shared
    np.testing.assert_allclose(refit.params.a, alone.a)
    assert not np.allclose(refit.params.d, shared.d)
    asked = replay(alone, matrix.values[held], selector=MaxInfoSelector(), max_items=30).order
    np.testing.assert_array_equal(refit.order, asked)  # the replay itself used them


def test_a_pool_of_25_real_sources_covers_models_drawn_like_them(shared_data):
    """IFEval, 25 source models: with the item parameters fitted on every source, the folds'
    bands were too narrow and 90 % intervals held 0.74-0.79 of held-out models at 25 items on
    three seeds, 0.79 on this one (``bench/adaptive_sources_before_fold_irt.md``); refitted
    per fold, 0.91-0.94 (``bench/adaptive_sources.md``)."""
    from lmeval_microbench.adaptive.evaluate import estimate_targets

    peer_cells = tools_module("peer_cells")
    cell = peer_cells.Cell("ifeval", "25", "random", 50, 0)
    source, target, source_truth, target_truth = peer_cells.split_cell(cell, shared_data)
    _, lower, upper = estimate_targets(source, source_truth, target, [25])[25]
    assert np.mean((lower <= target_truth) & (target_truth <= upper)) >= 0.85


def test_a_whole_benchmark_pool_without_upward_folds_keeps_the_reach(small_pool):
    """Under 48 sources no upward fold bounds a run beyond them, so the span keeps the raised
    IRT-free reading (``ScoreMap.with_pool_reach``) and the build warns; with upward folds a
    whole-benchmark pool leaves it out, as before."""
    matrix, _ = simulate_responses(PARAMS, 30, seed=7)
    with pytest.warns(FewSourcesWarning, match="30 source models: too few to replay its strong"):
        few = build_pool(
            matrix, matrix.mean_scores(), name="few", benchmark="toy", estimator="ridge"
        )
    few_map = pool_state(few).state.score_map
    assert not any(side.side == "above" for side in few_map.sides)
    assert few_map.reach == REACH_Z
    assert pool_state(small_pool).state.score_map.reach == 0.0


def test_inside_folds_refit_their_irt_below_the_threshold_only(monkeypatch):
    """The inside folds replay on IRT refitted without their models under FOLD_IRT_BELOW
    sources and on the pool's own IRT from there on. The threshold is moved to the matrix's
    size, so both sides are one model apart."""
    from lmeval_microbench.adaptive import pool as pool_module

    matrix, _ = simulate_responses(PARAMS, 50, seed=8)
    seen: list[tuple[int, int | None]] = []
    real = pool_module.fold_run

    def spy(source, truth, values, params, held, *args, refit_seed=None, **kwargs):
        seen.append((int(held.sum()), refit_seed))
        return real(source, truth, values, params, held, *args, refit_seed=refit_seed, **kwargs)

    monkeypatch.setattr(pool_module, "fold_run", spy)
    refits = {}
    for threshold in (50, 51):
        monkeypatch.setattr(pool_module, "FOLD_IRT_BELOW", threshold)
        seen.clear()
        pool_module.fit_adaptive_state(matrix, matrix.mean_scores(), seed=3, estimator="ridge")
        inside = seen[: pool_module.CALIBRATION_FOLDS]
        assert sum(held for held, _ in inside) == 50  # the three inside folds come first
        refits[threshold] = {seed for _, seed in inside}
    assert refits == {50: {None}, 51: {3}}
