"""Cross-conformal intervals: held-out residuals of the source models, scaled by score level.

An estimator is refitted K times, each time without one fold of source models, and predicts
that fold. The absolute residuals ``|truth - prediction|``, divided by a scale ``s(prediction)``,
are exchangeable with the residual of a new model drawn like the source models, so the
``ceil((n + 1) level) / n`` empirical quantile ``q`` of the scaled residuals gives the interval
``prediction +- q s(prediction)`` with coverage close to ``level`` (Vovk's cross-conformal
prediction; exact finite-sample coverage holds for split conformal, cross-fitting trades a small
slack for using every source model).

Errors are not the same at every score: near 0 and 1 a model's full score is pinned down and
residuals shrink, in the middle they are largest. The scale captures that:

``constant``  s = 1 (plain absolute residuals: one width everywhere).
``binomial``  s = sqrt(p (1 - p)) with p clipped to [0.02, 0.98] (the shape of binomial noise).
``binned``    s = mean |residual| in quantile bins of the prediction, linearly interpolated
              between bin centres and floored at a quarter of the overall mean (learned shape).

Regions (Mondrian conformal). One quantile of all scaled residuals gives the promised coverage
*on average over models*, not where a user's model lies: the scale matches the mean residual,
not its tail, and where a few source models with a given subset score have very different full
scores (the source models disagree about what that subset score means) the tail is heavier
than elsewhere, so such models are covered far less often than 90 %. With enough source
models the prediction range is therefore cut into regions (equal-count bins of the cross-fitted
predictions, at least ``MIN_PER_REGION`` residuals each, at most ``MAX_REGIONS``) and the
quantile is taken per region: each region gets its own finite-sample guarantee, and a region
whose source models disagree gets a wider interval. That local residual spread is what "wider
where the source models disagree" means for a residual-based band. On the whole leaderboard
the binned scale already follows most of it: coverage per third moves by at most 0.01
(``bench/populations.md``, population ``all``).

Few source models (fewer than ``2 * MIN_PER_REGION``: one region). Neither the shape of the
errors nor a quantile per region can be learned from 15-99 residuals, and a random handful of
models has almost no members at the ends of the score range, where errors are largest (on the
leaderboard, weak models are the odd ones). The scale is then multiplied by a distance term
``sqrt(1 + z^2)``, ``z = (prediction - centre) / spread`` with the mean and standard deviation
of the source models' cross-fitted predictions: the shape of a regression prediction interval
(wider away from the data), an assumption, measured in ``bench/populations.md``.

Recalibrated width (``widen`` >= 1, :mod:`lmeval_microbench.auto.widen`). The residuals refit
only the estimator's head, on items and an IRT fit chosen once on all source models; with a few
dozen sources that optimism under-covers a new model. ``--method auto`` repeats selection and
fit in its random folds, measures by how much the band falls short there, and the half-width
is multiplied by that factor.

A band stored without these fields (older bundles) loads and gives the same intervals as
before, and ``fit_band(..., conditional=False)`` fits that one-quantile band for comparisons.

A leaf of the package (it imports only :mod:`.errors`), not part of ``estimators/``: the
estimators, the joint estimator, adaptive pools, the readers of runs and the guards of
``outside/`` all use it, and ``outside/`` must not import the estimators package, whose
guarded estimator imports ``outside/`` (that cycle broke ``import lmeval_microbench.outside``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .errors import InputError

SCALE_MODES = ("constant", "binomial", "binned")
MIN_PER_REGION = 50
"""Fewest residuals of a region: its 90 % quantile is then the 46th of 50 or more."""
MAX_REGIONS = 6
_BINOMIAL_CLIP = 0.02
_MIN_PER_BIN = 100
_MAX_BINS = 10
_FLOOR_FRACTION = 0.25
_TINY = 1e-6


def check_level(level: float) -> float:
    """Nominal coverage must lie strictly between 0 and 1."""
    level = float(level)
    if not 0.0 < level < 1.0:
        raise InputError(f"level must lie strictly between 0 and 1, got {level!r}")
    return level


def conformal_quantile(sorted_residuals: np.ndarray, level: float) -> float:
    """The ``ceil((n + 1) level)``-th smallest residual (inf if there are too few)."""
    n = sorted_residuals.size
    rank = math.ceil((n + 1) * check_level(level))
    return math.inf if rank > n else float(sorted_residuals[rank - 1])


def _empty() -> np.ndarray:
    return np.zeros(0)


@dataclass(frozen=True)
class ConformalBand:
    """A fitted interval rule: scale knots and the sorted scaled residuals of the source models.

    ``residuals`` pools every region; ``edges`` (increasing cut points on the predicted score)
    and ``region_residuals`` (sorted, one array per region) are empty for a one-region band.
    ``spread`` > 0 turns on the distance term of few-model bands (see the module docstring).
    """

    mode: str
    knots: np.ndarray
    scales: np.ndarray
    residuals: np.ndarray
    edges: np.ndarray = field(default_factory=_empty)
    region_residuals: tuple[np.ndarray, ...] = ()
    centre: float = 0.0
    spread: float = 0.0
    fit_data: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(
        default=None, compare=False, repr=False
    )
    """Cross-fitted predictions, truths and keys it was fitted on (not saved; see :meth:`refit`)."""
    widen: float = 1.0
    """Factor on every half-width (>= 1; see the module docstring)."""

    def scale(self, prediction: np.ndarray) -> np.ndarray:
        """Residual scale at each predicted score (fractions in [0, 1])."""
        prediction = np.asarray(prediction, dtype=np.float64)
        if self.mode == "constant":
            shape = np.ones_like(prediction)
        elif self.mode == "binomial":
            p = np.clip(prediction, _BINOMIAL_CLIP, 1.0 - _BINOMIAL_CLIP)
            shape = np.sqrt(p * (1.0 - p))
        else:
            shape = np.interp(prediction, self.knots, self.scales)
        if self.spread > 0:
            shape = shape * np.sqrt(1.0 + ((prediction - self.centre) / self.spread) ** 2)
        return shape

    def quantile(self, level: float) -> float:
        """Finite-sample conformal quantile of all scaled residuals (inf if too few)."""
        return conformal_quantile(self.residuals, level)

    def region_of(self, prediction: np.ndarray) -> np.ndarray:
        """Region index of each predicted score (a prediction on an edge is in the upper one)."""
        return np.searchsorted(self.edges, np.asarray(prediction, dtype=np.float64), "right")

    def region_quantiles(self, level: float) -> np.ndarray:
        """The quantile of each region's scaled residuals.

        A region with too few residuals for ``level`` (e.g. 99 % from 50) takes the larger of
        the pooled quantile and its own largest residual rather than an infinite interval.
        """
        pooled = self.quantile(level)
        if not self.region_residuals:
            return np.array([pooled])
        out = [conformal_quantile(r, level) for r in self.region_residuals]
        return np.array(
            [
                q if math.isfinite(q) else max(pooled, float(r[-1]))
                for q, r in zip(out, self.region_residuals, strict=True)
            ]
        )

    def half_width(self, prediction: np.ndarray, level: float) -> np.ndarray:
        """Interval half-width at each predicted score: its region's quantile times the scale."""
        prediction = np.asarray(prediction, dtype=np.float64)
        quantiles = self.region_quantiles(level)[self.region_of(prediction)]
        return self.widen * quantiles * self.scale(prediction)

    def widened(self, factor: float) -> ConformalBand:
        """This band with its half-widths multiplied by ``factor`` (>= 1) instead."""
        return replace(self, widen=_checked_widen(factor))

    def refit(self, **options: Any) -> ConformalBand:
        """The band refitted on the same residuals with other :func:`fit_band` options.

        For measurements (``conditional=False`` is the band before regions); only a band fitted
        in this process has its residuals at hand, a loaded one has not.
        """
        if self.fit_data is None:
            raise InputError("a loaded conformal band cannot be refitted (no source residuals)")
        prediction, truth, key = self.fit_data
        return fit_band(prediction, truth, self.mode, key=key, **options)

    def to_dict(self) -> dict[str, Any]:
        """Plain lists; a band without regions or distance term writes only the older fields."""
        out: dict[str, Any] = {
            "mode": self.mode,
            "knots": self.knots.tolist(),
            "scales": self.scales.tolist(),
            "residuals": self.residuals.tolist(),
        }
        if self.region_residuals:
            out["edges"] = self.edges.tolist()
            out["region_residuals"] = [r.tolist() for r in self.region_residuals]
        if self.spread > 0:
            out["centre"], out["spread"] = self.centre, self.spread
        if self.widen != 1.0:
            out["widen"] = self.widen
        return out

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> ConformalBand:
        try:
            band = cls(
                str(payload["mode"]),
                np.asarray(payload["knots"], dtype=np.float64),
                np.asarray(payload["scales"], dtype=np.float64),
                np.asarray(payload["residuals"], dtype=np.float64),
                np.asarray(payload.get("edges", []), dtype=np.float64).reshape(-1),
                tuple(
                    np.asarray(r, dtype=np.float64).reshape(-1)
                    for r in payload.get("region_residuals", [])
                ),
                float(payload.get("centre", 0.0)),
                float(payload.get("spread", 0.0)),
                widen=_checked_widen(payload.get("widen", 1.0)),
            )
        except KeyError as exc:
            raise InputError(f"conformal band lacks field {exc.args[0]!r}") from exc
        _check_regions(band)
        return band


