"""IRT reconstructions of the full score: ``irt``, ``pirt`` and ``gpirt`` (tinyBenchmarks).

All three estimate a model's ability ``theta`` from its subset scores alone (EAP by default,
with the item parameters fitted on the source models), then predict the probability of a
correct answer on every item of the source matrix:

``irt``    mean over all items of P(correct | theta).
``pirt``   the observed scores where the model was evaluated, P(correct | theta) elsewhere,
           averaged over all items: each item counts with its share 1 / N of the benchmark
           (Polo et al. 2024, "tinyBenchmarks", p-IRT).
``gpirt``  ``lam * anchor + (1 - lam) * pirt``: the weighted anchor sum is unbiased but noisy,
           p-IRT is precise but biased where the IRT model is wrong, so a mix can do better than
           either. ``lam`` is chosen on the source models: the value on a grid of 0, 0.05, ..., 1
           with the smallest K-fold cross-validated squared error of the calibrated mix (the
           calibration line is refitted in each fold). tinyBenchmarks sets ``lam`` by a heuristic
           of its own; cross-validation needs no model of the errors and can be checked.

Each raw estimate then goes through the linear calibration of the base class, because the
source matrix may hold only part of the benchmark (see ``base``). Missing subset scores are
allowed with ``allow_missing=True``: they are imputed from these item parameters (see
``missing``), as for every estimator.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError, ItemMismatchError
from ..irt import IRTModel, estimate_abilities
from ..irt.params import MODEL_TYPES, ItemParams
from ..responses import ResponseMatrix
from ..subset import Subset
from ._fitting import fit_line, fold_labels
from ._item_curve import ItemCurve, slope_scale
from .anchor import anchor_se, anchor_sum
from .base import ScoreEstimator

ABILITY_METHODS = ("eap", "map", "mle")
LAMBDA_GRID = np.linspace(0.0, 1.0, 21)


def probability_slope(params: ItemParams, theta: np.ndarray) -> np.ndarray:
    """dP/dtheta of every item at every ability: shape (m, n, D)."""
    return slope_scale(params, theta)[:, :, None] * params.a[None, :, :]


def delta_se(gradient: np.ndarray, theta_se: np.ndarray) -> np.ndarray:
    """Delta-method standard error from a gradient (m, D) and per-dimension ability se (m, D)."""
    return np.sqrt(np.sum((gradient * theta_se) ** 2, axis=1))


class _IRTBased(ScoreEstimator):
    """Shared machinery: item parameters over all source items and abilities from the subset.

    Parameters
    ----------
    irt_model
        IRT model fitted on the source models when ``fit`` gets no ``irt`` parameters.
    ability_method
        ``"eap"`` (default), ``"map"`` or ``"mle"``; passed to ``estimate_abilities``.
    irt_options
        Extra keyword arguments for ``IRTModel`` (``max_iter``, ``tol``...), JSON-ready.
    """

    supports_missing = True

    def __init__(
        self,
        *,
        irt_model: str = "2pl",
        ability_method: str = "eap",
        irt_options: dict[str, Any] | None = None,
        calibration: str = "linear",
        interval: str = "binned",
        n_folds: int = 5,
        random_state: int | None = 0,
    ) -> None:
        super().__init__(
            calibration=calibration, interval=interval, n_folds=n_folds, random_state=random_state
        )
        self.irt_model = irt_model
        self.ability_method = ability_method
        self.irt_options = irt_options

    def _validate_params(self) -> None:
        super()._validate_params()
        if self.irt_model not in MODEL_TYPES:
            raise InputError(
                f"{self.name}: irt_model must be one of {MODEL_TYPES}, got {self.irt_model!r}"
            )
        if self.ability_method not in ABILITY_METHODS:
            raise InputError(
                f"{self.name}: ability_method must be one of {ABILITY_METHODS}, "
                f"got {self.ability_method!r}"
            )

    # ------------------------------------------------------------------ feature map
    def _fit_features(self, source: ResponseMatrix, subset: Subset, irt: ItemParams | None) -> None:
        """Item parameters of every source item: the given ones, or a fit on the source models."""
        if irt is None:
            model = IRTModel(
                model=self.irt_model,
                n_dims=1,
                random_state=self.random_state,
                **dict(self.irt_options or {}),
            )
            irt = model.fit(source).params_
        try:
            self.params_: ItemParams = irt.subset(list(source.item_ids))
        except ItemMismatchError as exc:
            raise ItemMismatchError(
                f"{self.name}: the IRT parameters must cover every item of {source.source}: {exc}"
            ) from exc
        self._derive_from_params()

    def _derive_from_params(self) -> None:
        """What predictions read off ``params_``: the subset's columns and parameters, and
        the all-item curve of a large benchmark (:mod:`._item_curve`)."""
        self.subset_columns_: np.ndarray = self.params_.positions(self.item_ids_)
        self._subset_params = self.params_.subset(list(self.item_ids_))
        self._item_curve = ItemCurve.of(self.params_)

    def _feature_state(self) -> dict[str, Any]:
        return {"params": self.params_.to_dict()}

    def _imputation_params(self) -> ItemParams | None:
        """The estimator's own fit covers the subset: it imputes without a bundle's help."""
        return self.imputation_params_ or self._subset_params

    def _load_feature_state(self, state: dict[str, Any]) -> None:
        self.params_ = ItemParams.from_dict(state["params"])
        self._derive_from_params()

    def _abilities(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Abilities (m, D) and their standard errors from the subset scores (NaN skipped)."""
        theta, se = estimate_abilities(
            self.params_, values, list(self.item_ids_), method=self.ability_method
        )
        return np.asarray(theta, dtype=np.float64), np.asarray(se, dtype=np.float64)

    def _irt_mean(self, theta: np.ndarray, theta_se: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean predicted probability over all items, with its delta-method se."""
        if self._item_curve is not None:  # a large benchmark: off the grid (._item_curve)
            raw, gradient = self._item_curve.read(self.params_, theta)
            return raw, delta_se(gradient, theta_se)
        raw = self.params_.probability(theta).mean(axis=1)
        gradient = probability_slope(self.params_, theta).mean(axis=1)
        return raw, delta_se(gradient, theta_se)

    def _pirt(
        self, values: np.ndarray, theta: np.ndarray, theta_se: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Observed scores where present, IRT predictions elsewhere, averaged over all items."""
        if self._item_curve is not None:
            return self._pirt_from_curve(self._item_curve, values, theta, theta_se)
        probability = self.params_.probability(theta)
        observed = np.zeros(probability.shape, dtype=bool)
        observed[:, self.subset_columns_] = ~np.isnan(values)
        completed = probability.copy()
        completed[:, self.subset_columns_] = np.where(
            np.isnan(values), completed[:, self.subset_columns_], values
        )
        raw = completed.mean(axis=1)
        slope = probability_slope(self.params_, theta) * (~observed)[:, :, None]
        return raw, delta_se(slope.mean(axis=1), theta_se)

    def _pirt_from_curve(
        self, curve: ItemCurve, values: np.ndarray, theta: np.ndarray, theta_se: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_pirt` with the all-item means off ``curve``: the observed subset items
        swap their prediction for their score, and leave the slope."""
        mean_p, mean_slope = curve.read(self.params_, theta)
        subset = self._subset_params
        observed = ~np.isnan(values)
        n_items = self.params_.n_items
        gap = np.where(observed, values - subset.probability(theta), 0.0)
        asked_slope = probability_slope(subset, theta) * observed[:, :, None]
        raw = mean_p + gap.sum(axis=1) / n_items
        slope = mean_slope - asked_slope.sum(axis=1) / n_items
        return raw, delta_se(slope, theta_se)


class IRTEstimator(_IRTBased):
    """Mean IRT probability over all source items at the ability estimated from the subset."""

    name = "irt"

    def _features(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        theta, theta_se = self._abilities(values)
        raw, se = self._irt_mean(theta, theta_se)
        return raw[:, None], se[:, None]


class PIRTEstimator(_IRTBased):
    """p-IRT: observed subset scores plus IRT predictions for the unseen items (share 1/N each)."""

    name = "pirt"

    def _features(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        theta, theta_se = self._abilities(values)
        raw, se = self._pirt(values, theta, theta_se)
        return raw[:, None], se[:, None]


def _mix(features: np.ndarray, lam: float) -> np.ndarray:
    return lam * features[:, 0] + (1.0 - lam) * features[:, 1]


def choose_lambda(features: np.ndarray, target: np.ndarray, n_folds: int, seed: Any) -> float:
    """The grid weight of the anchor estimate with least K-fold CV error of the calibrated mix."""
    folds = fold_labels(target.size, n_folds, seed)
    errors = np.zeros(LAMBDA_GRID.size)
    for k, lam in enumerate(LAMBDA_GRID):
        mixed = _mix(features, lam)
        for fold in range(n_folds):
            held = folds == fold
            intercept, slope = fit_line(mixed[~held], target[~held])
            errors[k] += np.sum((intercept + slope * mixed[held] - target[held]) ** 2)
    return float(LAMBDA_GRID[int(np.argmin(errors))])


class GPIRTEstimator(_IRTBased):
    """gp-IRT: ``lam * anchor + (1 - lam) * pirt`` with ``lam`` cross-validated on source models.

    ``lam`` is chosen inside every head fit, so the conformal residuals include the noise of
    choosing it. With ``calibration="none"`` the mix is not calibrated and ``lam`` minimises
    the plain CV error.
    """

    name = "gpirt"

    def _features(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        theta, theta_se = self._abilities(values)
        pirt, pirt_se = self._pirt(values, theta, theta_se)
        anchor = anchor_sum(values, self.weights_)
        return np.column_stack([anchor, pirt]), np.column_stack(
            [anchor_se(anchor, values, self.weights_), pirt_se]
        )

    def _fit_head(self, features: np.ndarray, target: np.ndarray) -> dict[str, Any]:
        if self.calibration == "none":
            errors = [np.sum((_mix(features, lam) - target) ** 2) for lam in LAMBDA_GRID]
            return {
                "lam": float(LAMBDA_GRID[int(np.argmin(errors))]),
                "intercept": 0.0,
                "slope": 1.0,
            }
        lam = choose_lambda(features, target, self.n_folds, self.random_state)
        intercept, slope = fit_line(_mix(features, lam), target)
        return {"lam": lam, "intercept": intercept, "slope": slope}

    def _predict_head(self, head: dict[str, Any], features: np.ndarray) -> np.ndarray:
        return head["intercept"] + head["slope"] * _mix(features, head["lam"])

    def _head_se(
        self, head: dict[str, Any], features: np.ndarray, feature_se: np.ndarray
    ) -> np.ndarray:
        """Delta method with the two parts fully correlated (they share the responses): a bound."""
        return np.abs(head["slope"]) * _mix(feature_se, head["lam"])
