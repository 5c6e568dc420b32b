"""Estimates from a partial run: unscored subset items imputed from the IRT model.

Every estimator and its conformal interval were fitted on models scored on *all* subset
items. Fed fewer, its features leave the scale it learned: the mean over the first half of a
greedy subset is not the mean over the subset, and a spline head extrapolates it anywhere (a
``--limit 50`` winogrande run was estimated at 0.0). So a missing score is not skipped but
drawn, many times, from what the model's scored items say about it: an ability from its
posterior given the scored items (the bundle's IRT parameters, fitted on the source models),
then each missing item's answer at that ability. Every completed row goes through the
estimator exactly as a full run would. The estimate is the mean over the draws (multiple
imputation) and the interval widens by their spread (Rubin's rule on the conformal
half-width): few scored items give a wide interval, all but one barely change it.

The IRT model draws the missing answers independently given the ability; real models are
better or worse on *groups* of items than one ability says, so the spread of the draws is too
small, most of all when a whole block of items is missing (``--limit`` keeps the first ``k``).
:func:`fit_inflation` measures by how much on the source models when a bundle is built (the
squared gap between the full-run estimate and the imputed one, over the spread of the draws,
for the first ``k`` and for ``k`` random items) and the interval uses it.
``tools/bench_missing.py`` measures error and coverage on held-out leaderboard models.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from scipy.stats import norm

from .._types import ItemId
from ..errors import InputError
from ..irt import posterior_draws
from ..irt.params import ItemParams
from ..outside.ceiling import open_above


class Imputable(Protocol):
    """What imputation reads of a fitted estimator (:class:`.base.ScoreEstimator` is one).

    A protocol, not that class: the base class imports this module to impute, so naming the
    class here would make the two modules import each other.
    """

    item_ids_: tuple[ItemId, ...]
    missing_inflation_: dict[str, list[float]] | None

    def predict_rows(
        self, values: np.ndarray, level: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...


CALIBRATION_FRACTIONS = (0.1, 0.5, 0.9)
"""Shares of the subset kept when the inflation of the imputation spread is measured."""
CALIBRATION_MODELS = 150
CALIBRATION_ITEM_MODELS = 150 * 250
"""Models x subset items the factor is measured on at most: 150 models up to 250 subset
items, fewer beyond (IRT estimators of whole benchmarks spent most of a build's time here;
the factor is a ratio of means, stable well before 150 models)."""
MIN_CALIBRATION_ROWS = 20
"""Fewer complete source rows leave the factor unmeasured (1: the plain spread of the draws)."""
CALIBRATION_DRAWS = 100
N_DRAWS = 400
"""Imputations per model: the Monte Carlo error of the mean is below 0.1 points here."""
_ROWS_PER_CHUNK = 8192
"""Completed rows pushed through an estimator at once (kernel estimators hold rows x models)."""


def row_generator(row: np.ndarray) -> np.random.Generator:
    """A generator seeded by the row's own scores: a model's estimate does not depend on which
    other models are estimated with it, and the same run always gives the same numbers."""
    return np.random.default_rng(zlib.crc32(np.ascontiguousarray(row).tobytes()))


def impute_rows(
    params: ItemParams, item_ids: tuple[str, ...], row: np.ndarray, n_draws: int
) -> np.ndarray:
    """``n_draws`` completions of one score row: NaN entries drawn 0/1 at posterior abilities."""
    rng = row_generator(row)
    theta = posterior_draws(params, row[None, :], item_ids, n_draws, rng)[0]
    gaps = np.flatnonzero(np.isnan(row))
    probability = params.subset([item_ids[k] for k in gaps]).probability(theta)
    completed = np.repeat(row[None, :], n_draws, axis=0)
    completed[:, gaps] = (rng.random(probability.shape) < probability).astype(np.float64)
    return completed


def completed_rows(
    params: ItemParams, item_ids: tuple[str, ...], values: np.ndarray, n_draws: int
) -> np.ndarray:
    """``n_draws`` completions of every row of ``values``, stacked row by row (m x n_draws, n)."""
    return np.concatenate([impute_rows(params, item_ids, row, n_draws) for row in values])


def _per_row(
    estimator: Imputable, stacked: np.ndarray, n_rows: int, level: float
) -> list[np.ndarray]:
    """The estimator's ``(value, lower, upper, se)`` on stacked completions: (n_rows, draws)."""
    return [part.reshape(n_rows, -1) for part in estimator.predict_rows(stacked, level)]


