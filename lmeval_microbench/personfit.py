"""Person fit: does a model answer like the population the IRT parameters were fitted on?

A score estimate extrapolates from a few items by assuming the model behaves like the source
models: easy items right before hard ones, in the proportions the IRT model predicts at its
ability. Two checks say when that assumption fails, so that the output can say so and the
interval can widen to what can honestly be said.

``lz``
    The standardised log-likelihood l_z of Drasgow, Levine and Williams (1985) at the model's
    ability, or (default) Snijders' (2001) l_z*, which corrects l_z for the ability being
    estimated from the same answers so that it is close to N(0, 1) even on 25 items. Large
    negative values mean the pattern is less likely than the model's own ability predicts:
    hard items right and easy items wrong, near-random answering, a model far outside the
    source range. The threshold is calibrated on source models (:func:`calibrate_lz_threshold`):
    their 4 % quantile flags about 5 % of new ordinary models (source models shaped the IRT
    fit and fit it a little better; see ``bench/personfit.md``).
``guessing_test``
    Likelihood ratio of the answers under the IRT model (marginal over the ability prior)
    against answering at chance (each item right with probability ``chance``, e.g. 1 / number
    of choices), with a parametric-bootstrap p-value under guessing and the posterior
    probability of guessing. When guessing cannot be rejected (p >= ``alpha``) the answers are
    indistinguishable from a random responder's and the estimate's interval must reach down
    to the chance-level full score (:func:`widen_for_fit`).

Scores may be fractional (counted as fractional Bernoulli outcomes) and NaN where an item was
not scored; every statistic uses the scored items of each row only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.special import expit

from ._types import Estimate, ItemId
from .bundle.fit_spec import PersonFitSpec
from .errors import InputError
from .irt import ItemParams, _math, estimate_abilities
from .irt.ability import EAP_STEP, _checked_values

if TYPE_CHECKING:
    from .bundle import Bundle

DEFAULT_LZ_THRESHOLD = -1.645
"""l_z* threshold when none was calibrated: the 5 % quantile of its N(0, 1) reference."""
DEFAULT_ALPHA = 0.01
"""Guessing is "not rejected" when its bootstrap p-value is at least this."""
DEFAULT_SIMULATIONS = 2000
"""Simulated random responders per missingness pattern for the guessing p-value."""
CHANCE_FLOOR = 1e-3
"""Per-item chance levels are clipped to [CHANCE_FLOOR, 1 - CHANCE_FLOOR] (gsm8k has 0)."""

_P_CLIP = 1e-10
_SIM_CHUNK = 512


# ------------------------------------------------------------------------------ l_z
def lz(
    params: ItemParams,
    values: np.ndarray,
    item_ids: Sequence[ItemId],
    *,
    corrected: bool = True,
    method: str = "eap",
    prior_mean: float = 0.0,
    prior_sd: float = 1.0,
    theta: np.ndarray | None = None,
) -> np.ndarray:
    """Person-fit statistic of each row of ``values`` (m, n) -> (m,); NaN with < 2 items scored.

    ``corrected=False`` gives Drasgow's l_z = (l0 - E l0) / sd(l0) at the estimated ability,
    with l0 = sum y log P + (1 - y) log(1 - P) over the scored items. ``corrected=True`` gives
    Snijders' l_z*: the weights w = logit(P) are projected off the ability score direction,
    w~ = w - c r with r = P' / (P (1 - P)) and c = sum P' w / sum P' r, and the statistic is
    sum (y - P) w~ / sqrt(sum P (1 - P) w~^2). At the MAP ability (whose estimating equation
    is sum (y - P) r = (theta - mean) / sd^2) this equals Snijders' numerator
    W + c r0(theta); at the EAP (default, as the estimators use) it is the same projection
    and differs by a term of order 1 / n. ``theta`` (m, D) skips the ability estimation.
    """
    values = _checked_values(values, item_ids)
    columns = params.subset(list(item_ids))
    if theta is None:
        theta, _ = estimate_abilities(
            columns,
            values,
            list(columns.item_ids),
            method=method,
            prior_mean=prior_mean,
            prior_sd=prior_sd,
        )
    theta = np.asarray(theta, dtype=np.float64).reshape(values.shape[0], columns.n_dims)
    observed = ~np.isnan(values)
    y = np.where(observed, values, 0.0)
    star = expit(_math.logits(theta, columns.a, columns.d))
    p = np.clip(columns.g + (columns.u - columns.g) * star, _P_CLIP, 1.0 - _P_CLIP)
    pq = p * (1.0 - p) * observed
    w = np.log(p) - np.log1p(-p)
    resid = (y - p) * observed
    if not corrected:
        numerator = np.sum(resid * w, axis=1)
        variance = np.sum(pq * w**2, axis=1)
    else:
        # dP/dtheta (m, n, D) and r = P' / (P (1 - P)); unobserved items carry zero weight.
        slope = ((columns.u - columns.g) * star * (1.0 - star))[:, :, None] * columns.a[None]
        slope = slope * observed[:, :, None]
        r = slope / (p * (1.0 - p))[:, :, None]
        lhs = np.einsum("mnd,mne->mde", slope, r)
        rhs = np.einsum("mnd,mn->md", slope, w)
        c = _solve_rows(lhs, rhs)
        w_tilde = w - np.einsum("mnd,md->mn", r, c)
        numerator = np.sum(resid * w_tilde, axis=1)
        variance = np.sum(pq * w_tilde**2, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = numerator / np.sqrt(variance)
    out[(observed.sum(axis=1) < 2) | ~(variance > 1e-12)] = np.nan
    return out


def _solve_rows(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Per-row least-squares solve of (m, D, D) x = (m, D); zero where the system is empty."""
    out = np.zeros_like(rhs)
    for k in range(lhs.shape[0]):
        if np.any(lhs[k]):
            out[k] = np.linalg.lstsq(lhs[k], rhs[k], rcond=None)[0]
    return out


