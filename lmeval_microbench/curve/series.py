"""One benchmark's curve: per checkpoint the raw subset score, IRT ability and full-score
estimate, each step tested (:mod:`.significance`) and each series summarised
(:mod:`.statistics`).

:func:`trace_benchmark` works on a checkpoints x items answer matrix, so the command
(answers read from lm-eval runs, :mod:`.reader`) and the benchmark on leaderboard
checkpoints (answers replayed from a response matrix) run the same code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .._types import Estimate
from ..bundle import Bundle
from ..irt import estimate_abilities
from ..personfit import bundle_person_fit, fitted_estimate
from ..reconstruct import bundle_estimator
from ..responses import ResponseMatrix
from .significance import DEFAULT_PERMUTATIONS, ScoreFunction, StepTest, paired_flip_test
from .statistics import SeriesStats, rank_agreement, series_stats

QUANTITIES = ("raw", "ability", "estimate")
"""The three readings of a checkpoint: subset mean, IRT ability (EAP), full-score estimate."""


@dataclass(frozen=True)
class CurvePoint:
    """One checkpoint on one benchmark."""

    label: str
    model: str
    step: float
    items_scored: int
    raw: float
    ability: float
    ability_se: float
    estimate: Estimate | None

    def value(self, quantity: str) -> float:
        if quantity == "estimate":
            return math.nan if self.estimate is None else self.estimate.value
        return float(getattr(self, quantity))

    def to_dict(self) -> dict[str, Any]:
        estimate = self.estimate
        return {
            "run": self.label,
            "model": self.model,
            "step": self.step,
            "items_scored": self.items_scored,
            "raw": _finite(self.raw),
            "ability": _finite(self.ability),
            "ability_se": _finite(self.ability_se),
            "estimate": None if estimate is None else _finite(estimate.value),
            "lower": None if estimate is None else _finite(estimate.lower),
            "upper": None if estimate is None else _finite(estimate.upper),
        }


def _finite(value: float) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


@dataclass
class BenchmarkCurve:
    """The curve of one benchmark with its step tests and statistics per quantity."""

    benchmark: str
    bundle: str
    estimator: str
    level: float
    points: list[CurvePoint]
    steps: dict[str, list[StepTest]]
    stats: dict[str, SeriesStats]
    truth: list[float] | None = None
    notes: list[str] = field(default_factory=list)

    def values(self, quantity: str) -> np.ndarray:
        if quantity == "truth":
            return np.asarray(self.truth if self.truth is not None else [], dtype=np.float64)
        return np.array([p.value(quantity) for p in self.points])

    def rank_agreement(self) -> dict[str, float]:
        """Spearman correlation of each quantity with the true curve (when known)."""
        if self.truth is None:
            return {}
        return {q: rank_agreement(self.values(q), self.values("truth")) for q in QUANTITIES}

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "bundle": self.bundle,
            "estimator": self.estimator,
            "level": self.level,
            "points": [p.to_dict() for p in self.points],
            "steps": {q: [t.to_dict() for t in tests] for q, tests in self.steps.items()},
            "statistics": {q: s.to_dict() for q, s in self.stats.items()},
            **({"truth": self.truth} if self.truth is not None else {}),
            **(
                {"spearman_with_truth": {q: _finite(r) for q, r in self.rank_agreement().items()}}
                if self.truth is not None
                else {}
            ),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class TraceOptions:
    """How a curve is computed: the bundle's estimator, interval level, imputation of
    unscored items, and the permutation budget and seed of the step tests."""

    estimator: str | None = None
    level: float | None = None
    allow_missing: bool | None = None
    permutations: int = DEFAULT_PERMUTATIONS
    seed: int = 0

    def filled(self) -> TraceOptions:
        """None (left to the run) -> the defaults: bundle's estimator, 0.9, no imputation."""
        return replace(
            self,
            level=0.9 if self.level is None else self.level,
            allow_missing=bool(self.allow_missing),
        )


