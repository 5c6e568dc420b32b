"""Weights for moving a flagged estimate toward chance, scored by ``bench_guess_weight.py``
(adaptive runs) and ``bench_fit_effect.py`` (the default static build).

The product moves an estimate whose answers cannot be told from guessing toward the chance
score by P(guessing), the posterior at prior odds ``DEFAULT_PRIOR_GUESS`` against an ordinary
model with the ability prior N(0, 3²) (``personfit.POSTERIOR_ABILITY_SD``,
``personfit.widen_for_fit``); each rule of ``RULES`` maps that posterior to another weight,
and each of ``ABILITY_SD`` refits it under another ability prior, so that a change of the one
rule rests on both kinds of estimate. ``sources_base_rate`` gives a prior per pool from
its own sources (``bench_guess_weight.py`` scores it on adaptive runs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.special import expit, logit

from lmeval_microbench._types import ItemId
from lmeval_microbench.irt import ItemParams
from lmeval_microbench.personfit import DEFAULT_PRIOR_GUESS, guessing_test


def at_prior(prior: float) -> Callable[[float], float]:
    """The product's posterior restated at another prior P(guessing): the log likelihood ratio
    is the same, only the prior log odds change."""
    shift = logit(prior) - logit(DEFAULT_PRIOR_GUESS)
    return lambda p: float(expit(logit(min(max(p, 1e-12), 1 - 1e-12)) + shift))


_at_even_odds = at_prior(0.5)  # the rule before


def sources_base_rate(log_ratio: np.ndarray, *, tol: float = 1e-10) -> float:
    """The share of guessers among source models whose answers give these log likelihood
    ratios (IRT model over guessing, ``GuessingTest.log_ratio``): the mixture weight that
    maximises their likelihood, by EM from the product's prior. Each step averages the
    sources' posteriors at the current weight; the fixed point is the population's own base
    rate, the prior a model drawn from the sources would have."""
    ratio = np.asarray(log_ratio, dtype=np.float64)
    rate = DEFAULT_PRIOR_GUESS
    for _ in range(10_000):
        new = float(np.mean(expit(logit(rate) - ratio)))
        new = min(max(new, 1e-6), 1 - 1e-6)
        if abs(new - rate) < tol:
            break
        rate = new
    return new


def _beyond_even(p: float) -> float:
    """max(0, 2 P - 1) of the posterior at even odds: the move only as far as the answers
    themselves favour guessing."""
    return max(0.0, 2 * _at_even_odds(p) - 1)


PRODUCT = "P(guessing)"  # the rule the product applies
PRODUCT_ODDS = f"1:{round((1 - DEFAULT_PRIOR_GUESS) / DEFAULT_PRIOR_GUESS)}"
RULES: dict[str, Callable[[float], float]] = {
    PRODUCT: lambda p: p,
    "widen only": lambda p: 0.0,
    "even odds": _at_even_odds,
    "odds beyond even": _beyond_even,
    "prior 0.1": at_prior(0.1),
}

ABILITY_SD = {"ability sd 1 (before)": 1.0, "ability sd 2": 2.0}
"""Rules that refit the posterior: guessing weighed against an ordinary model whose ability
prior is N(0, sd²) instead of the product's N(0, 3²), at the product's prior odds. sd 1 (the
sources' own prior) was the product's rule before: a model beyond the sources needed guessing
to explain it (the weakest fifth did). Only the weight changes; the flag is the product's."""


def wide_posteriors(
    irt: ItemParams, values: np.ndarray, item_ids: Sequence[ItemId], chance: np.ndarray
) -> dict[str, np.ndarray]:
    """P(guessing) of each row of ``values`` (models x ``item_ids``) under each
    ``ABILITY_SD`` rule: the product's guessing test on the same answers with that ability
    prior for the posterior (it needs no simulated responders)."""
    return {
        name: guessing_test(
            irt, values, item_ids, chance, n_simulations=1, posterior_sd=sd
        ).posterior
        for name, sd in ABILITY_SD.items()
    }
