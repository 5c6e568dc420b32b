"""Anchor Points: cluster items by how source models answer them, keep one medoid per cluster.

Items whose correctness is strongly correlated across models are interchangeable for
scoring, so one representative per cluster, weighted by cluster size, estimates the full
score (Vivek et al., 2023; tinyBenchmarks uses the same weighting).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from .._rng import SeedLike, as_generator
from ..responses import ResponseMatrix
from ._pam import pam_swap
from .base import Selector, Subset
from .random import _seed_value

PAM_MAX_ITEMS = 2000
"""Above this many items the k-means medoids are kept as they are: each swap step costs
``O(n^2 k)``, and the ``n x n`` distances grow past a laptop's memory not far beyond."""
MAX_SWAPS_PER_MEDOID = 4
"""Swap steps allowed per medoid (real matrices needed under one per medoid)."""


def standardised_item_profiles(source: ResponseMatrix) -> np.ndarray:
    """Item columns z-scored across models, one row per item (missing -> item mean).

    Squared Euclidean distance between two rows is ``2 m (1 - r)`` with ``r`` the
    correlation of the items' correctness, so k-means on these rows clusters by correlation.
    """
    values = source.values
    means = np.nanmean(values, axis=0)
    filled = np.where(np.isnan(values), means, values)
    centred = filled - means
    scale = centred.std(axis=0)
    scale[scale == 0] = 1.0
    return (centred / scale).T


def _kmeans_plus_plus(
    points: np.ndarray, k: int, rng: np.random.Generator, norms: np.ndarray
) -> np.ndarray:
    n = points.shape[0]
    centres = np.empty((k, points.shape[1]))
    centres[0] = points[rng.integers(n)]
    closest = _squared_distances(points, centres[:1], norms)[:, 0]
    for j in range(1, k):
        total = closest.sum()
        probs = closest / total if total > 0 else np.full(n, 1.0 / n)
        centres[j] = points[rng.choice(n, p=probs)]
        closest = np.minimum(closest, _squared_distances(points, centres[j : j + 1], norms)[:, 0])
    return centres


def _squared_distances(
    points: np.ndarray, centres: np.ndarray, norms: np.ndarray | None = None
) -> np.ndarray:
    """Squared distances of every row of ``points`` to every centre (``norms``: the rows'
    squared norms, computed once by callers that ask many times).

    Built in place on the product: ``2.0 * points @ centres.T`` doubled the whole profile
    matrix before each product (half of the distances' time on 12,096 items); doubling is exact, so
    the distances are the same to the bit."""
    norms = np.sum(points**2, axis=1) if norms is None else norms
    sq = points @ centres.T
    sq *= -2.0
    sq += norms[:, None]
    sq += np.sum(centres**2, axis=1)
    return np.maximum(sq, 0.0, out=sq)


