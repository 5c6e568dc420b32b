"""The reading contract, and the source facts every reading learns from.

A reading is fitted on the source models (:class:`SourceView`) and then reads a new model's
subset answers into ``(value, se)`` on the scale of the target score. Readings that estimate
the mean over the matrix items map it to the target with :class:`ScaleMap` when the target
is something else (the Open LLM Leaderboard v1 matrices hold 58-249 items of benchmarks of
1,000-14,000): the map is an *inverse* regression, matrix mean ~ a + b * target, solved for the
target, because the usual regression of the target on the matrix mean shrinks towards the
sources' average, the very bias a reading must not have.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ...errors import InputError
from ...responses import ResponseMatrix
from ...selection.audit import AUDIT_KEY
from ...subset import Subset
from ...truth import is_matrix_mean

if TYPE_CHECKING:
    from typing_extensions import Self

MIN_SLOPE = 0.2
"""An inverse map with a smaller slope would multiply noise by more than 5: not used."""
_TINY = 1e-9


class FlatScaleError(InputError):
    """The matrix mean hardly moves with the target score among the models a map is fitted
    on: no reading of the matrix items can be mapped to the target there."""


def smoothed_rates(values: np.ndarray) -> np.ndarray:
    """Per-item success rate of ``values`` (models x items, NaN = missing), strictly inside
    (0, 1): ``(right + 0.5) / (answered + 1)``, so that items every source answered alike
    still have a finite logit."""
    answered = (~np.isnan(values)).sum(axis=0)
    right = np.nansum(values, axis=0)
    return (right + 0.5) / (answered + 1.0)


@dataclass(frozen=True)
class ScaleMap:
    """Matrix-mean scale -> target scale: ``(mean - intercept) / slope``; identity by default."""

    intercept: float = 0.0
    slope: float = 1.0

    @classmethod
    def fit(cls, matrix_mean: np.ndarray, target: np.ndarray, whole: bool) -> ScaleMap:
        if whole:
            return cls()
        slope, intercept = _line(target, matrix_mean)
        if slope < MIN_SLOPE:
            raise FlatScaleError(
                f"the matrix mean hardly moves with the target score (slope {slope:.3f}, "
                f"under {MIN_SLOPE}): no reading of the matrix items can estimate that target "
                f"among these {target.size} models; more source models, or scores spread wider "
                "than the noise of the items' mean, would give one"
            )
        return cls(intercept, slope)

    def __call__(self, value: np.ndarray, se: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (value - self.intercept) / self.slope, se / self.slope

    def to_dict(self) -> dict[str, float]:
        return {"intercept": self.intercept, "slope": self.slope}

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> ScaleMap:
        return cls(float(payload["intercept"]), float(payload["slope"]))


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope and intercept of ``y ~ x`` (slope 0 for a constant ``x``)."""
    spread = float(np.sum((x - x.mean()) ** 2))
    slope = float(np.sum((x - x.mean()) * (y - y.mean())) / spread) if spread > 0 else 0.0
    return slope, float(y.mean() - slope * x.mean())


