"""Weights for moving a flagged estimate toward chance, scored by ``bench_guess_weight.py``
(adaptive runs) and ``bench_fit_effect.py`` (the default static build).

The product moves an estimate whose answers cannot be told from guessing toward the chance
score by P(guessing), the posterior at prior odds ``DEFAULT_PRIOR_GUESS``
(``personfit.widen_for_fit``); each rule here maps that posterior to another weight, so that
a change of the one rule rests on both kinds of estimate.
"""

from __future__ import annotations

from collections.abc import Callable

from scipy.special import expit, logit

from lmeval_microbench.personfit import DEFAULT_PRIOR_GUESS


def _at_prior(prior: float) -> Callable[[float], float]:
    """The product's posterior restated at another prior P(guessing): the log likelihood ratio
    is the same, only the prior log odds change."""
    shift = logit(prior) - logit(DEFAULT_PRIOR_GUESS)
    return lambda p: float(expit(logit(min(max(p, 1e-12), 1 - 1e-12)) + shift))


_at_even_odds = _at_prior(0.5)  # the rule before


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
    "prior 0.1": _at_prior(0.1),
}
