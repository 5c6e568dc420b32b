"""Cross-conformal intervals: held-out residuals of the source models, scaled by score level.

An estimator is refitted K times, each time without one fold of source models, and predicts
that fold. The absolute residuals ``|truth - prediction|``, divided by a scale ``s(prediction)``,
are exchangeable with the residual of a new model drawn like the source models, so the
``ceil((n + 1) level) / n`` empirical quantile ``q`` of the scaled residuals gives the interval
``prediction +- q s(prediction)`` with coverage close to ``level`` (Vovk's cross-conformal
prediction; exact finite-sample coverage holds for split conformal, cross-fitting trades a small
slack for using every source model).

Errors are not the same at every score: near 0 and 1 a model's full score is pinned down and
residuals shrink, in the middle they are largest. The scale captures that:

``constant``  s = 1 (plain absolute residuals: one width everywhere).
``binomial``  s = sqrt(p (1 - p)) with p clipped to [0.02, 0.98] (the shape of binomial noise).
``binned``    s = mean |residual| in quantile bins of the prediction, linearly interpolated
              between bin centres and floored at a quarter of the overall mean (learned shape).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError

SCALE_MODES = ("constant", "binomial", "binned")
_BINOMIAL_CLIP = 0.02
_MIN_PER_BIN = 100
_MAX_BINS = 10
_FLOOR_FRACTION = 0.25
_TINY = 1e-6


def check_level(level: float) -> float:
    """Nominal coverage must lie strictly between 0 and 1."""
    level = float(level)
    if not 0.0 < level < 1.0:
        raise InputError(f"level must lie strictly between 0 and 1, got {level!r}")
    return level


@dataclass(frozen=True)
class ConformalBand:
    """A fitted interval rule: scale knots and the sorted scaled residuals of the source models."""

    mode: str
    knots: np.ndarray
    scales: np.ndarray
    residuals: np.ndarray

    def scale(self, prediction: np.ndarray) -> np.ndarray:
        """Residual scale at each predicted score (fractions in [0, 1])."""
        prediction = np.asarray(prediction, dtype=np.float64)
        if self.mode == "constant":
            return np.ones_like(prediction)
        if self.mode == "binomial":
            p = np.clip(prediction, _BINOMIAL_CLIP, 1.0 - _BINOMIAL_CLIP)
            return np.sqrt(p * (1.0 - p))
        return np.interp(prediction, self.knots, self.scales)

    def quantile(self, level: float) -> float:
        """Finite-sample conformal quantile of the scaled residuals (inf if too few residuals)."""
        level = check_level(level)
        n = self.residuals.size
        rank = math.ceil((n + 1) * level)
        if rank > n:
            return math.inf
        return float(self.residuals[rank - 1])

    def half_width(self, prediction: np.ndarray, level: float) -> np.ndarray:
        return self.quantile(level) * self.scale(prediction)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "knots": self.knots.tolist(),
            "scales": self.scales.tolist(),
            "residuals": self.residuals.tolist(),
        }

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> ConformalBand:
        try:
            return cls(
                str(payload["mode"]),
                np.asarray(payload["knots"], dtype=np.float64),
                np.asarray(payload["scales"], dtype=np.float64),
                np.asarray(payload["residuals"], dtype=np.float64),
            )
        except KeyError as exc:
            raise InputError(f"conformal band lacks field {exc.args[0]!r}") from exc


def binned_scale(prediction: np.ndarray, abs_residual: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knots (mean prediction per bin) and scales (mean |residual| per bin, floored).

    Bins are quantile bins of the prediction with at least ``_MIN_PER_BIN`` models each (at
    most ``_MAX_BINS``), so each bin mean is stable; the floor keeps a bin that happened to
    have tiny residuals from producing an interval of zero width.
    """
    n = prediction.size
    n_bins = int(np.clip(n // _MIN_PER_BIN, 1, _MAX_BINS))
    order = np.argsort(prediction, kind="stable")
    groups = np.array_split(order, n_bins)
    knots = np.array([prediction[g].mean() for g in groups])
    scales = np.array([abs_residual[g].mean() for g in groups])
    floor = max(_FLOOR_FRACTION * float(abs_residual.mean()), _TINY)
    scales = np.maximum(scales, floor)
    knots, unique_at = np.unique(knots, return_index=True)
    return knots, scales[unique_at]


def fit_band(prediction: np.ndarray, truth: np.ndarray, mode: str = "binned") -> ConformalBand:
    """Fit the interval rule from cross-fitted predictions and true scores of source models."""
    if mode not in SCALE_MODES:
        raise InputError(f"unknown interval scale {mode!r}; expected one of {SCALE_MODES}")
    prediction = np.asarray(prediction, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    if prediction.shape != truth.shape or prediction.ndim != 1 or prediction.size == 0:
        raise InputError(
            "conformal fit needs two equal-length 1-D arrays, "
            f"got {prediction.shape} and {truth.shape}"
        )
    abs_residual = np.abs(truth - prediction)
    if mode == "binned":
        knots, scales = binned_scale(prediction, abs_residual)
    else:
        knots, scales = np.zeros(0), np.zeros(0)
    band = ConformalBand(mode, knots, scales, np.zeros(0))
    scaled = np.sort(abs_residual / np.maximum(band.scale(prediction), _TINY))
    return ConformalBand(mode, knots, scales, scaled)