def _cluster_means(points: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each cluster's mean row (zeros where it is empty, for the caller to reseed) and its
    size, in one sparse product: a loop over the clusters' member rows took a quarter of
    ``build`` on 12,096 items. ``points`` should be C-contiguous: scipy copies any other
    layout on every product (the item profiles are a transposed view; the copies took 18 of
    170 s of a 348 x 12,096 build)."""
    n = points.shape[0]
    members = sparse.csr_matrix((np.ones(n), (labels, np.arange(n))), shape=(k, n))
    sizes = np.bincount(labels, minlength=k)
    sums = np.asarray(members @ points)
    return sums / np.maximum(sizes, 1)[:, None], sizes


def kmeans(
    points: np.ndarray, k: int, rng: np.random.Generator, *, max_iter: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd's k-means with k-means++ start; returns (labels, centres). Empty clusters reseed."""
    norms = np.sum(points**2, axis=1)
    rows = np.ascontiguousarray(points)  # for the sparse sums; same values, same sums
    centres = _kmeans_plus_plus(points, k, rng, norms)
    labels = np.full(points.shape[0], -1)
    for _ in range(max_iter):
        distances = _squared_distances(points, centres, norms)
        new_labels = np.argmin(distances, axis=1)
        if np.array_equal(new_labels, labels):
            break
        labels = new_labels
        centres, sizes = _cluster_means(rows, labels, k)
        empty = sizes == 0
        if empty.any():  # move empty centres to the point worst served by its centre
            worst = int(np.argmax(distances[np.arange(len(labels)), labels]))
            centres[empty] = points[worst]
    return labels, centres


TIE_RTOL = 1e-9
"""Relative gap within which members count as equally close to their centre."""


def medoid_indices(points: np.ndarray, labels: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """For each non-empty cluster, the member closest to its centre; of members equally
    close (within :data:`TIE_RTOL`), the first row.

    The two members of a two-item cluster are exactly as close to its centre, their midpoint,
    so floating-point rounding picked one of them, and rounding differs between CPUs: on
    another machine the shipped IFEval tinyBenchmarks items were rebuilt with one of 50
    swapped (item 170 in place of item 77, its cluster's other member), from the same data
    and code.
    """
    medoids = []
    for j in range(centres.shape[0]):
        members = np.flatnonzero(labels == j)
        if members.size == 0:
            continue
        gaps = np.sum((points[members] - centres[j]) ** 2, axis=1)
        closest = gaps <= gaps.min() + TIE_RTOL * max(float(gaps.min()), 1.0)
        medoids.append(int(members[np.argmax(closest)]))
    return np.asarray(medoids, dtype=np.intp)


def cluster_representatives(
    points: np.ndarray,
    budget: int,
    rng: np.random.Generator,
    *,
    n_init: int = 5,
    max_iter: int = 100,
) -> tuple[np.ndarray, np.ndarray]:
    """``budget`` medoid rows of ``points`` and the share of all rows each one stands for.

    Best of ``n_init`` k-means runs (lowest inertia). When identical points leave clusters
    empty, there are fewer medoids than ``budget``: the rest are filled with the rows farthest
    from every chosen one, and shares then come from assigning each row to its nearest pick.
    """
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for _ in range(n_init):
        labels, centres = kmeans(points, budget, rng, max_iter=max_iter)
        inertia = float(np.sum((points - centres[labels]) ** 2))
        if best is None or inertia < best[0]:
            best = (inertia, labels, centres)
    assert best is not None
    _, labels, centres = best
    picked = medoid_indices(points, labels, centres)
    if picked.size == budget:
        sizes = np.bincount(labels, minlength=budget)
        sizes = sizes[sizes > 0]
        return picked, sizes / sizes.sum()
    picked = _fill_farthest(points, picked, budget)
    nearest = np.argmin(_squared_distances(points, points[picked]), axis=1)
    sizes = np.bincount(nearest, minlength=budget)
    return picked, sizes / sizes.sum()


def correlation_distances(points: np.ndarray) -> np.ndarray:
    """``1 - r`` between standardised rows (a constant item correlates 0 with every other)."""
    distances = 1.0 - points @ points.T / max(points.shape[1], 1)
    np.fill_diagonal(distances, 0.0)
    return np.clip(distances, 0.0, 2.0)


def swap_medoids(points: np.ndarray, medoids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PAM swaps on correlation distance from the k-means medoids, then cluster shares.

    An item that nothing else resembles must stand for itself, and a k-means medoid (the
    member nearest a centre) rarely does (measured in :mod:`._pam`'s docstring).
    """
    distances = correlation_distances(points)
    picked = pam_swap(distances, medoids, max_swaps=MAX_SWAPS_PER_MEDOID * medoids.size)
    sizes = np.bincount(np.argmin(distances[:, picked], axis=1), minlength=picked.size)
    return picked, sizes / sizes.sum()


def _fill_farthest(points: np.ndarray, picked: np.ndarray, budget: int) -> np.ndarray:
    """Add the row farthest from all picked rows until there are ``budget`` (ties: lowest row)."""
    chosen = list(int(k) for k in picked)
    gap = np.min(_squared_distances(points, points[chosen]), axis=1)
    gap[chosen] = -np.inf
    while len(chosen) < budget:
        k = int(np.argmax(gap))
        chosen.append(k)
        gap = np.minimum(gap, _squared_distances(points, points[k : k + 1])[:, 0])
        gap[chosen] = -np.inf
    return np.asarray(chosen, dtype=np.intp)


class AnchorPointsSelector(Selector):
    """k-means on correlation profiles of items, then PAM swaps on correlation distance;
    medoids weighted by cluster size."""

    name = "anchor_points"

    def __init__(self, *, n_init: int = 5, max_iter: int = 100) -> None:
        self.n_init = n_init
        self.max_iter = max_iter

    def _select(self, source: ResponseMatrix, budget: int, seed: SeedLike) -> Subset:
        rng = as_generator(seed)
        points = standardised_item_profiles(source)
        medoids, shares = cluster_representatives(
            points, budget, rng, n_init=self.n_init, max_iter=self.max_iter
        )
        if points.shape[0] <= PAM_MAX_ITEMS:
            medoids, shares = swap_medoids(points, medoids)
        order = np.argsort(medoids)
        return Subset(
            tuple(source.item_ids[m] for m in medoids[order]),
            shares[order],
            self.name,
            _seed_value(seed),
            {"cluster_shares": shares[order].tolist()},
        )
