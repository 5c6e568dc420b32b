"""The ``person_fit`` block of a bundle: built from its source models, applied to new ones."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._types import Estimate, ItemId
from ..bundle.fit_spec import STAND_IN_RULE, PersonFitSpec
from ..errors import InputError
from ..responses import ResponseMatrix
from .held_out import held_out_lz
from .rule import PersonFit, person_fit, widen_for_fit
from .statistics import (
    DEFAULT_ALPHA,
    DEFAULT_LZ_THRESHOLD,
    DEFAULT_SIMULATIONS,
    population_floor,
)

if TYPE_CHECKING:
    from ..bundle import Bundle

BUILD_LZ_QUANTILE = 0.04
"""Quantile of l_z* over the source models a build uses as threshold (``bench/personfit.md``:
it flags about 4 % of held-out ordinary leaderboard models)."""
FLOOR_SHARE = 0.05
"""Share of weakest source models whose item rates stand in for chance without choices."""
IMPLAUSIBLE_SHARE = 0.5
"""More source models than this share under a given chance score (less :data:`BELOW_CHANCE`):
the build warns that the chance level is likely wrong."""
MIN_CALIBRATION_ROWS = 10
"""Source models with a held-out l_z* the threshold needs (a build needs 10 models)."""
BELOW_CHANCE = 0.05
"""How far under the chance-level score the lowest plausible score lies: near-random models
are not uniform guessers, and the weakest Open LLM Leaderboard v1 models scored up to 4
points under chance (ARC 21.0, MMLU 22.9, Winogrande 47.9 against 25, 25 and 50;
``bench/shipped_guard.md``)."""


def build_spec(
    source: ResponseMatrix,
    item_ids: Sequence[ItemId],
    target: np.ndarray,
    chance: float | Mapping[ItemId, float] | None,
    *,
    irt_model: str = "2pl",
    seed: int = 0,
    quantile: float = BUILD_LZ_QUANTILE,
    alpha: float = DEFAULT_ALPHA,
    progress: bool = True,
) -> PersonFitSpec:
    """The ``person_fit`` block of a bundle, from its source models' answers on ``item_ids``.

    ``source`` is the matrix the bundle's IRT is fitted on (``irt_model``, ``seed``: as
    :func:`..irt.fit_source_irt` fits it) and ``target`` its models' full scores. The l_z*
    threshold is the ``quantile`` of the source models' l_z*, each scored by an IRT fitted
    the same way without it (:func:`.held_out.held_out_lz`), so that it flags about that
    share of new ordinary models however few the sources are.
    ``chance``: one chance level for every item (e.g. 0.25), a mapping from item
    id to chance level covering every subset item (the full-benchmark chance score is then
    the mean over all items the mapping gives, ideally the whole benchmark), or None when
    the benchmark has no choices: each item's rate among the weakest
    :data:`FLOOR_SHARE` of source models, and as chance score those models' mean full score
    (``chance_from = "weakest_sources"``: the check widens intervals to that score but moves
    no estimate). A mapping whose subset items share one level is stored as that one number.
    ``progress`` False hides the bar of the held-out folds.
    """
    ids = list(item_ids)
    values = source.values[:, source.item_positions(ids)]
    per_item, score, chance_rule = _build_chance(values, ids, target, chance)
    threshold, lz_rule = _lz_threshold(
        held_out_lz(source, ids, irt_model=irt_model, seed=seed, progress=progress), quantile
    )
    chance_from = "weakest_sources" if chance is None else "given"
    return PersonFitSpec(threshold, alpha, per_item, score, chance_rule, lz_rule, chance_from)


def _lz_threshold(held_out: np.ndarray, quantile: float) -> tuple[float, str]:
    """The misfit threshold from the sources' held-out l_z*, and its rule in words."""
    finite = held_out[np.isfinite(held_out)]
    if finite.size < MIN_CALIBRATION_ROWS:
        return DEFAULT_LZ_THRESHOLD, (
            f"N(0, 1) 5 % quantile: only {finite.size} source models with an l_z* "
            f"(calibrating needs {MIN_CALIBRATION_ROWS})"
        )
    rule = (
        f"{100 * quantile:g} % quantile of l_z* over {finite.size} source models, each scored "
        "by an IRT fitted without it"
    )
    return float(np.quantile(finite, quantile)), rule


def lowest_score(spec: PersonFitSpec) -> float:
    """The lowest full score a model weaker than every source can plausibly have: the
    chance-level score less :data:`BELOW_CHANCE` where the chance levels were given, else 0
    (the weakest sources' stand-in is no floor for a model below them). ``guarded``'s
    interval reaches down to it for such a model
    (:meth:`..estimators.GuardedEstimator.with_floor`)."""
    if spec.stand_in:
        return 0.0
    return max(0.0, spec.chance_score - BELOW_CHANCE)


