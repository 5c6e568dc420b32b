"""One model's person fit (both statistics and a reason in words) and what it does to an
estimate: the rule every printed estimate follows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._types import Estimate, ItemId
from ..errors import InputError
from ..irt import ItemParams
from ..irt.ability import _checked_values
from .statistics import DEFAULT_ALPHA, DEFAULT_LZ_THRESHOLD, DEFAULT_SIMULATIONS, guessing_test, lz


@dataclass(frozen=True)
class PersonFit:
    """Person fit of one model's answers to a bundle's IRT parameters.

    ``misfit``: l_z below ``lz_threshold`` (the pattern is unlike the source models'), for a
    pattern with right and wrong answers (:func:`one_sided` patterns are not judged).
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
    judged = ~one_sided(values)
    results = []
    for k in range(values.shape[0]):
        misfit = bool(judged[k] and np.isfinite(stats[k]) and stats[k] < lz_threshold)
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


def one_sided(values: np.ndarray) -> np.ndarray:
    """Rows whose scored answers are all right or all wrong. The misfit check does not judge
    them: such a pattern has no order of right and wrong answers to compare with the items'
    difficulty, and its l_z* is a number the ability prior makes (a model that answered every
    item of a small IFEval bundle right was warned that its "right and wrong answers do not
    follow item difficulty"). All wrong stays the guessing test's to judge. The threshold is
    still calibrated on every source's l_z*: leaving such sources out there moved the shipped
    bundles' thresholds and, with 10 sources, left too few to calibrate on."""
    scored = ~np.isnan(values)
    low = np.where(scored, values, np.inf).min(axis=1)
    high = np.where(scored, values, -np.inf).max(axis=1)
    return (low == high) & np.isin(high, (0.0, 1.0))


def widen_for_fit(
    estimate: Estimate, fit: PersonFit, chance_score: float, *, stand_in: bool = False
) -> tuple[Estimate, str]:
    """The estimate to report given the person fit, and a note saying why it changed.

    When guessing cannot be rejected, the interval is stretched to contain the chance-level
    score ``chance_score``, and a value above it becomes the mixture of the two, weighted by
    the posterior probability of guessing: the estimator assumes an ordinary model, and this
    one is, with that probability, no better than chance (a random model's hellaswag estimate
    was near 50 with chance 25). A value below it is kept: near-random models are not uniform
    guessers and often score below chance. With ``stand_in`` (the weakest source models stand
    in for chance) no value moves: their score is the sources' floor, not a guesser's
    (``bench/fit_effect.md`` measures both). A misfit only adds a warning.
    """
    if not math.isfinite(chance_score) or not 0 <= chance_score <= 1:
        raise InputError(f"widen_for_fit: chance_score must be in [0, 1], got {chance_score}")
    if not fit.flagged:
        return estimate, ""
    if not fit.guessing:
        return estimate, fit.reason
    weight = fit.guess_posterior if math.isfinite(fit.guess_posterior) else 1.0
    moves = estimate.value > chance_score and not stand_in
    value = (1 - weight) * estimate.value + weight * chance_score if moves else estimate.value
    widened = replace(
        estimate,
        value=value,
        lower=min(estimate.lower, chance_score, value),
        upper=max(estimate.upper, chance_score, value),
    )
    if not moves:
        whose = "the weakest source models' score" if stand_in else "the chance-level score"
        note = f"interval widened to include {whose} {100 * chance_score:.1f} (estimate kept)"
        return widened, f"{fit.reason}; {note}"
    return widened, (
        f"{fit.reason}; estimate moved toward the chance-level score {100 * chance_score:.1f} "
        f"by P(guessing) = {weight:.2f} (from {100 * estimate.value:.1f}), interval widened "
        "to include it"
    )
