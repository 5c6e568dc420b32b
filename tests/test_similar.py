"""The model-similarity AIPW reading and the ``similar`` estimator built on it."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from lmeval_microbench.errors import InputError
from lmeval_microbench.estimators import estimator_from_state, make_estimator
from lmeval_microbench.outside.readings.similar import ALPHAS, PENALTY, similarity_aipw
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import make_selector
from lmeval_microbench.selection.base import Subset


def shifted_world(seed: int, shift: float, n_source: int = 60, n_target: int = 40):
    """2PL items; sources uniform on [-2, 0], targets on [shift - 0.5, shift + 0.5]."""
    rng = np.random.default_rng(seed)
    n_items = 300
    slope, easy = rng.lognormal(0.0, 0.3, n_items), rng.normal(0.0, 1.5, n_items)
    theta = np.concatenate(
        [rng.uniform(-2.0, 0.0, n_source), rng.uniform(shift - 0.5, shift + 0.5, n_target)]
    )
    chance = 1.0 / (1.0 + np.exp(-(slope * theta[:, None] + easy)))
    values = (rng.random(chance.shape) < chance).astype(float)
    ids = [f"s.{k}" for k in range(n_items)]
    models = [f"m{k}" for k in range(theta.size)]
    matrix = ResponseMatrix(values, models, ids, source="shifted")
    return matrix.select_models(models[:n_source]), matrix.select_models(models[n_source:])


def loo_by_refitting(features: np.ndarray, answers: np.ndarray, alpha: float) -> np.ndarray:
    """Leave-one-item-out residuals of a ridge with an unpenalised intercept, refitted for
    every left-out item (the closed form must give the same)."""
    k = features.shape[0]
    residual = np.empty(k)
    for left in range(k):
        keep = np.arange(k) != left
        x, y = features[keep], answers[keep]
        x_mean, y_mean = x.mean(axis=0), y.mean()
        xc = x - x_mean
        weights = np.linalg.solve(xc.T @ xc + alpha * np.eye(x.shape[1]), xc.T @ (y - y_mean))
        residual[left] = answers[left] - (y_mean + (features[left] - x_mean) @ weights)
    return residual


@pytest.mark.parametrize("penalties", [None, ALPHAS], ids=["fixed", "chosen per model"])
def test_aipw_by_hand_on_a_tiny_matrix(penalties):
    """Five items asked of a model, three left: the estimate is (asked sum + predictions +
    3 * mean leave-one-out residual) / 8, the predictions and residuals those of a refitted
    ridge at the fixed penalty (:data:`PENALTY`), or at the one of several with the least
    leave-one-out error (the grid that states saved before it keep)."""
    rng = np.random.default_rng(0)
    sources = (rng.random((6, 8)) < 0.5).astype(float)
    model = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    asked, rest = sources[:, :5].T, sources[:, 5:].T
    if penalties is None:
        estimate, se = similarity_aipw(asked, rest, model[None, :])
    else:
        estimate, se = similarity_aipw(asked, rest, model[None, :], penalties=penalties)
    centred = asked - asked.mean(axis=0)
    scale = np.trace(centred @ centred.T) / 5
    fits = []
    for alpha in (PENALTY,) if penalties is None else penalties:
        residual = loo_by_refitting(asked, model, alpha * scale)
        fits.append((np.mean(residual**2), alpha * scale, residual))
    _, best_alpha, residual = min(fits, key=lambda fit: fit[0])
    weights = np.linalg.solve(
        centred.T @ centred + best_alpha * np.eye(6), centred.T @ (model - model.mean())
    )
    predicted = np.clip(model.mean() + (rest - asked.mean(axis=0)) @ weights, 0.0, 1.0)
    by_hand = (model.sum() + predicted.sum() + 3 * residual.mean()) / 8
    assert estimate[0] == pytest.approx(float(np.clip(by_hand, 0.0, 1.0)))
    spread = max(residual.var(ddof=1), 0.01)
    assert se[0] == pytest.approx(3 / 8 * np.sqrt(spread / 5 * (1 - 5 / 8)))


def test_leaving_a_source_out_is_reading_it_without_its_column():
    """The rank-one downdate gives the estimate of a fit without the source's column (at the
    penalties of the kernel with every column)."""
    rng = np.random.default_rng(1)
    sources = (rng.random((12, 40)) < 0.6).astype(float)
    asked, rest = sources[:, :15].T, sources[:, 15:].T
    together, together_se = similarity_aipw(asked, rest, sources[:, :15], leave_self_out=True)
    centred = asked - asked.mean(axis=0)
    scale = float(np.trace(centred @ centred.T)) / 15
    for k in (0, 5, 11):
        others = np.arange(12) != k
        alone, alone_se = similarity_aipw(
            asked[:, others], rest[:, others], sources[k : k + 1, :15], penalty_scale=scale
        )
        assert together[k] == pytest.approx(alone[0], abs=1e-9)
        assert together_se[k] == pytest.approx(alone_se[0], abs=1e-9)


def test_blocks_of_models_give_the_same_estimates(monkeypatch):
    from lmeval_microbench.outside.readings import similar

    rng = np.random.default_rng(3)
    sources = (rng.random((11, 30)) < 0.5).astype(float)
    asked, rest = sources[:, :10].T, sources[:, 10:].T
    whole = similarity_aipw(asked, rest, sources[:, :10], leave_self_out=True)
    monkeypatch.setattr(similar, "CHUNK", 3)
    blocks = similarity_aipw(asked, rest, sources[:, :10], leave_self_out=True)
    for a, b in zip(whole, blocks, strict=True):
        np.testing.assert_allclose(a, b)


def test_every_item_asked_gives_the_mean_exactly():
    rng = np.random.default_rng(2)
    sources = (rng.random((10, 12)) < 0.5).astype(float)
    estimate, se = similarity_aipw(sources.T, np.zeros((0, 10)), sources[:3])
    np.testing.assert_allclose(estimate, sources[:3].mean(axis=1))
    np.testing.assert_allclose(se, 0.0)


def fitted_similar(source: ResponseMatrix, budget: int, seed: int):
    subset = make_selector("random").select(source, budget, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator = make_estimator("similar").fit(source, subset, source.mean_scores())
    return estimator, subset


def test_similar_intervals_hold_for_models_stronger_than_every_source():
    """Every target two SDs above every source, random items: mean-residual correction keeps
    the bias small, and the intervals, sized by each model's own residuals, cover."""
    source, target = shifted_world(seed=3, shift=2.0)
    truth = target.mean_scores()
    assert truth.min() > source.mean_scores().max()
    errors, covered = [], []
    for seed in range(5):
        estimator, subset = fitted_similar(source, 40, seed)
        value, lower, upper = estimator.estimate_matrix(target.select_items(subset.item_ids))
        errors.append(value - truth)
        covered.append((lower <= truth) & (truth <= upper))
    assert abs(np.mean(errors)) < 0.02
    assert 0.85 <= np.mean(covered) <= 1.0


