"""Baselines: uniformly random items, and random items stratified by subject."""

from __future__ import annotations

import numpy as np

from .._rng import SeedLike, as_generator
from ..responses import ResponseMatrix
from .base import Selector, Subset


def _seed_value(seed: SeedLike) -> int | None:
    return int(seed) if isinstance(seed, (int, np.integer)) else None


class RandomSelector(Selector):
    """``budget`` items drawn without replacement, equal weights: the baseline to beat."""

    name = "random"

    def _select(self, source: ResponseMatrix, budget: int, seed: SeedLike) -> Subset:
        rng = as_generator(seed)
        picked = np.sort(rng.choice(source.n_items, size=budget, replace=False))
        return Subset(
            tuple(source.item_ids[k] for k in picked),
            np.full(budget, 1.0 / budget),
            self.name,
            _seed_value(seed),
        )


def allocate_proportionally(sizes: np.ndarray, budget: int) -> np.ndarray:
    """Split ``budget`` over strata in proportion to ``sizes`` (largest remainder method).

    No stratum gets more items than it has; leftovers go to the largest remainders.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    exact = budget * sizes / sizes.sum()
    counts = np.minimum(np.floor(exact).astype(np.int64), sizes)
    remainder = exact - counts
    while counts.sum() < budget:
        room = counts < sizes
        k = int(np.argmax(np.where(room, remainder, -np.inf)))
        counts[k] += 1
        remainder[k] = -1.0
    return counts


class StratifiedSelector(Selector):
    """Random items within each stratum (e.g. MMLU subject), in proportion to stratum size.

    Each item's weight is its stratum's share of the benchmark divided by the items drawn
    from that stratum, so the weighted sum is the stratified estimator of the full mean.
    """

    name = "stratified"

    def _select(self, source: ResponseMatrix, budget: int, seed: SeedLike) -> Subset:
        rng = as_generator(seed)
        strata = source.strata().astype(str)
        labels, inverse, sizes = np.unique(strata, return_inverse=True, return_counts=True)
        counts = allocate_proportionally(sizes, budget)
        picked: list[int] = []
        weights: list[float] = []
        for k, count in enumerate(counts):
            if count == 0:
                continue
            members = np.flatnonzero(inverse == k)
            chosen = rng.choice(members, size=int(count), replace=False)
            picked.extend(int(c) for c in chosen)
            weights.extend([sizes[k] / source.n_items / count] * int(count))
        order = np.argsort(picked)
        weights_arr = np.asarray(weights)[order]
        return Subset(
            tuple(source.item_ids[picked[k]] for k in order),
            weights_arr / weights_arr.sum(),
            self.name,
            _seed_value(seed),
            {"strata": {str(label): int(c) for label, c in zip(labels, counts, strict=True)}},
        )
