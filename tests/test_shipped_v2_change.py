"""``tools/shipped_v2_change.py``: what a rebuild of the shipped v2 bundles moved."""

from __future__ import annotations

import numpy as np
import pytest
from tools_support import tools_module

from lmeval_microbench.build import build_bundle
from lmeval_microbench.estimators import estimator_from_state
from lmeval_microbench.synthetic import random_item_params, simulate_responses


@pytest.fixture(scope="module")
def matrix():
    found, _ = simulate_responses(random_item_params(60, seed=4), 80, seed=5)
    return found


def _bundle(matrix, method: str, seed: int):
    return build_bundle(
        matrix,
        matrix.mean_scores(),
        name="b",
        benchmark="b",
        method=method,
        budget=12,
        seed=seed,
        estimators=["mean"],
        default_estimator="mean",
    )


def test_a_bundle_beside_itself_moved_nothing(matrix):
    bundle = _bundle(matrix, "random", 0)
    found = tools_module("shipped_v2_change").compare("b", bundle, bundle, matrix)
    assert found["items_before_only"] == found["items_after_only"] == []
    assert found["models"] == matrix.n_models
    for edge in ("estimate", "lower", "upper"):
        assert found[edge]["share_moved"] == 0.0 and found[edge]["largest_change"] == 0.0
    assert found["width_before"] == found["width_after"]


def test_other_items_are_named_and_their_moves_measured(matrix):
    before, after = _bundle(matrix, "random", 0), _bundle(matrix, "random", 1)
    found = tools_module("shipped_v2_change").compare("b", before, after, matrix)
    assert set(found["items_before_only"]) == set(before.item_ids) - set(after.item_ids)
    assert set(found["items_after_only"]) == set(after.item_ids) - set(before.item_ids)
    assert found["items_before_only"]  # two random draws of 12 of 60 items differ
    # each bundle read on its own items, by hand
    read = [
        estimator_from_state(b.estimator_state()).estimate_matrix(matrix.select_items(b.item_ids))
        for b in (before, after)
    ]
    change = 100 * (read[1][0] - read[0][0])
    assert found["estimate"]["share_moved"] == pytest.approx(np.mean(np.abs(change) > 1e-7))
    assert found["estimate"]["mean_change"] == pytest.approx(float(np.mean(change)))
    assert abs(found["estimate"]["largest_change"]) == pytest.approx(np.abs(change).max())
    width = [100 * np.mean(r[2] - r[1]) for r in read]
    assert (found["width_before"], found["width_after"]) == pytest.approx(width)
