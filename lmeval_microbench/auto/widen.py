"""How much wider the chosen recipe's intervals must be, measured on the choice's own folds.

A bundle's conformal band (:mod:`lmeval_microbench._conformal`) comes from cross-fitted
residuals that refit only the estimator's head: the items and the IRT fit were chosen once
on all source models. The choice's random folds redo everything for each fold, selection
included, so their targets are scored as a new model is. Where the band is too narrow there,
the ratio of a target's error to its interval's half-width exceeds 1 for more than 10 % of
the targets, and the factor that restores 90 % is the conformal quantile of those ratios.

That quantile is itself measured on the few dozen models of a small matrix and would chase
the noise of one split, so it is shrunk towards 1 (no change) by ``n / (n + SHRINK_MODELS)``
with ``n`` the fold targets: on 25 sources a third of the measured shortfall is applied, on
300 six sevenths. Widen only: a band that covered more than 90 % on the folds is kept, since
the folds' targets are models like the sources and say nothing of those beyond them, whose
interval the guard sizes (:mod:`lmeval_microbench.outside`).

The factor is measured at the 90 % level and multiplies the band at every level. Measured on
the peer suite's cells before and after (``bench/peers_widen.md``): random-split coverage with
25 / 50 / 100 sources 0.899 / 0.883 / 0.888 -> 0.918 / 0.891 / 0.909 for 1.5 / 0.5 / 0.5
points of width; with all sources, where the factor is near 1, nothing moved by more than
0.012 of coverage.
"""

from __future__ import annotations

import numpy as np

from .._conformal import conformal_quantile
from ._cv import LEVEL, RANDOM, Outcome

SHRINK_MODELS = 50
"""Fold targets at which half of the measured shortfall is applied."""


def fold_widen(outcome: Outcome, level: float = LEVEL) -> float:
    """The factor (>= 1) for the half-widths of the candidate measured by ``outcome``.

    Targets whose interval had zero width cannot be widened by a factor and are left out;
    with too few ratios for a finite quantile the factor is 1.
    """
    ratios = outcome.ratio_values(RANDOM)
    ratios = np.sort(ratios[np.isfinite(ratios)])
    quantile = conformal_quantile(ratios, level) if ratios.size else np.inf
    if not np.isfinite(quantile) or quantile <= 1.0:
        return 1.0
    n = ratios.size
    return float(1.0 + (quantile - 1.0) * n / (n + SHRINK_MODELS))


def widen_interval(
    value: np.ndarray, lower: np.ndarray, upper: np.ndarray, factor: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(value, lower, upper)`` with both half-widths multiplied by ``factor``, in [0, 1]."""
    value, lower, upper = (np.asarray(a, dtype=np.float64) for a in (value, lower, upper))
    low = np.clip(value - factor * (value - lower), 0.0, 1.0)
    high = np.clip(value + factor * (upper - value), 0.0, 1.0)
    return value, low, high