def test_similar_state_round_trip_and_bad_state():
    source, target = shifted_world(seed=4, shift=0.0)
    estimator, subset = fitted_similar(source, 30, 0)
    state = json.loads(json.dumps(estimator.state_dict(), allow_nan=False))
    assert isinstance(state["reading"]["asked"][0], str)  # 0/1 answers saved as bit strings
    again = estimator_from_state(state)
    items = target.select_items(subset.item_ids)
    for a, b in zip(estimator.estimate_matrix(items), again.estimate_matrix(items), strict=True):
        np.testing.assert_allclose(a, b)
    del state["reading"]["rest"]
    with pytest.raises(InputError, match="outside reading 'similar': state lacks field 'rest'"):
        estimator_from_state(state)


def test_similar_state_keeps_its_penalty_and_old_states_their_grid():
    """A new state saves the fixed penalty; a state saved before it (no ``penalties`` field)
    reads with the per-model choice among :data:`ALPHAS`, as it did; a bad one is refused."""
    from lmeval_microbench.outside.readings import SimilarReading

    source, target = shifted_world(seed=8, shift=1.0)
    estimator, subset = fitted_similar(source, 30, 0)
    state = json.loads(json.dumps(estimator.state_dict(), allow_nan=False))
    assert state["reading"]["penalties"] == [PENALTY]
    reading = estimator.reading_
    answers = target.select_items(subset.item_ids).values
    old_state = {k: v for k, v in state["reading"].items() if k != "penalties"}
    old = SimilarReading.from_state(old_state)
    by_grid = similarity_aipw(reading.asked_.T, reading.rest_.T, answers, penalties=ALPHAS)
    np.testing.assert_allclose(old.read(answers, np.full(len(answers), np.nan))[0], by_grid[0])
    fixed = similarity_aipw(reading.asked_.T, reading.rest_.T, answers)
    np.testing.assert_allclose(reading.read(answers, np.full(len(answers), np.nan))[0], fixed[0])
    assert not np.allclose(by_grid[0], fixed[0])
    for bad in ([], [0.0], ["x"], 3):
        with pytest.raises(InputError, match="outside reading 'similar'"):
            SimilarReading.from_state({**state["reading"], "penalties": bad})


def test_similar_widening_multiplies_the_half_width():
    source, target = shifted_world(seed=5, shift=0.0)
    estimator, subset = fitted_similar(source, 30, 0)
    items = target.select_items(subset.item_ids)
    value, lower, upper = estimator.estimate_matrix(items)
    estimator.widen_intervals(2.0)
    _, lower2, upper2 = estimator.estimate_matrix(items)
    inside = (lower > 0) & (upper < 1) & (lower2 > 0) & (upper2 < 1)
    assert inside.any()
    np.testing.assert_allclose((upper2 - value)[inside], 2 * (upper - value)[inside])


def test_similar_refuses_too_few_items_by_name():
    source, _ = shifted_world(seed=6, shift=0.0)
    subset = Subset(tuple(source.item_ids[:3]), np.full(3, 1 / 3), "random")
    with pytest.raises(InputError, match="similar: the subset has 3 items; the reading needs 4"):
        make_estimator("similar").fit(source, subset, source.mean_scores())


def test_cli_builds_and_estimates_with_similar(tmp_path, capsys):
    """``build --method balanced --estimator similar`` then ``estimate``: the bundle saves the
    source answers and reads every model back, the asked items counted exactly."""
    from lmeval_microbench.bundle import load_bundle
    from lmeval_microbench.cli.app import main

    source, _ = shifted_world(seed=7, shift=0.0, n_source=80, n_target=1)
    matrix_file = tmp_path / "matrix.parquet"
    source.to_parquet(matrix_file)
    folder = tmp_path / "bundle"
    arguments = ["build", "--responses", str(matrix_file), "--method", "balanced"]
    arguments += ["--budget", "40", "--benchmark", "toy", "--estimator", "similar"]
    assert main([*arguments, "--out", str(folder)]) == 0
    assert load_bundle(folder).default_estimator == "similar"
    capsys.readouterr()
    assert main(["estimate", str(folder), "--responses", str(matrix_file), "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == 80
    assert all(r["estimate_lower"] <= r["estimate_value"] <= r["estimate_upper"] for r in records)
    truth = dict(zip(source.model_ids, source.mean_scores(), strict=True))
    errors = [abs(r["estimate_value"] - truth[r["model"]]) for r in records]
    assert np.mean(errors) < 0.05
