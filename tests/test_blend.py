"""``blend``: the mean of estimators on the same items, and the fallback that uses it."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from lmeval_microbench.auto import FALLBACK, FALLBACK_CALIBRATED, choose_recipe
from lmeval_microbench.build import build_bundle
from lmeval_microbench.errors import InputError
from lmeval_microbench.estimators import (
    FITTED_BY_DEFAULT,
    BlendEstimator,
    estimator_from_state,
    make_estimator,
)
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import make_selector


def world(seed: int, n_source: int = 10, n_target: int = 40, shift: float = 0.0):
    """2PL items; sources' abilities on [-1.5, 1], targets' on the same range moved by
    ``shift``. The truth is each model's mean over every item (a whole benchmark)."""
    rng = np.random.default_rng(seed)
    n_items = 200
    slope, easy = rng.lognormal(0.0, 0.3, n_items), rng.normal(0.0, 1.2, n_items)
    theta = np.concatenate(
        [rng.uniform(-1.5, 1.0, n_source), rng.uniform(-1.5, 1.0, n_target) + shift]
    )
    chance = 1.0 / (1.0 + np.exp(-(slope * theta[:, None] + easy)))
    values = (rng.random(chance.shape) < chance).astype(float)
    models = [f"m{k}" for k in range(theta.size)]
    matrix = ResponseMatrix(values, models, [f"b.{k}" for k in range(n_items)], source="world")
    return matrix.select_models(models[:n_source]), matrix.select_models(models[n_source:])


def fitted(name: str, source: ResponseMatrix, budget: int = 40, **params):
    subset = make_selector("random").select(source, budget, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator = make_estimator(name, **params).fit(source, subset, source.mean_scores())
    return estimator, subset


def estimates(estimator, target: ResponseMatrix):
    return np.asarray(estimator.estimate_matrix(target.select_items(estimator.item_ids_)))


def test_the_blend_is_the_mean_of_its_members_fitted_alone():
    """By hand: value, lower and upper are the means of guarded's and similar's, each fitted
    on its own on the same sources and items."""
    source, target = world(0)
    blend, _ = fitted("blend", source)
    parts = [estimates(fitted(name, source)[0], target) for name in ("guarded", "similar")]
    np.testing.assert_allclose(estimates(blend, target), (parts[0] + parts[1]) / 2, atol=1e-12)


def test_state_round_trip_and_the_floor_and_widening_reach_the_members():
    source, target = world(1)
    blend, _ = fitted("blend", source)
    blend.with_floor(0.25)
    assert blend.members_[0].floor_ == 0.25  # guarded keeps it; similar has none
    before = estimates(blend, target)
    blend.widen_intervals(2.0)
    after = estimates(blend, target)
    np.testing.assert_allclose(after[0], before[0])
    assert np.all(after[2] - after[1] >= before[2] - before[1] - 1e-12)
    assert np.any(after[2] - after[1] > before[2] - before[1] + 1e-6)
    state = json.loads(json.dumps(blend.state_dict(), allow_nan=False))
    np.testing.assert_allclose(estimates(estimator_from_state(state), target), after)


def test_a_cross_fit_calibrates_the_members_on_the_blends_re_selected_errors():
    """Re-selected estimates far from the truth (a selection that fitted its sources) must
    widen the interval inside the sources, as they do for ``guarded`` alone."""
    source, target = world(2, n_source=40)
    subset = make_selector("random").select(source, 40, seed=0)
    truth = source.mean_scores()
    off = truth + np.where(np.arange(truth.size) % 2, 0.25, -0.25)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = BlendEstimator().fit(source, subset, truth)
        crossed = BlendEstimator().fit(source, subset, truth, cross_fit=off)
    width = [np.mean(np.diff(estimates(e, target)[1:], axis=0)) for e in (plain, crossed)]
    assert width[1] > width[0] + 0.02


@pytest.mark.parametrize(
    ("members", "message"),
    [
        (["guarded"], "two or more"),
        (["guarded", "guarded"], "distinct"),
        (["guarded", "blend"], "blend"),
        (["guarded", "nope"], "nope"),
    ],
)
def test_bad_members_are_refused_by_name(members, message):
    source, _ = world(3)
    subset = make_selector("random").select(source, 20, seed=0)
    with pytest.raises(InputError, match=message):
        BlendEstimator(members=members).fit(source, subset, source.mean_scores())


def _reversed(state):
    state["members"] = state["members"][::-1]


def _emptied(state):
    state["members"] = []


def _not_a_list(state):
    state["members"] = 3


def _member_broken(state):
    del state["members"][1]["reading"]


def _other_items(state):
    state["members"][0]["item_ids"] = ["x"] * len(state["item_ids"])
    state["members"][0]["inner_state"]["item_ids"] = state["members"][0]["item_ids"]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (_reversed, "saved members"),
        (_emptied, "saved members"),
        (_not_a_list, "malformed"),
        (_member_broken, "lacks field 'reading'"),
        (_other_items, "other items"),
    ],
)
def test_a_damaged_state_is_refused_in_one_line(damage, message):
    source, _ = world(4)
    state = json.loads(json.dumps(fitted("blend", source)[0].state_dict()))
    damage(state)
    with pytest.raises(InputError, match=message):
        estimator_from_state(state)


