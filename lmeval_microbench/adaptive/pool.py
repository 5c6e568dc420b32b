"""Item pools: a bundle whose subset is every item, plus the state an adaptive run needs.

A pool is an ordinary bundle (same schema, checksums, per-item content hashes, save/load) so
everything that reads bundles reads pools. Its subset is every item of the response matrix; its
default estimator is a ridge on all pool items (what a plain, non-adaptive lm-eval run of the
whole pool task reports); and one more estimator entry, named :data:`ADAPTIVE`, holds the
adaptive state: prior, score map and interval bands (:mod:`.scoring`). That entry's state is
not a registered estimator, so bundle readers keep it opaque and only :func:`pool_state` opens it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .._types import Estimate, ItemId
from ..build import fit_source_irt
from ..bundle import Bundle, DatasetCoordinates, EstimatorSpec, MetricSpec
from ..bundle.fit_spec import PersonFitSpec
from ..errors import BundleError, InputError
from ..estimators import estimator_from_state
from ..estimators._fitting import MIN_SOURCE_MODELS
from ..irt import estimate_abilities
from ..irt.params import ItemParams
from ..outside.ceiling import open_above
from ..outside.folds import DOWN, UP, directed_folds
from ..outside.guard import REACH_Z
from ..personfit import build_spec, check_estimate, fit_record, lowest_score
from ..responses import ResponseMatrix
from ..subset import Subset
from ..truth import is_matrix_mean
from .bands import ABOVE, BELOW, SIDE_EDGES, TopBand, run_placement
from .beyond import UNCHOSEN_TOWARD, choose_toward, warn_without_upward_folds
from .calibrate import FoldRun, choose_pseudo, fold_run, merged_predictions, run_predictions
from .estimation import PSEUDO_ANSWERS, GridPosterior
from .scoring import RATES_KEYS, ScoreMap, checkpoints_for
from .selection import MaxInfoSelector

ADAPTIVE = "adaptive"
"""Name of the estimator entry (and of its state's ``estimator`` field) holding the pool state."""
STATE_VERSION = 1
POOL_METHOD = "pool"
"""``subset.method`` of a pool: every item of the source matrix."""
SCORE_ESTIMATOR = "kridge"
"""Estimator of a pool: the score map of adaptive runs and the default of static runs."""
CALIBRATION_FOLDS = 3
FOLD_IRT_BELOW = 200
"""Fewer sources: each cross-fitted fold replays on item parameters fitted without its models
(:func:`.calibrate.fold_run`); random splits of 278 or 2,000+ held 0.85-0.97 without them."""
MIN_FOLD_MODELS = 10
"""Fewer models on a side than this: no directed folds there (too few to say anything)."""
SIDE_OF = {DOWN: BELOW, UP: ABOVE}
EDGE_SHARE = 0.01
"""Share of the source models beyond each ability edge (:func:`ability_edges`). Not the
weakest model itself: the in-population bands hold on average, not for the last percent of
a leaderboard, and a run just inside the weakest model is read nearly as badly as one beyond
it. With the edge at the weakest model, the weakest fifth of the leaderboard held out lost
coverage at 50 items (TruthfulQA 0.92 -> 0.82, HellaSwag 0.92 -> 0.84, Winogrande 0.54 ->
0.40, ARC 0.98 -> 0.94; ``bench/adaptive_edge_at_weakest.md``); at the percent it keeps
0.90, 0.88, 0.51 and 0.98, for random splits at most 1.7 points wider at 25 items than at the
weakest model (``bench/adaptive.md``)."""


@dataclass(frozen=True)
class AdaptiveState:
    """What an adaptive run of a pool needs besides the item parameters.

    ``score_map`` wraps the bundle's own estimator entry named ``estimator`` (stored once).
    """

    prior_mean: float
    prior_sd: float
    estimator: str
    score_map: ScoreMap
    calibration: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimator": ADAPTIVE,
            "state_version": STATE_VERSION,
            "prior": {"mean": self.prior_mean, "sd": self.prior_sd},
            "score_estimator": self.estimator,
            "bands": self.score_map.bands_to_list(),
            "imputation": self.score_map.imputation,
            "pseudo": self.score_map.pseudo,
            **self.score_map.sides_to_dict(),
            **self.score_map.rates_to_dict(),
            **self.score_map.floor_to_dict(),
            **self.score_map.toward_to_dict(),
            **self.score_map.reach_to_dict(),
            **self.score_map.top_to_dict(),
            "calibration": dict(self.calibration),
        }

    @classmethod
    def from_bundle(cls, bundle: Bundle, obj: Mapping[str, Any]) -> AdaptiveState:
        where = f"bundle {bundle.name!r}"
        try:
            if obj.get("state_version") != STATE_VERSION:
                raise InputError(
                    f"state_version {obj.get('state_version')!r}, expected {STATE_VERSION}"
                )
            name = str(obj["score_estimator"])
            estimator = estimator_from_state(bundle.estimator_state(name))
            return cls(
                float(obj["prior"]["mean"]),
                float(obj["prior"]["sd"]),
                name,
                ScoreMap.from_parts(
                    estimator,
                    obj["bands"],
                    str(obj.get("imputation", "posterior")),
                    {side: obj[side] for side in SIDE_EDGES if side in obj},
                    float(obj.get("pseudo", PSEUDO_ANSWERS)),
                    {k: obj[k] for k in RATES_KEYS} if "source_rates" in obj else None,
                    float(obj["floor"]) if "floor" in obj else None,
                    float(obj.get("toward_reading", 0.0)),
                    float(obj.get("upper_reach", 0.0)),
                    obj.get("top_band"),
                    float(obj["toward_edge"]) if "toward_edge" in obj else None,
                    float(obj.get("lower_reach", 0.0)),
                ),
                dict(obj.get("calibration", {})),
            )
        except (KeyError, TypeError, ValueError, InputError) as exc:
            raise BundleError(f"{where}: unusable adaptive state ({exc})") from exc


