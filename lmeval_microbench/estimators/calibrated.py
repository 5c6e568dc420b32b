"""Supervised reconstruction (metabench-style): subset features -> full score by penalised splines.

The features of a model are its IRT ability estimated from the subset, its subset mean and its
p-IRT estimate (on request also the anchor sum or the plain IRT mean). On held-out Open LLM
Leaderboard models adding p-IRT to ability + mean cut the error by up to 15 % (mmlu, arc) and
never hurt; a linear head (``n_knots=0``) was up to twice as bad on Anchor Points subsets, where
ability and subset mean are far from linear in each other (bench/estimators.md has the run).

The head is an additive model: each feature enters through a natural cubic spline (linear
beyond the outer knots, so models outside the source range are extrapolated by a line, not a
cubic), all basis columns standardised, and a ridge penalty on the non-linear columns whose
strength is chosen by generalised cross-validation on the source models. metabench fits a GAM
on ability and subset score; this is the same idea in a few lines of numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from ._ridge_cv import centred_ridge_gcv, standardise
from .anchor import anchor_sum
from .irt import _IRTBased

FEATURES = ("theta", "mean", "anchor", "pirt", "irt")
ALPHA_GRID = np.logspace(-4, 4, 17)
_LINEAR_PENALTY = 1e-6
"""Tiny ridge on the linear columns: the ability and the subset mean are nearly collinear."""


def natural_spline_basis(x: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """Non-linear columns of the natural cubic spline with ``knots`` (ESL eq. 5.4-5.5).

    Returns ``len(knots) - 2`` columns; together with 1 and ``x`` they span the cubic splines
    with these knots that are linear beyond the outer two.
    """

    def truncated_cube(k: int) -> np.ndarray:
        return np.clip(x - knots[k], 0.0, None) ** 3

    if knots.size < 3:
        return np.zeros((x.size, 0))
    last = knots.size - 1
    columns = []
    d_last = (truncated_cube(last - 1) - truncated_cube(last)) / (knots[last] - knots[last - 1])
    for k in range(knots.size - 2):
        d_k = (truncated_cube(k) - truncated_cube(last)) / (knots[last] - knots[k])
        columns.append(d_k - d_last)
    return np.column_stack(columns)


def quantile_knots(x: np.ndarray, n_knots: int) -> np.ndarray:
    """Knots at evenly spaced quantiles of ``x`` (5%..95%), duplicates removed."""
    knots = np.unique(np.quantile(x, np.linspace(0.05, 0.95, n_knots)))
    return knots if knots.size >= 3 else knots[:0]


def design(features: np.ndarray, knots: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Basis columns of every feature (linear first) and a mask of the non-linear ones."""
    blocks = [features]
    nonlinear = [np.zeros(features.shape[1], dtype=bool)]
    for j, feature_knots in enumerate(knots):
        basis = natural_spline_basis(features[:, j], feature_knots)
        blocks.append(basis)
        nonlinear.append(np.ones(basis.shape[1], dtype=bool))
    return np.column_stack(blocks), np.concatenate(nonlinear)


def ridge_gcv(
    x: np.ndarray, y: np.ndarray, penalised: np.ndarray
) -> tuple[float, np.ndarray, float]:
    """Ridge on standardised columns with intercept; penalty chosen by GCV on ``ALPHA_GRID``.

    Returns (intercept, coefficients, alpha). The linear columns get a tiny fixed penalty, so
    each grid point is a penalty per column (see :func:`._ridge_cv.ridge_gcv`).
    """
    n = y.size
    penalties = np.where(penalised[None, :], ALPHA_GRID[:, None], _LINEAR_PENALTY) * n
    intercept, coef, index = centred_ridge_gcv(x, y, penalties)
    return intercept, coef, float(ALPHA_GRID[index])


class CalibratedEstimator(_IRTBased):
    """Penalised additive spline regression of the full score on subset features.

    Parameters
    ----------
    features
        Any of ``FEATURES``: ``theta`` (ability from the subset), ``mean`` (subset mean),
        ``anchor`` (weighted sum), ``pirt``, ``irt``. Default ``("theta", "mean", "pirt")``.
    n_knots
        Spline knots per feature (quantiles of the source models); fewer than 3 gives a
        linear model.

    ``calibration`` is ignored (the head is the calibration); there is no model-based ``se``
    (the features share the same responses), so ``se`` is NaN and the interval is conformal.
    """

    name = "calibrated"

    def __init__(
        self,
        *,
        features: tuple[str, ...] | list[str] = ("theta", "mean", "pirt"),
        n_knots: int = 6,
        irt_model: str = "2pl",
        ability_method: str = "eap",
        irt_options: dict[str, Any] | None = None,
        calibration: str = "linear",
        interval: str = "binned",
        n_folds: int = 5,
        random_state: int | None = 0,
    ) -> None:
        super().__init__(
            irt_model=irt_model,
            ability_method=ability_method,
            irt_options=irt_options,
            calibration=calibration,
            interval=interval,
            n_folds=n_folds,
            random_state=random_state,
        )
        self.features = tuple(features)
        self.n_knots = n_knots

    def _validate_params(self) -> None:
        super()._validate_params()
        unknown = [f for f in self.features if f not in FEATURES]
        if unknown or not self.features:
            raise InputError(
                f"{self.name}: features must be a non-empty list of {FEATURES}, "
                f"got {self.features!r}"
            )
        if not isinstance(self.n_knots, (int, np.integer)) or self.n_knots < 0:
            raise InputError(
                f"{self.name}: n_knots must be a non-negative integer, got {self.n_knots!r}"
            )

    def _features(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        theta, theta_se = self._abilities(values)
        columns: list[np.ndarray] = []
        for feature in self.features:
            if feature == "theta":
                columns.extend(theta.T)
            elif feature == "mean":
                columns.append(np.nanmean(values, axis=1))
            elif feature == "anchor":
                columns.append(anchor_sum(values, self.weights_))
            elif feature == "pirt":
                columns.append(self._pirt(values, theta, theta_se)[0])
            else:
                columns.append(self._irt_mean(theta, theta_se)[0])
        features = np.column_stack(columns)
        return features, np.full(features.shape, np.nan)

    def _fit_head(self, features: np.ndarray, target: np.ndarray) -> dict[str, Any]:
        knots = [quantile_knots(features[:, j], self.n_knots) for j in range(features.shape[1])]
        basis, nonlinear = design(features, knots)
        center, scale = standardise(basis)
        intercept, coef, alpha = ridge_gcv((basis - center) / scale, target, nonlinear)
        return {
            "knots": [k.tolist() for k in knots],
            "center": center.tolist(),
            "scale": scale.tolist(),
            "intercept": intercept,
            "coef": coef.tolist(),
            "alpha": alpha,
        }

    def _predict_head(self, head: dict[str, Any], features: np.ndarray) -> np.ndarray:
        knots = [np.asarray(k, dtype=np.float64) for k in head["knots"]]
        basis, _ = design(features, knots)
        standardised = (basis - np.asarray(head["center"])) / np.asarray(head["scale"])
        return head["intercept"] + standardised @ np.asarray(head["coef"])

    def _head_se(
        self, head: dict[str, Any], features: np.ndarray, feature_se: np.ndarray
    ) -> np.ndarray:
        return np.full(features.shape[0], np.nan)
