"""The floor of adaptive runs below the sources (issue 19): a run that may lie below every
source model has its lower edge reach the chance-level score less 5 points, as the static
``guarded`` interval does. Checked by hand on a pool, in the pool's saved state, on the
shipped pools, and on MuSR's weakest fifth (real answers, a pool fitted on the rest)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from adaptive_support import saved_before

from lmeval_microbench.adaptive import build_pool, pool_state
from lmeval_microbench.adaptive import pool as pool_module
from lmeval_microbench.adaptive.bands import BELOW
from lmeval_microbench.adaptive.pool import (
    ADAPTIVE,
    AdaptiveState,
    estimate_pool,
    fit_adaptive_state,
)
from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
from lmeval_microbench.adaptive.refresh import with_floor
from lmeval_microbench.adaptive.scoring import FLOOR_TEST_MARGIN
from lmeval_microbench.adaptive.selection import MaxInfoSelector
from lmeval_microbench.adaptive.simulate import replay
from lmeval_microbench.bundle import load_bundle
from lmeval_microbench.errors import BundleError, InputError
from lmeval_microbench.personfit import lowest_score
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.synthetic import random_item_params, simulate_responses

CHANCE = 0.25


def _pool(chance: float | None = CHANCE):
    params = random_item_params(20, seed=3)
    matrix, _ = simulate_responses(params, 200, seed=4)
    truth = matrix.mean_scores()
    return build_pool(matrix, truth, name="p", benchmark="toy", estimator="ridge", chance=chance)


def test_a_new_pool_has_the_floor_of_its_chance_levels():
    bundle = _pool()
    assert pool_state(bundle).state.score_map.floor == pytest.approx(CHANCE - 0.05)
    assert bundle.estimator_state(ADAPTIVE)["floor"] == pytest.approx(CHANCE - 0.05)
    # built without chance levels, the weakest sources stand in: no floor above 0
    assert pool_state(_pool(None)).state.score_map.floor == 0.0


def test_the_floor_lowers_only_runs_that_may_lie_below_the_sources_by_hand():
    """Four runs with the same narrow span: at 0.7 with the ability far below the sources'
    edge, just inside it, and far above; and one at the weakest source's true score with an
    ordinary ability. Only the first and the last may lie below every source: their lower
    edges move, to exactly the floor; nothing else moves."""
    score_map = pool_state(_pool()).state.score_map
    bottom = 0.4  # sources whose weakest scores 40 % (the toy's weakest score under the floor)
    score_map = replace(score_map, truth_range=(bottom, score_map.truth_range[1]))
    edge = next(side for side in score_map.sides if side.side == BELOW).ability_edge
    prediction = np.array([0.7, 0.7, 0.7, bottom + 0.001])
    theta = np.array([edge - 3.0, edge + 1.0, edge + 4.0, edge + 1.0])
    ability = (theta, np.full(4, 0.2))
    unfloored = replace(score_map, floor=None)
    for level in (0.8, 0.9, 0.95):
        low0, high0 = unfloored.interval(prediction, 10, level, (prediction, prediction), ability)
        low, high = score_map.interval(prediction, 10, level, (prediction, prediction), ability)
        assert low0[0] > CHANCE - 0.05 and low0[3] > CHANCE - 0.05  # the band stops short
        np.testing.assert_allclose(low[[0, 3]], CHANCE - 0.05)
        np.testing.assert_array_equal(low[1:3], low0[1:3])
        np.testing.assert_array_equal(high, high0)


def test_the_floor_test_lowers_the_edge_by_half_its_band_first_by_hand():
    """Runs just above the weakest source with an ability inside the sources: the floor
    applies exactly where the 90 % lower edge lowered by FLOOR_TEST_MARGIN of its half-width
    reaches the weakest source's score, also where the 90 % edge itself stays above it."""
    score_map = pool_state(_pool()).state.score_map
    bottom = 0.4
    score_map = replace(score_map, truth_range=(bottom, score_map.truth_range[1]))
    edge = next(side for side in score_map.sides if side.side == BELOW).ability_edge
    prediction = bottom + np.linspace(0.0, 0.3, 61)
    ability = (np.full(prediction.size, edge + 1.0), np.full(prediction.size, 0.2))
    down = score_map.halves(prediction, 10, 0.9, ability)[0]
    low, _ = score_map.interval(prediction, 10, 0.9, (prediction, prediction), ability)
    expected = prediction - (1.0 + FLOOR_TEST_MARGIN) * down <= bottom
    np.testing.assert_array_equal(np.isclose(low, CHANCE - 0.05), expected)
    assert (expected & (prediction - down > bottom)).any()  # the margin decides some runs
    assert not expected.all()  # and runs further up keep their band


