"""The conformal bands of an adaptive pool: one per checkpoint of its cross-fitted runs, the
side bands of its directed folds (the weakest and the strongest source models replayed with the
map fitted on the others), and the top band (how far above its span a model the map reads as
among the sources may lie when it is stronger than all of them). :class:`.scoring.ScoreMap`
widens a run's span by them; see that module for what each band is fitted on and where it
applies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

from .._conformal import ConformalBand, conformal_quantile, fit_band
from ..errors import InputError
from ..outside.guard import W_MIN
from ..outside.placement import Placement

LEVELS = (0.8, 0.9, 0.95)
"""Interval levels a pool stores quantiles for."""
BELOW, ABOVE = "below", "above"
SIDE_EDGES = {BELOW: "top", ABOVE: "bottom"}
"""Each side of the sources, and the key of its edge in the pool state (see SideBands)."""
MIN_TOP_MODELS = 20
"""Fewer fold models read inside the fold map's range at a checkpoint than this: no top band
there (19 is the least number whose 95 % conformal quantile is finite)."""


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
        """The band of each model's distance from the truth to its span (:mod:`.scoring`)."""
        low, high = span
        outside = np.maximum(0.0, np.maximum(truth - high, low - truth))
        band = fit_band(prediction, prediction + outside, "binned")
        quantiles = {level: band.region_quantiles(level) for level in LEVELS}
        return cls(n_items, band, quantiles)

    def half_width(self, prediction: np.ndarray, level: float) -> np.ndarray:
        """Quantile times scale; an unbounded quantile stays unbounded (not NaN at scale 0)."""
        region = self.shape.region_of(prediction)
        quantile = stored(self.quantiles, level)[region]
        with np.errstate(invalid="ignore"):
            return np.where(np.isinf(quantile), np.inf, quantile * self.shape.scale(prediction))

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_items": self.n_items,
            "mode": self.shape.mode,
            "knots": rounded(self.shape.knots),
            "scales": rounded(self.shape.scales),
            "edges": rounded(self.shape.edges),
            "centre": self.shape.centre,
            "spread": self.shape.spread,
            "quantiles": {str(level): quantiles_to_json(q) for level, q in self.quantiles.items()},
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
        where = f"band at {obj['n_items']} items"
        quantiles = {float(k): quantiles_from_json(v, where) for k, v in obj["quantiles"].items()}
        regions = shape.edges.size + 1
        if any(q.shape != (regions,) for q in quantiles.values()):
            raise InputError(
                f"band at {obj['n_items']} items: quantiles do not match {regions} regions"
            )
        return cls(int(obj["n_items"]), shape, quantiles)


def stored(quantiles: Mapping[float, np.ndarray], level: float) -> np.ndarray:
    """A band's quantiles at ``level``, refused in one line where the pool kept none."""
    if level not in quantiles:
        raise InputError(f"interval level {level} not stored; pools keep {list(quantiles)}")
    return quantiles[level]


def at_checkpoint(marks: Sequence[int], n_items: int) -> int:
    """The position in ``marks`` of the largest checkpoint at most ``n_items``; the first
    where none is (a run shorter than every checkpoint gets the widest band)."""
    fitting = [k for k, mark in enumerate(marks) if mark <= n_items]
    return fitting[-1] if fitting else 0


def rounded(values: np.ndarray) -> list[float]:
    return [round(float(v), 7) for v in np.asarray(values).reshape(-1)]


def quantiles_to_json(values: np.ndarray) -> list[float | None]:
    """Stored quantiles, an unbounded one (too few fold models for its level: e.g. 95 % from
    fewer than 19) as ``null``: strict JSON has no infinity."""
    return [None if np.isinf(v) else v for v in rounded(values)]