def _build_chance(
    values: np.ndarray,
    ids: list[ItemId],
    target: np.ndarray,
    chance: float | Mapping[ItemId, float] | None,
) -> tuple[float | dict[ItemId, float], float, str]:
    """Chance per subset item (or one number), the chance score and the rule in words."""
    if chance is None:
        floor = population_floor(values, target, FLOOR_SHARE)
        count = max(1, round(FLOOR_SHARE * values.shape[0]))
        weakest = np.sort(np.asarray(target, dtype=np.float64))[:count]
        rule = (
            f"{STAND_IN_RULE}: each item's rate among the weakest {100 * FLOOR_SHARE:g} % of "
            f"source models ({count}); chance score = their mean full score"
        )
        return dict(zip(ids, floor.tolist(), strict=True)), float(np.mean(weakest)), rule
    if isinstance(chance, Mapping):
        missing = [item for item in ids if item not in chance]
        if missing:
            raise InputError(f"chance: no chance level for subset items {missing[:5]}")
        given = _chance_levels(list(chance.values()))
        rule = (
            "per item as given (e.g. 1 / number of choices); chance score = the mean over "
            f"the {len(chance)} items given"
        )
        levels = {float(chance[item]) for item in ids}
        per_item = levels.pop() if len(levels) == 1 else {i: float(chance[i]) for i in ids}
        _warn_if_implausible(float(given.mean()), target)
        return per_item, float(given.mean()), rule
    level = float(_chance_levels([chance])[0])
    _warn_if_implausible(level, target)
    return level, level, f"{level:g} for every item, as given"


def _warn_if_implausible(chance_score: float, target: np.ndarray) -> None:
    """Warn when more than :data:`IMPLAUSIBLE_SHARE` of the sources score over
    :data:`BELOW_CHANCE` under the given chance score: the level is then likely wrong (a
    benchmark without choices, or a typo such as 0.99 for 0.25), and the interval of a model
    below every source would stop short at it. Real models do score under chance on hard or
    adversarial items, so the share is large: on the leaderboard matrices' own items (metabench's
    selection, their mean as the score) 24.5 % of TruthfulQA's models and 11.5 % of ARC's lie
    that far under their chance scores (23.3 and 25)."""
    scores = np.asarray(target, dtype=np.float64)
    below = int(np.sum(scores < chance_score - BELOW_CHANCE))
    if below > IMPLAUSIBLE_SHARE * scores.size:
        warnings.warn(
            f"chance: a chance score of {100 * chance_score:.1f} lies more than "
            f"{100 * BELOW_CHANCE:g} points above the full score of {below} of the "
            f"{scores.size} source models; a chance level is the score of guessing (1 / number "
            "of choices): check it, or leave it out for a benchmark without choices",
            stacklevel=3,
        )


def _chance_levels(levels: Sequence[Any]) -> np.ndarray:
    """Chance levels as an array, each a number in [0, 1) (unclipped, as stored)."""
    try:
        array = np.asarray(levels, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"chance: levels must be numbers, got {list(levels)[:5]}") from None
    if array.size == 0 or not np.all(np.isfinite(array)) or np.any((array < 0) | (array >= 1)):
        raise InputError("chance: chance levels must be numbers in [0, 1)")
    return array


def bundle_person_fit(
    bundle: Bundle, values: np.ndarray, *, n_simulations: int = DEFAULT_SIMULATIONS
) -> list[PersonFit] | None:
    """Person fit of each row of ``values`` (models, the bundle's items in its order; NaN =
    not scored) to ``bundle``; None when the bundle carries no ``person_fit`` block.

    The seed is fixed, so the run and a later ``microbench reconstruct`` of its samples
    report the same numbers.
    """
    spec = bundle.person_fit
    if spec is None or bundle.irt is None:
        return None
    ids = list(bundle.item_ids)
    return person_fit(
        bundle.irt,
        values,
        ids,
        spec.chance_vector(ids),
        lz_threshold=spec.lz_threshold,
        alpha=spec.alpha,
        n_simulations=n_simulations,
        seed=0,
    )


def check_estimate(
    bundle: Bundle, scores: Mapping[ItemId, float], estimate: Estimate | None
) -> tuple[Estimate | None, PersonFit | None, str]:
    """One model's ``estimate`` from ``scores`` (item id -> score; the bundle's items it
    lacks count as unscored) after the bundle's person-fit check: the estimate to report,
    the fit (None when the bundle has no check) and the note for a warning ("" when none)."""
    values = np.array([[scores.get(item, np.nan) for item in bundle.item_ids]], dtype=float)
    fits = bundle_person_fit(bundle, values)
    if fits is None:
        return estimate, None, ""
    reported, note = fitted_estimate(estimate, fits[0], bundle.person_fit)
    return reported, fits[0], note


def fitted_estimate(
    estimate: Estimate | None, fit: PersonFit | None, spec: PersonFitSpec | None
) -> tuple[Estimate | None, str]:
    """:func:`widen_for_fit` where there is an estimate and a fit; the note says what was done.

    Without an estimate (items missing, reported as NaN) there is nothing to qualify: no
    note, so no warning; the fit itself still goes into JSON outputs.
    """
    if estimate is None or fit is None or spec is None or not fit.flagged:
        return estimate, ""
    return widen_for_fit(estimate, fit, spec.chance_score, stand_in=spec.stand_in)


def fit_record(
    fit: PersonFit | None, spec: PersonFitSpec | None, note: str, widened: bool
) -> dict[str, Any]:
    """The ``person_fit`` object of JSON outputs (strict JSON: NaN as null).

    ``{"checked": false}`` when the bundle has no person-fit block (bundles before 1.2).
    """
    if fit is None or spec is None:
        return {"checked": False}
    record = {
        key: (None if isinstance(value, float) and not math.isfinite(value) else value)
        for key, value in fit.as_dict().items()
    }
    return {
        "checked": True,
        **record,
        "chance_score": spec.chance_score,
        "chance_from": spec.chance_from,
        "widened": widened,
        "note": note,
    }


def fit_warning(model: str | None, bundle_name: str, note: str) -> str:
    """The one-line warning printed for a flagged estimate (``model`` None: not known)."""
    who = "the evaluated model" if model is None else f"model {model!r}"
    return f"{who}, bundle {bundle_name!r}: person fit: {note}"
