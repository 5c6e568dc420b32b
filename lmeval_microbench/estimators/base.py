"""The estimator contract: a model's scores on subset items -> full-benchmark score + interval.

Every estimator has two learned stages, both fitted on the source models only:

1. a *feature map* (``_fit_features`` / ``_features``) that turns a model's subset scores into
   one or more raw estimates of its score: the subset mean, the weighted anchor sum, an IRT
   reconstruction;
2. a *head* (``_fit_head`` / ``_predict_head``) that maps those raw estimates to the target,
   the true full-benchmark score. The default head is a least-squares line
   ``target ~ intercept + slope * raw``: the raw estimates live on the scale of the matrix
   items, which are often a hand-picked part of the benchmark (the Open LLM Leaderboard
   matrices keep 100-250 informative items of 1,000-14,000), so their mean is not the full
   score; the line corrects the level and spread. ``calibration="none"`` skips it when the
   target is the matrix mean itself (on a whole benchmark a full-score feature is then read
   as the mean over the items not asked, ``FinitePopulation.rest_features``).

Intervals are cross-conformal (``.._conformal``): the head is refitted ``n_folds`` times
without one fold of source models, and the scaled held-out residuals give the half-width. The
feature map is not refitted per fold (IRT: K extra fits): ``--method auto`` widens the band by
the shortfall its select-then-fit folds measure (:meth:`widen_intervals`).

Small matrices (a dozen models, every item) are fitted down to ``MIN_SOURCE_MODELS``: below
``MIN_CALIBRATION_MODELS`` a line on the few models adds more noise than it removes, so
``calibration="linear"`` falls back to ``"none"`` (with a warning) where the target *is* the
mean over the matrix items; the conformal residuals are then leave-one-model-out.
"""

from __future__ import annotations

import inspect
import json
import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .._conformal import SCALE_MODES, ConformalBand, check_level, fit_band, tie_key
from .._text import preview as _preview
from .._types import Estimate, ItemId
from ..errors import FewSourcesWarning, InputError, ItemMismatchError
from ..irt.params import ItemParams
from ..responses import ResponseMatrix
from ..subset import Subset
from ..truth import is_matrix_mean
from ._fitting import (
    MIN_CALIBRATION_MODELS,
    checked_cross_fit,
    checked_score,
    fit_line,
    fold_labels,
    usable_models,
)
from .finite import FinitePopulation
from .missing import (
    InflationDraws,
    fit_inflation,
    inflation_draws,
    inflation_state,
    predict_partial_rows,
)

if TYPE_CHECKING:  # typing.Self needs Python 3.11; annotations are strings here
    from typing_extensions import Self

STATE_VERSION = 1
CALIBRATIONS = ("linear", "none")


