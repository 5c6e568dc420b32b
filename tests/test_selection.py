import numpy as np
import pytest

from lmeval_microbench.errors import InputError
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import SELECTORS, make_selector
from lmeval_microbench.selection.random import allocate_proportionally
from lmeval_microbench.synthetic import random_item_params, simulate_responses


@pytest.fixture(scope="module")
def source() -> ResponseMatrix:
    params = random_item_params(120, seed=1)
    matrix, _ = simulate_responses(params, 300, seed=2)
    items = matrix.items.copy()
    items["stratum"] = [f"s{k % 7}" for k in range(matrix.n_items)]
    return ResponseMatrix(matrix.values, matrix.model_ids, matrix.item_ids, items=items)


@pytest.mark.parametrize("name", sorted(SELECTORS))
def test_budget_weights_and_determinism(source, name):
    first = make_selector(name).select(source, 20, seed=7)
    again = make_selector(name).select(source, 20, seed=7)
    assert first.item_ids == again.item_ids
    np.testing.assert_array_equal(first.weights, again.weights)
    assert first.budget == 20
    assert len(set(first.item_ids)) == 20
    assert set(first.item_ids) <= set(source.item_ids)
    assert first.weights.sum() == pytest.approx(1.0)
    assert first.method == name


@pytest.mark.parametrize("name", sorted(SELECTORS))
def test_uses_only_given_rows(source, name):
    """Changing models outside the source rows cannot change the selection."""
    rows = source.model_ids[:200]
    a = make_selector(name).select(source.select_models(rows), 15, seed=3)
    altered = source.values.copy()
    altered[200:] = 1 - altered[200:]
    other = ResponseMatrix(altered, source.model_ids, source.item_ids, items=source.items)
    b = make_selector(name).select(other.select_models(rows), 15, seed=3)
    assert a.item_ids == b.item_ids


@pytest.mark.parametrize("name", sorted(SELECTORS))
def test_budget_errors(source, name):
    with pytest.raises(InputError, match="budget"):
        make_selector(name).select(source, 0)
    with pytest.raises(InputError, match="exceeds"):
        make_selector(name).select(source, source.n_items + 1)


def test_unknown_method_lists_known():
    with pytest.raises(InputError, match="anchor_points"):
        make_selector("nope")


def test_allocate_proportionally_hand_case():
    assert allocate_proportionally(np.array([50, 30, 20]), 10).tolist() == [5, 3, 2]
    assert allocate_proportionally(np.array([1, 1, 98]), 3).tolist() == [0, 0, 3]
    assert allocate_proportionally(np.array([2, 9]), 6).sum() == 6


def test_stratified_weights_are_stratum_shares(source):
    subset = make_selector("stratified").select(source, 14, seed=0)
    strata = source.items.loc[list(subset.item_ids), "stratum"].to_numpy()
    for label in np.unique(strata):
        share = np.mean(source.items["stratum"].to_numpy() == label)
        assert subset.weights[strata == label].sum() == pytest.approx(share)


def test_anchor_points_groups_duplicated_items():
    """Items that are exact copies of each other share one anchor and its weight."""
    rng = np.random.default_rng(0)
    base = (rng.random((200, 4)) < np.array([0.2, 0.4, 0.6, 0.8])).astype(float)
    values = np.repeat(base, [5, 3, 1, 1], axis=1)
    ids = [f"i{k}" for k in range(values.shape[1])]
    matrix = ResponseMatrix(values, [f"m{k}" for k in range(200)], ids)
    subset = make_selector("anchor_points").select(matrix, 4, seed=0)
    assert sorted(np.round(subset.weights * 10).astype(int).tolist()) == [1, 1, 3, 5]
    assert subset.weights @ matrix.select_items(subset.item_ids).values.T == pytest.approx(
        matrix.values.mean(axis=1)
    )
