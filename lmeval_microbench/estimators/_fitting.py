"""Small pieces every estimator's fit shares: which source models it can fit on, folds, a line.

Kept apart from :mod:`.base` so that the estimators that do not fit the base class's
feature-and-head pipeline (``guarded``, ``similar``, the joint estimator) use the same checks
and the same refusals without inheriting that pipeline's code, and so that a refusal of too few
usable models reads the same whichever estimator makes it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._rng import as_generator
from .._types import ItemId
from ..errors import InputError

MIN_SOURCE_MODELS = 10
"""Fewest usable source models an estimator is fitted on: a 90 % conformal interval needs 9
held-out residuals to be finite (``ceil((n + 1) * 0.9) <= n``), 10 keeps one to spare; the
interval is then the largest residual, hence ``MIN_CALIBRATION_MODELS`` for a fitted head."""
MIN_CALIBRATION_MODELS = 20
"""Fewer source models than this get no linear calibration head and leave-one-out residuals."""
FOLD_FAILURES = (InputError, ValueError, ArithmeticError, np.linalg.LinAlgError)
"""What a fit on one fold's models may raise where that fold is skipped rather than the whole
fit refused: the folds of ``crossfit`` and the guard's re-selecting upward folds."""


def usable_models(values: np.ndarray, *, any_item: bool, name: str, source: str) -> np.ndarray:
    """Mask of the source models an estimator can fit on, or an :class:`InputError`.

    ``values`` are the source models' scores on the subset items (NaN: not scored). With
    ``any_item`` (IRT estimators, which impute) a model needs one scored subset item, otherwise
    every one; fewer than ``MIN_SOURCE_MODELS`` such models are refused, naming the matrix.
    """
    gaps = np.isnan(values)
    usable = ~(gaps.all(axis=1) if any_item else gaps.any(axis=1))
    if usable.sum() < MIN_SOURCE_MODELS:
        needed = "any" if any_item else "every"
        hint = "" if any_item else _gap_hint(gaps)  # fewer items help only where all are needed
        raise InputError(
            f"{name}: only {int(usable.sum())} source models of {source} have scores on "
            f"{needed} subset item; at least {MIN_SOURCE_MODELS} are needed{hint}"
        )
    return usable


def _gap_hint(gaps: np.ndarray) -> str:
    """Why so few models are complete, where gaps are the cause: scattered gaps leave no block
    of models and items without one (20 % of MuSR's answers missing at random: not one of 100
    models answered 50 given items), and fewer items leave more models complete."""
    if not gaps.any():
        return ""
    return (
        f" ({100 * gaps.mean():.0f} % of their scores on these {gaps.shape[1]} items are "
        "missing: a smaller budget, or a matrix with fewer gaps, leaves more models complete)"
    )


def fit_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares ``y ~ intercept + slope * x``; a constant ``x`` gives slope 0."""
    x_mean, y_mean = float(x.mean()), float(y.mean())
    spread = float(np.sum((x - x_mean) ** 2))
    slope = float(np.sum((x - x_mean) * (y - y_mean)) / spread) if spread > 0 else 0.0
    return y_mean - slope * x_mean, slope


def fold_labels(n: int, n_folds: int, seed: Any) -> np.ndarray:
    """Fold number of each of ``n`` rows: a seeded permutation cut into near-equal folds."""
    labels = np.arange(n) % n_folds
    return labels[as_generator(seed).permutation(n)]


def checked_score(item: ItemId, score: Any, *, owner: str = "") -> float:
    """``score`` as a float, or an :class:`InputError` naming the item: a NaN, a string or a
    percentage slipped in where a score in [0, 1] belongs would bend every estimate."""
    where = f"{owner}: " if owner else ""
    try:
        number = float(score)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}score of item {item!r} is not a number: {score!r}") from exc
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InputError(f"{where}score of item {item!r} is not in [0, 1] (got {score!r})")
    return number


def checked_cross_fit(
    cross_fit: np.ndarray, usable: np.ndarray, own: np.ndarray, name: str
) -> np.ndarray:
    """The given out-of-fold estimates of the usable source models; ``own`` (the estimator's
    own cross-fit) fills the models the given procedure could not estimate (NaN)."""
    values = np.asarray(cross_fit, dtype=np.float64).reshape(-1)
    if values.shape != usable.shape:
        raise InputError(
            f"{name}: cross_fit has {values.size} estimates for {usable.size} source models"
        )
    values = values[usable]
    return np.clip(np.where(np.isfinite(values), values, own), 0.0, 1.0)
