"""``guarded``'s floor: below the sources, on a target that is not the matrix mean, the lower
edge reaches the lowest score a model can have (issue 19, the weakest fifth)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from test_outside import world

from lmeval_microbench.build import build_bundle
from lmeval_microbench.errors import InputError
from lmeval_microbench.estimators import estimator_from_state, make_estimator
from lmeval_microbench.outside import floored
from lmeval_microbench.personfit import BELOW_CHANCE, lowest_score
from lmeval_microbench.selection.base import Subset

GUESSING = 0.25


def benchmark_score(matrix) -> np.ndarray:
    """A benchmark score that is not the matrix mean: the matrix is part of the benchmark."""
    return 0.1 + 0.8 * matrix.mean_scores()


def hard_subset(source, size: int = 40) -> Subset:
    """The items the sources found hardest: a weaker model misses them all alike, so they say
    nothing of how far below the sources it lies (as items chosen among strong models)."""
    order = np.argsort(source.values.mean(axis=0))[:size]
    return Subset(tuple(source.item_ids[k] for k in order), np.full(size, 1 / size), "hard")


def fitted_guarded(source, subset):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_estimator("guarded").fit(source, subset, benchmark_score(source))


@pytest.fixture(scope="module")
def weak_world():
    """Sources of ability [0, 2], targets of [-3, -2], 3PL items with a guessing floor."""
    source, target = world(seed=21, shift=-2.5, guessing=GUESSING)
    subset = hard_subset(source)
    return source, target, subset, fitted_guarded(source, subset)


def test_floored_moves_only_the_lower_edges_of_models_below():
    lower = np.array([0.5, 0.5, 0.1])
    got = floored(lower, np.array([0.9, 0.01, 0.9]), 0.2)
    np.testing.assert_allclose(got, [0.2, 0.5, 0.1])


def test_floor_restores_coverage_where_the_items_say_nothing_below_the_sources(weak_world):
    _source, target, subset, fitted = weak_world
    guarded = estimator_from_state(fitted.state_dict())
    assert guarded.guard_above_ is False and guarded.floor_ == 0.0
    items = target.select_items(subset.item_ids)
    truth = benchmark_score(target)
    state = guarded.state_dict()
    state.pop("floor")
    unfloored = estimator_from_state(state)
    assert unfloored.floor_ is None  # a state saved before the floor: its edges stay
    value, lower, upper = unfloored.estimate_matrix(items)
    assert np.mean((lower <= truth) & (truth <= upper)) < 0.5
    chance_score = 0.1 + 0.8 * GUESSING
    guarded.with_floor(chance_score - BELOW_CHANCE)
    floored_value, floored_lower, floored_upper = guarded.estimate_matrix(items)
    np.testing.assert_allclose(floored_value, value)
    np.testing.assert_allclose(floored_upper, upper)
    assert np.all(floored_lower <= lower + 1e-12)
    assert np.mean((floored_lower <= truth) & (truth <= floored_upper)) >= 0.9
    assert np.mean(floored_lower <= chance_score - BELOW_CHANCE + 1e-12) >= 0.9


def test_floor_leaves_models_inside_the_sources_alone():
    source, target = world(seed=22, guessing=GUESSING)
    subset = hard_subset(source)
    guarded = fitted_guarded(source, subset)
    items = target.select_items(subset.item_ids)
    lower = guarded.estimate_matrix(items)[1]
    state = guarded.state_dict()
    state.pop("floor")
    unfloored_lower = estimator_from_state(state).estimate_matrix(items)[1]
    moved = lower < unfloored_lower - 1e-12
    assert moved.mean() < 0.1  # only the few the reading places below the weakest source
    # those few missed the hard items like the weaker half of the sources
    assert np.all(benchmark_score(target)[moved] < np.median(benchmark_score(source)) + 0.1)


def test_floor_survives_the_state_and_is_checked(weak_world):
    _source, target, subset, fitted = weak_world
    guarded = estimator_from_state(fitted.state_dict())
    guarded.with_floor(0.15)
    state = json.loads(json.dumps(guarded.state_dict()))
    assert state["floor"] == 0.15
    again = estimator_from_state(state)
    items = target.select_items(subset.item_ids)
    for a, b in zip(guarded.estimate_matrix(items), again.estimate_matrix(items), strict=True):
        np.testing.assert_allclose(a, b)
    for bad in (1.0, -0.1, "low", float("nan")):
        with pytest.raises(InputError, match="floor must be"):
            guarded.with_floor(bad)
        with pytest.raises(InputError, match=r"floor must be|malformed estimator state"):
            estimator_from_state({**state, "floor": bad})


def test_matrix_mean_targets_store_no_floor():
    source, _ = world(seed=23, shift=-2.5, guessing=GUESSING)
    subset = hard_subset(source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        guarded = make_estimator("guarded").fit(source, subset, source.mean_scores())
    assert guarded.guard_above_ is True and "floor" not in guarded.state_dict()


@pytest.mark.parametrize(("chance", "floor"), [(0.3, 0.3 - BELOW_CHANCE), (0.02, 0.0), (None, 0.0)])
def test_build_sets_the_floor_from_the_chance_level(chance, floor):
    source, _ = world(seed=24, n_source=120, n_target=1, guessing=GUESSING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bundle = build_bundle(
            source,
            benchmark_score(source),
            name="floor",
            benchmark="floor",
            method="random",
            budget=30,
            estimators=["guarded"],
            chance=chance,
        )
    state = next(spec.state for spec in bundle.estimators if spec.name == "guarded")
    assert state["floor"] == pytest.approx(floor)
    assert lowest_score(bundle.person_fit) == pytest.approx(floor)
