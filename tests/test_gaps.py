"""``gaps``: a matrix with gaps filled for the recipe choice, and its part without them."""

from __future__ import annotations

import numpy as np
import pytest

from lmeval_microbench.auto import choose_recipe
from lmeval_microbench.errors import InputError
from lmeval_microbench.gaps import complete_core, filled
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.synthetic import random_item_params, simulate_responses


def _matrix(values: np.ndarray, source: str = "m.csv") -> ResponseMatrix:
    models = [f"model{k}" for k in range(values.shape[0])]
    items = [f"item{k}" for k in range(values.shape[1])]
    return ResponseMatrix(values, models, items, source=source)


def test_a_matrix_without_gaps_comes_back_unchanged():
    matrix = _matrix(np.ones((4, 5)))
    truth = np.arange(4.0)
    assert complete_core(matrix, truth, 3) == (matrix, truth)
    assert filled(matrix, truth) == (matrix, truth)


def test_a_gap_is_filled_from_the_models_and_the_items_rates():
    values = np.array(
        [[1.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0, np.nan], [np.nan, 1.0, 0.0, 0.0],
         [1.0, 1.0, 1.0, np.nan]]
    )  # fmt: skip
    values = np.column_stack([values, np.full(4, np.nan)])  # an item nobody answered
    matrix = _matrix(values)
    means = np.nanmean(values, axis=1)
    with pytest.warns(UserWarning, match=r"m\.csv: 3 missing responses .* filled"):
        full, truth = filled(matrix, means)
    assert list(full.item_ids) == ["item0", "item1", "item2", "item3"]
    odds = lambda p: np.log(p / (1 - p))  # noqa: E731
    # model 1 (rate 1/3) at item 3 (rate 1/2 among models 0 and 2), matrix rate 8/13
    expected = 1 / (1 + np.exp(-(odds(1 / 3) + odds(1 / 2) - odds(8 / 13))))
    assert full.values[1, 3] == pytest.approx(expected)
    # model 3 answered every item it was given right: its rate is clipped below 1
    assert 0.5 < full.values[3, 3] < 1.0
    assert not np.isnan(full.values).any()
    # truths that were the answered items' means become the filled rows' means
    assert truth == pytest.approx(full.values.mean(axis=1))
    # other truths (a leaderboard's scores) are kept
    with pytest.warns(UserWarning):
        assert filled(matrix, np.array([0.1, 0.2, 0.3, 0.4]))[1].tolist() == [0.1, 0.2, 0.3, 0.4]


def test_a_mostly_empty_model_and_a_mostly_empty_item_are_the_ones_dropped():
    values = np.ones((6, 8))
    values[2, :6] = np.nan  # a model that answered two items
    values[1:5, 7] = np.nan  # an item four models lack
    values[0, 3] = np.nan  # one gap of a model that answered the rest
    # the lone gap is a fifth of what is left of item3 and a seventh of model0: item3 goes
    core, truth = complete_core(_matrix(values), np.arange(6.0), 4)
    assert (core.n_models, core.n_items) == (5, 6)  # 1 of 6 models and 2 of 8 items left out
    assert not np.isnan(core.values).any()
    assert "model2" not in core.model_ids and "model0" in core.model_ids
    assert "item7" not in core.item_ids and "item3" not in core.item_ids
    # truths stay aligned with the models kept
    assert truth.tolist() == [float(m.removeprefix("model")) for m in core.model_ids]


def test_scattered_gaps_in_every_model_leave_most_of_the_matrix():
    rng = np.random.default_rng(0)
    values = rng.random((40, 120)).round()
    values[rng.random(values.shape) < 0.02] = np.nan
    values[np.arange(40), rng.integers(0, 120, 40)] = np.nan
    assert np.isnan(values).any(axis=1).all()  # every model lacks an item
    core, _ = complete_core(_matrix(values), np.zeros(40), 25)
    assert not np.isnan(core.values).any()
    assert core.n_models >= 25 and core.n_items >= 25


