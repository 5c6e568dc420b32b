"""De-shrunk reading: the inner estimator's estimate with its pull to the sources undone.

A regression's estimate is unbiased given the model's *answers*, not given its true score:
on the source models its out-of-fold estimates follow ``estimate ~ a + b * truth`` with
``b < 1`` (strong models estimated too low, weak ones too high). Solving that line for the
truth, ``(estimate - a) / b``, gives a reading that is unbiased given the truth as far as the
line holds, with the spread of its residuals on the sources as standard error: the classical
calibration (inverse regression) estimator. Where the line bends beyond the sources (items
that every strong model gets right) the reading inherits the bend; the inner extrapolation
folds measure that.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .base import MIN_SLOPE, Reading, SourceView, _line, number


class DeshrunkReading(Reading):
    """``(inner - a) / b`` from the line ``inner_oof ~ a + b * truth`` on the sources."""

    name = "deshrunk"

    @classmethod
    def available(cls, view: SourceView) -> str | None:
        slope, _ = _line(view.target, view.inner_oof)
        if slope < MIN_SLOPE:
            return f"the inner estimates hardly follow the truth (slope {slope:.3f})"
        return None

    def fit(self, view: SourceView) -> DeshrunkReading:
        self.slope_, self.intercept_ = _line(view.target, view.inner_oof)
        self.slope_ = max(self.slope_, MIN_SLOPE)
        reading = (view.inner_oof - self.intercept_) / self.slope_
        self.se_ = float(np.std(reading - view.target))
        return self

    def read(self, values: np.ndarray, inner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        value = (np.asarray(inner, dtype=np.float64) - self.intercept_) / self.slope_
        return value, np.full(value.shape, self.se_)

    def state(self) -> dict[str, Any]:
        return {"intercept": self.intercept_, "slope": self.slope_, "se": self.se_}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> DeshrunkReading:
        where = "outside reading 'deshrunk'"
        reading = cls()
        reading.intercept_ = number(state, "intercept", where)
        reading.slope_ = max(number(state, "slope", where), MIN_SLOPE)
        reading.se_ = number(state, "se", where)
        return reading
