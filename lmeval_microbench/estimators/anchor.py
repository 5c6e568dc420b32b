"""Weighted anchor sum: each subset item stands for a share of the benchmark (Anchor Points)."""

from __future__ import annotations

import numpy as np

from ..irt.params import ItemParams
from ..responses import ResponseMatrix
from ..selection.base import Subset
from .base import ScoreEstimator


def anchor_sum(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``sum(weights * scores)`` per row, renormalised over the observed (non-NaN) items."""
    observed = ~np.isnan(values)
    mass = observed @ weights
    return np.where(observed, values, 0.0) @ weights / np.where(mass > 0, mass, np.nan)


def anchor_se(estimate: np.ndarray, values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Binomial standard error of a weighted sum: ``sqrt(p (1 - p) sum w^2)`` (observed items)."""
    observed = ~np.isnan(values)
    mass = observed @ weights
    w_sq = observed @ (weights**2) / np.where(mass > 0, mass**2, np.nan)
    return np.sqrt(np.clip(estimate * (1.0 - estimate), 0.0, None) * w_sq)


class AnchorEstimator(ScoreEstimator):
    """``sum(subset.weights * scores)``, then the linear calibration of the base class.

    With Anchor Points subsets the weights are cluster shares, so the sum estimates the mean
    over the items the clusters were built on; with equal weights it equals ``mean``.
    """

    name = "anchor"

    def _fit_features(self, source: ResponseMatrix, subset: Subset, irt: ItemParams | None) -> None:
        """Nothing to learn beyond the subset weights the base class keeps."""

    def _features(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        estimate = anchor_sum(values, self.weights_)
        return estimate[:, None], anchor_se(estimate, values, self.weights_)[:, None]
