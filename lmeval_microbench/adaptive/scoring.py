"""From an adaptive run's answers to the full-benchmark score and its 90% interval.

Point estimate. Every source model answered every pool item, so one of the package's
estimators (``kridge``) is fitted from the whole pool's answers to the true full-benchmark
score. An adaptive run knows only some answers; the others are replaced by their posterior
expected values given the answers so far, shifted to agree with the run's own hit rate
(:func:`.estimation.impute`): items already answered count as they were answered, the rest as
the ability and that hit rate say. A pool records which imputation its bands were fitted with
(pools built before the shift load as ``posterior`` and keep their numbers).

Interval. How far that is from the truth depends on how many items were asked, and on the
adaptive procedure itself (which items a model of that ability gets). So the intervals come from
simulated adaptive runs of the source models, cross-fitted (each fold's models replayed with
IRT and regression fitted without them): at each of a list of item counts ("checkpoints") the
residuals give one conformal band (:func:`~lmeval_microbench._conformal.fit_band`),
and a run stopped after n items uses the band of the largest checkpoint <= n (fewer items, wider
band: conservative between checkpoints). Only each band's quantiles at three levels are kept,
which keeps a pool small.

Span. A run is also scored with the unshifted (``posterior``) imputation, and the score
estimator gives its own interval for the imputed answers (for ``kridge`` that holds its range
guard: the span of a flexible and a linear estimate for a model above every source model).
For a model the 1-D IRT and the source models describe, the two estimates agree and the
estimator's interval is narrower than the band; for one they do not (typically stronger than
every source model) they part. The interval is therefore the span of the estimate, the
unshifted estimate and the estimator's interval, widened by the band; the band is fitted on
each source model's distance *outside* its own span, a conformal score like any other, so the
coverage of models drawn like the sources is kept, and for symmetric errors the width there
is what the plain residual band gives. It is the rule of ``kridge``'s own range guard
(:mod:`lmeval_microbench.estimators.ridge`): beyond the data, the disagreement of estimates
is the honest measure of what is not known. Spans are taken at the 90 % level, so an 80 %
interval of such a run is conservative.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._conformal import ConformalBand, fit_band
from .._types import ItemId
from ..errors import InputError
from ..estimators import make_estimator
from ..estimators.base import ScoreEstimator
from ..irt.params import ItemParams
from ..responses import ResponseMatrix
from ..subset import Subset
from .estimation import IMPUTATIONS, impute

LEVELS = (0.8, 0.9, 0.95)
"""Interval levels a pool stores quantiles for."""

BASE_CHECKPOINTS = (
    1,
    2,
    3,
    4,
    5,
    6,
    8,
    10,
    12,
    15,
    20,
    25,
    30,
    35,
    40,
    50,
    60,
    75,
    100,
    125,
    150,
    200,
)
"""Item counts at which simulated runs are scored to fit interval bands (plus the pool size)."""


def checkpoints_for(n_items: int) -> tuple[int, ...]:
    """The checkpoints of a pool of ``n_items`` items (the pool size is always the last)."""
    return tuple(sorted({c for c in BASE_CHECKPOINTS if c < n_items} | {n_items}))


@dataclass(frozen=True)
class Band:
    """The conformal band of one checkpoint: its scale shape and quantiles per level."""

    n_items: int
    shape: ConformalBand
    quantiles: Mapping[float, np.ndarray]

    @classmethod
    def fit(
        cls,
        n_items: int,
        prediction: np.ndarray,
        truth: np.ndarray,
        span: tuple[np.ndarray, np.ndarray],
    ) -> Band:
        """The band of each model's distance from the truth to its span (see the module)."""
        low, high = span
        outside = np.maximum(0.0, np.maximum(truth - high, low - truth))
        band = fit_band(prediction, prediction + outside, "binned")
        quantiles = {level: band.region_quantiles(level) for level in LEVELS}
        return cls(n_items, band, quantiles)

    def half_width(self, prediction: np.ndarray, level: float) -> np.ndarray:
        if level not in self.quantiles:
            raise InputError(
                f"interval level {level} not stored; pools keep {list(self.quantiles)}"
            )
        region = self.shape.region_of(prediction)
        return self.quantiles[level][region] * self.shape.scale(prediction)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_items": self.n_items,
            "mode": self.shape.mode,
            "knots": _rounded(self.shape.knots),
            "scales": _rounded(self.shape.scales),
            "edges": _rounded(self.shape.edges),
            "centre": self.shape.centre,
            "spread": self.shape.spread,
            "quantiles": {str(level): _rounded(q) for level, q in self.quantiles.items()},
        }

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> Band:
        shape = ConformalBand(
            str(obj["mode"]),
            np.asarray(obj["knots"], dtype=np.float64),
            np.asarray(obj["scales"], dtype=np.float64),
            np.zeros(0),
            np.asarray(obj["edges"], dtype=np.float64),
            (),
            float(obj["centre"]),
            float(obj["spread"]),
        )
        quantiles = {float(k): np.asarray(v, dtype=np.float64) for k, v in obj["quantiles"].items()}
        regions = shape.edges.size + 1
        if any(q.shape != (regions,) for q in quantiles.values()):
            raise InputError(
                f"band at {obj['n_items']} items: quantiles do not match {regions} regions"
            )
        return cls(int(obj["n_items"]), shape, quantiles)


