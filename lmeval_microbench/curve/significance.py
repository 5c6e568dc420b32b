"""Is the change between two checkpoints a change of the model, or noise of the subset?

Two checkpoints answer the SAME subset items, so the errors of their two estimates are
strongly correlated: an item set that flatters one checkpoint flatters the next one too.
Comparing their intervals (overlap or not) ignores that correlation and is far too
conservative, and a z-test from two independent standard errors is wrong for the same
reason. What differs between the two runs is only the items they answered differently.

The test here is a paired randomization (sign-flip) test on the item-level answers. Under
the null hypothesis "the checkpoints are the same model", the two answers to each item are
exchangeable, so swapping them item by item gives the null distribution of any score
``f`` of the answers: raw subset mean, IRT ability or the full-score estimate alike. The
observed change ``f(b) - f(a)`` is significant when its p-value (the share of swaps whose
change is at least as large in absolute value) is at most ``1 - level``. Only items
answered differently can move the statistic; with ``k`` of them and ``2**k`` no more than
the permutation budget every swap is enumerated (an exact test), else swaps are drawn at
random. For the raw mean this is the exact McNemar / sign test on discordant items.

It tests the model on these items; the change on the whole benchmark can still differ
in sign. ``tools/bench_curves.py`` counts how often a significant change has the wrong
sign against the true full-benchmark curve.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

ScoreFunction = Callable[[np.ndarray], np.ndarray]
"""Scores of each row of a (models x items) answer matrix, NaN where not evaluated."""

DEFAULT_PERMUTATIONS = 999


@dataclass(frozen=True)
class StepTest:
    """The change of one score between two checkpoints and its paired test."""

    delta: float
    """``f(later) - f(earlier)``."""
    p_value: float
    threshold: float
    """The ``level`` quantile of ``|change|`` over the swaps: changes beyond it are not
    noise at that level (a noise band for the plots and tables)."""
    discordant: int
    """Items the two checkpoints answered differently."""
    significant: bool
    exact: bool

    @property
    def direction(self) -> int:
        """+1 up, -1 down, 0 within the noise."""
        return int(np.sign(self.delta)) if self.significant else 0

    def to_dict(self) -> dict[str, float | int | bool | None]:
        return {
            "delta": _finite(self.delta),
            "p_value": _finite(self.p_value),
            "noise_threshold": _finite(self.threshold),
            "discordant_items": self.discordant,
            "significant": self.significant,
            "exact": self.exact,
        }


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def swap_masks(
    discordant: np.ndarray, permutations: int, rng: np.random.Generator
) -> tuple[np.ndarray, bool]:
    """Which items each swap exchanges (rows), only ever among the ``discordant`` ones.

    All ``2**k`` swaps when they fit in ``permutations`` (exact), else ``permutations``
    random ones. Returned with whether the set is exact.
    """
    k = int(discordant.sum())
    n = discordant.size
    columns = np.flatnonzero(discordant)
    if 2**k <= permutations:
        codes = np.arange(2**k)[:, None]
        bits = (codes >> np.arange(k)[None, :]) & 1
        masks = np.zeros((2**k, n), dtype=bool)
        masks[:, columns] = bits.astype(bool)
        return masks, True
    masks = np.zeros((permutations, n), dtype=bool)
    masks[:, columns] = rng.random((permutations, k)) < 0.5
    return masks, False


def paired_flip_test(
    score: ScoreFunction,
    earlier: np.ndarray,
    later: np.ndarray,
    *,
    level: float = 0.9,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> StepTest:
    """The sign-flip test of ``score(later) - score(earlier)`` (see the module docstring).

    ``earlier`` and ``later`` are the two checkpoints' answers to the same items (NaN where
    not scored); items scored by only one of them are never swapped. NaN scores give a NaN
    p-value and no significance.
    """
    earlier = np.asarray(earlier, dtype=np.float64)
    later = np.asarray(later, dtype=np.float64)
    both = ~np.isnan(earlier) & ~np.isnan(later)
    discordant = both & (earlier != later)
    masks, exact = swap_masks(discordant, permutations, np.random.default_rng(seed))
    first = np.where(masks, later, earlier)
    second = np.where(masks, earlier, later)
    scores = score(np.vstack([earlier, later, first, second]))
    delta = float(scores[1] - scores[0])
    null = np.abs(scores[2 + len(masks) :] - scores[2 : 2 + len(masks)])
    if not np.isfinite(delta) or not np.all(np.isfinite(null)):
        return StepTest(delta, np.nan, np.nan, int(discordant.sum()), False, exact)
    tolerance = 1e-12 * max(1.0, abs(delta))
    at_least = int(np.sum(null >= abs(delta) - tolerance))
    p_value = at_least / len(null) if exact else (1 + at_least) / (1 + len(null))
    threshold = float(np.quantile(null, level))
    significant = bool(p_value <= 1 - level and abs(delta) > tolerance)
    return StepTest(delta, p_value, threshold, int(discordant.sum()), significant, exact)