def calibrate_lz_threshold(
    params: ItemParams,
    values: np.ndarray,
    item_ids: Sequence[ItemId],
    *,
    false_alarm: float = 0.05,
    corrected: bool = True,
) -> float:
    """The ``false_alarm`` quantile of l_z over ordinary (e.g. source) models' rows.

    Flagging rows below it flags that share of models like these. Source models took part
    in the IRT fit, so they fit slightly better than new models; measure the false-alarm
    rate on held-out models (``tools/bench_personfit.py`` does).
    """
    if not 0 < false_alarm < 1:
        raise InputError(
            f"calibrate_lz_threshold: false_alarm must be in (0, 1), got {false_alarm}"
        )
    stats = lz(params, values, item_ids, corrected=corrected)
    stats = stats[np.isfinite(stats)]
    if stats.size < 20:
        raise InputError(
            f"calibrate_lz_threshold: {stats.size} rows with a finite l_z; need at least 20"
        )
    return float(np.quantile(stats, false_alarm))


# ------------------------------------------------------------------------------ guessing
@dataclass(frozen=True)
class GuessingTest:
    """Answers under the IRT model versus answering at chance, per row.

    ``log_ratio`` = log marginal likelihood under the IRT model (ability integrated over its
    prior) minus log likelihood under guessing: positive favours the IRT model.
    ``p_value``: share of simulated random responders (same scored items, each right with
    probability ``chance``) whose ``log_ratio`` is at least as large; large means the answers
    look like guessing. ``posterior``: P(guessing | answers) at prior ``prior_guess``.
    ``score_p_value``: share of those random responders with at least as many right answers
    (above their chance expectation): small means far more right than guessing gives. The
    likelihood ratio alone cannot say so for a pattern that neither model fits (a strong
    model answering unlike the source models), so guessing needs both to be large.
    """

    log_ratio: np.ndarray
    p_value: np.ndarray
    posterior: np.ndarray
    score_p_value: np.ndarray | None = None


def chance_vector(chance: float | Sequence[float] | np.ndarray, n_items: int) -> np.ndarray:
    """Per-item chance levels (n,), clipped into [CHANCE_FLOOR, 1 - CHANCE_FLOOR]."""
    array = np.asarray(chance, dtype=np.float64)
    if array.ndim == 0:
        array = np.full(n_items, float(array))
    if array.shape != (n_items,):
        raise InputError(f"chance has shape {array.shape}, expected a scalar or ({n_items},)")
    if not np.all(np.isfinite(array)) or np.any((array < 0) | (array >= 1)):
        raise InputError("chance levels must lie in [0, 1)")
    return np.clip(array, CHANCE_FLOOR, 1.0 - CHANCE_FLOOR)