@dataclass(frozen=True)
class Pool:
    """A loaded pool: its bundle, 1-D item parameters in pool order, and adaptive state."""

    bundle: Bundle
    params: ItemParams
    state: AdaptiveState

    @property
    def name(self) -> str:
        return self.bundle.name

    @property
    def item_ids(self) -> tuple[ItemId, ...]:
        return self.params.item_ids


def is_pool(bundle: Bundle) -> bool:
    """Whether ``bundle`` carries an adaptive state."""
    return any(spec.name == ADAPTIVE for spec in bundle.estimators)


def pool_state(bundle: Bundle) -> Pool:
    """The pool view of ``bundle``; a bundle that is not a pool is refused in one line."""
    if not is_pool(bundle) or bundle.irt is None:
        raise InputError(
            f"bundle {bundle.name!r} is not an item pool (no {ADAPTIVE!r} state); build one with "
            "`microbench adaptive build`"
        )
    state = AdaptiveState.from_bundle(bundle, bundle.estimator_state(ADAPTIVE))
    if set(state.score_map.item_ids) != set(bundle.item_ids):
        raise BundleError(f"bundle {bundle.name!r}: adaptive state and subset differ in items")
    return Pool(bundle, bundle.irt.subset(list(bundle.item_ids)), state)


# ---------------------------------------------------------------------------- building
def fit_adaptive_state(
    source: ResponseMatrix,
    truth: np.ndarray,
    *,
    seed: int = 0,
    folds: int = CALIBRATION_FOLDS,
    estimator: str = SCORE_ESTIMATOR,
    irt: ItemParams | None = None,
) -> tuple[ItemParams, AdaptiveState]:
    """IRT on all source models (``irt``: fitted already), the score map, and bands from
    cross-fitted adaptive replays.

    Each fold of source models is replayed (max-information selection, one item per step) to
    the whole pool with the score estimator fitted on the other folds, so its residuals are
    those of models the regression has not seen. The IRT parameters come from all source
    models, refitted per fold under :data:`FOLD_IRT_BELOW` sources.

    Directed folds add the models outside the sources, as the static guard's do
    (:func:`~lmeval_microbench.outside.folds.directed_folds`): the weakest fifth of the sources
    replayed with the score map fitted on the other four fifths and on the strongest half, and
    the strongest fifth fitted on the other four fifths and on the weakest half. Each fold's
    residuals make a set of bands (``ScoreMap.sides``), a floor on the width on its side
    (:class:`.bands.SideBands`).
    - Below: without it, the weakest fifth of held-out leaderboard models got 90 % intervals
      that held for 0.28-0.48 of them on five of the six v1 pools at 50 items
      (``bench/adaptive_before_downfold.md``). Merging the fold's residuals into the one band
      was tried first; in a synthetic world it narrowed the low bins and lowered coverage
      (0.89 -> 0.84).
    - Above: without it, the strongest fifth of IFEval's models (whole benchmark, a pool
      fitted on the rest) got 90 % intervals that held for 0.26-0.30 of them at 10-50 items.

    The same runs choose how far the imputation trusts a run's hit rate
    (:func:`.calibrate.choose_pseudo`) before the bands are fitted with that choice. Where the
    target is the sources' mean over the pool items (a whole benchmark), upward folds replayed
    on IRT refitted without their held-out models choose how far a run above the sources moves
    to the IRT-free reading (:func:`_upward_refits`, :mod:`.beyond`); a pool without them moves
    it the whole way (:data:`.beyond.UNCHOSEN_TOWARD`).
    """
    _check_model_count(source, folds)
    values = complete_answers(source)
    truth = np.asarray(truth, dtype=np.float64)
    marks = checkpoints_for(source.n_items)
    params = (irt if irt is not None else fit_source_irt(source, seed=seed)).subset(
        list(source.item_ids)
    )
    fold_of = np.random.default_rng(seed).permutation(source.n_models) % folds
    refit = seed if source.n_models < FOLD_IRT_BELOW else None
    inside = [
        fold_run(source, truth, values, params, fold_of == k, estimator, refit_seed=refit)
        for k in range(folds)
    ]
    directed = directed_runs(source, truth, values, params, estimator)
    kinds = {"inside": inside, **{SIDE_OF[d]: runs for d, runs in directed.items()}}
    pseudo, pseudo_mae = choose_pseudo(kinds, truth, marks)
    predictions, spans = merged_predictions(inside, marks, pseudo, source.n_models)
    score_map = replace(ScoreMap.fit(estimator, source, truth), pseudo=pseudo)
    score_map = score_map.with_bands(predictions, spans, truth)
    edges = ability_edges(params, values)
    for direction, runs in directed.items():
        found = [run_predictions(run, marks, pseudo) for run in runs]
        side = SIDE_OF[direction]
        score_map = score_map.with_side(side, found, truth[runs[0].rows], edges[side])
        if direction == UP:
            score_map = score_map.with_top(top_band(runs, found, truth))
    whole = is_matrix_mean(values, truth)
    toward, toward_mae, toward_edge = 0.0, {}, None
    if whole and score_map.has_upward_folds:
        refits = _upward_refits(source, truth, values, params, estimator, seed)
        toward, toward_mae = choose_toward(refits, truth, marks, pseudo)
    elif whole:  # nothing to choose on: the static guard's move (see .beyond)
        toward, toward_edge = UNCHOSEN_TOWARD, edges[ABOVE]
    score_map = score_map.with_toward(toward, toward_edge).with_pool_reach(whole)
    score_map = score_map.with_lower_reach(REACH_Z)  # every pool: see ScoreMap.lower_reach
    warn_without_upward_folds(score_map, source.n_models)
    calibration = {
        "selector": MaxInfoSelector.name,
        "batch": 1,
        "folds": folds,
        "n_source_models": int(source.n_models),
        "down_fold_models": _held_count(directed, DOWN),
        "up_fold_models": _held_count(directed, UP),
        "pseudo_answers": pseudo,
        "pseudo_mae_by_folds": pseudo_mae,
        "toward_reading": toward,
        "upper_reach": score_map.reach,
        "toward_mae_by_share": toward_mae,
        "cv_mae_by_items": {str(n): float(np.mean(np.abs(predictions[n] - truth))) for n in marks},
        "note": "cross-fitted replays of the source models; MAE on the fraction scale",
    }
    return params, AdaptiveState(0.0, 1.0, estimator, score_map, calibration)