class ScoreEstimator(ABC):
    """Estimate a model's full-benchmark score from its scores on a subset of items.

    Parameters
    ----------
    calibration
        ``"linear"`` (default): map the raw estimate to the target with a line fitted on the
        source models; ``"none"``: the raw estimate is the prediction.
    interval
        Residual scale of the conformal interval: ``"binned"`` (default), ``"binomial"`` or
        ``"constant"`` (see ``lmeval_microbench._conformal``).
    n_folds
        Folds of source models for the cross-fitted residuals.
    random_state
        Seed of the fold assignment (kept as given, used in :meth:`fit`).
    """

    name: ClassVar[str] = "base"
    supports_missing: ClassVar[bool] = False
    """Whether :meth:`fit` can use source models with unscored subset items (IRT-based)."""
    imputation_params_: ItemParams | None = None
    """IRT parameters of the subset items for ``allow_missing`` (see :meth:`with_imputation`)."""
    missing_inflation_: dict[str, list[float]] | None = None
    """How much the imputation spread understates its error (:meth:`calibrate_missing`)."""
    finite_: FinitePopulation | None = None
    """The benchmark when the target is the mean over all source items; see predict_rows."""
    features_estimate_full_score: ClassVar[bool] = False
    """Whether the first feature is a full-score estimate (a subset mean, an anchor sum)."""
    min_items: ClassVar[int] = 1
    """Fewest subset items the estimator can be fitted on (a build given fewer leaves it out
    unless it is named)."""

    def __init__(
        self,
        *,
        calibration: str = "linear",
        interval: str = "binned",
        n_folds: int = 5,
        random_state: int | None = 0,
    ) -> None:
        self.calibration = calibration
        self.interval = interval
        self.n_folds = n_folds
        self.random_state = random_state

    # ------------------------------------------------------------------ parameters
    @classmethod
    def _param_names(cls) -> list[str]:
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            init = klass.__dict__.get("__init__")
            if init is None or klass is object:
                continue
            for param in inspect.signature(init).parameters.values():
                if param.kind is param.KEYWORD_ONLY and param.name not in names:
                    names.append(param.name)
        return names

    def get_params(self) -> dict[str, Any]:
        """Constructor arguments as given (lists for tuples, so the dict is JSON-ready)."""
        return {
            name: list(value) if isinstance(value, tuple) else value
            for name, value in ((n, getattr(self, n)) for n in self._param_names())
        }

    def _validate_params(self) -> None:
        if self.calibration not in CALIBRATIONS:
            raise InputError(
                f"{self.name}: calibration must be one of {CALIBRATIONS}, got {self.calibration!r}"
            )
        if self.interval not in SCALE_MODES:
            raise InputError(
                f"{self.name}: interval must be one of {SCALE_MODES}, got {self.interval!r}"
            )
        if not isinstance(self.n_folds, (int, np.integer)) or self.n_folds < 2:
            raise InputError(f"{self.name}: n_folds must be an integer >= 2, got {self.n_folds!r}")
        if self.random_state is not None and not isinstance(self.random_state, (int, np.integer)):
            raise InputError(
                f"{self.name}: random_state must be an int or None (it is saved in the bundle), "
                f"got {type(self.random_state).__name__}"
            )

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ------------------------------------------------------------------ stages (subclasses)
    @abstractmethod
    def _fit_features(self, source: ResponseMatrix, subset: Subset, irt: ItemParams | None) -> None:
        """Learn the feature map from the source models (may be a no-op)."""

    @abstractmethod
    def _features(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Features ``(m, p)`` and their model-based standard errors ``(m, p)`` (NaN: none).

        ``values`` has shape ``(m, k)``, columns in the order of ``self.item_ids_``; NaN
        entries occur only for estimators with ``supports_missing``.
        """

    def _feature_state(self) -> dict[str, Any]:
        """JSON-ready state of the feature map."""
        return {}

    def _load_feature_state(self, state: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Restore what :meth:`_feature_state` saved (nothing by default)."""

    def _fit_head(self, features: np.ndarray, target: np.ndarray) -> dict[str, Any]:
        """Fit the map from features to target; the default is a line on the first feature."""
        if self.calibration == "none":
            return {"intercept": 0.0, "slope": 1.0}
        intercept, slope = fit_line(features[:, 0], target)
        return {"intercept": intercept, "slope": slope}

    def _predict_head(self, head: dict[str, Any], features: np.ndarray) -> np.ndarray:
        return head["intercept"] + head["slope"] * features[:, 0]

    def _head_se(
        self, head: dict[str, Any], features: np.ndarray, feature_se: np.ndarray
    ) -> np.ndarray:
        """Model-based standard error of the prediction (delta method through the head)."""
        return np.abs(head["slope"]) * feature_se[:, 0]

    # ------------------------------------------------------------------ fit
    def fit(
        self,
        source: ResponseMatrix,
        subset: Subset,
        target: np.ndarray,
        *,
        irt: ItemParams | None = None,
        cross_fit: np.ndarray | None = None,
    ) -> Self:
        """Learn everything from the source models only; returns ``self``.

        Parameters
        ----------
        source
            Responses of the source models; must contain every subset item.
        subset
            Items (and weights) the new models will be scored on.
        target
            True full-benchmark score of each source model, fractions in [0, 1], aligned with
            ``source.model_ids``.
        irt
            Item parameters covering the source items (IRT estimators fit their own if None).
        cross_fit
            Out-of-fold estimates of the source models (aligned with ``source.model_ids``) by
            a procedure that also re-selected the items in each fold
            (:func:`lmeval_microbench.crossfit.selection_cross_fit`): the interval and
            ``cv_mae_`` are then fitted on them instead of this estimator's own cross-fit,
            which keeps the subset fixed and is optimistic when the subset was chosen
            for these very models (supervised selection).
        """
        target, values = self._begin_fit(source, subset, target)
        # models lacking subset scores cannot be fitted on: IRT estimators need one, others all
        usable = usable_models(
            values, any_item=self.supports_missing, name=self.name, source=source.source
        )
        if usable.sum() < MIN_CALIBRATION_MODELS and self.calibration == "linear":
            self._drop_calibration(source, usable, target)
        self._fit_features(source, subset, irt)
        self.finite_ = FinitePopulation.detect(source, usable, target, len(self.item_ids_))
        features, _ = self._head_features(values[usable])
        y = self._rest_target(values[usable], target[usable])
        cv_prediction = self._cross_fit(features, y)
        self.fixed_oof_: np.ndarray = self._full(values[usable], cv_prediction)
        """Out-of-fold estimates on the fixed subset (equal to ``oof_`` without ``cross_fit``)."""
        if cross_fit is not None:
            given = checked_cross_fit(
                cross_fit, usable, self._full(values[usable], cv_prediction), self.name
            )
            cv_prediction = self._rest_target(values[usable], given)
        self.head_: dict[str, Any] = self._fit_head(features, y)
        fitted = np.clip(self._predict_head(self.head_, features), 0.0, 1.0)
        self.band_: ConformalBand = fit_band(
            cv_prediction, y, self.interval, key=tie_key(cv_prediction, fitted)
        )
        self.oof_: np.ndarray = self._full(values[usable], cv_prediction)
        """Out-of-fold estimates of the usable source models (full scale; not saved)."""
        self.n_source_: int = int(usable.sum())
        self.cv_mae_: float = float(np.mean(np.abs(cv_prediction - y))) * self._rest_share()
        return self

    def _begin_fit(
        self, source: ResponseMatrix, subset: Subset, target: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """What every ``fit`` does first: check the parameters and the target, and keep the
        subset's item ids and weights. Returns the checked target and the source models'
        scores on the subset items."""
        self._validate_params()
        target = self._check_target(source, target)
        self.item_ids_: tuple[ItemId, ...] = tuple(subset.item_ids)
        self.weights_: np.ndarray = np.asarray(subset.weights, dtype=np.float64)
        return target, source.values[:, source.item_positions(self.item_ids_)]

    def _head_features(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        features, feature_se = self._features(values)
        raw = self.calibration == "none" and self.features_estimate_full_score
        if self.finite_ is None or not raw:
            return features, feature_se
        return self.finite_.rest_features(values, features, feature_se)

    def _rest_share(self) -> float:
        """Share of the benchmark an estimate still has to estimate (1 unless finite)."""
        return 1.0 if self.finite_ is None else self.finite_.rest_share

    def _rest_target(self, values: np.ndarray, full: np.ndarray) -> np.ndarray:
        return full if self.finite_ is None else self.finite_.rest(values, full)

    def _full(self, values: np.ndarray, rest: np.ndarray) -> np.ndarray:
        return rest if self.finite_ is None else self.finite_.full(values, rest)

    def _check_target(self, source: ResponseMatrix, target: np.ndarray) -> np.ndarray:
        target = np.asarray(target, dtype=np.float64).reshape(-1)
        if target.shape != (source.n_models,):
            raise InputError(
                f"{self.name}: target has {target.size} values, {source.source} has "
                f"{source.n_models} models"
            )
        bad = np.flatnonzero(~np.isfinite(target) | (target < 0) | (target > 1))
        if bad.size:
            models = [source.model_ids[k] for k in bad]
            raise InputError(
                f"{self.name}: target must be finite fractions in [0, 1] (percent scores divided "
                f"by 100); bad for models {_preview(models)}: {_preview(target[bad].tolist())}"
            )
        return target

    def _drop_calibration(
        self, source: ResponseMatrix, usable: np.ndarray, target: np.ndarray
    ) -> None:
        """Switch to ``calibration="none"`` for a few source models, where that is right.

        A line fitted on fewer than ``MIN_CALIBRATION_MODELS`` models is mostly noise. Without
        it the raw estimate (subset mean, anchor sum, IRT reconstruction) is the prediction,
        which estimates the mean over the source matrix items: right only when the target is
        that mean (the matrix is the whole benchmark). Otherwise this raises. The switch sets
        ``self.calibration``, so ``get_params`` and the saved state say what was fitted.
        Estimators whose head is itself the model (``calibrated``) still fit it.
        """
        n_usable = int(usable.sum())
        if not is_matrix_mean(source.values[usable], target[usable]):
            raise InputError(
                f"{self.name}: only {n_usable} source models of {source.source}; a calibration "
                f"line needs at least {MIN_CALIBRATION_MODELS}. With fewer, the target must be "
                "the mean over the matrix items (then calibration='none' is used), or pass "
                "calibration='none' explicitly"
            )
        detail = (
            f"{n_usable} source models of {source.source} are fewer than "
            f"{MIN_CALIBRATION_MODELS}: no calibration line (calibration='none'; the target is "
            "the matrix mean) and leave-one-out conformal residuals"
        )
        warnings.warn(FewSourcesWarning(self.name, detail), stacklevel=3)
        self.calibration = "none"

    def _cross_fit(self, features: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Out-of-fold predictions of the head for every source model.

        Folds are leave-one-model-out below ``MIN_CALIBRATION_MODELS`` models: with K folds
        of two or three models the heads would be fitted on noticeably fewer models.
        """
        n_folds = target.size if target.size < MIN_CALIBRATION_MODELS else self.n_folds
        folds = fold_labels(target.size, n_folds, self.random_state)
        prediction = np.empty_like(target)
        for fold in range(n_folds):
            held = folds == fold
            head = self._fit_head(features[~held], target[~held])
            prediction[held] = np.clip(self._predict_head(head, features[held]), 0.0, 1.0)
        return prediction

    def _sibling(self, name: str) -> ScoreEstimator:
        """A new estimator ``name`` with this one's common parameters: the parts of an
        estimator made of others (``guarded``'s inner one, ``blend``'s members)."""
        from . import make_estimator

        return make_estimator(
            name,
            calibration=self.calibration,
            interval=self.interval,
            n_folds=self.n_folds,
            random_state=self.random_state,
        )

    # ------------------------------------------------------------------ estimate
    def _check_fitted(self) -> None:
        if not hasattr(self, "band_"):
            raise InputError(f"{self.name}: not fitted; call fit() or from_state() first")

    def _predict(
        self, values: np.ndarray, level: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        features, feature_se = self._head_features(values)
        value = np.clip(self._predict_head(self.head_, features), 0.0, 1.0)
        half = self.band_.half_width(value, level)
        se = self._head_se(self.head_, features, feature_se)
        return value, np.clip(value - half, 0.0, 1.0), np.clip(value + half, 0.0, 1.0), se

    def predict_rows(
        self, values: np.ndarray, level: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(value, lower, upper, se)`` of complete rows of subset answers.

        On a whole benchmark (``finite_``) the subset answers are part of the score: the
        estimator predicts only the mean over the other items, and the score is the known
        part plus that prediction, its interval and se shrunk by the share left to estimate.
        On a benchmark of 100 items with 50 asked, half the score is then exact.
        """
        value, lower, upper, se = self._predict(values, level)
        if self.finite_ is None:
            return value, lower, upper, se
        return (
            self._full(values, value),
            self._full(values, lower),
            self._full(values, upper),
            se * self._rest_share(),
        )

    def with_imputation(self, params: ItemParams | None) -> Self:
        """Let ``allow_missing`` impute unscored items from ``params`` (the bundle's IRT fit);
        ``self``. Parameters that do not cover every subset item are ignored."""
        if params is not None and set(self.item_ids_) <= set(params.item_ids):
            self.imputation_params_ = params.subset(list(self.item_ids_))
        return self

    def with_floor(self, floor: float) -> Self:
        """The lowest score a model below the sources can have (:func:`..personfit.lowest_score`,
        passed by every build); an estimator whose interval below the sources does not reach
        down to one (all but ``guarded``, and ``blend`` through it) ignores it. ``self``."""
        self._check_fitted()
        return self

    def widen_intervals(self, factor: float) -> Self:
        """Multiply interval half-widths by ``factor`` >= 1 (:mod:`..auto.widen`); ``self``."""
        self._check_fitted()
        self.band_ = self.band_.widened(factor)
        return self

    def calibrate_missing(
        self, source: ResponseMatrix, seed: int = 0, draws: InflationDraws | None = None
    ) -> Self:
        """How much wider partial-run intervals must be (:func:`.missing.fit_inflation`), on
        ``draws`` shared by a build's estimators (drawn here if None or of other items)."""
        params = self._imputation_params()
        if params is None:
            raise InputError(f"{self.name}: calibrate_missing needs IRT parameters of the subset")
        if draws is None or draws.item_ids != self.item_ids_:
            values = source.values[:, source.item_positions(self.item_ids_)]
            draws = inflation_draws(params, values, seed)
        self.missing_inflation_ = fit_inflation(self, draws) or None
        return self

    def _imputation_params(self) -> ItemParams | None:
        """IRT parameters to impute unscored subset items from, None when there are none."""
        return self.imputation_params_

    @property
    def imputes_missing(self) -> bool:
        """Whether ``allow_missing=True`` can be honoured (IRT parameters of the subset known)."""
        return self._imputation_params() is not None

    def _check_missing(self, allow_missing: bool) -> None:
        if allow_missing and not self.imputes_missing:
            raise InputError(
                f"{self.name}: allow_missing=True imputes unscored items from IRT parameters "
                "of the subset items, and this estimator has none (a bundle built without an "
                "IRT fit); score every subset item instead"
            )

    def _predict_partial(
        self, values: np.ndarray, level: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_predict`, rows that lack scores imputed, rows with every answer right open
        above (:func:`.missing.predict_partial_rows`)."""
        return predict_partial_rows(self, self._imputation_params(), values, level)

    def estimate(
        self, scores: Mapping[ItemId, float], *, level: float = 0.9, allow_missing: bool = False
    ) -> Estimate:
        """Estimate one model's full score from its scores keyed by item id.

        Ids outside the subset are ignored. A missing subset item raises
        :class:`ItemMismatchError` naming it (with ``allow_missing=True`` missing items are
        imputed, see :mod:`.missing`); NaN or scores outside [0, 1] raise :class:`InputError`.
        """
        self._check_fitted()
        self._check_missing(allow_missing)
        level = check_level(level)
        if not isinstance(scores, Mapping):
            raise InputError(
                f"{self.name}: scores must be a mapping item id -> score, "
                f"got {type(scores).__name__}"
            )
        missing = [i for i in self.item_ids_ if i not in scores]
        if missing and not allow_missing:
            raise ItemMismatchError(f"{self.name}: no score for subset items {_preview(missing)}")
        row = np.full((1, len(self.item_ids_)), np.nan)
        for k, item in enumerate(self.item_ids_):
            if item in scores:
                row[0, k] = checked_score(item, scores[item], owner=self.name)
        if np.isnan(row).all():
            raise ItemMismatchError(
                f"{self.name}: none of the {len(self.item_ids_)} subset items was scored"
            )
        value, lower, upper, se = self._predict_partial(row, level)
        return Estimate(float(value[0]), float(lower[0]), float(upper[0]), level, float(se[0]))

    def estimate_matrix(
        self,
        matrix: ResponseMatrix,
        *,
        level: float = 0.9,
        allow_missing: bool = False,
        return_se: bool = False,
    ) -> tuple[np.ndarray, ...]:
        """Estimates for every model (row) of ``matrix``, joined by item id.

        Returns ``(value, lower, upper)`` arrays aligned with ``matrix.model_ids``, plus the
        model-based standard error when ``return_se`` (NaN where the method has none).
        """
        self._check_fitted()
        self._check_missing(allow_missing)
        level = check_level(level)
        values = matrix.values[:, matrix.item_positions(self.item_ids_)]
        gaps = np.isnan(values)
        if not allow_missing and gaps.any():
            rows, cols = np.nonzero(gaps)
            raise InputError(
                f"{self.name}: {matrix.source}: model {matrix.model_ids[rows[0]]!r} has no "
                f"score for subset item {self.item_ids_[cols[0]]!r} ({gaps.sum()} such entries; "
                "--allow-missing, or allow_missing=True, imputes them, with a wider interval)"
            )
        empty = np.flatnonzero(gaps.all(axis=1))
        if empty.size:
            models = [matrix.model_ids[k] for k in empty]
            raise ItemMismatchError(
                f"{self.name}: models with no subset item scored: {_preview(models)}"
            )
        value, lower, upper, se = self._predict_partial(values, level)
        return (value, lower, upper, se) if return_se else (value, lower, upper)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable fitted state (bundles store this; no pickles)."""
        self._check_fitted()
        state = {
            **self._state_header(),
            "features": self._feature_state(),
            "head": self.head_,
            "band": self.band_.to_dict(),
        }
        if self.finite_ is not None:
            state["finite"] = self.finite_.to_state()
        json.dumps(state, allow_nan=False)  # fail here, not in the bundle writer
        return state

    def _state_header(self) -> dict[str, Any]:
        """The fields every estimator's state holds, so that a subclass with a state of its
        own cannot forget one (the missing-answer inflation among them)."""
        header = {
            "estimator": self.name,
            "state_version": STATE_VERSION,
            "params": self.get_params(),
            "item_ids": list(self.item_ids_),
            "weights": self.weights_.tolist(),
            "n_source": self.n_source_,
            "cv_mae": self.cv_mae_,
        }
        if self.missing_inflation_:
            header["missing_inflation"] = self.missing_inflation_
        return header

    @classmethod
    def _from_header(cls, state: Mapping[str, Any]) -> Self:
        """A new estimator holding :meth:`_state_header`'s fields, its version checked; a
        missing field raises ``KeyError`` for the caller to name."""
        if state["state_version"] != STATE_VERSION:
            raise InputError(
                f"{cls.name}: estimator state version {state['state_version']!r} is not "
                f"supported (expected {STATE_VERSION})"
            )
        estimator = cls(**state["params"])
        estimator.item_ids_ = tuple(state["item_ids"])
        estimator.weights_ = np.asarray(state["weights"], dtype=np.float64)
        estimator.head_ = {}
        estimator.n_source_ = int(state["n_source"])
        estimator.cv_mae_ = float(state["cv_mae"])
        estimator.missing_inflation_ = inflation_state(state.get("missing_inflation"), cls.name)
        return estimator

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> ScoreEstimator:
        """Rebuild a fitted estimator; on the base class, dispatch on ``state["estimator"]``."""
        try:
            name = state["estimator"]
        except (KeyError, TypeError) as exc:
            raise InputError(f"estimator state lacks field {exc}") from exc
        if cls is ScoreEstimator:
            from . import ESTIMATORS

            if name not in ESTIMATORS:
                raise InputError(
                    f"unknown estimator {name!r} in state; known: {sorted(ESTIMATORS)}"
                )
            return ESTIMATORS[name].from_state(state)
        if name != cls.name:
            raise InputError(f"state is for estimator {name!r}, not {cls.name!r}")
        return cls._from_own_state(state)

    @classmethod
    def _from_own_state(cls, state: Mapping[str, Any]) -> Self:
        """The estimator of a state :meth:`from_state` found to be this class's: a feature
        map and a head. Estimators that write a state of their own read it here."""
        name = cls.name
        try:
            estimator = cls._from_header(state)
            estimator._load_feature_state(state["features"])
            estimator.head_ = dict(state["head"])
            estimator.band_ = ConformalBand.from_dict(state["band"])
            estimator.finite_ = FinitePopulation.from_state(
                state.get("finite"), len(estimator.item_ids_), name
            )
        except KeyError as exc:
            raise InputError(f"{name}: estimator state lacks field {exc.args[0]!r}") from exc
        except TypeError as exc:  # parameters of another version of the class
            raise InputError(f"{name}: estimator state has unknown parameters ({exc})") from exc
        return estimator