def population_floor(values: np.ndarray, truth: np.ndarray, share: float = 0.05) -> np.ndarray:
    """Per-item success rate of the weakest ``share`` of a population (for items without
    choices, e.g. gsm8k: the lowest plausible level of a model that cannot do the task).

    A rate of 1 (every weak model right, a few of them on an easy item) is lowered to
    ``(answered + 0.5) / (answered + 1)``: not a certain success for a guesser, since a
    chance level of 1 would make guessing and a perfect model the same thing (and was
    refused, stopping the build).
    """
    values = np.asarray(values, dtype=np.float64)
    count = max(1, round(share * values.shape[0]))
    weakest = values[np.argsort(np.asarray(truth), kind="stable")[:count]]
    answered = (~np.isnan(weakest)).sum(axis=0)
    rate = np.nansum(weakest, axis=0) / np.maximum(answered, 1)
    return np.minimum(rate, (answered + 0.5) / (answered + 1.0))


def _marginal_loglik(
    columns: ItemParams, values: np.ndarray, prior_mean: float, prior_sd: float
) -> np.ndarray:
    """log of the IRT likelihood integrated over the N(prior_mean, prior_sd^2) ability prior."""
    if columns.n_dims == 1:
        n_nodes = round(2 * _math.GRID_BOUND / EAP_STEP) + 1
        std_nodes, log_w = _math.equispaced_normal_grid(n_nodes)
    else:
        std_nodes, log_w = _math.latent_grid(columns.n_dims, 41)
    nodes = prior_mean + prior_sd * std_nodes
    loglik = _math.grid_loglik(
        _math.ScoreArrays(values), nodes, columns.a, columns.d, columns.g, columns.u
    )
    return _math.posterior_weights(loglik, log_w)[1]


def _guess_loglik(values: np.ndarray, chance: np.ndarray) -> np.ndarray:
    observed = ~np.isnan(values)
    y = np.where(observed, values, 0.0)
    return np.sum(observed * (y * np.log(chance) + (1.0 - y) * np.log1p(-chance)), axis=1)


def guessing_test(
    params: ItemParams,
    values: np.ndarray,
    item_ids: Sequence[ItemId],
    chance: float | Sequence[float] | np.ndarray,
    *,
    n_simulations: int = DEFAULT_SIMULATIONS,
    seed: int = 0,
    prior_guess: float = 0.5,
    prior_mean: float = 0.0,
    prior_sd: float = 1.0,
) -> GuessingTest:
    """Can the answers of each row be told apart from answering at chance? See GuessingTest.

    ``chance``: probability of a right answer by guessing, a scalar or one per column (1 /
    number of choices; for items without choices use :func:`population_floor`). Rows with
    the same scored items share their simulated random responders.
    """
    values = _checked_values(values, item_ids)
    columns = params.subset(list(item_ids))
    chance = chance_vector(chance, values.shape[1])
    if not 0 < prior_guess < 1:
        raise InputError(f"guessing_test: prior_guess must be in (0, 1), got {prior_guess}")
    ratio = _marginal_loglik(columns, values, prior_mean, prior_sd) - _guess_loglik(values, chance)
    observed = ~np.isnan(values)
    p_value = np.full(values.shape[0], np.nan)
    score_p = np.full(values.shape[0], np.nan)
    excess = np.sum(np.where(observed, values - chance, 0.0), axis=1)
    rng = np.random.default_rng(seed)
    patterns: dict[bytes, list[int]] = {}
    for row in range(values.shape[0]):
        if observed[row].any():
            patterns.setdefault(np.packbits(observed[row]).tobytes(), []).append(row)
    for rows in patterns.values():
        mask = observed[rows[0]]
        sub = columns.subset([columns.item_ids[k] for k in np.flatnonzero(mask)])
        simulated, sums = [], []
        for start in range(0, n_simulations, _SIM_CHUNK):
            size = min(_SIM_CHUNK, n_simulations - start)
            draws = (rng.random((size, int(mask.sum()))) < chance[mask]).astype(np.float64)
            simulated.append(
                _marginal_loglik(sub, draws, prior_mean, prior_sd)
                - _guess_loglik(draws, chance[mask])
            )
            sums.append(np.sum(draws - chance[mask], axis=1))
        p_value[rows] = _upper_tail(np.concatenate(simulated), ratio[rows])
        score_p[rows] = _upper_tail(np.concatenate(sums), excess[rows])
    prior_logit = math.log(prior_guess / (1.0 - prior_guess))
    posterior = expit(prior_logit - ratio)
    posterior[~observed.any(axis=1)] = prior_guess
    return GuessingTest(ratio, p_value, posterior, score_p)