def _imputed_draws(
    estimator: Imputable, params: ItemParams, values: np.ndarray, level: float, n_draws: int
) -> list[np.ndarray]:
    """The estimator's ``(value, lower, upper, se)`` on each draw: arrays (m, n_draws)."""
    stacked = completed_rows(params, tuple(estimator.item_ids_), values, n_draws)
    return _per_row(estimator, stacked, values.shape[0], level)


def predict_partial_rows(
    estimator: Imputable, params: ItemParams | None, values: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What an estimator prints for rows of subset answers: rows that lack scores imputed
    where ``params`` allow it (:func:`predict_with_imputation`), and the upper end opened to
    1 for rows with every scored answer right (:mod:`..outside.ceiling`)."""
    if params is None or not np.isnan(values).any():
        value, lower, upper, se = estimator.predict_rows(values, level)
    else:
        value, lower, upper, se = predict_with_imputation(estimator, params, values, level)
    return value, lower, open_above(values, upper), se


def predict_with_imputation(
    estimator: Imputable,
    params: ItemParams,
    values: np.ndarray,
    level: float,
    n_draws: int = N_DRAWS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(value, lower, upper, se)`` of each row of ``values`` (columns: the estimator's items).

    Complete rows go through the estimator unchanged; rows with NaN are imputed.
    """
    out = [np.empty(values.shape[0]) for _ in range(4)]
    complete = ~np.isnan(values).any(axis=1)
    if complete.any():
        for array, part in zip(out, estimator.predict_rows(values[complete], level), strict=True):
            array[complete] = part
    partial = np.flatnonzero(~complete)
    per_chunk = max(1, _ROWS_PER_CHUNK // n_draws)
    for start in range(0, partial.size, per_chunk):
        rows = partial[start : start + per_chunk]
        draws = _imputed_draws(estimator, params, values[rows], level, n_draws)
        factor = inflation_of(estimator.missing_inflation_, values[rows])
        for array, pooled in zip(out, pool_draws(*draws, level, factor), strict=True):
            array[rows] = pooled
    return out[0], out[1], out[2], out[3]


def pool_draws(
    value: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    se: np.ndarray,
    level: float,
    inflation: np.ndarray | float = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rubin's rule over draws (axis 1): mean estimate, half-width from within + between spread.

    The within part is each draw's conformal half-width (the larger side, since the bands
    are clipped to [0, 1]); the between part is the variance of the draws' estimates times
    ``inflation`` (see :func:`fit_inflation`), scaled to the level by the normal quantile.
    """
    n_draws = value.shape[1]
    mean = value.mean(axis=1)
    between = value.var(axis=1, ddof=1) * (1.0 + 1.0 / n_draws) * inflation
    within = np.maximum(upper - value, value - lower).mean(axis=1)
    z = float(norm.ppf(0.5 + level / 2.0))
    half = np.sqrt(within**2 + z**2 * between)
    pooled_se = np.sqrt(np.mean(se**2, axis=1) + between)
    return mean, np.clip(mean - half, 0.0, 1.0), np.clip(mean + half, 0.0, 1.0), pooled_se


# ---------------------------------------------------------------------------- inflation
def keep_pattern(values: np.ndarray, kind: str, keep: int, rng: np.random.Generator) -> np.ndarray:
    """``values`` with all but ``keep`` items per row set to NaN: the first ones or random ones."""
    out = values.copy()
    if kind == "first":
        out[:, keep:] = np.nan
    else:
        for row in out:
            row[rng.permutation(row.size)[keep:]] = np.nan
    return out


def is_prefix(row: np.ndarray) -> bool:
    """Whether the scored items of ``row`` are the first ones (what ``--limit`` keeps)."""
    scored = ~np.isnan(row)
    return bool(scored[: scored.sum()].all())


def inflation_of(inflation: dict[str, list[float]] | None, values: np.ndarray) -> np.ndarray:
    """Inflation factor of each row by its scored share: the prefix curve when the scored
    items are the first ones (``--limit``), else the random curve (a data-parallel shard
    that died leaves every ``n``-th document unscored, which is close to random). 1 without
    a fit."""
    if not inflation:
        return np.ones(values.shape[0])
    fractions = np.asarray(inflation["fractions"])
    share = (~np.isnan(values)).mean(axis=1)
    return np.array(
        [
            np.interp(s, fractions, inflation["first" if is_prefix(row) else "random"])
            for s, row in zip(share, values, strict=True)
        ]
    )


@dataclass(frozen=True)
class InflationDraws:
    """The partial runs :func:`fit_inflation` scores an estimator on, and their completions.

    They depend on the subset's IRT parameters, the source answers and the seed only, not on
    the estimator, so a build draws them once for all its estimators. Drawn anew for each of
    the eleven, a default build at 50 items took 40 s on IFEval and 48 s on MuSR; drawn once,
    35 and 39 s, the bundles unchanged (``bench/build_speed_before_shared_draws.md``,
    ``bench/build_speed.md``: one session, the later run also with the held-out person-fit
    threshold, :mod:`..personfit.held_out`).
    """

    item_ids: tuple[ItemId, ...]
    rows: np.ndarray
    """Complete source rows (models, subset items) the factor is measured on."""
    completions: dict[tuple[str, float], np.ndarray]
    """Per (pattern kind, share kept): every row's ``CALIBRATION_DRAWS`` imputed completions,
    stacked row by row ((models x draws), subset items)."""


def inflation_draws(params: ItemParams, values: np.ndarray, seed: int = 0) -> InflationDraws | None:
    """Partial runs of up to ``CALIBRATION_MODELS`` source models scored on every subset item
    (columns of ``values``: the items of ``params``, in order), for the first ``k`` and ``k``
    random items (``k`` from ``CALIBRATION_FRACTIONS``), each completed ``CALIBRATION_DRAWS``
    times; None with fewer than ``MIN_CALIBRATION_ROWS`` complete rows."""
    rng = np.random.default_rng(seed)
    complete = values[~np.isnan(values).any(axis=1)]
    if len(complete) < MIN_CALIBRATION_ROWS:
        return None
    n_models = min(
        CALIBRATION_MODELS, max(MIN_CALIBRATION_ROWS, CALIBRATION_ITEM_MODELS // values.shape[1])
    )
    rows = complete[rng.permutation(len(complete))[:n_models]]
    item_ids = tuple(params.item_ids)
    n_items = rows.shape[1]
    completions = {}
    for kind in ("first", "random"):
        for fraction in CALIBRATION_FRACTIONS:
            keep = min(n_items - 1, max(1, round(fraction * n_items)))
            partial = keep_pattern(rows, kind, keep, rng)
            completions[(kind, fraction)] = completed_rows(
                params, item_ids, partial, CALIBRATION_DRAWS
            )
    return InflationDraws(item_ids, rows, completions)


def fit_inflation(estimator: Imputable, draws: InflationDraws | None) -> dict[str, list[float]]:
    """Factor by which the spread of the draws understates the imputation error, per share kept.

    On the partial runs of ``draws`` (:func:`inflation_draws`): the mean squared gap between
    the full-run estimate and the mean of the draws, over the mean variance of the draws;
    never below 1. In-sample on purpose: both estimates share the fitted head, so the ratio
    measures the imputation model only (on held-out leaderboard models it came out the same or
    slightly lower, see ``tools/bench_missing.py``). Empty without draws.
    """
    if draws is None:
        return {}
    full = estimator.predict_rows(draws.rows, 0.9)[0]
    curves: dict[str, list[float]] = {"fractions": list(CALIBRATION_FRACTIONS)}
    for kind in ("first", "random"):
        factors = []
        for fraction in CALIBRATION_FRACTIONS:
            stacked = draws.completions[(kind, fraction)]
            values = _per_row(estimator, stacked, draws.rows.shape[0], 0.9)[0]
            gap = np.mean((full - values.mean(axis=1)) ** 2)
            spread = np.mean(values.var(axis=1, ddof=1))
            factors.append(float(max(1.0, gap / spread)) if spread > 0 else 1.0)
        curves[kind] = factors
    return curves


def inflation_state(value: Any, name: str) -> dict[str, list[float]] | None:
    """The saved partial-run inflation curves, checked: equal lengths, finite factors >= 1."""
    if value is None:
        return None
    try:
        curves = {key: [float(v) for v in value[key]] for key in ("fractions", "first", "random")}
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(
            f"{name}: estimator state has a malformed missing_inflation ({exc})"
        ) from exc
    sizes = {len(v) for v in curves.values()}
    factors = curves["first"] + curves["random"]
    if len(sizes) != 1 or not all(math.isfinite(f) and f >= 1.0 for f in factors):
        raise InputError(f"{name}: estimator state has a malformed missing_inflation")
    return curves
