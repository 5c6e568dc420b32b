"""Random generators passed explicitly; no global seeding anywhere in the package."""

from __future__ import annotations

import numpy as np

SeedLike = int | np.random.Generator | np.random.SeedSequence | None


def as_generator(seed: SeedLike) -> np.random.Generator:
    """Return a Generator for ``seed``; a Generator passes through unchanged."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def spawn(seed: SeedLike, n: int) -> list[np.random.Generator]:
    """``n`` independent generators derived from ``seed`` (for repeats and bootstraps)."""
    if isinstance(seed, np.random.Generator):
        return list(seed.spawn(n))
    sequence = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return [np.random.default_rng(child) for child in sequence.spawn(n)]
