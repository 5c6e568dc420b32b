"""tinyBenchmarks' IRT clustering: k-means on item parameters, one medoid per cluster.

Polo et al. (2024, "tinyBenchmarks") fit an IRT model on the source models and describe each
item by its parameters ``[a, d]`` (slopes and intercept); items with similar parameters are
answered alike by any model of a given ability, so one medoid per k-means cluster, weighted by
the cluster's share of the items, stands for its cluster. Unlike Anchor Points, whose
item profiles have one coordinate per source model, the embedding has only ``D + 1``
coordinates and does not depend on how many source models there are.

Choices here: the IRT model is a 2PL with ``n_dims`` dimensions (default 1: a 1-D fit of a
3,000 x 100 matrix takes well under a second; tinyBenchmarks uses about ten dimensions, our
2-D fit takes ~10 s and 3-D ~2 min on the same matrix); the embedding columns are
standardised so slopes and intercepts count alike in the k-means distance. Items every source
model gets right (or wrong) cannot be fitted; they get slope 0 and the most extreme fitted
intercept of their sign, so they cluster with the easiest (hardest) items instead of being
dropped from the weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._rng import SeedLike, as_generator
from ..irt import fit_with_constant_items
from ..responses import ResponseMatrix
from .anchor_points import cluster_representatives
from .base import Selector, Subset
from .random import _seed_value


def standardise_columns(points: np.ndarray) -> np.ndarray:
    """Each column centred and scaled to unit standard deviation (constant columns: centred)."""
    centred = points - points.mean(axis=0)
    scale = centred.std(axis=0)
    scale[scale == 0] = 1.0
    return centred / scale


def irt_item_embeddings(
    source: ResponseMatrix, n_dims: int, irt_options: dict[str, Any], seed: int
) -> np.ndarray:
    """``[a_1..a_D, d]`` of every source item from a 2PL fit, shape (n_items, D + 1).

    Constant items (same score for every model) are left out of the fit and placed at slope
    0 and the largest fitted |d| with the sign of their score (see the module docstring).
    """
    params = fit_with_constant_items(source, "2pl", n_dims, random_state=seed, **irt_options)
    return np.column_stack([params.a, params.d])


class TinyBenchmarksSelector(Selector):
    """k-means on standardised IRT item parameters ``[a, d]``; medoids weighted by cluster share.

    Parameters
    ----------
    n_dims
        Ability dimensions of the 2PL fitted to the source (see the module docstring).
    n_init, max_iter
        k-means restarts (the lowest inertia wins) and iterations per restart.
    irt_options
        Extra keyword arguments of :class:`~lmeval_microbench.irt.IRTModel` (``max_iter``...).
    """

    name = "tinybenchmarks"

    def __init__(
        self,
        *,
        n_dims: int = 1,
        n_init: int = 5,
        max_iter: int = 100,
        irt_options: dict[str, Any] | None = None,
    ) -> None:
        self.n_dims = n_dims
        self.n_init = n_init
        self.max_iter = max_iter
        self.irt_options = irt_options

    def _select(self, source: ResponseMatrix, budget: int, seed: SeedLike) -> Subset:
        rng = as_generator(seed)
        irt_seed = int(rng.integers(2**31))
        embedding = irt_item_embeddings(source, self.n_dims, dict(self.irt_options or {}), irt_seed)
        points = standardise_columns(embedding)
        picked, shares = cluster_representatives(
            points, budget, rng, n_init=self.n_init, max_iter=self.max_iter
        )
        order = np.argsort(picked)
        return Subset(
            tuple(source.item_ids[k] for k in picked[order]),
            shares[order],
            self.name,
            _seed_value(seed),
            {"cluster_shares": shares[order].tolist(), "n_dims": self.n_dims},
        )
