"""Response matrices drawn from known IRT parameters: for tests and benchmarks, never shipped."""

from __future__ import annotations

import numpy as np

from ._rng import SeedLike, as_generator
from .irt.params import ItemParams
from .responses import ResponseMatrix


def random_item_params(
    n_items: int, *, model: str = "2pl", n_dims: int = 1, seed: SeedLike = None
) -> ItemParams:
    """Plausible parameters: log-normal slopes, normal intercepts, small guessing/slipping."""
    rng = as_generator(seed)
    a = np.exp(rng.normal(0.0, 0.35, size=(n_items, n_dims)))
    if model == "1pl":
        a = np.ones((n_items, n_dims))
    d = rng.normal(0.0, 1.5, size=n_items)
    g = rng.uniform(0.05, 0.3, size=n_items) if model in ("3pl", "4pl") else np.zeros(n_items)
    u = rng.uniform(0.85, 1.0, size=n_items) if model == "4pl" else np.ones(n_items)
    ids = tuple(f"item{k:05d}" for k in range(n_items))
    return ItemParams(ids, a, d, g, u, model)


def simulate_responses(
    params: ItemParams,
    n_models: int,
    *,
    seed: SeedLike = None,
    missing_rate: float = 0.0,
    theta: np.ndarray | None = None,
) -> tuple[ResponseMatrix, np.ndarray]:
    """Draw 0/1 responses; returns the matrix and the true abilities (n_models, D)."""
    rng = as_generator(seed)
    if theta is None:
        theta = rng.standard_normal((n_models, params.n_dims))
    probs = params.probability(theta)
    values = (rng.random(probs.shape) < probs).astype(np.float64)
    if missing_rate > 0:
        values[rng.random(values.shape) < missing_rate] = np.nan
    model_ids = [f"model{k:05d}" for k in range(n_models)]
    return ResponseMatrix(values, model_ids, params.item_ids, source="synthetic"), theta
