"""``similar``: the model-similarity AIPW reading as an estimator of its own.

:class:`~lmeval_microbench.outside.readings.similar.SimilarReading` predicts a model's answers
on the items it was not asked from the source models' answers and corrects the prediction by
its own residuals on the asked items. Inside ``guarded`` it can be the outside reading
(``reading="similar"``); here it is the whole estimate, for every model, with random items
(``--method random`` or ``balanced``): the recipe of benchpred's ``aipw`` with cross-fitted
residuals, whose error does not depend on the model resembling the sources.

Nothing is fitted on the source models' full scores beyond the reading's map from the matrix
mean to the target (identity on a whole benchmark). The interval is the estimate plus or
minus ``q`` of its standard errors, ``q`` the larger of the normal quantile and the conformal
quantile of the sources' studentized errors, each source read from the others: the standard
error comes from the model's own residuals, so the interval widens for a model the sources
predict badly, wherever it lies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.stats import norm

from .._conformal import ConformalBand, fit_band
from ..errors import InputError
from ..irt.params import ItemParams
from ..outside.readings import SourceView
from ..outside.readings.similar import MIN_ITEMS, SimilarReading
from ..responses import ResponseMatrix
from ..subset import Subset
from ._fitting import usable_models
from ._own import OwnStagesEstimator, state_errors


class SimilarEstimator(OwnStagesEstimator):
    """The similar reading for every model, with a studentized conformal interval.

    ``calibration``, ``interval``, ``n_folds`` and ``random_state`` are accepted for the
    common interface and not used.
    """

    name = "similar"
    min_items = MIN_ITEMS

    def fit(
        self,
        source: ResponseMatrix,
        subset: Subset,
        target: np.ndarray,
        *,
        irt: ItemParams | None = None,
        cross_fit: np.ndarray | None = None,
    ) -> SimilarEstimator:
        """Fit the reading and studentize every source's error read from the others; returns
        ``self``. ``irt`` and ``cross_fit`` are not used: nothing is fitted on the subset
        scores, so re-selecting the items per fold would change nothing to correct."""
        target, values = self._begin_fit(source, subset, target)
        complete = usable_models(values, any_item=False, name=self.name, source=source.source)
        # the view's inner estimates are not read by this reading: the truths stand in
        view = SourceView.build(source, subset, target, target[complete])
        reason = SimilarReading.available(view)
        if reason is not None:
            raise InputError(f"similar: {reason}")
        self.reading_ = SimilarReading().fit(view)
        value, se = self.reading_.read_sources()
        self.oof_ = np.clip(value, 0.0, 1.0)
        errors = np.abs(self.oof_ - view.target)
        self.studentized_ = np.sort(errors / np.maximum(se, 1e-9))
        self.widen_ = 1.0
        # the interval is the studentized one; a plain band of the same errors serves the
        # common interface (fitted-state checks, widening)
        self.band_ = fit_band(self.oof_, view.target, "constant")
        self.head_: dict[str, Any] = {}
        self.n_source_ = view.n_models
        self.cv_mae_ = float(errors.mean())
        return self

    def multiplier(self, level: float) -> float:
        """Half-width in standard errors: the larger of the normal quantile and the sources'
        conformal one, times the widening of :meth:`widen_intervals`."""
        n = self.studentized_.size
        rank = math.ceil((n + 1) * level)
        conformal = float(self.studentized_[rank - 1]) if rank <= n else math.inf
        return self.widen_ * max(float(norm.ppf(0.5 + level / 2)), conformal)

    def _predict(
        self, values: np.ndarray, level: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        value, se = self.reading_.read(values, np.full(values.shape[0], np.nan))
        value = np.clip(value, 0.0, 1.0)
        half = self.multiplier(level) * se
        return value, np.clip(value - half, 0.0, 1.0), np.clip(value + half, 0.0, 1.0), se

    def widen_intervals(self, factor: float) -> SimilarEstimator:
        """Multiply the half-width by ``factor`` >= 1 (:mod:`..auto.widen`); returns ``self``."""
        self._check_fitted()
        self.widen_ *= float(factor)
        self.band_ = self.band_.widened(factor)
        return self

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        self._check_fitted()
        return {
            **self._state_header(),
            "reading": self.reading_.state(),
            "studentized": self.studentized_.tolist(),
            "widen": self.widen_,
            "band": self.band_.to_dict(),
        }

    @classmethod
    def _from_own_state(cls, state: Mapping[str, Any]) -> SimilarEstimator:
        with state_errors(cls.name):
            estimator = cls._from_header(state)
            estimator.reading_ = SimilarReading.from_state(state["reading"])
            estimator.studentized_ = np.asarray(state["studentized"], dtype=np.float64)
            estimator.widen_ = float(state["widen"])
            estimator.band_ = ConformalBand.from_dict(state["band"])
        if estimator.reading_.asked_.shape[1] != len(estimator.item_ids_):
            raise InputError("similar: the saved source answers do not match the subset items")
        return estimator
