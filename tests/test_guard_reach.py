"""``guarded``'s reach: on a whole benchmark, the interval spans the own-level reading's
spread wherever that spread lies above the strongest source (issue 19: few sources bunched in a
narrow range, a model beyond them that the precise reading places inside)."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from scipy.special import expit
from test_guard_floor import benchmark_score
from test_outside import world
from tools_support import tools_module

from lmeval_microbench.estimators import estimator_from_state, make_estimator
from lmeval_microbench.outside import REACH_Z, composed_interval, reached, reached_below
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection.base import Subset

N_ITEMS = 750
SUBSET = 50


def bunched_world(seed: int, discrimination: float, guessing: float, top: float):
    """MuSR-like: 3PL items of low ``discrimination`` with a ``guessing`` floor; 25 source
    abilities bunched in [-0.3, 0.3] (their scores span 5-10 points), 150 targets in
    [0.3, ``top``], above every source by less than 50 items can tell apart."""
    rng = np.random.default_rng(seed)
    slopes = rng.lognormal(np.log(discrimination), 0.3, N_ITEMS)
    difficulties = rng.normal(0.0, 1.5, N_ITEMS)
    theta = np.concatenate([rng.uniform(-0.3, 0.3, 25), rng.uniform(0.3, top, 150)])
    return answered_world(rng, slopes, difficulties, theta, guessing, 25, "bunched")


def answered_world(rng, slopes, difficulties, theta, guessing: float, n_sources: int, name):
    """3PL answers of models ``theta`` (the first ``n_sources`` the sources) drawn with
    ``rng``, as (source, target) matrices; item ids ``<name initial>.<k>``."""
    p = guessing + (1 - guessing) * expit(slopes * (theta[:, None] - difficulties))
    values = (rng.random(p.shape) < p).astype(float)
    ids = tuple(f"{name[0]}.{k}" for k in range(slopes.size))
    models = [f"m{k}" for k in range(theta.size)]
    matrix = ResponseMatrix(values, models, ids, source=name)
    return matrix.select_models(models[:n_sources]), matrix.select_models(models[n_sources:])


def random_subset(source: ResponseMatrix, seed: int) -> Subset:
    picked = np.sort(np.random.default_rng(seed).choice(source.n_items, SUBSET, replace=False))
    return Subset(tuple(source.item_ids[k] for k in picked), np.full(SUBSET, 1 / SUBSET), "random")


def fitted_guarded(source, subset, target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_estimator("guarded").fit(source, subset, target)


def without_reach(guarded):
    """The same fit as a state saved before the reach loads."""
    state = guarded.state_dict()
    state.pop("reach")
    return estimator_from_state(state)


def coverage(estimator, items, truth) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    value, lower, upper = estimator.estimate_matrix(items)
    return float(np.mean((lower <= truth) & (truth <= upper))), value, lower, upper


def peer_cell_coverage(shared_data, cell: tuple, method: str) -> tuple[float, float]:
    """Coverage of ``method`` + ``guarded`` on a peer-suite cell (matrix, population,
    protocol, budget, seed) without and with the reach; the estimate must not move."""
    cells = tools_module("peer_cells")
    cell = cells.Cell(*cell)
    source, target, source_truth, held_out = cells.split_cell(cell, shared_data)
    bundle = tools_module("bench_peers").build_recipe(cell, source, source_truth, method, "guarded")
    guarded = estimator_from_state(bundle.estimator_state())
    items = target.select_items(bundle.item_ids)
    before, value_before, _, _ = coverage(without_reach(guarded), items, held_out)
    after, value, _, _ = coverage(guarded, items, held_out)
    np.testing.assert_allclose(value, value_before)
    return before, after


def test_reached_widens_only_where_the_spread_lies_above_the_sources():
    upper = np.full(4, 0.50)
    value = np.array([0.45, 0.52, 0.38, 0.99])
    se = np.array([0.01, 0.02, 0.02, 0.02])
    got = reached(upper, (value, se), top=0.5, z=2.0)
    # inside and below: unchanged; above: value + 2 se, capped at 1
    np.testing.assert_allclose(got, [0.50, 0.56, 0.50, 1.0])
    assert REACH_Z == pytest.approx(1.6449, abs=1e-4)


@pytest.mark.parametrize(
    ("seed", "discrimination", "guessing", "top"),
    [(2, 0.5, 0.33, 1.3), (3, 0.5, 0.33, 1.3), (3, 0.3, 0.4, 1.0)],
)
def test_reach_covers_models_beyond_bunched_sources(seed, discrimination, guessing, top):
    """Worlds where the precise reading (``checked``) placed models beyond the sources inside
    them: without the reach their intervals held for 0.65-0.91 of them (measured)."""
    source, target = bunched_world(seed, discrimination, guessing, top)
    subset = random_subset(source, seed)
    guarded = fitted_guarded(source, subset, source.mean_scores())
    assert guarded.reach_ is not None
    items, truth = target.select_items(subset.item_ids), target.mean_scores()
    before, value_before, _, _ = coverage(without_reach(guarded), items, truth)
    after, value, lower, upper = coverage(estimator_from_state(guarded.state_dict()), items, truth)
    np.testing.assert_allclose(value, value_before)  # the estimate does not move
    assert np.all(lower <= value) and np.all(value <= upper)
    assert after >= 0.9
    assert after >= before + 0.05


def test_reach_costs_little_inside_spread_sources():
    """Sources spread N(0, 1), targets like them: the spread rarely crosses their edges
    (measured: no interval of the 200 moved)."""
    source, target = world(seed=5)
    subset = random_subset(source, 5)
    guarded = fitted_guarded(source, subset, source.mean_scores())
    items, truth = target.select_items(subset.item_ids), target.mean_scores()
    _, _, lower0, upper0 = coverage(without_reach(guarded), items, truth)
    _, _, lower, upper = coverage(guarded, items, truth)
    np.testing.assert_allclose(lower, lower0)
    assert np.mean(upper > upper0) <= 0.05


def test_no_reach_where_the_target_is_not_the_matrix_mean():
    source, _ = bunched_world(3, 0.5, 0.33, 1.3)
    guarded = fitted_guarded(source, random_subset(source, 3), benchmark_score(source))
    assert guarded.guard_above_ is False and guarded.reach_ is None
    assert "reach" not in guarded.state_dict()


def test_reach_on_musr_with_25_bunched_sources(shared_data):
    """The peer suite's cell that showed it: MuSR, 25 sources spanning 8.6 points, the
    strongest fifth held out (seed 1), anchor points + ``guarded`` at 50 items (the default's
    pick there). Measured: coverage 0.64 at 11.3 points wide without the reach, 0.94 at 19.0
    with it."""
    cell = ("musr", "25", "extrapolation", 50, 1)
    before, after = peer_cell_coverage(shared_data, cell, "anchor_points")
    assert before < 0.8
    assert after >= 0.9


def test_reached_below_widens_only_where_the_whole_spread_lies_below_the_sources():
    lower = np.full(4, 0.40)
    value = np.array([0.45, 0.38, 0.20, 0.02])
    se = np.array([0.01, 0.02, 0.05, 0.02])
    got = reached_below(lower, (value, se), bottom=0.5, z=2.0)
    # 0.45 + 0.02 < 0.5 but its lower end 0.43 is above 0.40: unchanged; 0.38 + 0.04 < 0.5:
    # 0.34; 0.20 -> 0.10; 0.02 -> 0 (at least 0)
    np.testing.assert_allclose(got, [0.40, 0.34, 0.10, 0.0])
    # a spread that only crosses the weakest source's score leaves the edge alone
    crossing = reached_below(lower[:1], (np.array([0.47]), np.array([0.02])), bottom=0.5, z=2.0)
    np.testing.assert_allclose(crossing, [0.40])


def test_composed_interval_floors_then_reaches_in_the_guards_order():
    """Three models, hand-checked: inside (weight 0), below the sources (only the lower side
    moves, the floor reached), above them (the own reading's spread reaches up); the variant
    that keeps the upper edge where ``reach_where`` is false changes only that edge."""
    inner = (np.array([0.5, 0.3, 0.8]), np.array([0.45, 0.25, 0.75]), np.array([0.55, 0.35, 0.85]))
    reading = np.array([0.5, 0.1, 0.9])
    band = (np.array([0.4, 0.05, 0.7]), np.array([0.6, 0.2, 0.95]))
    weight = np.array([0.0, 1.0, 1.0])
    below = np.array([0.0, 1.0, 0.0])
    own = (np.array([0.5, 0.1, 0.97]), np.array([0.01, 0.01, 0.01]))
    kwargs = {"floor": 0.0, "reach": own, "top": 0.85, "bottom": 0.2}
    value, lower, upper = composed_interval(inner, reading, band, weight, below, **kwargs)
    # inside: the inner interval; below: moved to the reading, lower edge at the floor;
    # above: not moved (``below`` is 0 there), upper edge at 0.97 + REACH_Z * 0.01
    np.testing.assert_allclose(value, [0.5, 0.1, 0.8])
    np.testing.assert_allclose(lower, [0.45, 0.0, 0.7])
    np.testing.assert_allclose(upper, [0.55, 0.35, 0.97 + REACH_Z * 0.01])
    kept = composed_interval(
        inner, reading, band, weight, below, reach_where=np.zeros(3, bool), **kwargs
    )
    np.testing.assert_allclose(kept[0], value)
    np.testing.assert_allclose(kept[1], lower)
    np.testing.assert_allclose(kept[2], [0.55, 0.35, 0.95])


def far_below_world(seed: int):
    """Sources spread over abilities [0, 2]; 150 targets below them, in [-4, -0.5]."""
    rng = np.random.default_rng(seed)
    slopes = rng.lognormal(0.0, 0.3, N_ITEMS)
    difficulties = rng.normal(0.5, 1.0, N_ITEMS)
    theta = np.concatenate([rng.uniform(0.0, 2.0, 60), rng.uniform(-4.0, -0.5, 150)])
    return answered_world(rng, slopes, difficulties, theta, 0.25, 60, "far below")


def test_reach_below_spans_the_own_spread_of_models_far_below():
    """Where the own-level reading's whole spread lies under the weakest source, the lower
    edge reaches its lower end; elsewhere the interval is the one without the reach. The
    downward folds here are made to have measured no error (a reading exact on them), so that
    the band below is the least one, :data:`MIN_Q` standard errors."""
    source, target = far_below_world(0)
    subset = random_subset(source, 0)
    guarded = fitted_guarded(source, subset, source.mean_scores())
    guarded.guard_band_ = dataclasses.replace(guarded.guard_band_, below=np.zeros(40))
    guarded = estimator_from_state(guarded.state_dict())
    items = target.select_items(subset.item_ids)
    value_before, lower_before, upper_before = without_reach(guarded).estimate_matrix(items)
    value, lower, upper = guarded.estimate_matrix(items)
    np.testing.assert_allclose(value, value_before)  # the estimate does not move
    np.testing.assert_allclose(upper, upper_before)
    inner = guarded.inner_.predict_rows(items.values, 0.9)[0]
    own, se = guarded.reach_.read(items.values, inner)
    far = own + REACH_Z * se < guarded.bottom_
    assert 0.3 < far.mean() < 1.0  # the world holds models both far and near below
    np.testing.assert_array_less(lower[far], own[far] - REACH_Z * se[far] + 1e-12)
    assert np.mean(lower[far] < lower_before[far] - 1e-6) > 0.1  # measured: 0.28
    np.testing.assert_allclose(lower[~far], lower_before[~far])


def test_reach_below_on_hellaswag_weakest_fifth(shared_data):
    """The peer suite's cell that showed it: HellaSwag (metabench's 58 items, sources from
    57 %), the weakest fifth held out (seed 2), tinybenchmarks items + ``guarded`` at 50 (the
    default's pick there). Measured: coverage 0.79 at 10.9 points wide without the reach below,
    0.94 at 12.3 with it; the estimate does not move."""
    cell = ("hellaswag", "all", "weak", 50, 2)
    before, after = peer_cell_coverage(shared_data, cell, "tinybenchmarks")
    assert before < 0.85
    assert after >= 0.9