def test_pools_saved_before_the_floor_keep_their_intervals_and_bad_floors_are_refused():
    bundle = _pool()
    state = bundle.estimator_state(ADAPTIVE)
    older = {k: v for k, v in state.items() if k != "floor"}
    assert AdaptiveState.from_bundle(bundle, older).score_map.floor is None
    for bad in (1.0, -0.1, float("nan")):
        with pytest.raises(BundleError, match=r"bundle 'p'.*floor must lie in \[0, 1\)"):
            AdaptiveState.from_bundle(bundle, dict(state, floor=bad))


def test_an_older_pool_gets_the_floor_of_its_person_fit_block_without_refitting():
    bundle = _pool()
    state = bundle.estimator_state(ADAPTIVE)
    older = saved_before(bundle, ["floor"])
    again = with_floor(older)
    assert again.estimator_state(ADAPTIVE) == state
    with pytest.raises(InputError, match="no person-fit block"):
        with_floor(replace(older, person_fit=None))


@pytest.mark.parametrize("suite", ["openllm_v1", "openllm_v2"])
def test_every_shipped_pool_has_the_floor_of_its_person_fit_block(suite):
    folders = [p for p in sorted((SHIPPED_POOLS / suite).iterdir()) if p.is_dir()]
    assert folders
    for folder in folders:
        bundle = load_bundle(folder)
        assert pool_state(bundle).state.score_map.floor == lowest_score(bundle.person_fit), folder


def test_a_run_that_answers_every_item_wrong_reaches_the_floor_on_the_shipped_mmlu_pool():
    """MMLU's pool knows its chance level (1 / 4 per item): a run that gets all its items
    wrong lies below every source; its interval now reaches 20 %, the chance score less 5."""
    pool = pool_state(load_bundle(SHIPPED_POOLS / "openllm_v1" / "mmlu"))
    easiest = np.argsort(-pool.state.score_map.rates)[:15]
    wrong = {pool.item_ids[k]: 0.0 for k in easiest}
    found = estimate_pool(pool, wrong)
    assert found.lower <= 0.20 + 1e-9 < found.value


@pytest.fixture(scope="module")
def musr_weakest(shared_data):
    """A MuSR pool fitted on all but the weakest fifth of its 348 models, and those models."""
    values = ResponseMatrix.read(shared_data / "openllm_v2" / "responses" / "musr.parquet")
    truth = values.mean_scores()
    weakest = np.argsort(truth, kind="stable")[: round(0.2 * truth.size)]
    held = set(weakest.tolist())
    source = values.select_models([m for k, m in enumerate(values.model_ids) if k not in held])
    params, state = fit_adaptive_state(source, source.mean_scores())
    floor = lowest_score(load_bundle(SHIPPED_POOLS / "openllm_v2" / "musr").person_fit)
    return params, state.score_map.with_floor(floor), values.values[weakest], truth[weakest]


@pytest.mark.slow
@pytest.mark.parametrize("asked", [10, 25, 50])
def test_the_floor_covers_musr_models_below_every_source(musr_weakest, asked):
    """MuSR's weakest fifth scores under every source (32.3-36.1 % against 36.1 % and up,
    chance 37.1 %), but the 2PL places most of them at the sources' ability. Measured with
    this fit: coverage 0.81 / 0.69 / 0.71 -> 0.90 / 0.81 / 0.83 at 10 / 25 / 50 items, at
    most 0.7 points wider; the same runs, read with and without the floor."""
    params, score_map, targets, truth = musr_weakest
    run = replay(
        params, targets, selector=MaxInfoSelector(), max_items=asked,
        score_map=score_map, checkpoints=(asked,),
    )  # fmt: skip
    args = (run.predictions[asked], asked, 0.9, run.spans[asked], run.ability_at(asked))
    covered = {}
    for name, found in (("with", score_map), ("without", replace(score_map, floor=None))):
        low, high = found.interval(*args)
        covered[name] = float(np.mean((truth >= low - 1e-9) & (truth <= high + 1e-9)))
    assert covered["with"] >= 0.78 and covered["with"] >= covered["without"] + 0.08, covered


def test_a_bad_chance_level_is_refused_before_the_replays(monkeypatch):
    """The chance level sets the floor; a bad one is refused before minutes of replays."""

    def never(*args, **kwargs):
        raise AssertionError("the replays ran before the chance level was checked")

    monkeypatch.setattr(pool_module, "fit_adaptive_state", never)
    matrix, _ = simulate_responses(random_item_params(10, seed=1), 60, seed=2)
    with pytest.raises(InputError, match=r"chance levels must be numbers in \[0, 1\)"):
        build_pool(matrix, matrix.mean_scores(), name="p", benchmark="t", chance=1.5)