@dataclass(frozen=True)
class SourceView:
    """The source models as readings see them.

    ``all_values`` (models x every source item) gives the item rates; ``positions`` are the
    subset items' columns in it; ``inner_oof`` the inner estimator's out-of-fold estimates of
    the source models; ``whole`` whether the target is the mean over all source items.
    """

    all_values: np.ndarray
    positions: np.ndarray
    weights: np.ndarray
    audit: np.ndarray
    target: np.ndarray
    inner_oof: np.ndarray
    whole: bool
    _rates: list[np.ndarray] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def build(
        cls, source: ResponseMatrix, subset: Subset, target: np.ndarray, inner_oof: np.ndarray
    ) -> SourceView:
        """From a source matrix, its subset, the truths and the inner out-of-fold estimates.

        Models without every subset score are left out (the inner estimator left them out
        too when ``inner_oof`` has one value per complete model).
        """
        positions = source.item_positions(subset.item_ids)
        complete = ~np.isnan(source.values[:, positions]).any(axis=1)
        target = np.asarray(target, dtype=np.float64)[complete]
        oof = np.asarray(inner_oof, dtype=np.float64)
        if oof.size == complete.size and oof.size != target.size:
            oof = oof[complete]
        if oof.shape != target.shape:
            raise InputError(
                f"outside readings: {oof.size} inner estimates for {target.size} complete models"
            )
        audit_ids = set(subset.info.get(AUDIT_KEY, ()))
        values = source.values[complete]
        whole = is_matrix_mean(values, target)
        return cls(
            values,
            positions,
            np.asarray(subset.weights, dtype=np.float64),
            np.array([item in audit_ids for item in subset.item_ids]),
            target,
            oof,
            whole,
        )

    @property
    def n_models(self) -> int:
        return int(self.target.size)

    @property
    def n_items(self) -> int:
        """Items the score is the mean over (all source items)."""
        return int(self.all_values.shape[1])

    @property
    def values(self) -> np.ndarray:
        """Subset answers of the source models (models x subset items)."""
        return self.all_values[:, self.positions]

    @property
    def rates(self) -> np.ndarray:
        """Smoothed success rate of every source item (computed once)."""
        if not self._rates:
            self._rates.append(smoothed_rates(self.all_values))
        return self._rates[0]

    def rows(self, rows: np.ndarray, inner_oof: np.ndarray) -> SourceView:
        """The same view restricted to source models ``rows``, with their own inner estimates."""
        return SourceView(
            self.all_values[rows],
            self.positions,
            self.weights,
            self.audit,
            self.target[rows],
            np.asarray(inner_oof, dtype=np.float64),
            self.whole,
        )

    def scale_map(self, matrix_mean: np.ndarray | None = None) -> ScaleMap:
        """The map from the matrix-mean scale to the target (identity on a whole benchmark)."""
        if self.whole:
            return ScaleMap()
        with np.errstate(invalid="ignore"):
            mean = np.nanmean(self.all_values, axis=1) if matrix_mean is None else matrix_mean
        return ScaleMap.fit(mean, self.target, whole=False)


class Reading(ABC):
    """Fitted on source models; reads a model's subset answers into ``(value, se)``."""

    name: ClassVar[str] = "base"

    @classmethod
    def available(cls, view: SourceView) -> str | None:
        """None when the reading can be fitted on ``view``, else why not (one line)."""
        return None

    @abstractmethod
    def fit(self, view: SourceView) -> Self:
        """Learn from the source models; returns ``self``."""

    @abstractmethod
    def read(self, values: np.ndarray, inner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(value, se)`` per row of ``values`` (models x subset items, complete rows);
        ``inner`` is the inner estimator's estimate of each row."""

    def locate(self, values: np.ndarray, inner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(value, se)`` that decides how far outside the sources a model lies (the guard
        weight); the reading itself unless a more precise one can tell that."""
        return self.read(values, inner)

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """JSON-ready fitted state."""

    @classmethod
    @abstractmethod
    def from_state(cls, state: Mapping[str, Any]) -> Self:
        """Rebuild a fitted reading from :meth:`state`."""


def floats(payload: Mapping[str, Any], key: str, where: str) -> np.ndarray:
    """A saved list of finite numbers, or an :class:`InputError` naming ``where`` and ``key``."""
    try:
        array = np.asarray(payload[key], dtype=np.float64).reshape(-1)
    except KeyError as exc:
        raise InputError(f"{where}: state lacks field {key!r}") from exc
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: field {key!r} is not a list of numbers") from exc
    if not np.all(np.isfinite(array)):
        raise InputError(f"{where}: field {key!r} has a non-finite number")
    return array


def number(payload: Mapping[str, Any], key: str, where: str) -> float:
    try:
        value = float(payload[key])
    except KeyError as exc:
        raise InputError(f"{where}: state lacks field {key!r}") from exc
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: field {key!r} is not a number") from exc
    if not math.isfinite(value):
        raise InputError(f"{where}: field {key!r} is not finite")
    return value


def se_floor(se: np.ndarray) -> np.ndarray:
    """Standard errors kept strictly positive (a reading of every item has se 0)."""
    return np.maximum(se, _TINY)
