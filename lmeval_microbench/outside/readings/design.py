"""Design reading: the subset's own weighted mean, read as a survey estimate.

Each selected item stands for a share of the benchmark (Anchor Points' cluster shares,
equal shares for random items), so the weighted mean of a model's answers estimates its
mean over all items with no regression on the sources at all: what Anchor Points' own
estimator does, and under extrapolation the best published estimator more often than any
other (Zhang, Dorner & Hardt 2025). Its standard error treats the answers as binomial with
the finite-population correction of drawing ``k`` of ``N`` items; the binomial variance is
taken at the mean smoothed by half an answer each way, so a model that got every subset item
wrong (or right) is not read as known exactly (GSM8K's weakest sources score 0: with a
zero standard error their fold errors, scaled by it, were infinite).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .base import Reading, ScaleMap, SourceView, floats, number


class DesignReading(Reading):
    """``sum(weights * answers)`` with a binomial standard error, mapped to the target."""

    name = "design"

    def fit(self, view: SourceView) -> DesignReading:
        self.weights_ = view.weights / view.weights.sum()
        self.n_items_ = view.n_items
        self.scale_ = view.scale_map()
        return self

    def read(self, values: np.ndarray, inner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean = values @ self.weights_
        k = self.weights_.size
        correction = max(1.0 - k / self.n_items_, 0.0)
        squares = float(np.sum(self.weights_**2))
        effective = 1.0 / squares  # items an equal-weight sample of the same precision has
        smoothed = (np.clip(mean, 0.0, 1.0) * effective + 0.5) / (effective + 1.0)
        variance = smoothed * (1.0 - smoothed) * squares
        return self.scale_(mean, np.sqrt(variance * correction))

    def state(self) -> dict[str, Any]:
        return {
            "weights": self.weights_.tolist(),
            "n_items": self.n_items_,
            "scale": self.scale_.to_dict(),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> DesignReading:
        where = "outside reading 'design'"
        reading = cls()
        reading.weights_ = floats(state, "weights", where)
        reading.n_items_ = int(number(state, "n_items", where))
        reading.scale_ = ScaleMap.from_dict(state["scale"])
        return reading
