"""Weights for moving a flagged estimate toward chance, scored by ``bench_guess_weight.py``
(adaptive runs) and ``bench_fit_effect.py`` (the default static build).

The product moves an estimate whose answers cannot be told from guessing toward the chance
score by P(guessing), the posterior at even prior odds (``personfit.widen_for_fit``); each
rule here maps that posterior to another weight, so that a change of the one rule rests on
both kinds of estimate.
"""

from __future__ import annotations

from collections.abc import Callable

from scipy.special import expit, logit


def _at_prior(prior: float) -> Callable[[float], float]:
    return lambda p: float(expit(logit(min(max(p, 1e-12), 1 - 1e-12)) + logit(prior)))


PRODUCT = "P(guessing)"  # the rule the product applies
RULES: dict[str, Callable[[float], float]] = {
    PRODUCT: lambda p: p,
    "widen only": lambda p: 0.0,
    "odds beyond even": lambda p: max(0.0, 2 * p - 1),
    "prior 0.2": _at_prior(0.2),
    "prior 0.1": _at_prior(0.1),
}