def test_items_stay_at_least_min_items_and_a_matrix_without_such_a_part_is_refused():
    values = np.ones((5, 6))
    values[np.arange(5), np.arange(5)] = np.nan  # each model lacks its own item
    core, _ = complete_core(_matrix(values), np.zeros(5), 1)
    assert core.n_items >= 1 and not np.isnan(core.values).any()
    with pytest.raises(InputError, match=r"m\.csv: no model answered every one of 6"):
        complete_core(_matrix(values), np.zeros(5), 6)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_choice_runs_on_a_matrix_where_every_model_lacks_an_item():
    matrix, _ = simulate_responses(random_item_params(80, seed=3), 60, seed=4)
    values = matrix.values.copy()
    rng = np.random.default_rng(1)
    values[rng.random(values.shape) < 0.03] = np.nan
    values[np.arange(60), rng.integers(0, 80, 60)] = np.nan
    gappy = ResponseMatrix(values, matrix.model_ids, matrix.item_ids, source="gappy.csv")
    truth = np.nanmean(values, axis=1)
    choice = choose_recipe(
        gappy, truth, budgets=[10], inner_repeats=3, outer_repeats=0, progress=False
    )
    assert choice.budget == 10
    # every model and item is chosen on, the gaps filled
    assert (choice.protocol["models_used"], choice.protocol["items_used"]) == (60, 80)


def test_a_build_on_a_few_models_with_gaps_selects_items_each_of_them_answered():
    from lmeval_microbench.build import build_bundle, selection_pool
    from lmeval_microbench.estimators import estimator_from_state

    matrix, _ = simulate_responses(random_item_params(120, seed=5), 12, seed=6)
    values = matrix.values.copy()
    rng = np.random.default_rng(2)
    values[rng.random(values.shape) < 0.03] = np.nan
    gappy = ResponseMatrix(values, matrix.model_ids, matrix.item_ids, source="few.csv")
    truth = np.nanmean(values, axis=1)
    # items drawn anywhere: few of the 12 models answer all 40, too few to fit on
    anywhere = np.isnan(values[:, rng.choice(120, 40, replace=False)]).any(axis=1)
    assert (~anywhere).sum() < 10
    with pytest.warns(UserWarning, match="few.csv: items drawn from the .* that 12 of 12 models"):
        pool, _ = selection_pool(gappy, truth, 40)
    assert not np.isnan(pool.values).any() and pool.n_items >= 40
    with pytest.warns(UserWarning):
        bundle = build_bundle(
            gappy, truth, name="few", benchmark="few", method="random", budget=40,
            estimators=["guarded"],
        )  # fmt: skip
    assert set(bundle.item_ids) <= set(pool.item_ids)
    assert estimator_from_state(bundle.estimator_state()).n_source_ == 12
    # a matrix without gaps is its own pool
    assert selection_pool(matrix, matrix.mean_scores(), 40)[0] is matrix


def test_gaps_scattered_everywhere_are_named_as_the_reason_a_build_is_refused():
    from lmeval_microbench.build import build_bundle

    matrix, _ = simulate_responses(random_item_params(200, seed=7), 60, seed=8)
    values = matrix.values.copy()
    values[np.random.default_rng(3).random(values.shape) < 0.2] = np.nan
    gappy = ResponseMatrix(values, matrix.model_ids, matrix.item_ids, source="scattered.csv")
    truth = np.nanmean(values, axis=1)
    # 0.8 ** 50: no model answered 50 given items, and no block of 10 models x 50 items is whole
    with pytest.raises(
        InputError, match=r"scattered\.csv have scores on every subset item"
    ) as info:
        build_bundle(
            gappy, truth, name="s", benchmark="s", method="random", budget=50,
            estimators=["mean"],
        )  # fmt: skip
    assert "% of their scores on these 50 items are missing: a smaller budget" in str(info.value)
    # the hint is about gaps: a complete matrix refused for too few models does not get it
    few = ResponseMatrix(matrix.values[:9], matrix.model_ids[:9], matrix.item_ids, source="f.csv")
    with pytest.raises(InputError, match="at least 10 are needed") as info:
        build_bundle(
            few, few.mean_scores(), name="f", benchmark="f", method="random", budget=20,
            estimators=["mean"],
        )  # fmt: skip
    assert "missing" not in str(info.value)
    # where one scored item suffices (IRT estimators impute), fewer items would not help
    from lmeval_microbench.estimators._fitting import usable_models

    sparse = np.full((12, 5), np.nan)
    sparse[:3, 0] = 1.0
    with pytest.raises(InputError, match="have scores on any subset item") as info:
        usable_models(sparse, any_item=True, name="irt", source="s.csv")
    assert "smaller budget" not in str(info.value)