def top_band(
    runs: Sequence[FoldRun],
    found: Sequence[tuple[Mapping[int, np.ndarray], Mapping[int, tuple[np.ndarray, np.ndarray]]]],
    truth: np.ndarray,
) -> TopBand | None:
    """The top band (:class:`.bands.TopBand`) of the upward fold whose map reaches highest,
    the one fitted on the other four fifths, from its ``(predictions, spans)`` in ``found``."""
    nearest = int(np.argmax([run.score_map.truth_range[1] for run in runs]))
    predictions, spans = found[nearest]
    run = runs[nearest]
    return TopBand.fit(predictions, spans, truth[run.rows], run.score_map.truth_range[1])


def ability_edges(
    params: ItemParams, values: np.ndarray, prior_mean: float = 0.0, prior_sd: float = 1.0
) -> dict[str, float]:
    """Where the sources end on the ability scale, keyed by the side they bound: the
    whole-pool abilities (the package's EAP, which a run's grid posterior equals) of the
    weakest and the strongest :data:`EDGE_SHARE` of the source models. Beyond them, a run gets
    its side's bands (:class:`.bands.SideBands`)."""
    theta, _ = estimate_abilities(
        params, values, params.item_ids, prior_mean=prior_mean, prior_sd=prior_sd
    )
    low, high = np.quantile(theta[:, 0], [EDGE_SHARE, 1.0 - EDGE_SHARE])
    return {BELOW: float(low), ABOVE: float(high)}


