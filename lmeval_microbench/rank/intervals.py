"""Rank intervals from score intervals: where each model may stand among the others.

``simulate`` draws every model's score from its own estimate distribution (a split normal
through the estimate and the two ends of its interval, so a clipped or skewed interval
keeps its shape), ranks each draw and keeps the central ``rank_level`` share of each
model's ranks. ``overlap`` is the conservative count: a model ranks no better than one
plus the models whose whole interval lies above its interval, no worse than the count of
models minus those wholly below. ``tools/bench_rank.py`` measures how often either holds
the true full-benchmark rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from .._rng import SeedLike, as_generator
from ..errors import InputError

METHODS = ("simulate", "overlap")
N_DRAWS = 2000
_SD_FLOOR = 1e-6


@dataclass(frozen=True)
class RankIntervals:
    """Point ranks (1 = best, by estimate) and rank intervals ``[low, high]`` per model."""

    rank: np.ndarray
    low: np.ndarray
    high: np.ndarray


def point_ranks(value: np.ndarray) -> np.ndarray:
    """Rank 1 for the highest value; ties keep input order (stable)."""
    order = np.argsort(-np.asarray(value, dtype=np.float64), kind="stable")
    ranks = np.empty(order.size, dtype=np.int64)
    ranks[order] = np.arange(1, order.size + 1)
    return ranks


def _check(value: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
    if not (value.shape == lower.shape == upper.shape) or value.ndim != 1:
        raise InputError("value, lower and upper must be 1-D arrays of one length")
    if not np.all(np.isfinite(value) & np.isfinite(lower) & np.isfinite(upper)):
        raise InputError("estimates and their intervals must be finite to rank models")
    if np.any(lower > value + 1e-12) or np.any(upper < value - 1e-12):
        raise InputError("every interval must hold its estimate (lower <= value <= upper)")


def overlap_intervals(value: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> RankIntervals:
    """Ranks a model cannot leave unless some interval misses: see the module docstring."""
    above = (lower[None, :] > upper[:, None]).sum(axis=1)
    below = (upper[None, :] < lower[:, None]).sum(axis=1)
    rank = point_ranks(value)
    low = np.minimum(1 + above, rank)
    high = np.maximum(value.size - below, rank)
    return RankIntervals(rank, low, high)


def simulated_ranks(
    value: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    score_level: float,
    n_draws: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Ranks ``(n_draws, n_models)`` of scores drawn from each model's split normal."""
    z = float(norm.ppf(0.5 + score_level / 2.0))
    sd_up = np.maximum((upper - value) / z, _SD_FLOOR)
    sd_down = np.maximum((value - lower) / z, _SD_FLOOR)
    noise = rng.standard_normal((n_draws, value.size))
    draws = value + noise * np.where(noise > 0, sd_up, sd_down)
    order = np.argsort(-draws, axis=1)
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, value.size + 1)[None, :], axis=1)
    return ranks


def rank_intervals(
    value: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    score_level: float = 0.9,
    rank_level: float = 0.9,
    method: str = "simulate",
    n_draws: int = N_DRAWS,
    seed: SeedLike = 0,
) -> RankIntervals:
    """Rank intervals of models with estimates ``value`` in ``[lower, upper]`` (``score_level``).

    The point rank always lies inside its interval.
    """
    value, lower, upper = (np.asarray(a, dtype=np.float64) for a in (value, lower, upper))
    _check(value, lower, upper)
    if method == "overlap":
        return overlap_intervals(value, lower, upper)
    if method != "simulate":
        raise InputError(f"rank interval method must be one of {METHODS}, got {method!r}")
    if not 0.0 < rank_level < 1.0:
        raise InputError(f"rank_level must be in (0, 1), got {rank_level!r}")
    ranks = simulated_ranks(value, lower, upper, score_level, n_draws, as_generator(seed))
    tail = (1.0 - rank_level) / 2.0
    rank = point_ranks(value)
    low = np.floor(np.quantile(ranks, tail, axis=0)).astype(np.int64)
    high = np.ceil(np.quantile(ranks, 1.0 - tail, axis=0)).astype(np.int64)
    return RankIntervals(rank, np.minimum(low, rank), np.maximum(high, rank))