def test_ten_models_whose_mean_is_the_score_fall_back_to_the_blend():
    source, _ = world(5)
    choice = choose_recipe(source, source.mean_scores(), budgets=[20], progress=False)
    assert (choice.method, choice.estimator) == (FALLBACK.method, FALLBACK.estimator)
    assert FALLBACK.estimator == "blend" and FALLBACK_CALIBRATED.estimator == "guarded"


def test_coverage_holds_for_models_like_and_beyond_ten_sources():
    """Random items, 10 sources: the 90 % interval covers most held-out models, whether they
    are like the sources or a whole logit above them (12 worlds, 40 targets each)."""
    covered = {0.0: [], 1.0: []}
    for seed in range(12):
        for shift in covered:
            source, target = world(100 + seed, shift=shift)
            blend, _ = fitted("blend", source)
            _, lower, upper = estimates(blend, target)
            truth = target.mean_scores()
            covered[shift].append(np.mean((lower <= truth) & (truth <= upper)))
    assert np.mean(covered[0.0]) >= 0.85
    assert np.mean(covered[1.0]) >= 0.85


@pytest.mark.slow  # 11-25 s: the default run stays under 15 minutes
def test_a_build_fits_the_blend_only_where_it_is_the_default_or_named():
    """It would fit guarded and similar a second time in every build."""
    source, _ = world(6, n_source=30)
    truth = source.mean_scores()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = build_bundle(source, truth, name="b", benchmark="b", method="random", budget=30)
        chosen = build_bundle(
            source,
            truth,
            name="b",
            benchmark="b",
            method="random",
            budget=30,
            default_estimator="blend",
        )
    assert "blend" not in {spec.name for spec in plain.estimators}
    assert {"guarded", "similar"} <= {spec.name for spec in plain.estimators}
    assert chosen.default_estimator == "blend"
    assert {spec.name for spec in chosen.estimators} == {*FITTED_BY_DEFAULT, "blend"}


@pytest.mark.parametrize("budget", [1, 3])
def test_a_budget_under_four_items_builds_without_similar_and_blend(budget):
    """``similar`` reads at least 4 items; a default build of fewer leaves it out instead of
    refusing, and the 10-model fallback reads them with ``guarded`` alone."""
    source, _ = world(7)
    truth = source.mean_scores()
    choice = choose_recipe(source, truth, budgets=[budget], progress=False)
    assert choice.estimator == FALLBACK_CALIBRATED.estimator
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bundle = build_bundle(
            source,
            truth,
            name="b",
            benchmark="b",
            method=choice.method,
            budget=budget,
            default_estimator=choice.estimator,
        )
    names = {spec.name for spec in bundle.estimators}
    assert "similar" not in names and "blend" not in names and "guarded" in names