def score_functions(
    bundle: Bundle, options: TraceOptions
) -> tuple[dict[str, ScoreFunction], str, list[str]]:
    """Per quantity, the function of an answer matrix (rows = checkpoints, columns = the
    bundle's items) that gives it; the estimator's name; notes on what is unavailable."""
    ids = list(bundle.item_ids)
    fitted = bundle_estimator(bundle, options.estimator)
    notes: list[str] = []

    def raw(values: np.ndarray) -> np.ndarray:
        counted = np.isfinite(values).sum(axis=1)
        total = np.nansum(values, axis=1)
        return np.where(counted > 0, total / np.maximum(counted, 1), np.nan)

    def estimate(values: np.ndarray) -> np.ndarray:
        return _estimates(fitted, values, ids, options)[0]

    functions: dict[str, ScoreFunction] = {"raw": raw, "estimate": estimate}
    if bundle.irt is None or bundle.irt.n_dims != 1:
        why = "no IRT parameters" if bundle.irt is None else f"{bundle.irt.n_dims}-D IRT"
        notes.append(f"bundle {bundle.name!r}: {why}; no ability curve")
    else:
        irt = bundle.irt

        def ability(values: np.ndarray) -> np.ndarray:
            return estimate_abilities(irt, values, ids)[0][:, 0]

        functions["ability"] = ability
    return functions, fitted.name, notes


def _estimates(
    fitted: Any, values: np.ndarray, ids: list[str], options: TraceOptions
) -> tuple[np.ndarray, ...]:
    """Estimates of the rows that can have one (all items, or any with ``allow_missing``);
    NaN for the others."""
    observed = np.isfinite(values)
    usable = observed.any(axis=1) if options.allow_missing else observed.all(axis=1)
    out = [np.full(len(values), np.nan) for _ in range(3)]
    rows = np.flatnonzero(usable)
    if rows.size:
        matrix = ResponseMatrix(values[rows], [f"row{k}" for k in rows], ids, source="curve")
        found = fitted.estimate_matrix(
            matrix, level=options.level, allow_missing=options.allow_missing
        )
        for target, part in zip(out, found, strict=True):
            target[rows] = part
    return tuple(out)


def trace_benchmark(
    bundle: Bundle,
    labels: Sequence[str],
    models: Sequence[str],
    steps: Sequence[float],
    values: np.ndarray,
    options: TraceOptions | None = None,
    *,
    truth: Sequence[float] | None = None,
) -> BenchmarkCurve:
    """The curve of ``values`` (checkpoints in step order x ``bundle.item_ids``)."""
    options = (options or TraceOptions()).filled()
    values = np.asarray(values, dtype=np.float64)
    ids = list(bundle.item_ids)
    functions, estimator, notes = score_functions(bundle, options)
    abilities = estimate_abilities(bundle.irt, values, ids) if "ability" in functions else None
    value, lower, upper = _estimates(
        bundle_estimator(bundle, options.estimator), values, ids, options
    )
    points = []
    for k, label in enumerate(labels):
        has = np.isfinite(value[k])
        points.append(
            CurvePoint(
                label=label,
                model=models[k],
                step=float(steps[k]),
                items_scored=int(np.isfinite(values[k]).sum()),
                raw=float(functions["raw"](values[k : k + 1])[0]),
                ability=math.nan if abilities is None else float(abilities[0][k, 0]),
                ability_se=math.nan if abilities is None else float(abilities[1][k, 0]),
                estimate=Estimate(value[k], lower[k], upper[k], options.level) if has else None,
            )
        )
    points, flagged = _check_person_fit(bundle, values, points)
    notes += flagged
    tests = {
        quantity: [
            paired_flip_test(
                function,
                values[k],
                values[k + 1],
                level=options.level,
                permutations=options.permutations,
                seed=options.seed + k,
            )
            for k in range(len(points) - 1)
        ]
        for quantity, function in functions.items()
    }
    curve = BenchmarkCurve(
        benchmark=bundle.benchmark,
        bundle=bundle.name,
        estimator=estimator,
        level=options.level,
        points=points,
        steps=tests,
        stats={},
        truth=None if truth is None else [float(t) for t in truth],
        notes=notes,
    )
    quantities = [q for q in QUANTITIES if q in functions] + (["truth"] if truth else [])
    curve.stats = {q: series_stats(curve.values(q)) for q in quantities}
    return curve


def _check_person_fit(
    bundle: Bundle, values: np.ndarray, points: list[CurvePoint]
) -> tuple[list[CurvePoint], list[str]]:
    """The checkpoints with their estimates after the bundle's person-fit check (the rule of
    every estimate, :func:`..personfit.widen_for_fit`: the intervals of early checkpoints that
    answer like guessing reach chance), and one note per flagged checkpoint. The change tests
    keep the estimator's own function: they compare answer patterns, not reported values."""
    fits = bundle_person_fit(bundle, values)
    if fits is None:
        return points, []
    checked, notes = [], []
    for point, fit in zip(points, fits, strict=True):
        estimate, note = fitted_estimate(point.estimate, fit, bundle.person_fit)
        checked.append(replace(point, estimate=estimate))
        if note:
            notes.append(f"{point.label}: person fit: {note}")
    return checked, notes
