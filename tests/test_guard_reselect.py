"""The guard's upward folds choose supervised items again from each fold's models."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_outside import world

from lmeval_microbench.estimators import make_estimator
from lmeval_microbench.estimators.guarded import GuardedEstimator, _fold_subset
from lmeval_microbench.outside.folds import UP, directed_folds
from lmeval_microbench.selection import make_selector, select_with_audit
from lmeval_microbench.selection.audit import AUDIT_KEY


def _fold(source, n_train: int = 150):
    truth = source.mean_scores()
    order = np.argsort(truth, kind="stable")
    return truth, np.sort(order[:n_train]), np.sort(order[-40:])


def test_unsupervised_items_stay_the_fixed_subset_in_every_fold():
    source, _ = world(seed=1)
    truth, train, _ = _fold(source)
    subset = make_selector("random").select(source, 20, seed=0)
    fold = source.select_models(np.asarray(source.model_ids)[train])
    assert _fold_subset(fold, subset, truth[train]) is subset


def test_supervised_items_are_chosen_again_from_the_folds_models_alone():
    source, _ = world(seed=1)
    truth, train, _ = _fold(source)
    subset = make_selector("greedy").select(source, 15, seed=3, target=truth)
    fold = source.select_models(np.asarray(source.model_ids)[train])
    again = _fold_subset(fold, subset, truth[train])
    by_hand = make_selector("greedy").select(fold, 15, seed=3, target=truth[train])
    assert again.item_ids == by_hand.item_ids and again.method == "greedy"
    assert again.item_ids != subset.item_ids  # the weaker models' best items are others here


def test_audit_items_are_drawn_again_as_many_as_before():
    source, _ = world(seed=2)
    truth, train, _ = _fold(source)
    subset = select_with_audit(make_selector("greedy"), source, 20, 6, seed=0, target=truth)
    fold = source.select_models(np.asarray(source.model_ids)[train])
    again = _fold_subset(fold, subset, truth[train])
    assert len(again.item_ids) == 20 and len(again.info[AUDIT_KEY]) == 6


def test_upward_errors_come_from_items_chosen_on_each_folds_models():
    """By hand: each upward fold chooses greedy items from its training models, fits the
    inner estimator there and reads its targets on those items."""
    source, _ = world(seed=1)
    truth = 0.2 + 0.6 * source.mean_scores()
    subset = make_selector("greedy").select(source, 15, seed=3, target=truth)
    found = GuardedEstimator()._reselected_upward_errors(source, subset, truth, None)
    ids, expected = np.asarray(source.model_ids), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for train, test, direction in directed_folds(truth):
            if direction != UP:
                continue
            fold = source.select_models(ids[train])
            items = make_selector("greedy").select(fold, 15, seed=3, target=truth[train])
            inner = make_estimator("kridge").fit(fold, items, truth[train])
            held_out = source.select_models(ids[test]).select_items(items.item_ids)
            expected.append(np.abs(inner.estimate_matrix(held_out)[0] - truth[test]))
    np.testing.assert_allclose(found, np.sort(np.concatenate(expected)))


@pytest.mark.parametrize(
    ("method", "mean_target", "chosen_again"),
    [("greedy", False, True), ("greedy", True, False), ("random", False, False)],
)
def test_only_supervised_items_read_against_another_score_are_chosen_again(
    monkeypatch, method, mean_target, chosen_again
):
    """Where the target is the matrix mean the guard moves estimates by readings whose folds
    stay on the fixed items, and unsupervised items are the ones a new model gets: only
    supervised items against another score get the re-selecting upward folds."""
    calls = []

    def record(self, *args):
        calls.append(args)
        return np.zeros(0)

    monkeypatch.setattr(GuardedEstimator, "_reselected_upward_errors", record)
    source, _ = world(seed=2)
    truth = source.mean_scores() if mean_target else 0.2 + 0.6 * source.mean_scores()
    subset = make_selector(method).select(source, 15, seed=0, target=truth)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        make_estimator("guarded").fit(source, subset, truth)
    assert bool(calls) == chosen_again


@pytest.mark.slow
def test_greedy_items_read_the_strongest_fifth_of_the_leaderboard_with_honest_intervals(
    shared_data,
):
    """TruthfulQA, the whole benchmark's score as the target, the strongest fifth held out,
    25 greedy items read with ``guarded``: the intervals held for 0.29 of those models while
    the folds read the fixed items (``bench/adaptive_equal_before_reselect.md``)."""
    tools = pytest.importorskip("tools_support")
    tool = tools.tools_module("bench_adaptive_equal")
    matrix, truth, _ = tool.load_benchmark(shared_data, "truthfulqa")
    split = tool.first_split(matrix, truth, "extrapolation", 0)
    rows = np.random.default_rng(0).permutation(split.target.n_models)[:200]
    found = tool.built_reading(split, rows, "greedy", "guarded", 25, 0)
    assert found["coverage90"] >= 0.85


def test_a_fold_whose_inner_fit_fails_is_skipped(monkeypatch):
    """A fold's own items may not fit on its models (a constant item there, too few models):
    that fold is left out, and with none left the band above falls to the reading's."""
    source, _ = world(seed=1)
    truth = 0.2 + 0.6 * source.mean_scores()
    subset = make_selector("greedy").select(source, 15, seed=3, target=truth)

    class Failing:
        def fit(self, *args, **kwargs):
            raise ValueError("no fit on this fold")

    monkeypatch.setattr(GuardedEstimator, "_make_inner", lambda self: Failing())
    found = GuardedEstimator()._reselected_upward_errors(source, subset, truth, None)
    assert found.size == 0


def test_missing_answers_skip_a_fold_instead_of_refusing_the_build():
    """Items chosen again may hold a held-out model's missing answer: that fold is skipped.
    Reading the fold's targets on them once refused a greedy build whose target is not the
    matrix mean ("model 'm16' has no score for subset item 'w.91'")."""
    from lmeval_microbench.build import build_bundle
    from lmeval_microbench.responses import ResponseMatrix

    source, _ = world(seed=1)
    values = source.values.copy()
    values[np.random.default_rng(0).random(values.shape) < 0.05] = np.nan
    holed = ResponseMatrix(values, list(source.model_ids), list(source.item_ids))
    truth = 0.2 + 0.6 * np.nanmean(values, axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bundle = build_bundle(
            holed, truth, name="holed", benchmark="holed", method="greedy", budget=15,
            seed=0, estimators=["guarded"], default_estimator="guarded",
        )  # fmt: skip
    assert bundle.budget == 15
