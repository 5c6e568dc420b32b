"""The guard: how far outside the sources a reading places a model, and what follows.

``w = P(truth above the strongest source) + P(truth below the weakest source)`` under a
normal reading ``value +- se``. The estimate moves from the inner estimator's towards the
reading by ``(w - W_MIN) / (1 - W_MIN)``: nothing changes for a model the reading places
inside the sources (``w`` up to :data:`W_MIN`), and a model far outside gets the reading
alone. The interval of a model with ``w`` above
:data:`W_MIN` spans the inner interval and the reading's own, ``value +- q se``, where ``q``
is the conformal quantile of the reading's scaled errors on the sources' own extrapolation
folds (:mod:`.folds`): how wrong the reading was where the sources themselves extrapolate,
upward folds for a model above the sources and downward ones for a model below them, but
never below :data:`MIN_Q` below the sources and :data:`MIN_Q_ABOVE` above them. The folds
reach a fifth of the sources beyond the rest, and a reading that was exact there (a subset of
nearly every item, whose missing items every source answered alike) says nothing of a model
further out: on HellaSwag's weakest fifth such a band gave intervals 2.7 points wide that held
for 74 % of the models. A floor at the normal quantile (1.64) went too far the other way:
where a reading's standard error is pessimistic it widened MMLU's strongest fifth at 50 items
from 4.6 to 22 points. Above the sources a floor of one standard error was that pessimism:
where the strongest models answer nearly every item alike (the Open LLM Leaderboard v1
matrices of selected items), anchor points read them exactly (0.0-0.5 points of error) and
the floor alone made their intervals 10-14 points wide at coverage 1.00
(``bench/guard_variants_179_cells.md``, ``interval: least quantile 1 above``).

Where the estimate above the sources stays the inner one (a target that is not the matrix
mean, :mod:`lmeval_microbench.estimators.guarded`), the band above is the inner estimator's
own: the conformal quantile of its absolute errors on the upward folds, around its estimate.
The reading's band there spanned a reading that the estimate no longer follows: on the Open
LLM Leaderboard v1 matrices against the whole benchmark's score, strongest fifth, shipped
recipes, it made ARC's, HellaSwag's and Winogrande's intervals 15-24 points wide at coverage
0.97-1.00 (``bench/shipped_guard_before_inner_band.md``); the inner band gives 7-8 points at
0.89-0.97 (``bench/shipped_guard.md``). Where the reading erred less than the inner estimate
on the upward folds, its band stays: a regression shrinks towards the sources, and a target
that is a straight map of the matrix mean is read better by the reading (``tests``).

Below the sources on such a matrix the items say little: chosen to tell the sources apart,
they are missed alike by every weaker model, so neither the inner regression nor a reading
knows how far below the model lies (the weakest fifth of the Open LLM Leaderboard v1 held
out, shipped recipes: biased 3-9 points upward, intervals covering 0.41-0.74 on four of six
benchmarks). There the lower edge reaches down to a floor, the lowest score such a model can
have (:func:`floored`): the guessing level where the bundle knows its chance level, else 0.

Where the target is the matrix mean, the guard locates a model by a precise reading (the
de-shrunk one) so as not to move the estimates of the sources' own models for nothing; but
with few sources bunched in a narrow range that reading places a model beyond them inside,
and the interval stays the inner one: MuSR with 25 sources spanning 8.6 points, the strongest
fifth held out, 50 items, covered 0.64 at 11 points wide. So the interval also reaches the
spread of the own-level reading (:func:`reached`), an assumption-light one whose standard
error is the sampling noise of the items asked, wherever that spread crosses the sources'
edge above: the same rule as the weight's, a reading beyond the sources with probability over
:data:`W_MIN` spans its spread. The estimate does not move. Below the sources the reach is
narrower (:func:`reached_below`): only a model whose whole spread lies under the weakest
source, further below than the downward folds measured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

from .._conformal import conformal_quantile
from ..errors import InputError
from .placement import Placement
from .readings.base import se_floor

W_MIN = 0.05
"""Below this outside weight a model counts as inside: its interval is the inner one."""
MIN_Q = 1.0
"""Least quantile of the scaled downward fold errors: below the sources an interval of at
least one standard error of the reading either way, whatever the folds say (see the
module)."""
MIN_Q_ABOVE = 0.5
"""Least quantile of the scaled upward fold errors. On the peer suite's 179 cells
(``bench/guard_variants_179_cells.md``) 1 -> 0.5 narrowed the v1 strongest fifth's intervals by 1.9
points (all sources; 15.9 -> 14.0) at the same coverage (0.98, least cell 0.88) and moved
nothing on the whole benchmarks, whose fold errors lie above 1; 0.25 and 0 narrowed them
0.5-0.7 points more, also without a cell losing coverage, and are not taken: the floor is what
stands for the models further out than the folds reach."""
MIN_REACH = 0.01
"""One point: the least fold reach the inner band's growth beyond it is measured against."""
FALLBACK_WIDEN = 1.5
"""Too few fold errors for a conformal quantile: the normal quantile times this."""
REACH_Z = float(norm.isf(W_MIN))
"""Standard errors of a reading its reach spans (1.645): beyond the sources with probability
over :data:`W_MIN` (:func:`reached`; the adaptive runs' upper reach uses the same)."""


