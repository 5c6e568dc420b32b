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

Span. A run is also scored with the unshifted (``posterior``) imputation (and, where the pool chose
a stronger hold on the shift, with the shift of one pseudo answer; :mod:`.calibrate`), and the
score estimator gives its own interval for the imputed answers (for ``kridge`` that holds its range
guard). For a model the 1-D IRT and the source models describe, the estimates agree and the
estimator's interval is narrower than the band; for one they do not (typically stronger than every
source model) they part. The interval is the span of the estimates and the estimator's interval,
widened by the band, which is fitted on each source model's distance *outside* its own span: a
conformal score like any other, so the coverage of models drawn like the sources is kept. It is the
rule of ``kridge``'s range guard (:mod:`..estimators.ridge`): beyond the data, the disagreement of
estimates is the honest measure of what is not known (spans are taken at the 90 % level: an 80 %
interval is conservative). Two more readings join the span where they lie beyond every source
model's true score. The run read without IRT (the sources' smoothed success rate on each item,
shifted to the run's hit rate; :func:`.estimation.impute_from_rates`): beyond the sources it and
the 2PL err in opposite directions on whole benchmarks (IFEval's and MuSR's strongest fifth: the
posterior 5-9 points under the truth, the reading 10-13 over). And that reading at a hit count
:data:`..outside.guard.REACH_Z` binomial sds higher (:func:`.estimation.rates_raised`) where it
lies above the sources, the static guard's rule for a reading that may lie beyond them
(:mod:`..outside.guard`). A run of 10-25 items near the top of the sources cannot yet tell a model
among them from one beyond them, and the bands, fitted where the truth stops at the strongest
source, could not show it (MMLU's strongest fifth of the leaderboard held out: coverage 0.41 / 0.63
at 10 / 25 items without the reach, 0.96 / 0.93 with it; the price is width where the pool covered
already: GSM8K's 1.00 at 17-39 points, was 0.90 at 11-25). Only where the target is not the
sources' mean over the pool items (the v1 pools): there the reading goes through the same map as
the estimate and regresses with it. On a whole benchmark the unraised reading already errs above a
model beyond the sources, and the reach only widened (MuSR's random splits 14-23 -> 20-40 points at
10-50 items, the same coverage), so it is left out there where upward folds exist
(:meth:`ScoreMap.with_pool_reach`). On
whole-benchmark pools the estimate itself moves part of the way to the reading where the reading
lies above every source, as far as the pool's upward folds chose, or the whole way in a pool
without them (:mod:`.beyond`).

Sides. Those bands come from models like the sources. A model weaker or stronger than all of
them is read worse, so the pool also replays its weakest and its strongest fifth with the map
fitted on the other source models (:func:`.pool.fit_adaptive_state`), and their bands
(:class:`.bands.SideBands`) are a floor on the width of a run whose ability posterior places it
beyond the sources: on both edges below them, on the upper edge only above them, where the map
reads a run too low and its misses lie above (:meth:`ScoreMap.halves`).

Top. A model stronger than every source can answer the pool like one of the strongest sources:
its ability posterior then lies among theirs, and the side bands above do not apply. A run whose
90 % interval reaches the strongest source's true score may be such a model, so its upper edge
reaches at least the top band above its span (:class:`.bands.TopBand`, fitted on the models of
the upward fold that its map read as inside its range). It is the floor's rule below, mirrored.

Floor. Below the sources even those bands fall short: the weakest fifth replayed with a map
fitted on stronger models is still a fifth of the leaderboard, and near-random models lie
further out (MMLU's and Winogrande's weakest fifth held out: 90 % intervals held for 0.35-0.62
of them). A run that may lie below every source (:meth:`ScoreMap._below`: its 90 % lower
edge, lowered by half of its own half-width, at or under the weakest source's true score, or
its ability posterior below the sources' edge) has its lower edge reach the lowest score such a
model can have, the chance-level score less 5 points (:func:`..personfit.lowest_score`, from the
pool's person-fit block; 0 where the pool was built without chance levels), as the static
``guarded`` interval does (:func:`..outside.guard.floored`). Models lie under it too (on
metabench's items 28 % of MMLU's weakest fifth, 58 % of ARC's), so the span of a run below the
sources also reaches lower (:attr:`ScoreMap.lower_reach`): ARC's weakest fifth, 25 sources,
50 items, covered 0.67 -> 0.97 as printed, MMLU's 0.70 -> 0.76, no estimate moved
(``bench/adaptive_sources_weak_checked_before_lower_reach.md`` -> ``..._checked.md``).

The half band (:data:`FLOOR_TEST_MARGIN`): the bands come from the sources' own replays, whose
true scores never lie under the weakest source, so near that edge they cannot show how far
below it a model may be. With the 90 % edge itself as the test, MuSR's weakest fifth held out
was covered 0.81-0.90 at 10-50 items: every run that missed lay above the truth with its lower
edge 0-0.5 points above the weakest source. With the half band it is covered 0.99-1.00, for
0.4-0.7 points of width there and at most 1.4 on random splits (``bench/floor_rule.md``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .._types import ItemId
from ..errors import InputError
from ..estimators import make_estimator
from ..estimators.base import ScoreEstimator
from ..irt.params import ItemParams
from ..outside.guard import REACH_Z
from ..outside.readings.base import smoothed_rates
from ..responses import ResponseMatrix
from ..subset import Subset
from .bands import (
    ABOVE,
    BELOW,
    Band,
    SideBands,
    TopBand,
    at_checkpoint,
    beyond_edge,
    fit_bands,
    rounded,
)
from .estimation import IMPUTATIONS, PSEUDO_ANSWERS, impute, impute_from_rates, rates_raised

FLOOR_TEST_MARGIN = 0.5
"""Share of a run's own 90 % lower half-width by which its lower edge is lowered before the
floor test compares it with the weakest source (:meth:`ScoreMap._below`; module: "Floor")."""

RATES_KEYS = ("source_rates", "source_range")
"""Pool state keys of the IRT-free reading (:meth:`ScoreMap.rates_to_dict`)."""

# fmt: off
BASE_CHECKPOINTS = (
    1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 35, 40, 50, 60, 75, 100, 125, 150, 200,
)
# fmt: on
"""Item counts at which simulated runs are scored to fit interval bands (plus the pool size)."""


def checkpoints_for(n_items: int) -> tuple[int, ...]:
    """The checkpoints of a pool of ``n_items`` items (the pool size is always the last)."""
    return tuple(sorted({c for c in BASE_CHECKPOINTS if c < n_items} | {n_items}))


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
    sides: tuple[SideBands, ...] = ()
    """Bands of the directed folds (the weakest and the strongest source models replayed with
    the map fitted on the others), a floor on the width on their side of the sources."""
    pseudo: float = PSEUDO_ANSWERS
    """Strength of the shifted imputation (pseudo answers; :mod:`.calibrate` chooses it)."""
    rates: np.ndarray | None = field(default=None, compare=False)
    """The source models' smoothed success rate on each pool item (raw means in pools saved
    before the smoothing, the shipped ones among them), in pool order: the IRT-free reading
    of a run beyond the sources (:meth:`predict_run`). None in pools saved before it."""
    truth_range: tuple[float, float] | None = None
    """The weakest and the strongest source model's true score (fractions)."""
    floor: float | None = None
    """The lowest full score a run below every source can have (fraction; see the module's
    "Floor"). None: no floor (pools saved before it)."""
    reach: float = 0.0
    """Binomial sds above a run's hit count its span's upper reach reads (``REACH_Z``;
    0: no reach, as on whole-benchmark pools and in pools saved before it; see the module)."""
    lower_reach: float = 0.0
    """Binomial sds below a run's hit count its span's lower reach reads, where even the
    reading as many sds above lies under every source: after the static guard's rule
    (:func:`..outside.guard.reached_below`; here the band still widens the span), for models
    further under the sources than the floor and the side bands reach (0: none, as in pools
    saved before it; see "Floor")."""
    toward: float = 0.0
    """Share of the way the estimate of a run moves to the IRT-free reading where that reading
    lies above every source, times the probability that its ability lies above the sources'
    edge (:mod:`.beyond`; 0: no move, as in pools saved before it)."""
    toward_edge: float | None = None
    """That edge (ability) where no upward side band carries one: a pool too small for upward
    folds (:data:`.beyond.UNCHOSEN_TOWARD`). None: the side band's."""
    top: TopBand | None = None
    """How far above its span a run that may lie above every source reaches (see the module's
    "Top"). None: no top band (pools saved before it)."""

    @classmethod
    def fit(
        cls, name: str, source: ResponseMatrix, truth: np.ndarray, irt: ItemParams | None = None
    ) -> ScoreMap:
        """Fit estimator ``name`` on complete source answers with every item as the subset."""
        truth = np.asarray(truth, dtype=np.float64)
        subset = Subset(
            tuple(source.item_ids), np.full(source.n_items, 1.0 / source.n_items), "pool"
        )
        estimator = make_estimator(name).fit(source, subset, truth, irt=irt)
        return cls(estimator).with_sources(source, truth)

    def with_sources(self, source: ResponseMatrix, truth: np.ndarray) -> ScoreMap:
        """The map with the IRT-free reading's inputs from the ``source`` models it was fitted
        on and their ``truth``: each pool item's success rate and the range of true scores.

        The rates are smoothed as the static readings' are (``(right + 0.5) / (answered +
        1)``): an item no source answered right is not one no model can, and at its raw rate 0
        no shift a run's answers give reached it. With 25 sources that held TruthfulQA's strongest
        fifth 17.8 points under the truth after 50 items (intervals covering 0.67); smoothed,
        11.7 (0.99; ``bench/adaptive_sources_before_smoothed_rates.md`` ->
        ``bench/adaptive_sources.md``). With all 278 sources IFEval and MuSR moved by 0.02
        points at most (``bench/adaptive_v2_rates_before.md`` -> ``..._after.md``)."""
        truth = np.asarray(truth, dtype=np.float64)
        rates = smoothed_rates(source.select_items(list(self.item_ids)).values)
        return replace(self, rates=rates, truth_range=(float(truth.min()), float(truth.max())))

    @property
    def item_ids(self) -> tuple[ItemId, ...]:
        return tuple(self.estimator.item_ids_)

    def predict_run(
        self,
        expected: np.ndarray,
        asked: np.ndarray,
        scores: np.ndarray,
        ability: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Estimate and span ``(value, low, high)`` of runs, fractions (see the module).

        ``expected`` (m, n): posterior expected scores; ``asked``/``scores``: the answers so
        far; ``ability``: the posterior mean and sd (without it the estimate does not move
        towards the reading). A ``posterior`` map (version-1 pool) has the span of its
        estimate alone.
        """
        imputed = impute(expected, asked, scores, self.imputation, self.pseudo)
        value, lower, upper = self._estimate(imputed)
        if self.imputation == "posterior":
            return value, value, value
        readings = [value, self.predict(impute(expected, asked, scores, "posterior"))]
        if self.pseudo != PSEUDO_ANSWERS:  # the run's own hit rate, trusted as before the choice
            readings.append(self.predict(impute(expected, asked, scores, "shifted")))
        beyond = self._rates_reading(value, asked, scores)
        readings += [beyond, self._reach_above(value, asked, scores)]
        readings.append(self._reach_below(value, asked, scores))
        low = np.minimum(np.min(readings, axis=0), lower)
        high = np.maximum(np.max(readings, axis=0), upper)
        weight = self._toward_weight(ability)
        if weight is not None:  # a point within the span: the span does not move
            value = value + weight * (self._above(beyond, value) - value)
        return value, low, high

    def _toward_weight(self, ability: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray | None:
        """:attr:`toward` times the probability that the ability lies above the sources'
        edge (None: no move)."""
        if not self.toward or ability is None:
            return None
        edges = [s.ability_edge for s in self.sides if s.side == ABOVE]
        edge = next((e for e in edges if e is not None), self.toward_edge)
        if edge is None:
            return None
        return self.toward * beyond_edge(*ability, edge, ABOVE)

    def above_reading(self, value: np.ndarray, asked: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """The IRT-free reading where it lies above every source, else ``value``: what
        :attr:`toward` moves an estimate to (:mod:`.beyond` chooses it on these)."""
        return self._above(self._rates_reading(value, asked, scores), value)

    def _above(self, beyond: np.ndarray, value: np.ndarray) -> np.ndarray:
        top = np.inf if self.truth_range is None else self.truth_range[1]
        return np.where(beyond > top, beyond, value)

    def _rates_reading(
        self, value: np.ndarray, asked: np.ndarray, scores: np.ndarray
    ) -> np.ndarray:
        """The run read without IRT (:func:`.estimation.impute_from_rates`) where that reading
        lies beyond the sources' true scores, else ``value`` (nothing added to the span).

        Beyond the sources the 2PL and this reading err in opposite directions (module of
        :mod:`.estimation`), so the span of the two reaches the truth where the directed folds,
        a fifth of the sources beyond the rest, cannot show how far out a model lies. Inside
        the sources' range it is left out: it errs more than the posterior there (IFEval's
        random split at 25 items: 5.6 against 3.5 points, pool mean).
        """
        if self.rates is None or self.truth_range is None:
            return value
        reading = self.predict(impute_from_rates(self.rates, asked, scores))
        bottom, top = self.truth_range
        return np.where((reading > top) | (reading < bottom), reading, value)

    def _reach_above(self, value: np.ndarray, asked: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """The IRT-free reading at a hit count :attr:`reach` binomial sds above the run's own
        where it lies above every source's true score, else ``value`` (see the module)."""
        if not self.reach or self.rates is None or self.truth_range is None:
            return value
        reach = self.predict(rates_raised(self.rates, asked, scores, self.reach))
        return np.where(reach > self.truth_range[1], reach, value)

    def _reach_below(self, value: np.ndarray, asked: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """The IRT-free reading :attr:`lower_reach` binomial sds below the run's hit count
        where the reading as many sds above lies under every source, else ``value``."""
        if not self.lower_reach or self.rates is None or self.truth_range is None:
            return value
        z = self.lower_reach
        below = self.predict(rates_raised(self.rates, asked, scores, z)) < self.truth_range[0]
        if not below.any():  # the common case: spare the second reading
            return value
        out = np.array(value, dtype=np.float64, copy=True)
        out[below] = self.predict(rates_raised(self.rates, asked[below], scores[below], -z))
        return out

    def predict_answers(
        self, expected: np.ndarray, asked: np.ndarray, scores: np.ndarray
    ) -> np.ndarray:
        """Full-score estimates of runs from their imputed answers (before :attr:`toward`)."""
        return self.predict(impute(expected, asked, scores, self.imputation, self.pseudo))

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
        return replace(self, bands=fit_bands(predictions, spans, truth))

    def with_side(
        self,
        side: str,
        folds: Sequence[
            tuple[Mapping[int, np.ndarray], Mapping[int, tuple[np.ndarray, np.ndarray]]]
        ],
        truth: np.ndarray,
        ability_edge: float | None = None,
    ) -> ScoreMap:
        """The same map with a set of bands per directed fold ``(predictions, spans)`` of the
        models on ``side`` of the sources whose true scores are ``truth``, applied beyond
        ``ability_edge`` (:class:`.bands.SideBands`); an earlier set of that side is replaced."""
        found = SideBands.fit(side, folds, truth, ability_edge)
        kept = tuple(bands for bands in self.sides if bands.side != side)
        return replace(self, sides=(*kept, found))

    def band_for(self, n_items: int, bands: tuple[Band, ...] | None = None) -> Band:
        """The band of the largest checkpoint at most ``n_items`` (the first one below it)."""
        bands = self.bands if bands is None else bands
        if not bands:
            raise InputError("this score map has no interval bands")
        return bands[at_checkpoint([band.n_items for band in bands], n_items)]

    def halves(
        self,
        prediction: np.ndarray,
        n_items: int,
        level: float,
        ability: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The band's half-widths below and above the run; for a run beyond the sources on a
        side (its ``ability`` posterior mean and sd, :meth:`SideBands.applies`), at least each
        of that side's fold bands', on both edges below the sources and on the upper edge only
        above them.

        A run above every source is read too low (the 2PL pulls it towards the sources), so
        its misses lie above: no run of IFEval's strongest fifth falls under its lower edge
        (``tests/test_adaptive_side_folds.py``). Widening that edge too made those intervals
        47-51 points wide; with the lower edge on the plain band they are 38-40, and every
        pool keeps its coverage at every length (``bench/adaptive.md``). Below the sources
        both edges keep the band: a scratch replay that widened only the lower edge there
        lost coverage above (HellaSwag's weakest fifth at 50 items)."""
        plain = self.band_for(n_items).half_width(prediction, level)
        lower, upper = plain, plain
        for side in self.sides:
            widest = plain
            for bands in side.folds:
                widest = np.maximum(
                    widest, self.band_for(n_items, bands).half_width(prediction, level)
                )
            applies = side.applies(prediction, ability)
            upper = np.where(applies, np.maximum(upper, widest), upper)
            if side.side == BELOW:
                lower = np.where(applies, np.maximum(lower, widest), lower)
        return lower, upper

    def interval(
        self,
        prediction: np.ndarray,
        n_items: int,
        level: float = 0.9,
        span: tuple[np.ndarray, np.ndarray] | None = None,
        ability: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The run's ``span`` (:meth:`predict_run`; none: the estimate) widened by the band
        (:meth:`halves`: side bands where the run's ``ability``, posterior mean and sd, lies
        beyond the sources; without it, where the estimate lies on a side's range); the lower
        edge down to the floor and the upper edge up by the top band where the run's 90 %
        interval reaches beyond the sources' range (module: "Top", "Floor")."""
        prediction = np.asarray(prediction, dtype=np.float64)
        low, high = (prediction, prediction) if span is None else span
        down, up = self.halves(prediction, n_items, level, ability)
        start = np.minimum(np.asarray(low, dtype=np.float64), prediction)
        end = np.maximum(np.asarray(high, dtype=np.float64), prediction)
        low, high = start - down, end + up
        down90, up90 = (
            (down, up) if level == 0.9 else self.halves(prediction, n_items, 0.9, ability)
        )
        if self.floor is not None:  # where the run may lie below every source (90 % edge)
            reach = start - (1.0 + FLOOR_TEST_MARGIN) * down90
            below = self._below(prediction, reach, ability)
            low = np.where(below, np.minimum(low, self.floor), low)
        if self.top is not None and self.truth_range is not None:  # may lie above every source
            above = end + up90 >= self.truth_range[1]
            high = np.where(above, np.maximum(high, end + self.top.reach(n_items, level)), high)
        return np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)

    def _below(
        self,
        prediction: np.ndarray,
        reach: np.ndarray,
        ability: tuple[np.ndarray, np.ndarray] | None,
    ) -> np.ndarray:
        """Where the floor applies: runs whose lower edge ``reach`` (the 90 % edge lowered by
        :data:`FLOOR_TEST_MARGIN` of its half-width) lies at or under the weakest source's true
        score, or that the ability posterior places below the sources
        (:meth:`SideBands.applies`).

        The first catches what the second misses where the 2PL does not tell near-random models
        from the weakest sources: MuSR's weakest fifth held out sit at the sources' ability
        (the edge's posterior probability over W_MIN for 6-7 % of them at 25-50 items) while
        their true scores lie under every source's."""
        below = np.zeros(np.shape(prediction), dtype=bool)
        if self.truth_range is not None:
            below |= reach <= self.truth_range[0]
        for side in self.sides:
            if side.side == BELOW:
                below |= side.applies(prediction, ability)
        return below

    def bands_to_list(self) -> list[dict[str, Any]]:
        return [band.to_dict() for band in self.bands]

    def rates_to_dict(self) -> dict[str, Any]:
        """The IRT-free reading's inputs for the pool state, keyed by item (empty: none)."""
        if self.rates is None or self.truth_range is None:
            return {}
        return {
            "source_rates": dict(zip(map(str, self.item_ids), rounded(self.rates), strict=True)),
            "source_range": list(self.truth_range),
        }

    def sides_to_dict(self) -> dict[str, Any]:
        """The directed fold bands for the pool state, keyed by side (empty: none)."""
        return {bands.side: bands.to_dict() for bands in self.sides}

    @classmethod
    def from_parts(
        cls,
        estimator: ScoreEstimator,
        bands: Sequence[Mapping[str, Any]],
        imputation: str = "posterior",
        sides: Mapping[str, Mapping[str, Any]] | None = None,
        pseudo: float = PSEUDO_ANSWERS,
        rates: Mapping[str, Any] | None = None,
        floor: float | None = None,
        toward: float = 0.0,
        reach: float = 0.0,
        top: Mapping[str, Any] | None = None,
        toward_edge: float | None = None,
        lower_reach: float = 0.0,
    ) -> ScoreMap:
        """A map from its saved parts; ``rates`` is :meth:`rates_to_dict`'s and ``top``
        :meth:`top_to_dict`'s value (absent: none)."""
        if imputation not in IMPUTATIONS:
            raise InputError(f"unknown imputation {imputation!r}; expected one of {IMPUTATIONS}")
        found = cls(
            estimator,
            tuple(Band.from_dict(b) for b in bands),
            imputation,
            tuple(SideBands.from_dict(side, obj) for side, obj in (sides or {}).items()),
            float(pseudo),
        )
        found = found.with_rates(rates) if rates else found
        found = found.with_toward(toward, toward_edge) if toward else found
        found = found.with_reach(reach) if reach else found
        found = found.with_lower_reach(lower_reach) if lower_reach else found
        found = found.with_top(TopBand.from_dict(top)) if top else found
        return found if floor is None else found.with_floor(floor)

    def with_toward(self, share: float, edge: float | None = None) -> ScoreMap:
        """The map whose runs above the sources move ``share`` of the way to the IRT-free
        reading (see :attr:`toward`), weighted at the upward side band's ability edge or, where
        the pool has none, at ``edge`` (None: the map's own :attr:`toward_edge` stays); it
        needs that reading's inputs."""
        share = float(share)
        if not 0.0 <= share <= 1.0:
            raise InputError(f"toward_reading must lie in [0, 1], got {share!r}")
        if share and (self.rates is None or self.truth_range is None):
            raise InputError("toward_reading needs the pool's source_rates and source_range")
        if edge is not None:
            edge = float(edge)
            if not math.isfinite(edge):
                raise InputError(f"toward_edge must be a finite ability, got {edge!r}")
        return replace(self, toward=share, toward_edge=self.toward_edge if edge is None else edge)

    def toward_to_dict(self) -> dict[str, Any]:
        """The move towards the reading for the pool state (empty: none)."""
        if not self.toward:
            return {}
        found: dict[str, Any] = {"toward_reading": self.toward}
        if self.toward_edge is not None:
            found["toward_edge"] = self.toward_edge
        return found

    def with_reach(self, z: float) -> ScoreMap:
        """The map whose spans reach the IRT-free reading ``z`` binomial sds up (0: none)."""
        z = float(z)
        if not 0.0 <= z <= 10.0:
            raise InputError(f"upper_reach must lie in [0, 10] binomial sds, got {z!r}")
        if z and (self.rates is None or self.truth_range is None):
            raise InputError("upper_reach needs the pool's source_rates and source_range")
        return replace(self, reach=z)

    def with_pool_reach(self, whole: bool) -> ScoreMap:
        """The map with its pool's reach: :data:`..outside.guard.REACH_Z`, but none where the
        target is the sources' mean over the pool items (``whole``) and upward side bands exist
        (see the module). Without them (fewer than 48 sources) the reach is what a run beyond
        the sources has: pools of 25 sources held 0.17-0.32 of TruthfulQA's strongest fifth
        at 10-50 items without it and 0.67-0.98 with it, MMLU's 0.49-0.82 and 0.99-1.00; random
        splits at most 15 points wider (MuSR at 10 items;
        ``bench/adaptive_sources_fold_irt_only.md`` ->
        ``bench/adaptive_sources_before_unchosen_move.md``)."""
        return self.with_reach(0.0 if whole and self.has_upward_folds else REACH_Z)

    @property
    def has_upward_folds(self) -> bool:
        """Whether the pool replayed its strongest sources as a fold (side bands above)."""
        return any(side.side == ABOVE for side in self.sides)

    def with_lower_reach(self, z: float) -> ScoreMap:
        """The map whose spans reach ``z`` binomial sds down (:attr:`lower_reach`; 0: none)."""
        if not 0.0 <= float(z) <= 10.0:
            raise InputError(f"lower_reach must lie in [0, 10] binomial sds, got {z!r}")
        if z and (self.rates is None or self.truth_range is None):
            raise InputError("lower_reach needs the pool's source_rates and source_range")
        return replace(self, lower_reach=float(z))

    def reach_to_dict(self) -> dict[str, Any]:
        """The upper and lower reach for the pool state (empty: none)."""
        found = {"upper_reach": self.reach} if self.reach else {}
        return {**found, "lower_reach": self.lower_reach} if self.lower_reach else found

    def with_top(self, band: TopBand | None) -> ScoreMap:
        """The map whose runs that may lie above every source reach ``band`` above their span
        (None: no top band); it needs the sources' range of true scores."""
        if band is not None and self.truth_range is None:
            raise InputError("top_band needs the pool's source_range")
        return replace(self, top=band)

    def top_to_dict(self) -> dict[str, Any]:
        """The top band for the pool state (empty: none)."""
        return {} if self.top is None else {"top_band": self.top.to_dict()}

    def with_floor(self, floor: float) -> ScoreMap:
        """The map whose runs below the sources reach ``floor`` (a fraction in [0, 1))."""
        floor = float(floor)
        if not 0.0 <= floor < 1.0:
            raise InputError(f"floor must lie in [0, 1), got {floor!r}")
        return replace(self, floor=floor)

    def floor_to_dict(self) -> dict[str, Any]:
        """The floor for the pool state (empty: none)."""
        return {} if self.floor is None else {"floor": self.floor}

    def with_rates(self, saved: Mapping[str, Any]) -> ScoreMap:
        """The map with saved source rates (by item id) and truth range, checked."""
        by_item = saved["source_rates"]
        missing = [str(i) for i in self.item_ids if str(i) not in by_item]
        if missing or len(by_item) != len(self.item_ids):
            raise InputError(
                f"source_rates do not match the pool's items (missing e.g. {missing[:1]})"
            )
        rates = np.array([float(by_item[str(i)]) for i in self.item_ids])
        bottom, top = (float(v) for v in saved["source_range"])
        if not (np.all((rates >= 0) & (rates <= 1)) and 0 <= bottom <= top <= 1):
            raise InputError("source_rates and source_range must lie in [0, 1], bottom <= top")
        return replace(self, rates=rates, truth_range=(bottom, top))