def directed_runs(
    source: ResponseMatrix,
    truth: np.ndarray,
    values: np.ndarray,
    params: ItemParams,
    estimator: str,
    directions: tuple[str, ...] = (UP, DOWN),
) -> dict[str, list[FoldRun]]:
    """Per direction of ``directions``, the replays of its folds (directions with fewer than
    :data:`MIN_FOLD_MODELS` held-out models are left out). Folds that hold out the same models
    (both of a direction: they differ in the models the map is fitted on) share one replay."""
    runs: dict[str, list[FoldRun]] = {}
    orders: dict[bytes, np.ndarray] = {}
    for train, test, direction in _usable_folds(source, truth):
        if direction not in directions:
            continue
        held, fit_on = (np.isin(np.arange(source.n_models), rows) for rows in (test, train))
        order = orders.get(test.tobytes())
        run = fold_run(source, truth, values, params, held, estimator, fit_on, order)
        orders[test.tobytes()] = run.order
        runs.setdefault(direction, []).append(run)
    return runs


def _upward_refits(
    source: ResponseMatrix,
    truth: np.ndarray,
    values: np.ndarray,
    params: ItemParams,
    estimator: str,
    seed: int,
) -> list[FoldRun]:
    """The upward folds replayed on item parameters refitted on each fold's training models
    (:func:`.calibrate.fold_params`), with the ability edge above those models: what a model
    beyond the sources meets, to choose the move towards the reading. Not for the side bands:
    built from these, IFEval's strongest fifth held out got 90 % intervals 95 points wide (43
    with the pool's IRT) at the same coverage (0.97-0.99; ``tools/bench_adaptive.py`` on that
    variant during development, not kept)."""
    runs = []
    for train, test, direction in _usable_folds(source, truth):
        if direction != UP:
            continue
        held, fit_on = (np.isin(np.arange(source.n_models), rows) for rows in (test, train))
        run = fold_run(source, truth, values, params, held, estimator, fit_on, refit_seed=seed)
        runs.append(replace(run, above_edge=ability_edges(run.params, values[fit_on])[ABOVE]))
    return runs