def quantiles_from_json(values: Sequence[float | None], where: str) -> np.ndarray:
    """Stored quantiles back, ``null`` as unbounded; anything else must be a number >= 0."""
    try:
        found = np.asarray([np.inf if v is None else float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: quantiles must be numbers or null ({exc})") from None
    if np.any(np.isnan(found)) or np.any(found < 0):
        raise InputError(f"{where}: quantiles must be numbers >= 0 (or null: unbounded)")
    return found


@dataclass(frozen=True)
class SideBands:
    """The bands of the directed folds on one side of the source models.

    ``below``: the weakest source models replayed with the map fitted on stronger ones;
    ``above``: the strongest, fitted on weaker ones. A model beyond the sources is read worse
    than one among them (the map regresses towards them); these bands carry that error into
    its interval.

    Which runs get them: those whose ability posterior places them beyond the sources, with
    probability over :data:`~lmeval_microbench.outside.guard.W_MIN` (the static guard's
    rule), on the side of ``ability_edge``: the whole-pool ability of the weakest (below) or
    the strongest (above) percent of the source models (:func:`.pool.ability_edges`). The
    estimate cannot tell: a model beyond the sources is estimated *inside* their range, and
    an estimate in the weakest fifth's range is most often a model of that fifth. Applied
    there (up to ``edge``, the best true score of the fold's models: the rule of pools saved
    before ``ability_edge``), the bands replayed from models stronger than the whole fifth
    gave SmolLM2-135M, inside the leaderboard's range, HellaSwag 25.0 [0.0, 81.3] after 25
    items (before this rule; ``bench/demo_adaptive.md`` has the run now, ``bench/adaptive.md``
    the rule's effect on replays).
    """

    side: str
    edge: float
    folds: tuple[tuple[Band, ...], ...]
    ability_edge: float | None = None

    @classmethod
    def fit(
        cls,
        side: str,
        folds: Sequence[
            tuple[Mapping[int, np.ndarray], Mapping[int, tuple[np.ndarray, np.ndarray]]]
        ],
        truth: np.ndarray,
        ability_edge: float | None = None,
    ) -> SideBands:
        _check_side(side)
        edge = float(np.max(truth) if side == BELOW else np.min(truth))
        bands = tuple(fit_bands(pred, spans, truth) for pred, spans in folds)
        return cls(side, edge, bands, ability_edge)

    def beyond(self, theta: np.ndarray, se: np.ndarray) -> np.ndarray:
        """Posterior probability (normal) that the ability lies beyond ``ability_edge``."""
        if self.ability_edge is None:
            raise InputError(f"the {self.side} side bands of this pool have no ability edge")
        return beyond_edge(theta, se, self.ability_edge, self.side)

    def applies(
        self, prediction: np.ndarray, ability: tuple[np.ndarray, np.ndarray] | None = None
    ) -> np.ndarray:
        """Where the bands apply: by the run's ``ability`` (posterior mean, sd), or, without
        it or without an ability edge, by the estimate (see the class)."""
        if ability is not None and self.ability_edge is not None:
            return self.beyond(*ability) > W_MIN
        return prediction <= self.edge if self.side == BELOW else prediction >= self.edge

    def to_dict(self) -> dict[str, Any]:
        folds = [[band.to_dict() for band in bands] for bands in self.folds]
        found: dict[str, Any] = {SIDE_EDGES[self.side]: self.edge, "folds": folds}
        if self.ability_edge is not None:
            found["ability_edge"] = self.ability_edge
        return found

    @classmethod
    def from_dict(cls, side: str, obj: Mapping[str, Any]) -> SideBands:
        _check_side(side)
        folds = tuple(tuple(Band.from_dict(b) for b in fold) for fold in obj["folds"])
        ability = obj.get("ability_edge")
        return cls(
            side, float(obj[SIDE_EDGES[side]]), folds, None if ability is None else float(ability)
        )


def beyond_edge(theta: np.ndarray, se: np.ndarray, edge: float, side: str) -> np.ndarray:
    """Posterior probability (normal, mean ``theta``, sd ``se``) that the ability lies
    beyond ``edge`` on ``side``."""
    z = (edge - np.asarray(theta, dtype=np.float64)) / np.maximum(se, 1e-9)
    return norm.cdf(z) if side == BELOW else norm.sf(z)


def run_placement(
    sides: Sequence[SideBands], ability: tuple[np.ndarray, np.ndarray]
) -> Placement | None:
    """Where runs' ability posteriors (mean, sd) place them against the source models: the
    probability that the ability lies above the sides' upper ``ability_edge`` and under the
    lower one (None: a pool without both edges, saved before them).

    The static guard places a model by a reading of its score against the sources' scores
    (:mod:`..outside.placement`); an adaptive run has no fixed subset to read, and its
    ability posterior is what the pool's side bands already act on. The edges are the
    abilities of the strongest and the weakest :data:`.pool.EDGE_SHARE` of the sources, so a
    run named ``above`` lies above all but that share of them, more likely than not
    (``tools/bench_adaptive_placement.py`` measures how often such a run is beyond them all).
    """
    edges = {side.side: side for side in sides if side.ability_edge is not None}
    if set(edges) != {ABOVE, BELOW}:
        return None
    return Placement(edges[ABOVE].beyond(*ability), edges[BELOW].beyond(*ability))


def _check_side(side: str) -> None:
    if side not in SIDE_EDGES:
        raise InputError(f"unknown side {side!r}; expected one of {sorted(SIDE_EDGES)}")


def fit_bands(
    predictions: Mapping[int, np.ndarray],
    spans: Mapping[int, tuple[np.ndarray, np.ndarray]],
    truth: np.ndarray,
) -> tuple[Band, ...]:
    """One band per checkpoint, in checkpoint order, from cross-fitted predictions and spans."""
    return tuple(Band.fit(n, predictions[n], truth, spans[n]) for n in sorted(predictions))


@dataclass(frozen=True)
class TopBand:
    """How far above its span the truth of a model lies that the map reads as among the sources
    while it is stronger than all of them: per checkpoint, conformal quantiles of that distance.

    Fitted on the upward fold that extrapolates least (the strongest fifth of the sources,
    replayed with the map fitted on the other four fifths), on the fold's models whose estimate
    lies at or under the strongest true score that map was fitted on: models beyond its sources
    that it reads as among them. The side bands cannot show them. A run gets those by its ability
    posterior, and such a model's ability lies among the sources'; fitted on every fold model,
    they are narrow because the fold's spans cover the models the ability places beyond
    (the leaderboard's strongest fifth of ARC held out: 28 % of the runs had their ability
    inside the sources' edge, and their 90 % intervals covered 0.20-0.32 of them at 25-50
    items). :meth:`.scoring.ScoreMap.interval` raises the upper edge of every run whose 90 %
    interval reaches the strongest source's true score by this band.
    """

    n_items: tuple[int, ...]
    quantiles: Mapping[float, np.ndarray]
    """Per level, one distance (fractions) per checkpoint of ``n_items``."""

    @classmethod
    def fit(
        cls,
        predictions: Mapping[int, np.ndarray],
        spans: Mapping[int, tuple[np.ndarray, np.ndarray]],
        truth: np.ndarray,
        top: float,
    ) -> TopBand | None:
        """The band of the fold models whose estimate lies at or under ``top``, the strongest
        true score of the models the fold's map was fitted on (None: no checkpoint with
        :data:`MIN_TOP_MODELS` of them)."""
        marks, found = [], {level: [] for level in LEVELS}
        for n in sorted(predictions):
            inside = predictions[n] <= top
            if inside.sum() < MIN_TOP_MODELS:
                continue
            high = np.maximum(spans[n][1], predictions[n])[inside]
            above = np.sort(np.maximum(0.0, truth[inside] - high))
            marks.append(n)
            for level in LEVELS:
                found[level].append(conformal_quantile(above, level))
        if not marks:
            return None
        return cls(tuple(marks), {level: np.asarray(q) for level, q in found.items()})

    def reach(self, n_items: int, level: float) -> float:
        """The distance at the largest checkpoint at most ``n_items`` (the first one below it)."""
        return float(stored(self.quantiles, level)[at_checkpoint(self.n_items, n_items)])

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_items": list(self.n_items),
            "quantiles": {str(level): quantiles_to_json(q) for level, q in self.quantiles.items()},
        }

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> TopBand:
        marks = tuple(int(n) for n in obj["n_items"])
        found = obj["quantiles"].items()
        quantiles = {float(k): quantiles_from_json(v, "top band") for k, v in found}
        if not marks or list(marks) != sorted(set(marks)):
            raise InputError("top band: n_items must be increasing checkpoints")
        if any(q.shape != (len(marks),) for q in quantiles.values()):  # >= 0: quantiles_from_json
            raise InputError(f"top band: quantiles must be {len(marks)} distances >= 0 per level")
        return cls(marks, quantiles)
