"""Rules the guard could follow, tried on the peer suite's cells: bench/guard_variants.*.

The guard (``outside/guard.py``) moves a model's estimate from the inner regression towards an
outside reading as far as that reading places the model beyond the sources, and widens its
interval to span both. The changes to that rule that come up again and again are measured
here on the same fitted bundles, so a maintainer sees what each would do before touching the
library:

- ``move: consistent``: move only as far as the reading and the inner estimate disagree beyond
  their own noise, ``(1 - (se_reading^2 + se_inner^2) / d^2)`` clipped to [0, 1] of the move
  (``d``: reading minus inner estimate; ``se_inner`` from the inner 90 % interval). The guard
  pays on random splits where the sources' range is narrow (MuSR with 25-100 sources,
  ``bench/guard_cost.md``); a move that waits for a real disagreement would not.
- ``move: even prior``: the outside weight as a posterior with even prior odds of inside
  and outside the sources, each side's truth uniform on its part of [0, 1]. The shipped
  weight, a normal reading against a flat prior on the real line, gives the outside prior odds
  of (1 - range) / range, nine to one on a range of 10 points.
- ``move: whole at w = t``: the shipped weight, with the whole move reached at ``w = t``
  (0.5, 0.25) instead of 1. On the strongest fifth the reading alone erred less than the
  guarded estimate on most cells (scratch runs on 20 cells: GSM8K at 50 items 3.27 against
  3.59, MuSR 2.0-2.9 against 2.2-3.1): models just beyond the strongest source get ``w``
  near 0.5 and keep half of the inner regression's shrinkage.
- ``move below: never`` and ``move below: only the clearly below``: on a matrix whose target
  is its mean, the estimate moves above the sources as shipped, and below them never, or only
  where the reading places the model below the weakest source with probability over
  ``1 - W_MIN``; the interval is the shipped one. With few sources whose weakest lies near the
  chance score, a held-out model's reading under it is mostly the sampling noise of the items
  asked (MuSR, 50 sources, random split, anchor points: five models of 33-36 % answered 14 of
  the 50 items right, were read at 25.7 +- 4.8 % against a weakest source at 33.7 %, and moved
  there; a scratch run):
  the weakest-fifth cells (``--weak``) say what the move below buys where models do lie
  below the sources. Neither is kept: never moving below gains 0.03-0.22 points on random
  splits (whole benchmarks with 25-100 sources 3.35 -> 3.13) and loses 1.83 on the v1
  weakest fifth (2.80 -> 4.63) and 0.62 on the whole benchmarks' (2.87 -> 3.49); moving only
  the clearly below gains 0.02-0.15 and loses 0.25 and 0.54 there (``bench/guard_variants.md``).
  ``move below: even prior`` moves below the sources by the even-prior weight of lying below
  them (the shipped move above): within 0.10 points of the shipped rule in every group, better
  in some (whole benchmarks with 25-100 sources 3.35 -> 3.25) and worse in others (v1 random
  with all sources 2.14 -> 2.18, whole benchmarks' weakest fifth 2.87 -> 2.92); not kept.
- ``locate: de-shrunk``: the shipped rule, with every reading placing models by the de-shrunk
  reading (:mod:`lmeval_microbench.outside.readings.deshrunk`), as ``checked`` and ``audit``
  already do, instead of by itself. ``own`` and ``design`` place by themselves, and their
  standard error is the sampling noise of the items asked: against a narrow source range they
  count most of the sources' own models as possibly outside (``bench/guard_cost.md``).
- ``interval: reading's band where w >= t``: the interval of a model the reading places
  outside with weight ``w`` at least ``t`` is the reading's band alone, not its span with the
  inner interval, which for such a model is biased towards the sources.
- ``interval: reach only where w <= W_MIN`` and ``interval: no reach``: the upper edge reaches
  the own-level reading's spread above the sources (``reached``) only for models the guard
  left inside, or for none. Where the guard acted, its band already spans the reading, so the
  reach looked like counting the same doubt twice; it is not what widens the strongest
  fifth's intervals (v1: 0.1 points), and dropping it put a cell of whole benchmarks with
  25-100 sources at 0.71 (0.61 without any reach) and one of the v1 strongest fifth with all
  sources at 0.75 (``bench/guard_variants.md``, the 263 cells of random and strongest-fifth
  splits).
- ``interval: least quantile t above``: the band above the sources at least ``t`` standard
  errors of the reading either way (shipped: ``MIN_Q_ABOVE``, 0.5; 1 before). Where the
  strongest models answer nearly every item alike, a reading exact on the folds got a band of
  the floor alone.
- ``interval: union shrunk on upward folds``: where the guard acted above the sources, the
  whole interval drawn towards the estimate by ``s``, the conformal 90 % quantile of the
  upward folds' misses in units of the interval's side towards the truth (each fold target's
  interval built by the shipped rule from the fold's own inner fit, reading and reach), at
  most 1, and 1 with fewer than ``MIN_FOLD_TARGETS`` fold targets the guard acted on. The
  strongest fifth's intervals span the inner one and the band and cover 0.98 where each alone
  was sized for 90 %; the band alone fell to 0.49 on a cell, and the folds were to say how far
  the span can be drawn in. ``... within the folds' reach``: only for models placed no
  further above the sources than the furthest fold target lay above its fold's training
  models. ``... to the folds' largest miss``: ``s`` the largest miss, not the 90 % quantile.
  None is kept: the folds miss less than the held-out strongest fifth, whose models lie
  beyond all the sources (and the fold targets' own errors sized the band they are measured
  against). v1 with 25-100 sources: 0.99 -> 0.82, 0.86 and 0.89 coverage, 24, 20 and 12 of 51
  cells under 0.85 (263 cells; on the 179 of ``bench/guard_variants_179_cells.md`` 0.81, 0.84
  and 0.88, 18, 15 and 9 of 35).

Each cell of ``bench/choice_rules.json`` whose chosen recipe is read with ``guarded`` (with
``--weak`` also the weakest-fifth cells of ``bench/peers.json``, with the recipe the default
build chose there) is rebuilt on its sources (as ``bench_guard_cost.py`` does); the guard's
parts are read for every held-out model (inner estimate and interval, reading, location,
band, weights) and every variant recombines them through the guard's own composition
(:func:`lmeval_microbench.outside.guard.composed_interval`), changing only what it varies.
``as shipped`` recombines them unchanged and must equal the estimator's output: the check that
the parts are the guard's.

    python tools/bench_guard_variants.py --jobs 2 --weak      # 10-25 minutes on 2 cores
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_guard_cost import Rebuilt, group_of, rebuilt_guard, run_cells, write_report

from lmeval_microbench._conformal import conformal_quantile
from lmeval_microbench.estimators import make_estimator
from lmeval_microbench.outside import (
    SourceView,
    beyond_weight,
    composed_interval,
)
from lmeval_microbench.outside.folds import extrapolation_folds
from lmeval_microbench.outside.guard import W_MIN, GuardBand
from lmeval_microbench.outside.readings import OwnLevelReading, make_reading
from lmeval_microbench.outside.readings.base import FlatScaleError, se_floor
from lmeval_microbench.outside.readings.checked import CheckedReading

LEVEL = 0.9
Z90 = float(norm.ppf(0.95))
Parts = dict[str, Any]
Interval = tuple[np.ndarray, np.ndarray, np.ndarray]
LOCATED_BY_DESHRUNK = ("checked", "deshrunk")
"""Readings that already place models by the de-shrunk reading: the refitted one must agree."""
MIN_FOLD_TARGETS = 10
"""Fewest upward fold targets the guard acted on that calibrate the fold-shrunk interval."""


def guard_parts(job: tuple[str, str, str]) -> Parts | None:
    """The guard's parts for every held-out model of one cell (None: recipe not guarded)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rebuilt = rebuilt_guard(job)
        if rebuilt is None:
            return None
        guarded, answers = rebuilt.guarded, rebuilt.held.values
        inner = guarded.inner_.predict_rows(answers, LEVEL)[:3]
        reading = guarded.reading_.read(answers, inner[0])
        located = guarded.reading_.locate(answers, inner[0])
        shipped = guarded.predict_rows(answers, LEVEL)[:3]
        view = source_view(rebuilt)
        precise = CheckedReading().fit(view)
        deshrunk = precise.deshrunk_.read(answers, inner[0])
        checked = precise.read(answers, inner[0])
        reach = None if guarded.reach_ is None else guarded.reach_.read(answers, inner[0])
        fold_misses, fold_reach = upward_fold_misses(rebuilt, view)
    if guarded.reading_name_ in LOCATED_BY_DESHRUNK and not np.allclose(located, deshrunk):
        raise AssertionError(f"{job[0]}: the refitted de-shrunk reading differs from the guard's")
    below, above_by, band = band_parts(
        guarded, reading, located, inner[0], (guarded.bottom_, guarded.top_)
    )
    return {
        "key": job[0],
        "recipe": job[1],
        "truth": rebuilt.held_truth,
        "inner": inner,
        "reading": reading,
        "located": located,
        "located_deshrunk": deshrunk,
        "located_checked": checked,
        "band": band,
        "top": guarded.top_,
        "bottom": guarded.bottom_,
        "guard_above": guarded.guard_above_,
        "floor": guarded.floor_,
        "reach": reach,
        "guard_band": guarded.guard_band_,
        "below": below,
        "above_by": above_by,
        "shipped": shipped,
        "fold_misses": fold_misses,
        "fold_reach": fold_reach,
    }


