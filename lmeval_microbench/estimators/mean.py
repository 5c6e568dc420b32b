"""Subset mean: the accuracy lm-eval prints on the subset, calibrated to the full score."""

from __future__ import annotations

import numpy as np

from ..irt.params import ItemParams
from ..responses import ResponseMatrix
from ..subset import Subset
from .base import ScoreEstimator


def binomial_se(mean: np.ndarray, n_items: float) -> np.ndarray:
    """Standard error of a mean of ``n_items`` Bernoulli scores with success rate ``mean``."""
    return np.sqrt(np.clip(mean * (1.0 - mean), 0.0, None) / n_items)


class MeanEstimator(ScoreEstimator):
    """Unweighted mean over the subset items, then the linear calibration of the base class.

    The model-based ``se`` treats the subset as a simple random sample of items:
    ``sqrt(p (1 - p) / k)`` times the calibration slope. It ignores the item selection, so it
    is too small for informative (non-random) subsets; the conformal interval is not.
    """

    name = "mean"
    features_estimate_full_score = True

    def _fit_features(self, source: ResponseMatrix, subset: Subset, irt: ItemParams | None) -> None:
        """Nothing to learn: the feature is the plain mean."""

    def _features(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean = values.mean(axis=1)
        se = binomial_se(mean, values.shape[1])
        return mean[:, None], se[:, None]
