"""The ridge head of the joint estimator: one ridge regression per output, penalties chosen by GCV.

Why a module of its own: the head is plain linear algebra on a feature matrix, with no
knowledge of benchmarks, subsets or base estimators; :class:`~.estimator.JointEstimator` builds
the features, fits a head on them (:func:`cross_fit_head` for the out-of-fold predictions
its intervals are calibrated on, :func:`fit_ridge_head` on all joint source models) and
stores it in its state with :meth:`RidgeHead.to_dict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import InputError
from .._ridge_cv import ridge_gcv, standardise

ALPHA_GRID = np.logspace(-6, 2, 33)
"""Ridge penalties per source model on standardised columns."""
ITEM_SCALES = (1.0, 0.3, 0.1, 0.03, 0.0)
"""Factors on the item columns relative to the others (0 drops them); chosen per output."""

_HEAD_FIELDS = ("center", "scale", "coef", "intercept", "alpha", "item_scale")


@dataclass(frozen=True)
class RidgeHead:
    """Ridge regressions of several outputs on shared standardised features.

    ``coef`` has shape (p, O) on the standardised columns; ``alpha`` and ``item_scale`` are
    the per-output choices of GCV (the item scale is already folded into ``coef``).
    """

    center: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    alpha: np.ndarray
    item_scale: np.ndarray

    def predict(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.center) / self.scale) @ self.coef + self.intercept

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name).tolist() for name in _HEAD_FIELDS}

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> RidgeHead:
        try:
            fields = {name: np.asarray(payload[name], dtype=np.float64) for name in _HEAD_FIELDS}
        except KeyError as exc:
            raise InputError(f"joint head lacks field {exc.args[0]!r}") from exc
        return cls(**fields)


def fit_ridge_head(x: np.ndarray, y: np.ndarray, item_columns: np.ndarray) -> RidgeHead:
    """Ridge of every column of ``y`` (m, O) on ``x`` (m, p), penalties chosen by GCV.

    Penalties are ``ALPHA_GRID`` per source model, one for all columns, so one
    eigendecomposition of the Gram matrix serves every penalty and output
    (:func:`.._ridge_cv.ridge_gcv`; p is a few hundred, m a few thousand: much cheaper than an
    SVD of the m x p design).

    The grid is ``ALPHA_GRID`` x ``ITEM_SCALES``: scaling the item columns by ``c`` before a
    common penalty is the same as penalising them ``1 / c^2`` times more, which lets the head
    lean on the few strong features and use the items only as far as they help.
    """
    center, scale = standardise(x)
    z = (x - center) / scale
    y_mean = y.mean(axis=0)
    yc = y - y_mean
    scales = ITEM_SCALES if item_columns.any() and not item_columns.all() else (1.0,)
    n_outputs = y.shape[1]
    best_gcv = np.full(n_outputs, np.inf)
    coef = np.zeros((x.shape[1], n_outputs))
    alpha = np.zeros(n_outputs)
    item_scale = np.ones(n_outputs)
    for factor in scales:
        column_factor = np.where(item_columns, factor, 1.0)
        choice = ridge_gcv(z * column_factor, yc, ALPHA_GRID * x.shape[0])
        better = choice.score < best_gcv
        for out in np.flatnonzero(better):
            best_gcv[out] = choice.score[out]
            coef[:, out] = choice.coef[:, out] * column_factor
            alpha[out] = ALPHA_GRID[choice.index[out]]
            item_scale[out] = factor
    return RidgeHead(center, scale, coef, y_mean, alpha, item_scale)


def cross_fit_head(
    x: np.ndarray, y: np.ndarray, item_columns: np.ndarray, folds: np.ndarray, n_folds: int
) -> np.ndarray:
    """Out-of-fold predictions of ``y``, clipped to [0, 1]: each fold by a head fitted without
    it."""
    prediction = np.empty_like(y)
    for fold in range(n_folds):
        held = folds == fold
        head = fit_ridge_head(x[~held], y[~held], item_columns)
        prediction[held] = np.clip(head.predict(x[held]), 0.0, 1.0)
    return prediction
