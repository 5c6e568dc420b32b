"""A pool's imputation strength, chosen on its own source models (adaptive/calibrate.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from lmeval_microbench.adaptive import calibrate
from lmeval_microbench.adaptive.calibrate import (
    PSEUDO_CANDIDATES,
    checkpoint_states,
    choose_pseudo,
    fold_run,
)
from lmeval_microbench.adaptive.estimation import PSEUDO_ANSWERS
from lmeval_microbench.adaptive.pool import fit_adaptive_state
from lmeval_microbench.adaptive.scoring import ScoreMap
from lmeval_microbench.adaptive.selection import MaxInfoSelector
from lmeval_microbench.adaptive.simulate import replay
from lmeval_microbench.build import fit_source_irt
from lmeval_microbench.responses import ResponseMatrix


def two_pl_world(slope: float, seed: int = 0) -> tuple[ResponseMatrix, np.ndarray]:
    """300 models, 60 items of typical slope ``slope``."""
    rng = np.random.default_rng(seed)
    n_models, n_items = 300, 60
    a, b = rng.lognormal(np.log(slope), 0.2, n_items), rng.normal(0.0, 1.0, n_items)
    theta = rng.normal(0.0, 1.0, n_models)
    p = 1.0 / (1.0 + np.exp(-a * (theta[:, None] - b)))
    values = (rng.random(p.shape) < p).astype(float)
    ids = [f"i{k}" for k in range(n_items)]
    source = ResponseMatrix(values, [f"m{k}" for k in range(n_models)], ids, source="world")
    return source, values.mean(axis=1)


@pytest.mark.slow
def test_musr_holds_the_shift_back_and_ifeval_keeps_it(shared_data):
    """Real whole benchmarks, every model: MuSR's items tell models apart weakly (its run's hit
    rate is mostly noise), IFEval's do not. Measured: MuSR 100 pseudo answers, IFEval 1."""
    chosen = {}
    for name in ("musr", "ifeval"):
        path = shared_data / "openllm_v2" / "responses" / f"{name}.parquet"
        source = ResponseMatrix.read(path)
        state = fit_adaptive_state(source, source.mean_scores())[1]
        chosen[name] = state.calibration["pseudo_answers"]
    assert chosen["musr"] > PSEUDO_ANSWERS and chosen["ifeval"] == PSEUDO_ANSWERS, chosen


@pytest.mark.parametrize("gain", [0.0, 1.0])
def test_a_stronger_hold_is_taken_only_for_a_clear_gain_on_every_fold_kind(monkeypatch, gain):
    monkeypatch.setattr(calibrate, "MIN_GAIN", gain)
    _, state = fit_adaptive_state(*two_pl_world(0.3, 0))
    errors = state.calibration["pseudo_mae_by_folds"]
    assert set(errors) == {str(p) for p in PSEUDO_CANDIDATES}
    assert set(errors[str(PSEUDO_ANSWERS)]) == {"inside", "above", "below"}
    totals = {float(p): np.mean(list(kinds.values())) for p, kinds in errors.items()}
    chosen = state.calibration["pseudo_answers"]
    if gain == 0.0:  # any gain on every kind: the least mean error
        assert totals[chosen] == min(totals.values()) and chosen > PSEUDO_ANSWERS
    else:  # no hold can cut the error by all of it
        assert chosen == PSEUDO_ANSWERS


def test_the_chosen_strength_is_kept_in_the_pool_state():
    source, truth = two_pl_world(0.3, 1)
    # a target other than the matrix mean keeps one IRT fit for the directed folds (measured:
    # 30 pseudo answers; .beyond refits them for whole benchmarks)
    _, state = fit_adaptive_state(source, 0.05 + 0.9 * truth)
    chosen = state.calibration["pseudo_answers"]
    assert chosen > PSEUDO_ANSWERS
    assert state.score_map.pseudo == chosen and state.to_dict()["pseudo"] == chosen
    stored = state.to_dict()
    again = ScoreMap.from_parts(state.score_map.estimator, stored["bands"], "shifted", {}, chosen)
    assert again.pseudo == chosen
    before = ScoreMap.from_parts(state.score_map.estimator, stored["bands"], "shifted")
    assert before.pseudo == PSEUDO_ANSWERS  # a pool saved before the choice keeps its numbers


def test_checkpoint_states_are_those_of_the_replay():
    """The posterior rebuilt from the asked order is the one the replay had at that point."""
    source, truth = two_pl_world(1.0)
    params = fit_source_irt(source).subset(list(source.item_ids))
    held = np.arange(source.n_models) < 40
    run = fold_run(source, truth, source.values, params, held, "kridge")
    score_map = replace(run.score_map, pseudo=10.0)
    direct = replay(
        params,
        source.values[held],
        selector=MaxInfoSelector(),
        max_items=25,
        score_map=score_map,
        checkpoints=(10, 25),
    )
    states = checkpoint_states(params, run.answers, run.order, (10, 25))
    for n, expected, asked, scores, (theta, se) in states:
        np.testing.assert_allclose(
            score_map.predict_answers(expected, asked, scores), direct.predictions[n], atol=1e-9
        )
        np.testing.assert_allclose(theta, direct.ability_at(n)[0], atol=1e-9)
        np.testing.assert_allclose(se, direct.ability_at(n)[1], atol=1e-9)


def test_choose_pseudo_scores_every_kind_it_is_given():
    source, truth = two_pl_world(1.0)
    params = fit_source_irt(source).subset(list(source.item_ids))
    held = np.arange(source.n_models) % 3 == 0
    run = fold_run(source, truth, source.values, params, held, "kridge")
    chosen, errors = choose_pseudo({"inside": [run]}, truth, (10, 25, 50, 60))
    assert chosen in PSEUDO_CANDIDATES and all(set(e) == {"inside"} for e in errors.values())