def _checked_widen(factor: Any) -> float:
    """A width factor must be a finite number of at least 1 (a band is only ever widened)."""
    try:
        value = float(factor)
    except (TypeError, ValueError):
        value = math.nan
    if not (math.isfinite(value) and value >= 1.0):
        raise InputError(f"conformal band: widen must be a finite number >= 1, got {factor!r}")
    return value


def _check_regions(band: ConformalBand) -> None:
    """Edges increasing, one non-empty residual array per region (or no regions at all)."""
    if not band.region_residuals and band.edges.size == 0:
        return
    if len(band.region_residuals) != band.edges.size + 1:
        raise InputError(
            f"conformal band has {band.edges.size} region edges but "
            f"{len(band.region_residuals)} residual arrays (expected one more than edges)"
        )
    if np.any(np.diff(band.edges) <= 0) or any(r.size == 0 for r in band.region_residuals):
        raise InputError("conformal band regions: edges must increase and no region be empty")


def binned_scale(prediction: np.ndarray, abs_residual: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knots (mean prediction per bin) and scales (mean |residual| per bin, floored).

    Bins are quantile bins of the prediction with at least ``_MIN_PER_BIN`` models each (at
    most ``_MAX_BINS``), so each bin mean is stable; the floor keeps a bin that happened to
    have tiny residuals from producing an interval of zero width. Models with equal
    predictions share a bin (a cut moves past the tie), as they share every later interval.
    """
    n = prediction.size
    n_bins = int(np.clip(n // _MIN_PER_BIN, 1, _MAX_BINS))
    order = np.argsort(prediction, kind="stable")
    ordered = prediction[order]
    cuts = set()
    for cut in (n * k // n_bins for k in range(1, n_bins)):
        while 0 < cut < n and ordered[cut] == ordered[cut - 1]:
            cut += 1
        if cut < n:
            cuts.add(cut)
    groups = np.split(order, sorted(cuts))
    knots = np.array([prediction[g].mean() for g in groups])
    scales = np.array([abs_residual[g].mean() for g in groups])
    floor = max(_FLOOR_FRACTION * float(abs_residual.mean()), _TINY)
    scales = np.maximum(scales, floor)
    knots, unique_at = np.unique(knots, return_index=True)
    return knots, scales[unique_at]


def region_edges(prediction: np.ndarray, min_per_region: int = MIN_PER_REGION) -> np.ndarray:
    """Cut points of equal-count regions of ``prediction`` with ``min_per_region`` each.

    Ties can make a region smaller than planned (many predictions clipped to 0, say): the
    smallest region is then merged into its smaller neighbour until every region is big enough.
    """
    n = prediction.size
    n_regions = int(np.clip(n // max(int(min_per_region), 1), 1, MAX_REGIONS))
    ordered = np.sort(prediction)
    cuts = [n * k // n_regions for k in range(1, n_regions)]
    edges = np.unique([(ordered[c - 1] + ordered[c]) / 2.0 for c in cuts])
    while edges.size:
        counts = np.bincount(np.searchsorted(edges, prediction, "right"), minlength=edges.size + 1)
        small = int(np.argmin(counts))
        if counts[small] >= min_per_region:
            break
        # drop the edge towards the smaller neighbour (the only one at either end)
        if small == 0 or (small < edges.size and counts[small + 1] <= counts[small - 1]):
            edges = np.delete(edges, small)
        else:
            edges = np.delete(edges, small - 1)
    return edges


def tie_key(cross_fitted: np.ndarray, fitted: np.ndarray) -> np.ndarray:
    """Cross-fitted predictions, averaged over models the fitted head predicts alike.

    Models with the same answers get the same prediction from the head, as would a new model
    with those answers; their cross-fitted predictions differ only by which models each fold
    left out, and that jitter sorts a tied group by its own residuals. Averaged within the
    group, the key puts it in one bin and one region; a model with no twin keeps its own
    cross-fitted prediction (what a new model's prediction is like).
    """
    _, group = np.unique(fitted, return_inverse=True)
    sums = np.bincount(group, weights=cross_fitted)
    return (sums / np.bincount(group))[group]


def fit_band(
    prediction: np.ndarray,
    truth: np.ndarray,
    mode: str = "binned",
    *,
    conditional: bool = True,
    min_per_region: int = MIN_PER_REGION,
    key: np.ndarray | None = None,
) -> ConformalBand:
    """Fit the interval rule from cross-fitted predictions and true scores of source models.

    ``conditional=False`` gives one quantile for every score and no distance term (the band
    of earlier versions); see the module docstring for what ``conditional`` adds.

    ``key`` (default: ``prediction``) is the score each residual is filed under for the
    scale, the regions and the distance term. Estimators pass their cross-fitted
    predictions averaged over models the fitted head predicts alike
    (:func:`tie_key`): on few items hundreds of source models
    share one answer pattern, and the cross-fit jitter inside such a group (leaving a strong
    model out lowers its prediction) would sort it by its own residuals, cut bins and regions
    through it, and leave the group's shared prediction a slice of small residuals.
    """
    if mode not in SCALE_MODES:
        raise InputError(f"unknown interval scale {mode!r}; expected one of {SCALE_MODES}")
    prediction = np.asarray(prediction, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    if prediction.shape != truth.shape or prediction.ndim != 1 or prediction.size == 0:
        raise InputError(
            "conformal fit needs two equal-length 1-D arrays, "
            f"got {prediction.shape} and {truth.shape}"
        )
    key = prediction if key is None else np.asarray(key, dtype=np.float64)
    if key.shape != prediction.shape:
        raise InputError(
            f"conformal fit: key has shape {key.shape}, predictions {prediction.shape}"
        )
    abs_residual = np.abs(truth - prediction)
    if mode == "binned":
        knots, scales = binned_scale(key, abs_residual)
    else:
        knots, scales = np.zeros(0), np.zeros(0)
    edges = region_edges(key, min_per_region) if conditional else np.zeros(0)
    spread = float(key.std()) if conditional and edges.size == 0 else 0.0
    centre = float(key.mean()) if spread > _TINY else 0.0
    shape = ConformalBand(mode, knots, scales, np.zeros(0), centre=centre, spread=spread)
    scaled = abs_residual / np.maximum(shape.scale(key), _TINY)
    region = np.searchsorted(edges, key, "right")
    parts = tuple(np.sort(scaled[region == k]) for k in range(edges.size + 1)) if edges.size else ()
    return ConformalBand(
        mode,
        knots,
        scales,
        np.sort(scaled),
        edges,
        parts,
        centre,
        spread if spread > _TINY else 0.0,
        (prediction, truth, key),
    )
