"""``ridge`` and ``kridge``: synthetic recovery, exact leave-one-out, coverage, the range guard."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lmeval_microbench.errors import InputError, ItemMismatchError
from lmeval_microbench.estimators import ScoreEstimator, estimator_from_state, make_estimator
from lmeval_microbench.estimators.ridge import (
    BLEND_GRID,
    FALLBACK_BLEND,
    fit_ridge_loo,
    guard_weight,
    hamming,
    line_with_loo,
    thin_svd,
)
from lmeval_microbench.irt.params import ItemParams
from lmeval_microbench.responses import ResponseMatrix, decode_rows, encode_rows
from lmeval_microbench.selection.base import Subset

NAMES = ("ridge", "kridge")
OPTIONS = {"ridge": {}, "kridge": {"n_landmarks": 300}}
"""Fewer landmarks than the default keep the tests fast; the method is the same."""


def make(name: str, **kwargs: object) -> ScoreEstimator:
    return make_estimator(name, **{**OPTIONS.get(name, {}), **kwargs})


N_ITEMS = 120
BUDGET = 40


def simulate(seed: int, n_models: int, *, families: int = 0) -> tuple[ResponseMatrix, np.ndarray]:
    """2PL answers of ``n_models`` models; with ``families`` > 0, models come in families.

    A family shares a base ability and an answer pattern (members copy 85 % of the family's
    answers), like fine-tunes of one base model, and a family offset of the full score that
    the item means do not show (the full benchmark holds items the matrix lacks).
    Returns the matrix and the full score (fractions).
    """
    rng = np.random.default_rng(seed)
    ids = [f"syn.{k}" for k in rng.permutation(N_ITEMS)]  # ids not in column order
    params = ItemParams(
        tuple(ids),
        rng.lognormal(0.0, 0.3, N_ITEMS),
        rng.normal(0.0, 1.2, N_ITEMS),
        np.zeros(N_ITEMS),
        np.ones(N_ITEMS),
        "2pl",
    )
    theta = rng.normal(size=n_models)
    answers = (rng.random((n_models, N_ITEMS)) < params.probability(theta)).astype(float)
    hidden = np.zeros(n_models)
    if families:
        family = rng.integers(families, size=n_models)
        base_theta = rng.normal(size=families)
        theta = base_theta[family] + 0.3 * rng.normal(size=n_models)
        pattern = (rng.random((families, N_ITEMS)) < params.probability(base_theta)).astype(float)
        own = (rng.random((n_models, N_ITEMS)) < params.probability(theta)).astype(float)
        copy = rng.random((n_models, N_ITEMS)) < 0.85
        answers = np.where(copy, pattern[family], own)
        hidden = rng.normal(0.0, 0.04, families)[family]
    score = np.clip(answers.mean(axis=1) * 0.8 + 0.1 + hidden, 0.0, 1.0)
    models = [f"model-{k}" for k in range(n_models)]
    return ResponseMatrix(answers, models, ids), score


def split(matrix: ResponseMatrix, score: np.ndarray, rows: np.ndarray) -> tuple:
    keep = np.zeros(matrix.n_models, dtype=bool)
    keep[rows] = True
    source = matrix.select_models([m for m, k in zip(matrix.model_ids, keep, strict=True) if k])
    target = matrix.select_models([m for m, k in zip(matrix.model_ids, keep, strict=True) if not k])
    return source, score[keep], target, score[~keep]


def subset_of(matrix: ResponseMatrix, seed: int = 3, budget: int = BUDGET) -> Subset:
    ids = tuple(np.random.default_rng(seed).choice(matrix.item_ids, size=budget, replace=False))
    return Subset(ids, np.full(budget, 1.0 / budget), "random", seed)


@pytest.fixture(scope="module")
def world() -> dict:
    matrix, score = simulate(1, 1000)
    source, source_score, target, target_score = split(matrix, score, np.arange(700))
    subset = subset_of(matrix)
    fits = {name: make(name).fit(source, subset, source_score) for name in NAMES}
    fits["mean"] = make_estimator("mean").fit(source, subset, source_score)
    return {
        "source": source,
        "source_score": source_score,
        "target": target,
        "target_score": target_score,
        "subset": subset,
        "fits": fits,
    }


def rmse(estimate: np.ndarray, truth: np.ndarray) -> float:
    return float(np.sqrt(np.mean((estimate - truth) ** 2)))


# ---------------------------------------------------------------------- linear algebra
def test_leave_one_out_predictions_equal_refits_without_the_model() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 8))
    free = rng.normal(size=(60, 1))
    y = x @ rng.normal(size=8) + 2.0 * free[:, 0] + rng.normal(size=60)
    fit = fit_ridge_loo(x, y, free, alphas=[0.05])
    for i in (0, 17, 59):
        keep = np.arange(60) != i
        alone = fit_ridge_loo(x[keep], y[keep], free[keep], alphas=[0.05 * 60 / 59])
        design = np.concatenate([[1.0], free[i]])
        assert fit.loo_prediction[i] == pytest.approx(alone.predict(design, x[i]), abs=1e-9)
    _, _, loo = line_with_loo(free[:, 0], y)
    keep = np.arange(60) != 5
    b, a = np.polyfit(free[keep, 0], y[keep], 1)
    assert loo[5] == pytest.approx(a + b * free[5, 0], abs=1e-9)


def test_free_columns_are_not_shrunk() -> None:
    """With a huge penalty the items drop out but the subset-score slope stays unbiased."""
    rng = np.random.default_rng(1)
    free = rng.uniform(0, 1, size=(300, 1))
    x = rng.integers(0, 2, size=(300, 20)).astype(float)
    y = 0.2 + 0.5 * free[:, 0] + 0.01 * rng.normal(size=300)
    fit = fit_ridge_loo(x, y, free, alphas=[1e6])
    assert fit.beta == pytest.approx([0.2, 0.5], abs=0.01)
    assert np.abs(fit.coef).max() < 1e-4


def test_rows_round_trip_through_their_json_encoding() -> None:
    bits = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert encode_rows(bits) == ["011", "100"]
    np.testing.assert_array_equal(decode_rows(encode_rows(bits), 3), bits)
    partial = np.array([[0.5, 1.0]])
    np.testing.assert_array_equal(decode_rows(encode_rows(partial), 2), partial)


def test_hamming_is_the_mean_absolute_difference_also_for_partial_scores() -> None:
    rng = np.random.default_rng(2)
    for a, b in (
        (rng.integers(0, 2, (9, 6)).astype(float), rng.integers(0, 2, (4, 6)).astype(float)),
        (rng.random((9, 6)), rng.random((4, 6))),
    ):
        np.testing.assert_allclose(hamming(a, b), np.abs(a[:, None] - b[None]).mean(axis=2))


def test_guard_weight_is_zero_inside_the_source_range() -> None:
    weight = guard_weight(np.array([0.5, 0.79, 0.81, 0.95]), 0.8, 0.25)
    np.testing.assert_array_equal(weight, [0.0, 0.0, 0.25, 0.25])


# ---------------------------------------------------------------------- accuracy and intervals
@pytest.mark.parametrize("name", NAMES)
def test_recovers_heldout_scores_better_than_the_subset_mean(name: str, world: dict) -> None:
    value, _, _ = world["fits"][name].estimate_matrix(world["target"])
    mean_value, _, _ = world["fits"]["mean"].estimate_matrix(world["target"])
    truth = world["target_score"]
    # the subset is a random 40 of 120 items: the mean of the 40 has binomial noise the
    # regression cannot remove, but it must not be worse than the calibrated mean
    assert rmse(value, truth) <= 1.02 * rmse(mean_value, truth)
    assert abs(float(np.mean(value - truth))) < 0.01
    assert np.corrcoef(value, truth)[0, 1] > 0.95


@pytest.mark.parametrize("name", NAMES)
def test_intervals_cover_heldout_models(name: str, world: dict) -> None:
    _, lower, upper = world["fits"][name].estimate_matrix(world["target"], level=0.9)
    truth = world["target_score"]
    assert 0.82 <= np.mean((lower <= truth) & (truth <= upper)) <= 0.97
    _, low50, up50 = world["fits"][name].estimate_matrix(world["target"], level=0.5)
    assert np.all(up50 - low50 <= upper - lower + 1e-12)


@pytest.fixture(scope="module")
def families() -> dict:
    """Families with a score offset the items do not show: only the kernel can learn it."""
    matrix, score = simulate(4, 1200, families=60)
    source, source_score, target, target_score = split(matrix, score, np.arange(900))
    subset = subset_of(matrix, budget=60)
    fits = {name: make(name).fit(source, subset, source_score) for name in NAMES}
    return {"fits": fits, "target": target, "target_score": target_score}


def test_kernel_borrows_from_near_duplicate_models(families: dict) -> None:
    errors = {
        name: rmse(fit.estimate_matrix(families["target"])[0], families["target_score"])
        for name, fit in families["fits"].items()
    }
    assert errors["kridge"] < 0.8 * errors["ridge"]


@pytest.mark.parametrize("name", NAMES)
def test_stronger_heldout_models_are_extrapolated_linearly(name: str) -> None:
    """Sources = the weakest 75 %: a linear truth must still hold above their range.

    The truth is linear in the item answers plus noise the items cannot see (sd 0.01); the
    split is on the noise-free part, so the targets are stronger, not luckier.
    """
    matrix, score = simulate(5, 1000)
    noisy = score + np.random.default_rng(5).normal(0.0, 0.01, score.size)
    subset = Subset(matrix.item_ids, np.full(N_ITEMS, 1.0 / N_ITEMS), "all")
    weakest = np.argsort(score, kind="stable")[:750]
    source, source_score, target, target_score = split(matrix, noisy, weakest)
    assert np.median(target_score) > source_score.max() - 0.02
    estimator = make(name).fit(source, subset, source_score)
    value, lower, upper = estimator.estimate_matrix(target)
    error = value - target_score
    assert np.mean(np.abs(error)) < 0.015
    assert abs(float(np.mean(error))) < 0.005
    assert np.mean((lower <= target_score) & (target_score <= upper)) >= 0.85


def test_guard_blends_in_the_line_when_the_regression_flattens() -> None:
    """The source is cut at the top (selection on the score); a flat-topped fit is corrected."""
    matrix, score = simulate(6, 1500)
    rng = np.random.default_rng(6)
    noisy = np.clip(score + rng.normal(0.0, 0.03, score.size), 0.0, 1.0)
    cut = np.quantile(noisy, 0.7)
    source, source_score, target, target_score = split(matrix, noisy, np.flatnonzero(noisy <= cut))
    subset = subset_of(matrix, budget=30)
    guarded = make_estimator("ridge").fit(source, subset, source_score)
    bare = make_estimator("ridge", guard=False).fit(source, subset, source_score)
    assert guarded.head_["blend"] in BLEND_GRID and bare.head_["blend"] == 0.0
    error = {
        "guarded": np.mean(guarded.estimate_matrix(target)[0] - target_score),
        "bare": np.mean(bare.estimate_matrix(target)[0] - target_score),
    }
    assert error["bare"] < 0  # truncation bias: the bare fit underestimates the strong models
    assert abs(error["guarded"]) <= abs(error["bare"])


def test_few_sources_fall_back_to_a_fixed_blend(world: dict) -> None:
    source = world["source"].select_models(world["source"].model_ids[:40])
    estimator = make_estimator("ridge").fit(source, world["subset"], world["source_score"][:40])
    assert estimator.head_["blend"] == FALLBACK_BLEND
    assert estimator.head_["guard_residuals"] == []


# ---------------------------------------------------------------------- ids, state, checks
@pytest.mark.parametrize("name", NAMES)
def test_estimate_joins_by_item_id(name: str, world: dict) -> None:
    estimator = world["fits"][name]
    model = world["target"].model_ids[7]
    scores = world["target"].row(model)
    shuffled = dict(sorted(scores.items(), key=lambda kv: kv[0][::-1]))
    first, second = estimator.estimate(scores), estimator.estimate(shuffled)
    np.testing.assert_array_equal(list(first.as_dict().values()), list(second.as_dict().values()))
    value, lower, upper = estimator.estimate_matrix(world["target"].select_models([model]))
    assert (first.value, first.lower, first.upper) == pytest.approx(
        (value[0], lower[0], upper[0]), abs=1e-12
    )
    reversed_items = world["target"].select_items(list(reversed(world["target"].item_ids)))
    np.testing.assert_allclose(
        estimator.estimate_matrix(reversed_items)[0], estimator.estimate_matrix(world["target"])[0]
    )
    del scores[world["subset"].item_ids[4]]
    with pytest.raises(ItemMismatchError, match=world["subset"].item_ids[4].replace(".", r"\.")):
        estimator.estimate(scores)


@pytest.mark.parametrize("name", NAMES)
def test_state_round_trip_through_json(name: str, world: dict) -> None:
    estimator = world["fits"][name]
    state = json.loads(json.dumps(estimator.state_dict()))
    restored = estimator_from_state(state)
    assert type(restored) is type(estimator)
    for before, after in zip(
        estimator.estimate_matrix(world["target"], return_se=True),
        restored.estimate_matrix(world["target"], return_se=True),
        strict=True,
    ):
        np.testing.assert_array_equal(before, after)


def test_kridge_state_keeps_the_kernel_compactly(families: dict) -> None:
    head = families["fits"]["kridge"].state_dict()["head"]
    assert head["kernel"] is not None  # leave-one-out keeps it where families exist
    landmarks = head["kernel"]["landmarks"]
    assert all(isinstance(row, str) and len(row) == 60 for row in landmarks)
    assert len(landmarks) == len(set(landmarks)) <= OPTIONS["kridge"]["n_landmarks"]


def test_fit_is_deterministic_and_uses_only_the_source(world: dict) -> None:
    again = make("kridge").fit(world["source"], world["subset"], world["source_score"])
    assert json.dumps(again.state_dict()) == json.dumps(world["fits"]["kridge"].state_dict())


def test_bad_parameters_are_rejected(world: dict) -> None:
    for kwargs, word in (
        ({"kernel": "yes"}, "kernel"),
        ({"guard": 1}, "guard"),
        ({"n_landmarks": 1}, "n_landmarks"),
    ):
        with pytest.raises(InputError, match=word):
            make_estimator("kridge", **kwargs).fit(
                world["source"], world["subset"], world["source_score"]
            )
    with pytest.raises(InputError, match="allow_missing"):
        world["fits"]["ridge"].estimate(
            world["target"].row(world["target"].model_ids[0]), allow_missing=True
        )


# ---------------------------------------------------------------------- real data
def real_split(shared_data: Path, protocol: str) -> tuple:
    """mmlu of the Open LLM Leaderboard v1: a random 80/20 split, or the best 20 % as targets."""
    folder = shared_data / "openllm_v1"
    matrix = ResponseMatrix.read_parquet(folder / "responses" / "mmlu_B.parquet")
    scores = pd.read_csv(folder / "scores" / "mmlu_B_scores.csv").drop_duplicates("model")
    truth = scores.set_index("model")["full_score_metabench"].reindex(list(matrix.model_ids))
    known = [m for m, value in truth.items() if np.isfinite(value)]
    matrix, truth = matrix.select_models(known), truth.loc[known].to_numpy() / 100.0
    if protocol == "random":
        rows = np.random.default_rng(0).permutation(matrix.n_models)[matrix.n_models // 5 :]
    else:
        rows = np.argsort(truth, kind="stable")[: matrix.n_models - matrix.n_models // 5]
    return split(matrix, truth, np.sort(rows))


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["random", "extrapolation"])
def test_real_mmlu_all_items(shared_data: Path, protocol: str) -> None:
    """kridge beats ridge in range; stronger models keep a bounded error and honest intervals."""
    source, source_score, target, target_score = real_split(shared_data, protocol)
    subset = Subset(source.item_ids, np.full(source.n_items, 1.0 / source.n_items), "all")
    errors, coverage = {}, {}
    for name in NAMES:
        value, lower, upper = (
            make_estimator(name).fit(source, subset, source_score).estimate_matrix(target)
        )
        errors[name] = 100 * float(np.mean(np.abs(value - target_score)))
        coverage[name] = float(np.mean((lower <= target_score) & (target_score <= upper)))
    if protocol == "random":
        assert errors["kridge"] < 0.8 * errors["ridge"] and errors["kridge"] < 1.1
        assert 0.85 <= coverage["kridge"] <= 0.95
    else:  # the calibrated spline head: MAE 5 points, coverage 0.22 on this split
        assert max(errors.values()) < 3.0
        assert min(coverage.values()) >= 0.85


@pytest.mark.parametrize("shape", [(60, 8), (8, 60)])
def test_thin_svd_reconstructs_tall_and_wide_matrices(shape):
    """Wide designs (few models, many items) go through the small Gram matrix of the rows."""
    matrix = np.random.default_rng(0).normal(size=shape)
    u, s, vt = thin_svd(matrix)
    rank = min(shape)
    assert u.shape == (shape[0], rank) and s.shape == (rank,) and vt.shape == (rank, shape[1])
    np.testing.assert_allclose((u * s) @ vt, matrix, atol=1e-10)
    np.testing.assert_allclose(u.T @ u, np.eye(rank), atol=1e-10)
    np.testing.assert_allclose(vt @ vt.T, np.eye(rank), atol=1e-10)
