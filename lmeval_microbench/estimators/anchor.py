"""Weighted anchor sum: each subset item stands for a share of the benchmark (Anchor Points)."""

from __future__ import annotations

import numpy as np

from ..irt.params import ItemParams
from ..responses import ResponseMatrix
from ..subset import Subset
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
    features_estimate_full_score = True

    def _fit_features(self, source: ResponseMatrix, subset: Subset, irt: ItemParams | None) -> None:
        """Nothing to learn beyond the subset weights the base class keeps."""

    def _features(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        estimate = anchor_sum(values, self.weights_)
        return estimate[:, None], anchor_se(estimate, values, self.weights_)[:, None]


class AnchorSumEstimator(AnchorEstimator):
    """The weighted anchor sum as it is, with no line fitted on the source models.

    Anchor Points' own estimator: a model's answers on the cluster medoids, each weighted
    by its cluster's share. With nothing fitted to the sources' scores it does not regress
    a model beyond them back towards them; under extrapolation on the Open LLM v1 matrices
    benchpred's version of it (``anchor_points_weighted``) was the best published estimator
    in most cases, and on whole current benchmarks among the worst (``bench/peers.md``),
    which is why ``--method auto`` only keeps it where its own folds say so.
    """

    name = "anchor_sum"

    def __init__(
        self,
        *,
        calibration: str = "none",
        interval: str = "binned",
        n_folds: int = 5,
        random_state: int | None = 0,
    ) -> None:
        super().__init__(
            calibration=calibration, interval=interval, n_folds=n_folds, random_state=random_state
        )