def _usable_folds(
    source: ResponseMatrix, truth: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """The directed folds with at least :data:`MIN_FOLD_MODELS` models held out and kept."""
    return [
        (train, test, direction)
        for train, test, direction in directed_folds(truth)
        if test.size >= MIN_FOLD_MODELS and source.n_models - test.size >= MIN_FOLD_MODELS
    ]


def _held_count(directed: Mapping[str, list[FoldRun]], direction: str) -> int:
    runs = directed.get(direction)
    return int(runs[0].rows.size) if runs else 0


def _check_model_count(source: ResponseMatrix, folds: int) -> None:
    """Refuse a matrix whose cross-fitting folds leave the score estimator too few models,
    naming the user's count rather than a fold's."""

    def fitted_on(n_models: int) -> int:  # the models the largest fold leaves
        return n_models - -(-n_models // folds)

    if fitted_on(source.n_models) < MIN_SOURCE_MODELS:
        least = source.n_models
        while fitted_on(least) < MIN_SOURCE_MODELS:
            least += 1
        raise InputError(
            f"{source.source}: a pool needs at least {least} source models, got "
            f"{source.n_models} (its score map is cross-fitted on {folds} folds, each fitted "
            f"on the other models, and needs {MIN_SOURCE_MODELS} of them)"
        )


def complete_answers(source: ResponseMatrix) -> np.ndarray:
    values = np.asarray(source.values, dtype=np.float64)
    if np.isnan(values).any():
        raise InputError(
            f"{source.source}: a pool needs every source model's answer to every item "
            f"({int(np.isnan(values).any(axis=1).sum())} models have gaps; drop them first)"
        )
    return values


def build_pool(
    source: ResponseMatrix,
    truth: np.ndarray,
    *,
    name: str,
    benchmark: str,
    metric: MetricSpec | None = None,
    dataset: DatasetCoordinates | None = None,
    license: str | None = None,
    description: str | None = None,
    seed: int = 0,
    estimator: str = SCORE_ESTIMATOR,
    chance: float | Mapping[ItemId, float] | None = None,
    progress: bool = True,
) -> Bundle:
    """The pool bundle of every item of ``source`` (true full scores ``truth``, fractions).

    ``chance`` (one level, or one per item, e.g. 1 / number of choices; None: the weakest
    source models' item rates, see :func:`~lmeval_microbench.personfit.build_spec`) sets the
    pool's ``person_fit`` block, which checks every adaptive estimate like a static one, and
    the floor of the intervals of runs below the sources (:meth:`.scoring.ScoreMap.with_floor`).
    ``progress``: the person-fit folds' bar.
    """
    _check_model_count(source, CALIBRATION_FOLDS)  # before the IRT and person-fit work
    irt = fit_source_irt(source, seed=seed)
    # a bad chance is refused before the replays
    person_fit = pool_person_fit(source, truth, chance, seed=seed, progress=progress)
    _, state = fit_adaptive_state(source, truth, seed=seed, estimator=estimator, irt=irt)
    state = replace(state, score_map=state.score_map.with_floor(lowest_score(person_fit)))
    subset = Subset(
        tuple(source.item_ids), np.full(source.n_items, 1.0 / source.n_items), POOL_METHOD, seed
    )
    static = state.score_map.estimator
    bundle = Bundle.from_parts(
        name=name,
        benchmark=benchmark,
        subset=subset,
        source=source,
        irt=irt,
        estimators=[
            EstimatorSpec(static.name, static.state_dict()),
            EstimatorSpec(ADAPTIVE, state.to_dict()),
        ],
        default_estimator=static.name,
        metric=metric or MetricSpec(name="acc"),
        dataset=dataset,
        reliability={"adaptive": dict(state.calibration)},
        license=license,
        description=description,
        person_fit=person_fit,
    )
    return bundle


def pool_person_fit(
    source: ResponseMatrix,
    truth: np.ndarray,
    chance: float | Mapping[ItemId, float] | None,
    seed: int = 0,
    progress: bool = True,
) -> PersonFitSpec:
    """A pool's ``person_fit`` block: the l_z* threshold from its source models' whole
    answer patterns (l_z* is standardised for the items a run answered, so it carries over
    to the 10-50 items of an adaptive run) and the chance levels of every pool item; ``seed``
    is the one the pool's IRT was fitted with."""
    items = list(source.item_ids)
    return build_spec(source, items, truth, chance, seed=seed, progress=progress)


# ---------------------------------------------------------------------------- estimating
@dataclass(frozen=True)
class PoolEstimate:
    """Full-score estimate (fractions) and 90 % interval of one adaptive run, with its ability."""

    value: float
    lower: float
    upper: float
    theta: float
    se: float
    n_items: int
    person_fit: dict[str, Any] = field(default_factory=lambda: {"checked": False})
    """:func:`~lmeval_microbench.personfit.fit_record` of the answers (``checked`` false for a
    pool without a ``person_fit`` block)."""
    note: str = ""
    """Why the estimate was moved or its interval widened ("" when the answers fit)."""
    placement: dict[str, Any] | None = None
    """Where the run's ability places it against the source models
    (:func:`.bands.run_placement`, one :meth:`..outside.Placement.records` object; None: a pool
    saved without ability edges)."""

    @property
    def flagged(self) -> bool:
        return bool(self.person_fit.get("flagged"))


def estimate_pool(pool: Pool, scores: Mapping[ItemId, float], level: float = 0.9) -> PoolEstimate:
    """The estimate an adaptive run's answers give, whatever order they were asked in,
    after the pool's person-fit check (the rule of static estimates,
    :func:`..personfit.widen_for_fit`: answers that cannot be told from guessing widen the
    interval to the chance score).

    The posterior depends only on which items were answered how, so this is what the run
    printed, recomputed from its samples (what ``microbench reconstruct`` needs).
    """
    raw, theta, se = posterior_estimate(pool, scores, level)
    reported, fit, note = check_estimate(pool.bundle, scores, raw)
    checked = raw if reported is None else reported
    return PoolEstimate(
        checked.value,
        checked.lower,
        checked.upper,
        theta,
        se,
        len(scores),
        fit_record(fit, pool.bundle.person_fit, note, checked is not raw),
        note,
        _placement(pool, theta, se),
    )


def _placement(pool: Pool, theta: float, se: float) -> dict[str, Any] | None:
    """The placement record of one run's ability posterior (None: no ability edges)."""
    found = run_placement(pool.state.score_map.sides, (np.array([theta]), np.array([se])))
    return None if found is None else found.records()[0]


def posterior_estimate(
    pool: Pool, scores: Mapping[ItemId, float], level: float = 0.9
) -> tuple[Estimate, float, float]:
    """The score map's estimate of the answers before any person-fit check, with the
    ability's posterior mean and sd: what :func:`estimate_pool` then checks."""
    if not scores:
        raise InputError(f"pool {pool.name!r}: no answered items to estimate from")
    session = GridPosterior(
        pool.params, 1, prior_mean=pool.state.prior_mean, prior_sd=pool.state.prior_sd
    )
    items = sorted(scores, key=str)  # one summation order, whatever order they came in
    positions = pool.params.positions(items)
    values = np.array([float(scores[item]) for item in items])
    session.update(np.zeros(len(values), dtype=np.intp), positions, values)
    asked = np.zeros((1, pool.params.n_items), dtype=bool)
    asked[0, positions] = True
    answers = np.zeros((1, pool.params.n_items))
    answers[0, positions] = values
    score_map = pool.state.score_map
    theta, se = session.mean_se()
    value, low, high = score_map.predict_run(session.expected_scores(), asked, answers, (theta, se))
    lower, upper = score_map.interval(value, len(values), level, (low, high), (theta, se))
    upper = open_above(values[None, :], upper)  # every asked item right: no bound above
    raw = Estimate(float(value[0]), float(lower[0]), float(upper[0]), level)
    return raw, float(theta[0]), float(se[0])