def band_parts(
    guarded: Any,
    reading: tuple[np.ndarray, np.ndarray],
    located: tuple[np.ndarray, np.ndarray],
    inner_value: np.ndarray,
    source_range: tuple[float, float],
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Which models lie towards the weakest of the sources' ``(bottom, top)``, how far above
    the top each is placed, and the guard's band, as the estimator's ``_predict`` makes them."""
    bottom, top = source_range
    below = located[0] < 0.5 * (top + bottom)
    above_by = np.maximum(located[0] - top, 0.0)
    band = guarded.guard_band_.edges(
        LEVEL, reading, inner_value, below, above_by, not guarded.guard_above_
    )
    return below, above_by, band


def source_view(rebuilt: Rebuilt) -> SourceView:
    """The view the rebuilt guard fitted its readings on, beside a refitted inner estimator's
    out-of-fold estimates on the fixed subset: the guard's own for the selections these cells
    use, which do not read the sources' scores (a supervised one's guard reads cross-fitted
    estimates that this refit does not make; :func:`guard_parts` checks the agreement)."""
    inner = make_estimator(rebuilt.guarded.inner).fit(
        rebuilt.whole_source, rebuilt.subset, rebuilt.source_truth, irt=rebuilt.irt
    )
    return SourceView.build(
        rebuilt.whole_source, rebuilt.subset, rebuilt.source_truth, inner.fixed_oof_
    )


def upward_fold_misses(rebuilt: Rebuilt, view: SourceView) -> tuple[np.ndarray, float]:
    """Sorted misses of the shipped guard's interval on the upward folds' targets it acted on
    (:func:`side_misses`), and how far above its fold's strongest training model the reading
    placed the furthest of them: each fold's inner fit, reading and reach refitted on the fold's
    training models, as the build's own folds fit them (``outside/folds.py``)."""
    guarded = rebuilt.guarded
    complete = ~np.isnan(rebuilt.sources.values).any(axis=1)  # the view's models
    ids = np.asarray(rebuilt.whole_source.model_ids)[complete]
    fit_fold = guarded._fold_fitter(
        rebuilt.whole_source.select_models(ids),
        rebuilt.subset,
        rebuilt.source_truth[complete],
        rebuilt.irt,
    )
    misses, reach = [], []
    for train, test in extrapolation_folds(view.target):
        oof, inner = fit_fold(train, test)
        fold = view.rows(train, oof)
        try:
            reading = make_reading(guarded.reading_name_).fit(fold)
        except FlatScaleError:
            continue
        answers = view.values[test]
        located = reading.locate(answers, inner[0])
        top, bottom = float(fold.target.max()), float(fold.target.min())
        reading_value = reading.read(answers, inner[0])
        below, above_by, band = band_parts(guarded, reading_value, located, inner[0], (bottom, top))
        own = OwnLevelReading().fit(fold).read(answers, inner[0])
        parts = {
            "inner": tuple(inner),
            "reading": reading_value,
            "located": located,
            "band": band,
            "top": top,
            "bottom": bottom,
            "guard_above": guarded.guard_above_,
            "floor": guarded.floor_,
            "reach": own if guarded.reach_ is not None else None,
        }
        acted = (shipped_weight(parts) > W_MIN) & ~below
        missed = side_misses(as_shipped(parts), view.target[test])
        misses.append(missed[acted])
        reach.append(above_by[acted])
    if not misses:
        return np.zeros(0), 0.0
    furthest = np.concatenate(reach)
    return np.sort(np.concatenate(misses)), float(furthest.max()) if furthest.size else 0.0


