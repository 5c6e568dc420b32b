"""Partial runs: unscored subset items imputed from the IRT fit (estimators.missing)."""

from __future__ import annotations

import dataclasses
import glob
import json

import numpy as np
import pytest

from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle import load_bundle
from lmeval_microbench.errors import InputError
from lmeval_microbench.estimators import ESTIMATORS, estimator_from_state
from lmeval_microbench.estimators.missing import (
    inflation_draws,
    inflation_of,
    is_prefix,
    keep_pattern,
)
from lmeval_microbench.harness import include_path
from lmeval_microbench.irt import estimate_abilities, posterior_draws
from lmeval_microbench.irt.params import ItemParams
from lmeval_microbench.reconstruct import bundle_estimator
from lmeval_microbench.reliability import interval_coverage
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.synthetic import random_item_params, simulate_responses

N_ITEMS = 60


def two_block_world(seed: int = 0) -> tuple[ResponseMatrix, np.ndarray]:
    """Items 0-29 measure one skill, 30-59 another (correlation 0.6): a 1-D IRT imputation
    of the second block from the first is right on average but too sure of itself."""
    rng = np.random.default_rng(seed)
    base = random_item_params(N_ITEMS, seed=seed)
    a = np.zeros((N_ITEMS, 2))
    a[: N_ITEMS // 2, 0] = base.a[: N_ITEMS // 2, 0] * 1.5
    a[N_ITEMS // 2 :, 1] = base.a[N_ITEMS // 2 :, 0] * 1.5
    params = ItemParams(base.item_ids, a, base.d, base.g, base.u)
    theta = rng.multivariate_normal([0, 0], [[1, 0.6], [0.6, 1]], size=1000)
    matrix, _ = simulate_responses(params, 1000, seed=seed + 1, theta=theta)
    return matrix, params.probability(theta).mean(axis=1)


@pytest.fixture(scope="module")
def world() -> dict:
    matrix, truth = two_block_world()
    source = matrix.select_models(matrix.model_ids[:700])
    target = matrix.select_models(matrix.model_ids[700:])
    bundle = build_bundle(
        source,
        truth[:700],
        name="blocks",
        benchmark="toy",
        method="random",
        budget=N_ITEMS,
        seed=0,
        estimators=["mean", "kridge"],
        default_estimator="kridge",
    )
    order = target.item_positions(bundle.item_ids)
    return {"bundle": bundle, "values": target.values[:, order], "truth": truth[700:]}


def coverage(estimator, values: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    matrix = ResponseMatrix(values, [f"m{k}" for k in range(len(values))], estimator.item_ids_)
    value, lower, upper = estimator.estimate_matrix(matrix, allow_missing=True)
    return interval_coverage(truth, lower, upper), float(np.mean(value - truth))


@pytest.mark.parametrize("keep", [10, 30, 50])
def test_a_limit_run_keeps_its_interval_honest(world, keep):
    """--limit keeps the first items; estimates stay unbiased and 90 % intervals cover."""
    estimator = bundle_estimator(world["bundle"])
    values = keep_pattern(world["values"], "first", keep, np.random.default_rng(0))
    cover, bias = coverage(estimator, values, world["truth"])
    assert 0.85 <= cover <= 0.99
    assert abs(bias) < 0.015


def test_without_the_measured_inflation_the_interval_would_be_too_narrow(world):
    estimator = bundle_estimator(world["bundle"])
    assert estimator.missing_inflation_["first"][0] > 1.2
    values = keep_pattern(world["values"], "first", 20, np.random.default_rng(0))
    honest, _ = coverage(estimator, values, world["truth"])
    estimator.missing_inflation_ = None
    naive, _ = coverage(estimator, values, world["truth"])
    assert naive < honest


def test_every_estimator_imputes_and_fewer_items_widen_the_interval(world):
    estimator = bundle_estimator(world["bundle"], "mean")
    row = world["values"][0]
    widths = []
    for keep in (10, 30, N_ITEMS):
        scores = dict(zip(estimator.item_ids_[:keep], row[:keep], strict=True))
        estimate = estimator.estimate(scores, allow_missing=keep < N_ITEMS)
        widths.append(estimate.upper - estimate.lower)
    assert widths[0] > widths[1] > widths[2]


def test_estimates_do_not_depend_on_the_other_models_estimated(world):
    estimator = bundle_estimator(world["bundle"])
    values = keep_pattern(world["values"][:6], "random", 25, np.random.default_rng(3))
    ids = list(estimator.item_ids_)
    together = estimator.estimate_matrix(
        ResponseMatrix(values, list("abcdef"), ids), allow_missing=True
    )
    alone = estimator.estimate_matrix(ResponseMatrix(values[3:4], ["d"], ids), allow_missing=True)
    assert [part[3] for part in together] == pytest.approx([part[0] for part in alone], abs=0)


def test_a_gap_without_allow_missing_is_refused_naming_the_model_the_item_and_the_way_out(world):
    estimator = bundle_estimator(world["bundle"], "kridge")
    values = world["values"][:3].copy()
    values[1, 4] = np.nan
    matrix = ResponseMatrix(values, ["a", "b", "c"], estimator.item_ids_, source="runs.parquet")
    item = estimator.item_ids_[4]
    with pytest.raises(InputError, match=rf"runs.parquet: model 'b' .* item '{item}' \(1 such "):
        estimator.estimate_matrix(matrix)
    with pytest.raises(InputError, match="--allow-missing, or allow_missing=True, imputes them"):
        estimator.estimate_matrix(matrix)
    assert np.isfinite(estimator.estimate_matrix(matrix, allow_missing=True)[0]).all()


def test_allow_missing_without_irt_parameters_is_refused(world):
    bundle = dataclasses.replace(world["bundle"], irt=None)
    estimator = bundle_estimator(bundle, "kridge")
    with pytest.raises(InputError, match="imputes unscored items from IRT parameters"):
        estimator.estimate({estimator.item_ids_[0]: 1.0}, allow_missing=True)


def test_inflation_survives_the_state_and_bad_states_are_refused(world):
    estimator = bundle_estimator(world["bundle"])
    state = estimator.state_dict()
    assert estimator_from_state(state).missing_inflation_ == estimator.missing_inflation_
    for broken in ({"fractions": [0.5]}, {**state["missing_inflation"], "first": [0.5, 1, 1]}):
        with pytest.raises(InputError, match="missing_inflation"):
            estimator_from_state({**state, "missing_inflation": broken})


def test_shared_draws_give_each_estimator_its_own_factors():
    """A build draws the partial runs once for all its estimators: each estimator's factors
    are those it measures on draws of its own, and draws of other items are not used."""
    matrix, truth = two_block_world(seed=2)
    source = matrix.select_models(matrix.model_ids[:300])
    bundle = build_bundle(
        source, truth[:300], name="b", benchmark="toy", method="random", budget=20, seed=1,
        estimators=["mean", "kridge"], default_estimator="kridge",
    )  # fmt: skip
    values = source.values[:, source.item_positions(bundle.item_ids)]
    shared = inflation_draws(bundle.irt.subset(list(bundle.item_ids)), values, seed=1)
    other = inflation_draws(bundle.irt.subset(list(bundle.item_ids[::-1])), values, seed=1)
    for name in ("mean", "kridge"):
        estimator = bundle_estimator(bundle, name)
        alone = estimator.calibrate_missing(source, seed=1).missing_inflation_
        assert alone == estimator.calibrate_missing(source, 1, shared).missing_inflation_
        assert alone == estimator.calibrate_missing(source, 1, other).missing_inflation_
        assert alone == bundle_estimator(bundle, name).missing_inflation_
    assert bundle_estimator(bundle, "mean").missing_inflation_ != alone  # factors differ


def test_prefix_patterns_use_the_prefix_curve():
    curves = {"fractions": [0.1, 0.9], "first": [3.0, 3.0], "random": [1.0, 1.0]}
    rows = np.array([[1.0, 0.0, np.nan, np.nan], [1.0, np.nan, 0.0, np.nan]])
    assert is_prefix(rows[0]) and not is_prefix(rows[1])
    assert inflation_of(curves, rows).tolist() == [3.0, 1.0]
    assert inflation_of(None, rows).tolist() == [1.0, 1.0]


def test_posterior_draws_match_the_eap_mean_and_se():
    params = random_item_params(40, seed=5)
    matrix, _ = simulate_responses(params, 5, seed=6)
    values = matrix.values.copy()
    values[:, 20:] = np.nan
    draws = posterior_draws(params, values, params.item_ids, 20000, np.random.default_rng(0))
    mean, se = estimate_abilities(params, values, params.item_ids)
    assert draws.shape == (5, 20000, 1)
    assert draws.mean(axis=1)[:, 0] == pytest.approx(mean[:, 0], abs=0.02)
    assert draws.std(axis=1)[:, 0] == pytest.approx(se[:, 0], rel=0.05)


def test_a_real_limit_run_is_no_longer_estimated_at_zero(shared_data):
    """Issue 8.1: pythia-14m's first 50 winogrande items were estimated at 0.0 [0.0, 4.9]."""
    folder = include_path() / "openllm_v1" / "winogrande"
    bundle = load_bundle(folder)
    (path,) = glob.glob(str(shared_data / "lm_eval_samples/pythia-14m/*winogrande*"))
    lines = [json.loads(line) for line in open(path, encoding="utf-8")]
    scores = {f"winogrande.{r['doc']['metabench_idx']}": float(r["acc"]) for r in lines}
    for name in ("kridge", "calibrated"):
        estimator = bundle_estimator(bundle, name)
        full = estimator.estimate({i: scores[i] for i in bundle.item_ids})
        half = estimator.estimate({i: scores[i] for i in bundle.item_ids[:50]}, allow_missing=True)
        assert half.lower <= full.value <= half.upper
        assert abs(half.value - full.value) < 0.05
        assert half.upper - half.lower > full.upper - full.lower


@pytest.mark.slow
def test_every_estimator_gives_the_same_estimates_after_its_state():
    """Whatever a fitted estimator was given after its fit (the build's floor, the choice's
    widening, the missing-answer inflation) must survive its saved state, for complete and
    for partial rows; composite and reading-based estimators write states of their own
    (``similar`` once lost its inflation there)."""
    matrix, truth = two_block_world(seed=1)
    names = sorted(set(ESTIMATORS) - {"anchor_sum"})  # anchor_sum: anchor items only
    bundle = build_bundle(
        matrix.select_models(matrix.model_ids[:300]), truth[:300], name="blocks",
        benchmark="toy", method="random", budget=30, seed=0, estimators=names,
        default_estimator="guarded",
    )  # fmt: skip
    order = matrix.item_positions(bundle.item_ids)
    values = matrix.values[300:340][:, order]
    partial = keep_pattern(values, "random", 20, np.random.default_rng(4))
    models = [f"t{k}" for k in range(len(values))]
    for name in names:
        estimator = bundle_estimator(bundle, name).with_floor(0.2).widen_intervals(1.3)
        assert estimator.missing_inflation_, name
        state = json.loads(json.dumps(estimator.state_dict()))
        loaded = estimator_from_state(state).with_imputation(bundle.irt)
        for rows, missing in ((values, False), (partial, True)):
            answers = ResponseMatrix(rows, models, list(bundle.item_ids))
            before, after = (
                e.estimate_matrix(answers, allow_missing=missing) for e in (estimator, loaded)
            )
            for x, y in zip(before, after, strict=True):
                np.testing.assert_array_equal(x, y, err_msg=f"{name} (missing: {missing})")
