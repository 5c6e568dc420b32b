"""Whole benchmarks: the asked items are part of the score, only the others are estimated.

When the target of the source models is their mean over every item of the matrix, the
matrix is the whole benchmark and a model's subset answers are that many items of its score,
known exactly. An estimator then predicts only the mean over the items it was not asked; the
score is the known part plus ``(N - k) / N`` times that prediction, and its interval and
standard error shrink by the same share (:meth:`ScoreEstimator.predict_rows`). A linear head
learns the known part by itself; a shrunk or nonlinear one (ridge, the guard's readings) and
every interval do not. Asking 190 of 200 items leaves at most 5 points to estimate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..responses import ResponseMatrix
from ..truth import is_matrix_mean


@dataclass(frozen=True)
class FinitePopulation:
    """``n_items`` items in the benchmark, ``n_subset`` of them asked."""

    n_items: int
    n_subset: int

    @classmethod
    def detect(
        cls, source: ResponseMatrix, usable: np.ndarray, target: np.ndarray, n_subset: int
    ) -> FinitePopulation | None:
        """The benchmark when the target is every usable model's mean over all source items
        and the subset leaves items out; else None."""
        values = source.values[usable]
        if n_subset >= source.n_items or np.isnan(values).any():
            return None
        if not is_matrix_mean(values, target[usable]):
            return None
        return cls(int(source.n_items), int(n_subset))

    @property
    def rest_share(self) -> float:
        """Share of the score left to estimate."""
        return (self.n_items - self.n_subset) / self.n_items

    def rest(self, values: np.ndarray, full: np.ndarray) -> np.ndarray:
        """Full scores -> the mean over the items outside the subset."""
        known = values.sum(axis=1)
        return np.clip((self.n_items * full - known) / (self.n_items - self.n_subset), 0.0, 1.0)

    def full(self, values: np.ndarray, rest: np.ndarray) -> np.ndarray:
        """Mean over the items outside the subset -> full score."""
        known = values.sum(axis=1)
        return np.clip((known + (self.n_items - self.n_subset) * rest) / self.n_items, 0.0, 1.0)

    def rest_features(
        self, values: np.ndarray, features: np.ndarray, feature_se: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """A first feature that estimates the full score -> the estimate of the rest's mean.

        Without a calibration line the feature *is* the estimate, and the head predicts the
        mean over the items outside the subset; read as that mean directly, a weighted anchor
        sum counted the asked items twice (cluster weights of 1/N and 12/N became
        (N - k)/N each).
        """
        features, feature_se = features.copy(), feature_se.copy()
        features[:, 0] = self.rest(values, features[:, 0])
        feature_se[:, 0] = feature_se[:, 0] / self.rest_share
        return features, feature_se

    def to_state(self) -> list[int]:
        return [self.n_items, self.n_subset]

    @classmethod
    def from_state(cls, value: Any, n_subset: int, name: str) -> FinitePopulation | None:
        """The saved pair, checked (absent in bundles of older versions: None)."""
        if value is None:
            return None
        try:
            n_items, k = (int(v) for v in value)
        except (TypeError, ValueError) as exc:
            raise InputError(
                f"{name}: estimator state has a malformed 'finite' ({value!r})"
            ) from exc
        if k != n_subset or n_items <= k:
            raise InputError(
                f"{name}: estimator state 'finite' {value!r} does not fit its {n_subset} items"
            )
        return cls(n_items, k)
