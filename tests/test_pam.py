"""PAM swaps behind Anchor Points: the swap bookkeeping against brute force, and why it matters."""

import numpy as np
import pytest

from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import make_selector
from lmeval_microbench.selection._pam import pam_swap, swap_gains, total_distance


def _distances(seed: int, n: int) -> np.ndarray:
    points = np.random.default_rng(seed).normal(size=(n, 3))
    return np.sqrt(((points[:, None] - points[None]) ** 2).sum(-1))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_swap_gains_equal_brute_force(seed):
    distances = _distances(seed, 25)
    medoids = np.array([0, 3, 7, 11, 19])
    gains = swap_gains(distances, medoids)
    before = total_distance(distances, medoids)
    for candidate in range(25):
        for slot in range(medoids.size):
            if candidate in medoids:
                assert gains[candidate, slot] == np.inf
                continue
            swapped = medoids.copy()
            swapped[slot] = candidate
            after = total_distance(distances, swapped)
            assert gains[candidate, slot] == pytest.approx(after - before, abs=1e-9)


def test_pam_swap_reaches_a_local_optimum_and_never_gets_worse():
    distances = _distances(3, 40)
    start = np.array([0, 1, 2, 3])
    medoids = pam_swap(distances, start, max_swaps=100)
    assert total_distance(distances, medoids) < total_distance(distances, start)
    assert swap_gains(distances, medoids).min() >= -1e-9
    assert np.array_equal(pam_swap(distances, start, max_swaps=0), start)


def test_pam_swap_leaves_degenerate_cases_alone():
    distances = _distances(4, 5)
    assert pam_swap(distances, np.array([2]), max_swaps=10).tolist() == [2]
    assert pam_swap(distances, np.arange(5), max_swaps=10).tolist() == list(range(5))


def test_anchor_points_gives_an_unlike_item_its_own_anchor():
    """Twelve copies each of three item kinds and one item unlike any: with four anchors the
    odd item must be one of them, weighted 1/37, so the weighted sum is every model's mean."""
    rng = np.random.default_rng(5)
    kinds = (rng.random((300, 3)) < np.array([0.3, 0.5, 0.7])).astype(float)
    odd = (rng.random((300, 1)) < 0.5).astype(float)
    values = np.hstack([np.repeat(kinds, 12, axis=1), odd])
    ids = [f"i{k}" for k in range(values.shape[1])]
    matrix = ResponseMatrix(values, [f"m{k}" for k in range(300)], ids)
    subset = make_selector("anchor_points").select(matrix, 4, seed=0)
    assert "i36" in subset.item_ids
    estimate = matrix.select_items(subset.item_ids).values @ subset.weights
    assert estimate == pytest.approx(values.mean(axis=1))