def beyond_weight(value: np.ndarray, se: np.ndarray, top: float, bottom: float) -> np.ndarray:
    """Probability that the truth lies above ``top`` or below ``bottom`` (normal reading)."""
    return Placement.locate(value, se, top, bottom).outside


@dataclass(frozen=True)
class GuardBand:
    """Sorted scaled errors ``|reading - truth| / se`` of the extrapolation folds: upward
    (``residuals``, for models above the sources) and downward (``below``, for models under
    them; a band saved before the downward folds has none and uses the upward ones).
    ``inner_above``: the inner estimator's absolute errors on the upward folds, in score
    units (a band saved before them has none: the reading's band is used above), and
    ``inner_reach`` the furthest a fold target lay beyond its fold's training models."""

    residuals: np.ndarray
    below: np.ndarray | None = None
    inner_above: np.ndarray | None = None
    inner_reach: float = 0.0

    def quantile(self, level: float, below: bool = False) -> float:
        """Conformal quantile of one side's fold errors, at least :data:`MIN_Q` below and
        :data:`MIN_Q_ABOVE` above; with too few errors, the widened normal one."""
        found = self.residuals if not below or self.below is None else self.below
        q = conformal_quantile(found, level) if found.size else math.inf
        if math.isfinite(q):
            return max(q, MIN_Q if below else MIN_Q_ABOVE)
        return FALLBACK_WIDEN * float(norm.ppf(0.5 + level / 2.0))

    def quantiles(self, level: float, below: np.ndarray) -> np.ndarray:
        """Per model: the downward quantile where ``below``, else the upward one."""
        return np.where(below, self.quantile(level, True), self.quantile(level, False))

    def inner_half_width(self, level: float) -> float:
        """Conformal quantile of the inner estimator's upward fold errors (inf: none, or too
        few for the level)."""
        found = self.inner_above
        return conformal_quantile(found, level) if found is not None and found.size else math.inf

    def edges(
        self,
        level: float,
        reading: tuple[np.ndarray, np.ndarray],
        inner_value: np.ndarray,
        below: np.ndarray,
        above_by: np.ndarray,
        one_sided: bool,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` of the band outside the sources, per model.

        ``below``: the model lies towards the weakest sources; ``above_by``: how far the
        reading locates it above the strongest (0 if not). The band is the reading ``+- q se``;
        above the sources with ``one_sided`` (the estimate there is the inner one), it reaches
        the inner estimate plus its upward fold quantile, where there are enough fold errors,
        growing in proportion to the distance beyond the folds' reach (:data:`MIN_REACH` at
        least): the inner estimator's error is a bias that grows with the distance. Its lower
        edge there is ``+inf``, so the interval keeps the inner one's lower edge
        (:func:`guarded_interval` spans both): the inner regression pulls such a model towards
        the sources, so it reads it too low and the misses lie above. On the shipped v1
        recipes' strongest fifth (``bench/shipped_guard.md``; before:
        ``bench/shipped_guard_before_upper_only.md``) ARC's intervals went 10.4 -> 9.8 points
        wide, HellaSwag's 7.2 -> 6.8 and MMLU's 15.1 -> 14.6, and no split's coverage moved."""
        value, se = reading
        half = self.quantiles(level, below) * se
        lower, upper = value - half, value + half
        inner_half = self.inner_half_width(level) if one_sided else math.inf
        if math.isfinite(inner_half):
            inner_half = inner_half * np.maximum(1.0, above_by / max(self.inner_reach, MIN_REACH))
            lower = np.where(below, lower, np.inf)
            upper = np.where(below, upper, inner_value + inner_half)
        return lower, upper

    def to_dict(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"residuals": self.residuals.tolist()}
        for key in ("below", "inner_above"):
            found = getattr(self, key)
            if found is not None:
                payload[key] = found.tolist()
        if self.inner_above is not None:
            payload["inner_reach"] = self.inner_reach
        return payload

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> GuardBand:
        residuals = _sorted_residuals(payload, "residuals")
        below, inner_above = (
            _sorted_residuals(payload, key) if key in payload else None
            for key in ("below", "inner_above")
        )
        try:
            reach = float(payload.get("inner_reach", 0.0))
        except (TypeError, ValueError) as exc:
            raise InputError(f"guard band: malformed inner_reach ({exc})") from exc
        if not math.isfinite(reach) or reach < 0:
            raise InputError("guard band: inner_reach must be finite and non-negative")
        return cls(residuals, below, inner_above, reach)


def _sorted_residuals(payload: Mapping[str, Any], key: str) -> np.ndarray:
    try:
        residuals = np.sort(np.asarray(payload[key], dtype=np.float64).reshape(-1))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"guard band: malformed {key} ({exc})") from exc
    if not np.all(np.isfinite(residuals)) or np.any(residuals < 0):
        raise InputError(f"guard band: {key} must be finite and non-negative")
    return residuals


def floored(lower: np.ndarray, below_weight: np.ndarray, floor: float) -> np.ndarray:
    """Lower edges that reach ``floor`` where the reading places the model below the
    weakest source (``below_weight``, the probability of that, above :data:`W_MIN`).

    At :data:`W_MIN`, not only where the reading puts the model below more likely than not:
    a model that answers like the weakest sources may lie anywhere below them. At 0.5 the
    guessers of ``tests/test_guard_floor.py`` were covered 0.62 (0.9 at :data:`W_MIN`); on
    the shipped v1 recipes' weakest fifth it made at most 0.04 of difference, and on random
    splits with a floor of 0 it spared the sources' weakest models some width (MMLU 8.5 ->
    7.3 points, 7.0 without a floor; a scratch run)."""
    return np.where(below_weight > W_MIN, np.minimum(lower, floor), lower)


def _reach_spread(reading: tuple[np.ndarray, np.ndarray], z: float) -> tuple[np.ndarray, ...]:
    """A reading's value and the half-width ``z se`` its reach spans, both sides alike."""
    value, se = reading
    return np.asarray(value, dtype=np.float64), z * se_floor(np.asarray(se, dtype=np.float64))


def spread_below(
    reading: tuple[np.ndarray, np.ndarray], bottom: float, z: float = REACH_Z
) -> np.ndarray:
    """Rows whose reading's whole spread ``value +- z se`` lies below ``bottom``, the weakest
    source's score: where :func:`reached_below` reaches."""
    value, spread = _reach_spread(reading, z)
    return value + spread < bottom


def reached(
    upper: np.ndarray,
    reading: tuple[np.ndarray, np.ndarray],
    top: float,
    z: float = REACH_Z,
) -> np.ndarray:
    """Upper edges that reach ``value + z se`` of ``reading`` where that lies above ``top``,
    the strongest source's score (capped at 1); elsewhere ``upper`` as it was.

    The same rule below the sources (the spread crossing the weakest source's score) doubled
    the reach's cost on random splits (MuSR with all sources at 10 items: 12 -> 37 points
    wide, 24 with the upper reach alone; scratch runs on the peer suite's cells): below, the
    guard's downward folds size the intervals near the sources, and :func:`reached_below`
    reaches only for a model whose whole spread lies below them."""
    value, spread = _reach_spread(reading, z)
    high = np.minimum(value + spread, 1.0)
    return np.where(high > top, np.maximum(upper, high), upper)


def reached_below(
    lower: np.ndarray,
    reading: tuple[np.ndarray, np.ndarray],
    bottom: float,
    z: float = REACH_Z,
) -> np.ndarray:
    """Lower edges that reach ``value - z se`` of ``reading`` (at least 0) where the whole
    spread ``value +- z se`` lies below ``bottom``, the weakest source's score: where the
    reading places the model below every source with probability over ``1 - W_MIN``;
    elsewhere ``lower`` as it was.

    The downward folds size the band for a model just under the weakest sources, as far as a
    fold's held-out fifth lies below its training models; a model far below them is beyond
    that reach. On HellaSwag's weakest fifth (the peer suite: metabench's 58 items, sources
    from 57 %, held-out models from 0 to 57 %) the chosen reading there erred 6.1 points on
    the lowest quarter, where the own-level reading erred 1.2 on the whole fifth, and the
    intervals covered 0.79 (seed 2) and 0.87 (seed 0); with this reach 0.94 and 0.94 at 1.4
    and 0.9 points more width. Not where the spread merely crosses ``bottom`` (the rule of
    :func:`reached` above): that reached MuSR's and IFEval's weakest fifth too (0.86 -> 0.97,
    0.84 -> 0.97) but widened MuSR's random splits at 10 items from 24 to 37 points where
    no held-out model lay below the sources; this rule left them at 24 (scratch runs on the
    peer suite's cells). The peer suite with it (``bench/peers_reach_below.md``): HellaSwag's
    weakest-fifth case 0.84 -> 0.94 at 9.0 -> 10.0 points wide, every weakest-fifth case
    0.89-0.99, random cells' coverage unchanged (extrapolation cells, whose models lie above
    every source, not rerun); no estimate moved."""
    value, spread = _reach_spread(reading, z)
    low = np.maximum(value - spread, 0.0)
    return np.where(spread_below(reading, bottom, z), np.minimum(lower, low), lower)


def guarded_interval(
    inner: tuple[np.ndarray, np.ndarray, np.ndarray],
    value_out: np.ndarray,
    band: tuple[np.ndarray, np.ndarray],
    weight: np.ndarray,
    value_weight: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(value, lower, upper)`` from the inner estimate and interval, the reading's value,
    the band outside the sources (:meth:`GuardBand.edges`) and ``w``.

    ``value_weight`` (default ``weight``) moves the estimate where it differs from the weight
    that widens the interval: a guard that moves the estimate on one side only keeps the
    interval both sides give."""
    value_in, lower_in, upper_in = inner
    outside = weight > W_MIN
    moving = weight if value_weight is None else value_weight
    moved = np.clip((moving - W_MIN) / (1.0 - W_MIN), 0.0, 1.0)
    value = (1.0 - moved) * value_in + moved * value_out
    lower = np.where(outside, np.minimum(lower_in, band[0]), lower_in)
    upper = np.where(outside, np.maximum(upper_in, band[1]), upper_in)
    value = np.clip(value, 0.0, 1.0)
    return (
        value,
        np.clip(np.minimum(lower, value), 0.0, 1.0),
        np.clip(np.maximum(upper, value), 0.0, 1.0),
    )


def composed_interval(
    inner: tuple[np.ndarray, np.ndarray, np.ndarray],
    value_out: np.ndarray,
    band: tuple[np.ndarray, np.ndarray],
    weight: np.ndarray,
    below: np.ndarray | None,
    *,
    top: float,
    bottom: float,
    floor: float | None = None,
    reach: tuple[np.ndarray, np.ndarray] | None = None,
    moving: np.ndarray | None = None,
    reach_where: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The guard's ``(value, lower, upper)`` composed from its parts, in the one order the
    estimator and ``tools/bench_guard_variants.py`` share: :func:`guarded_interval`, then
    the lower edge :func:`floored` where only the side below moves, then the own-level
    reading's reach above (:func:`reached`) and below (:func:`reached_below`).

    ``below``: the weight below the sources where only that side moves (None: the estimate
    moves on both sides, by ``weight``); ``moving``: a weight that moves the estimate in its
    stead (default ``below``); ``reach``: the own-level reading (None: no reach), reaching
    beyond ``top`` and ``bottom``, the strongest and weakest sources' scores (required: a
    default would silently switch the reach off);
    ``reach_where``: the rows whose upper edge may reach (default all), for the variants
    tool. One function, so that a tool measuring variants cannot drift from the guard."""
    moving = below if moving is None else moving
    value, lower, upper = guarded_interval(inner, value_out, band, weight, moving)
    if below is not None and floor is not None:
        lower = floored(lower, below, floor)
    if reach is not None:
        reaching = reached(upper, reach, top)
        upper = reaching if reach_where is None else np.where(reach_where, reaching, upper)
        lower = reached_below(lower, reach, bottom)
    return value, lower, upper