def _upper_tail(null: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Monte Carlo p-value: (1 + #null >= observed) / (1 + #null), per observed value."""
    null = np.sort(null)
    at_least = null.size - np.searchsorted(null, observed - 1e-9, side="left")
    return (1.0 + at_least) / (1.0 + null.size)


# ------------------------------------------------------------------------------ combined
@dataclass(frozen=True)
class PersonFit:
    """Person fit of one model's answers to a bundle's IRT parameters.

    ``misfit``: l_z below ``lz_threshold`` (the pattern is unlike the source models').
    ``guessing``: guessing not rejected (``guess_p_value >= alpha`` and ``score_p_value >=
    alpha``): the answers are indistinguishable from a random responder's. ``reason`` is
    empty when neither holds.
    """

    lz: float
    lz_threshold: float
    guess_p_value: float
    guess_posterior: float
    alpha: float
    n_scored: int
    misfit: bool
    guessing: bool
    reason: str
    score_p_value: float = math.nan
    """P(a random responder gets at least as many right answers): see :class:`GuessingTest`."""

    @property
    def flagged(self) -> bool:
        return self.misfit or self.guessing

    def as_dict(self) -> dict[str, Any]:
        return {
            "lz": self.lz,
            "lz_threshold": self.lz_threshold,
            "guess_p_value": self.guess_p_value,
            "guess_posterior": self.guess_posterior,
            "score_p_value": self.score_p_value,
            "alpha": self.alpha,
            "n_scored": self.n_scored,
            "misfit": self.misfit,
            "guessing": self.guessing,
            "flagged": self.flagged,
            "reason": self.reason,
        }


def person_fit(
    params: ItemParams,
    values: np.ndarray,
    item_ids: Sequence[ItemId],
    chance: float | Sequence[float] | np.ndarray,
    *,
    lz_threshold: float = DEFAULT_LZ_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    n_simulations: int = DEFAULT_SIMULATIONS,
    seed: int = 0,
) -> list[PersonFit]:
    """l_z* and the guessing test for every row of ``values``, with a reason text per row."""
    if not 0 < alpha < 1:
        raise InputError(f"person_fit: alpha must be in (0, 1), got {alpha}")
    values = _checked_values(values, item_ids)
    stats = lz(params, values, item_ids)
    test = guessing_test(params, values, item_ids, chance, n_simulations=n_simulations, seed=seed)
    n_scored = (~np.isnan(values)).sum(axis=1)
    results = []
    for k in range(values.shape[0]):
        misfit = bool(np.isfinite(stats[k]) and stats[k] < lz_threshold)
        guessing = bool(
            np.isfinite(test.p_value[k])
            and test.p_value[k] >= alpha
            and test.score_p_value[k] >= alpha
        )
        reasons = []
        if guessing:
            reasons.append(
                f"the answers cannot be told from guessing (p = {test.p_value[k]:.2f} that a "
                f"random responder fits the IRT model this well; P(guessing) = "
                f"{test.posterior[k]:.2f})"
            )
        if misfit:
            reasons.append(
                f"the answer pattern is unlike the source models' (l_z* = {stats[k]:.2f} < "
                f"{lz_threshold:.2f}: right and wrong answers do not follow item difficulty)"
            )
        results.append(
            PersonFit(
                float(stats[k]),
                float(lz_threshold),
                float(test.p_value[k]),
                float(test.posterior[k]),
                float(alpha),
                int(n_scored[k]),
                misfit,
                guessing,
                "; ".join(reasons),
                float(test.score_p_value[k]),
            )
        )
    return results


def widen_for_fit(estimate: Estimate, fit: PersonFit, chance_score: float) -> tuple[Estimate, str]:
    """The estimate to report given the person fit, and a note saying why it changed.

    When guessing cannot be rejected, the point value becomes the mixture of the chance-level
    score ``chance_score`` (the full-benchmark score of a random responder) and the fitted
    estimate, weighted by the posterior probability of guessing, and the interval is
    stretched to contain the chance score: the estimator's value assumes an ordinary model,
    and a model whose answers look like guessing is, with that probability, at chance
    (keeping the value put a random model's estimate of hellaswag near 50 with chance 25).
    A misfit without guessing only adds a warning.
    """
    if not math.isfinite(chance_score) or not 0 <= chance_score <= 1:
        raise InputError(f"widen_for_fit: chance_score must be in [0, 1], got {chance_score}")
    if not fit.flagged:
        return estimate, ""
    if not fit.guessing:
        return estimate, fit.reason
    weight = fit.guess_posterior if math.isfinite(fit.guess_posterior) else 1.0
    value = (1.0 - weight) * estimate.value + weight * chance_score
    widened = replace(
        estimate,
        value=value,
        lower=min(estimate.lower, chance_score, value),
        upper=max(estimate.upper, chance_score, value),
    )
    return widened, (
        f"{fit.reason}; estimate moved toward the chance-level score {100 * chance_score:.1f} "
        f"by P(guessing) = {weight:.2f} (from {100 * estimate.value:.1f}), interval widened "
        "to include it"
    )


# ------------------------------------------------------------------------------ bundles
BUILD_LZ_QUANTILE = 0.04
"""Quantile of l_z* over the source models a build uses as threshold (``bench/personfit.md``:
it flags about 4 % of held-out ordinary leaderboard models)."""
FLOOR_SHARE = 0.05
"""Share of weakest source models whose item rates stand in for chance without choices."""
MIN_CALIBRATION_ROWS = 20


def build_spec(
    irt: ItemParams,
    values: np.ndarray,
    item_ids: Sequence[ItemId],
    target: np.ndarray,
    chance: float | Mapping[ItemId, float] | None,
    *,
    quantile: float = BUILD_LZ_QUANTILE,
    alpha: float = DEFAULT_ALPHA,
) -> PersonFitSpec:
    """The ``person_fit`` block of a bundle, from its source models' subset answers.

    ``values`` (models, subset items) and ``target`` (their full scores) are the source
    models'. ``chance``: one chance level for every item (e.g. 0.25), a mapping from item
    id to chance level covering every subset item (the full-benchmark chance score is then
    the mean over all items the mapping gives, ideally the whole benchmark), or None when
    the benchmark has no choices: each item's rate among the weakest
    :data:`FLOOR_SHARE` of source models, and as chance score those models' mean full score.
    A mapping whose subset items share one level is stored as that one number.
    """
    ids = list(item_ids)
    per_item, score, chance_rule = _build_chance(values, ids, target, chance)
    finite = np.isfinite(lz(irt, values, ids))
    if finite.sum() >= MIN_CALIBRATION_ROWS:
        threshold = calibrate_lz_threshold(irt, values, ids, false_alarm=quantile)
        lz_rule = f"{100 * quantile:g} % quantile of l_z* over {int(finite.sum())} source models"
    else:
        threshold = DEFAULT_LZ_THRESHOLD
        lz_rule = (
            f"N(0, 1) 5 % quantile: only {int(finite.sum())} source models with an l_z* "
            f"(calibrating needs {MIN_CALIBRATION_ROWS})"
        )
    return PersonFitSpec(threshold, alpha, per_item, score, chance_rule, lz_rule)


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
            f"no choices known: each item's rate among the weakest {100 * FLOOR_SHARE:g} % of "
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
        return per_item, float(given.mean()), rule
    level = float(_chance_levels([chance])[0])
    return level, level, f"{level:g} for every item, as given"


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
    return widen_for_fit(estimate, fit, spec.chance_score)


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
        "widened": widened,
        "note": note,
    }


def fit_warning(model: str | None, bundle_name: str, note: str) -> str:
    """The one-line warning printed for a flagged estimate (``model`` None: not known)."""
    who = "the evaluated model" if model is None else f"model {model!r}"
    return f"{who}, bundle {bundle_name!r}: person fit: {note}"