def _rounded(values: np.ndarray) -> list[float]:
    return [round(float(v), 7) for v in np.asarray(values).reshape(-1)]


@dataclass(frozen=True)
class ScoreMap:
    """A fitted full-score estimator of the whole pool, applied to imputed answers, plus bands.

    ``estimator`` is one of the package's estimators fitted with every pool item as its subset
    (a pool uses ``kridge``: the lowest error of all estimators with every matrix item, and a
    range guard for models above the source range, ``bench/ours.md``). It is stored once, as
    the pool bundle's static estimator, and only named here.
    """

    estimator: ScoreEstimator
    bands: tuple[Band, ...] = ()
    imputation: str = "shifted"
    """How unasked items are filled in before :meth:`predict` (:func:`.estimation.impute`)."""
    below: tuple[tuple[Band, ...], ...] = ()
    """Bands of the downward folds (the weakest source models, fitted on others), one set per
    fold: at a prediction up to ``below_top`` the interval is at least as wide as each's."""
    below_top: float | None = None

    @classmethod
    def fit(
        cls, name: str, source: ResponseMatrix, truth: np.ndarray, irt: ItemParams | None = None
    ) -> ScoreMap:
        """Fit estimator ``name`` on complete source answers with every item as the subset."""
        subset = Subset(
            tuple(source.item_ids), np.full(source.n_items, 1.0 / source.n_items), "pool"
        )
        return cls(make_estimator(name).fit(source, subset, np.asarray(truth, float), irt=irt))

    @property
    def item_ids(self) -> tuple[ItemId, ...]:
        return tuple(self.estimator.item_ids_)

    def predict_run(
        self, expected: np.ndarray, asked: np.ndarray, scores: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Estimate and span ``(value, low, high)`` of runs, fractions (see the module).

        ``expected`` (m, n): posterior expected scores; ``asked``/``scores``: the answers so
        far. A ``posterior`` map (version-1 pool) has the span of its estimate alone.
        """
        value, lower, upper = self._estimate(impute(expected, asked, scores, self.imputation))
        if self.imputation == "posterior":
            return value, value, value
        unshifted = self._estimate(impute(expected, asked, scores, "posterior"))[0]
        low = np.minimum(np.minimum(value, unshifted), lower)
        high = np.maximum(np.maximum(value, unshifted), upper)
        return value, low, high

    def predict(self, imputed: np.ndarray) -> np.ndarray:
        """Full-score estimates (fractions) from imputed answers (m, n) in pool order."""
        return self._estimate(imputed)[0]

    def _estimate(self, imputed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The estimator's estimate and 90 % interval of imputed answers, clipped to [0, 1]."""
        imputed = np.clip(np.asarray(imputed, dtype=np.float64), 0.0, 1.0)
        rows = [f"row{k}" for k in range(len(imputed))]
        matrix = ResponseMatrix(imputed, rows, list(self.item_ids), source="adaptive run")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value, lower, upper = self.estimator.estimate_matrix(matrix, level=0.9)
        value = np.clip(value, 0.0, 1.0)
        return (
            value,
            np.minimum(np.clip(lower, 0.0, 1.0), value),
            np.maximum(np.clip(upper, 0.0, 1.0), value),
        )

    def with_bands(
        self,
        predictions: Mapping[int, np.ndarray],
        spans: Mapping[int, tuple[np.ndarray, np.ndarray]],
        truth: np.ndarray,
    ) -> ScoreMap:
        """The same map with a band per checkpoint from cross-fitted predictions and spans."""
        bands = _fit_bands(predictions, spans, truth)
        return ScoreMap(self.estimator, bands, self.imputation, self.below, self.below_top)

    def with_below(
        self,
        folds: Sequence[
            tuple[Mapping[int, np.ndarray], Mapping[int, tuple[np.ndarray, np.ndarray]]]
        ],
        truth: np.ndarray,
        top: float,
    ) -> ScoreMap:
        """The same map with a set of downward bands per fold ``(predictions, spans)`` of the
        models whose true scores are ``truth`` (see ``below``), for predictions up to ``top``."""
        below = tuple(_fit_bands(predictions, spans, truth) for predictions, spans in folds)
        return ScoreMap(self.estimator, self.bands, self.imputation, below, float(top))

    def band_for(self, n_items: int, bands: tuple[Band, ...] | None = None) -> Band:
        """The band of the largest checkpoint at most ``n_items`` (the first one below it)."""
        bands = self.bands if bands is None else bands
        if not bands:
            raise InputError("this score map has no interval bands")
        fitting = [band for band in bands if band.n_items <= n_items]
        return fitting[-1] if fitting else bands[0]

    def half_width(self, prediction: np.ndarray, n_items: int, level: float) -> np.ndarray:
        """The band's half-width; below ``below_top``, at least the downward band's."""
        half = self.band_for(n_items).half_width(prediction, level)
        if not self.below or self.below_top is None:
            return half
        widest = half
        for bands in self.below:
            widest = np.maximum(widest, self.band_for(n_items, bands).half_width(prediction, level))
        return np.where(prediction <= self.below_top, widest, half)

    def interval(
        self,
        prediction: np.ndarray,
        n_items: int,
        level: float = 0.9,
        span: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The run's ``span`` (:meth:`predict_run`; none: the estimate) widened by the band."""
        prediction = np.asarray(prediction, dtype=np.float64)
        low, high = (prediction, prediction) if span is None else span
        half = self.half_width(prediction, n_items, level)
        low = np.minimum(np.asarray(low, dtype=np.float64), prediction) - half
        high = np.maximum(np.asarray(high, dtype=np.float64), prediction) + half
        return np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)

    def bands_to_list(self) -> list[dict[str, Any]]:
        return [band.to_dict() for band in self.bands]

    def below_to_dict(self) -> dict[str, Any] | None:
        """The downward bands for the pool state (None: a map without them)."""
        if not self.below or self.below_top is None:
            return None
        folds = [[band.to_dict() for band in bands] for bands in self.below]
        return {"top": self.below_top, "folds": folds}

    @classmethod
    def from_parts(
        cls,
        estimator: ScoreEstimator,
        bands: Sequence[Mapping[str, Any]],
        imputation: str = "posterior",
        below: Mapping[str, Any] | None = None,
    ) -> ScoreMap:
        if imputation not in IMPUTATIONS:
            raise InputError(f"unknown imputation {imputation!r}; expected one of {IMPUTATIONS}")
        down = below or {}
        return cls(
            estimator,
            tuple(Band.from_dict(b) for b in bands),
            imputation,
            tuple(tuple(Band.from_dict(b) for b in fold) for fold in down.get("folds", ())),
            None if not down else float(down["top"]),
        )


def _fit_bands(
    predictions: Mapping[int, np.ndarray],
    spans: Mapping[int, tuple[np.ndarray, np.ndarray]],
    truth: np.ndarray,
) -> tuple[Band, ...]:
    """One band per checkpoint, in checkpoint order, from cross-fitted predictions and spans."""
    return tuple(Band.fit(n, predictions[n], truth, spans[n]) for n in sorted(predictions))