def side_misses(interval: Interval, truth: np.ndarray) -> np.ndarray:
    """How far each truth lies from the estimate, in units of the interval's side towards it
    (at most 1: covered)."""
    value, lower, upper = interval
    up = (truth - value) / np.maximum(upper - value, 1e-9)
    down = (value - truth) / np.maximum(value - lower, 1e-9)
    return np.where(truth >= value, up, down)


def _weights(parts: Parts, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The weight that widens, and the weight below the sources where only that side moves
    (None: the estimate moves on both sides), as the guard splits them: on a matrix whose
    target is not its mean only the side below moves."""
    if parts["guard_above"]:
        return weight, None
    value, se = parts["located"]
    return weight, beyond_weight(value, se, math.inf, parts["bottom"])


def _combine(
    parts: Parts,
    weight: np.ndarray,
    below: np.ndarray | None,
    moving: np.ndarray | None = None,
    reach_where: np.ndarray | None = None,
) -> Interval:
    """The guard's estimate and interval; ``below``: the weight below the sources where only
    that side moves (the lower edge then reaches the floor), ``moving``: a weight that moves
    the estimate in its stead (default: ``below``, else ``weight``), ``reach_where``: the
    models whose upper edge may reach the own-level reading's spread (default: all); the
    lower edge reaches it where it lies wholly under the weakest source, as the guard's does."""
    return composed_interval(
        parts["inner"],
        parts["reading"][0],
        parts["band"],
        weight,
        below,
        floor=parts["floor"],
        reach=parts["reach"],
        top=parts["top"],
        bottom=parts["bottom"],
        moving=moving,
        reach_where=reach_where,
    )


def _share_moved(weight: np.ndarray, below: np.ndarray | None, full: float = 1.0) -> np.ndarray:
    """Share of the way to the reading the estimate moves: 0 up to ``W_MIN``, all of it at
    ``full`` (the guard's own at 1), by ``below`` where only that side moves."""
    return np.clip(((weight if below is None else below) - W_MIN) / (full - W_MIN), 0.0, 1.0)


def _moved_by(
    parts: Parts, weight: np.ndarray, below: np.ndarray | None, share: np.ndarray
) -> Interval:
    """The guard's estimate and interval with the estimate moved ``share`` of the way: the
    moving weight that gives exactly that share once ``guarded_interval`` rescales it."""
    return _combine(parts, weight, below, W_MIN + (1 - W_MIN) * share)


def shipped_weight(parts: Parts) -> np.ndarray:
    return beyond_weight(*parts["located"], parts["top"], parts["bottom"])


def as_shipped(parts: Parts) -> Interval:
    return _combine(parts, *_weights(parts, shipped_weight(parts)))


def consistent(parts: Parts) -> Interval:
    """The shipped move, times the share of the reading's disagreement with the inner
    estimate that their noise does not explain."""
    weight, below = _weights(parts, shipped_weight(parts))
    inner_value, lower, upper = parts["inner"]
    reading, reading_se = parts["reading"]
    noise = se_floor(reading_se) ** 2 + ((upper - lower) / (2 * Z90)) ** 2
    gap = np.maximum((reading - inner_value) ** 2, 1e-12)
    agree = np.clip(1.0 - noise / gap, 0.0, 1.0)
    return _moved_by(parts, weight, below, _share_moved(weight, below) * agree)


def _even_prior_sides(parts: Parts) -> tuple[np.ndarray, np.ndarray]:
    """Posterior probabilities of lying above and below the sources, at even prior odds of
    inside and outside, the truth uniform inside [bottom, top] and on the rest of [0, 1]."""
    value, se = parts["located"]
    se = se_floor(se)
    top, bottom = parts["top"], parts["bottom"]
    mass = lambda a, b: norm.cdf((b - value) / se) - norm.cdf((a - value) / se)  # noqa: E731
    inside = mass(bottom, top) / max(top - bottom, 1e-3)
    rest = max(1.0 - (top - bottom), 1e-3)
    above, below = mass(top, 1.0) / rest, mass(0.0, bottom) / rest
    total = np.maximum(inside + above + below, 1e-300)
    return above / total, below / total


def even_prior(parts: Parts) -> Interval:
    """Outside weight as a posterior with even prior odds, truth uniform inside [bottom, top]
    and on the rest of [0, 1] outside."""
    above, below = _even_prior_sides(parts)
    return _combine(parts, *_weights(parts, above + below))


def _moved_below_by(parts: Parts, below: Callable[[Parts], np.ndarray]) -> Interval:
    """The shipped rule on a matrix whose target is its mean, with the estimate moved below
    the sources by the weight ``below`` gives instead of the shipped one; above them, and the
    interval (the weight that widens), as shipped. Elsewhere the shipped rule itself."""
    if not parts["guard_above"]:
        return as_shipped(parts)
    value, se = parts["located"]
    above = beyond_weight(value, se, parts["top"], -math.inf)
    return _combine(parts, shipped_weight(parts), None, moving=above + below(parts))


def even_prior_below(parts: Parts) -> Interval:
    """The estimate moved below the sources by the even-prior weight of lying below them
    (:func:`_even_prior_sides`)."""
    return _moved_below_by(parts, lambda p: _even_prior_sides(p)[1])


def steep(full: float) -> Callable[[Parts], Interval]:
    """The shipped weight, with the whole move reached at ``w = full`` instead of 1."""

    def variant(parts: Parts) -> Interval:
        weight, below = _weights(parts, shipped_weight(parts))
        return _moved_by(parts, weight, below, _share_moved(weight, below, full))

    return variant


def below_moves_only(clearly: bool) -> Callable[[Parts], Interval]:
    """The shipped rule on a matrix whose target is its mean, with the estimate moved below
    the sources only where the reading places the model below them with probability over
    ``1 - W_MIN`` (``clearly``), or never; above them it moves as shipped, and the interval
    is the shipped one's (the weight that widens is unchanged)."""

    def below(parts: Parts) -> np.ndarray:
        value, se = parts["located"]
        under = beyond_weight(value, se, math.inf, parts["bottom"])
        return np.where(clearly & (under > 1 - W_MIN), under, 0.0)

    return lambda parts: _moved_below_by(parts, below)


def located_by(key: str) -> Callable[[Parts], Interval]:
    """The shipped rule, with every reading placing models by the reading of ``key`` in the
    parts instead of by itself."""

    def variant(parts: Parts) -> Interval:
        located = {**parts, "located": parts[key]}
        return _combine(parts, *_weights(located, shipped_weight(located)))

    return variant


def band_alone(threshold: float) -> Callable[[Parts], Interval]:
    def variant(parts: Parts) -> Interval:
        value, lower, upper = as_shipped(parts)
        alone = shipped_weight(parts) >= threshold
        band_lower, band_upper = parts["band"]
        lower = np.where(alone, np.clip(np.minimum(band_lower, value), 0, 1), lower)
        upper = np.where(alone, np.clip(np.maximum(band_upper, value), 0, 1), upper)
        return value, lower, upper

    return variant


def reach_inside(parts: Parts) -> Interval:
    """The shipped rule, with the reach only where the guard did not act (weight up to
    ``W_MIN``): where it acted the band already spans the reading."""
    weight, below = _weights(parts, shipped_weight(parts))
    return _combine(parts, weight, below, reach_where=weight <= W_MIN)


def no_reach(parts: Parts) -> Interval:
    """The shipped rule without the reach."""
    weight, below = _weights(parts, shipped_weight(parts))
    return _combine(parts, weight, below, reach_where=np.zeros(weight.shape, bool))


def least_quantile_above(least: float) -> Callable[[Parts], Interval]:
    """The shipped rule, with the band's least quantile ``least`` instead of the shipped one
    (``MIN_Q_ABOVE``) for models above the sources (below them it stays ``MIN_Q``)."""

    def variant(parts: Parts) -> Interval:
        band: GuardBand = parts["guard_band"]
        found = conformal_quantile(band.residuals, LEVEL) if band.residuals.size else math.inf
        if not parts["guard_above"] or not math.isfinite(found):
            return as_shipped(parts)  # the band above is the inner one, or not from folds
        lower, upper = parts["band"]
        # the shipped quantile as the band computes it; the variant's from the same errors
        shipped_q, new_q = band.quantile(LEVEL), max(found, least)
        shrink = np.where(parts["below"], 0.0, (shipped_q - new_q) * parts["reading"][1])
        return _combine(
            {**parts, "band": (lower + shrink, upper - shrink)},
            *_weights(parts, shipped_weight(parts)),
        )

    return variant


def fold_calibrated(
    within_reach: bool = False, level: float = LEVEL
) -> Callable[[Parts], Interval]:
    """The shipped rule, with the interval of every model the guard acted on above the
    sources drawn towards the estimate by the conformal quantile at ``level`` of the upward
    folds' misses (their largest at ``level`` 1; never widened; unchanged with fewer than
    ``MIN_FOLD_TARGETS`` of them); with ``within_reach`` only for models placed no further
    above the sources than the furthest fold target lay above its fold's training models."""

    def variant(parts: Parts) -> Interval:
        value, lower, upper = as_shipped(parts)
        misses = parts["fold_misses"]
        if misses.size < MIN_FOLD_TARGETS:
            found = 1.0
        else:
            found = float(misses[-1]) if level >= 1 else conformal_quantile(misses, level)
        scale = min(found, 1.0)
        acted = (shipped_weight(parts) > W_MIN) & ~parts["below"]
        if within_reach:
            acted &= parts["above_by"] <= parts["fold_reach"]
        lower = np.where(acted, np.clip(value - scale * (value - lower), 0, 1), lower)
        upper = np.where(acted, np.clip(value + scale * (upper - value), 0, 1), upper)
        return value, lower, upper

    return variant


VARIANTS: dict[str, Callable[[Parts], Interval]] = {
    "as shipped": as_shipped,
    "move: consistent": consistent,
    "move: even prior": even_prior,
    "move: whole at w = 0.5": steep(0.5),
    "move: whole at w = 0.25": steep(0.25),
    "move below: never": below_moves_only(False),
    "move below: only the clearly below": below_moves_only(True),
    "move below: even prior": even_prior_below,
    "locate: de-shrunk": located_by("located_deshrunk"),
    "locate: checked": located_by("located_checked"),
    "interval: reading's band where w >= 0.9": band_alone(0.9),
    "interval: reading's band where w >= 0.99": band_alone(0.99),
    "interval: reach only where w <= W_MIN": reach_inside,
    "interval: no reach": no_reach,
    "interval: least quantile 1 above": least_quantile_above(1.0),
    "interval: least quantile 0.25 above": least_quantile_above(0.25),
    "interval: least quantile 0 above": least_quantile_above(0.0),
    "interval: union shrunk on upward folds": fold_calibrated(),
    "interval: union shrunk within the folds' reach": fold_calibrated(within_reach=True),
    "interval: union shrunk to the folds' largest miss": fold_calibrated(level=1.0),
}


def score_cell(parts: Parts) -> dict[str, Any]:
    """Every variant's MAE, coverage and width on one cell (points), and the check."""
    truth = parts["truth"]
    shipped = np.asarray(parts["shipped"])
    recombined = np.asarray(as_shipped(parts))
    if not np.allclose(recombined, shipped, atol=1e-9):
        raise AssertionError(f"{parts['key']}: the recombined guard differs from the estimator")
    out: dict[str, Any] = {
        "key": parts["key"],
        "recipe": parts["recipe"],
        "fold_targets": int(parts["fold_misses"].size),
    }
    for name, variant in VARIANTS.items():
        value, lower, upper = variant(parts)
        out[name] = {
            "mae": float(100 * np.mean(np.abs(value - truth))),
            "coverage": float(np.mean((lower <= truth) & (truth <= upper))),
            "width": float(100 * np.mean(upper - lower)),
        }
    return out


def measure(job: tuple[str, str, str]) -> dict[str, Any] | None:
    parts = guard_parts(job)
    return None if parts is None else score_cell(parts)


def summary(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for cell in cells:
        groups.setdefault(group_of(cell["key"]), []).append(cell)
    groups[("every", "cell", "")] = cells
    rows = []
    for (family, sources, protocol), members in groups.items():
        for name in VARIANTS:
            found = [c[name] for c in members]
            coverage = np.array([f["coverage"] for f in found])
            rows.append(
                {
                    "group": f"{family} {sources} {protocol}".strip(),
                    "variant": name,
                    "cells": len(members),
                    "mae": float(np.mean([f["mae"] for f in found])),
                    "coverage": float(coverage.mean()),
                    "min_coverage": float(coverage.min()),
                    "under": int(np.sum(coverage < 0.85)),
                    "width": float(np.mean([f["width"] for f in found])),
                }
            )
    return rows


def render(rows: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [
        "## The guard's rule against its alternatives",
        "",
        f"Generated by `tools/bench_guard_variants.py`; command: `{info['command']}`; "
        f"{info['seconds']:.0f} s; load average {info['load'][0]} -> {info['load'][1]} "
        "(2 shared cores). The cells of `bench/choice_rules.json` whose chosen recipe is read "
        "with `guarded` (with `--weak` also the weakest-fifth cells of `bench/peers.json`, "
        "with the default build's recipe there), rebuilt on their sources; every held-out "
        "model's guard parts "
        "recombined by each rule (see the script's docstring; `as shipped` is checked to equal "
        "the estimator's output). MAE and width in points; coverage of the estimator's own "
        "90 % interval, before `--method auto`'s factor: mean over cells, least cell, and cells "
        "under 0.85.",
        "",
        "| cells | variant | n | MAE | coverage | least | under 0.85 | width |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: (r["group"] == "every cell", r["group"])):
        lines.append(
            f"| {r['group']} | {r['variant']} | {r['cells']} | {r['mae']:.2f} "
            f"| {r['coverage']:.2f} | {r['min_coverage']:.2f} | {r['under']} "
            f"| {r['width']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    results, info, out = run_cells(
        measure, "bench_guard_variants.py", argv, __doc__.splitlines()[0]
    )
    rows = summary(results)
    payload = {"info": info, "summary": rows, "cells": results}
    write_report(out, "guard_variants", payload, render(rows, info))


if __name__ == "__main__":
    main()
