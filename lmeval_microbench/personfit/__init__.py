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
    source range. The threshold is the 4 % quantile of the source models' l_z*, each scored by
    an IRT fitted without it (:func:`.held_out.held_out_lz`), as a new model is scored: it
    flags about 5 % of new ordinary models (``bench/personfit.md``) also with few sources
    (``bench/personfit_sources.md``). :func:`calibrate_lz_threshold` takes the quantile of
    rows scored by the IRT they were fitted with.
``guessing_test``
    Likelihood ratio of the answers under the IRT model (marginal over the ability prior)
    against answering at chance (each item right with probability ``chance``, e.g. 1 / number
    of choices), with a parametric-bootstrap p-value under guessing and the posterior
    probability of guessing. When guessing cannot be rejected (p >= ``alpha``) the interval
    must reach the chance-level full score (:func:`widen_for_fit`).

Scores may be fractional (counted as fractional Bernoulli outcomes; the guessing test's
random responders then score with the same spread, :func:`.statistics.answer_spread`) and NaN
where an item was not scored; every statistic uses the scored items of each row only.
"""

from .bundles import (
    BELOW_CHANCE,
    BUILD_LZ_QUANTILE,
    FLOOR_SHARE,
    MIN_CALIBRATION_ROWS,
    build_spec,
    bundle_person_fit,
    check_estimate,
    fit_record,
    fit_warning,
    fitted_estimate,
    lowest_score,
)
from .held_out import held_out_lz
from .rule import PersonFit, one_sided, person_fit, widen_for_fit
from .statistics import (
    CHANCE_FLOOR,
    DEFAULT_ALPHA,
    DEFAULT_LZ_THRESHOLD,
    DEFAULT_PRIOR_GUESS,
    DEFAULT_SIMULATIONS,
    POSTERIOR_ABILITY_SD,
    GuessingTest,
    calibrate_lz_threshold,
    chance_vector,
    guessing_test,
    lz,
    population_floor,
)

__all__ = [
    "BELOW_CHANCE",
    "BUILD_LZ_QUANTILE",
    "CHANCE_FLOOR",
    "DEFAULT_ALPHA",
    "DEFAULT_LZ_THRESHOLD",
    "DEFAULT_PRIOR_GUESS",
    "DEFAULT_SIMULATIONS",
    "FLOOR_SHARE",
    "MIN_CALIBRATION_ROWS",
    "POSTERIOR_ABILITY_SD",
    "GuessingTest",
    "PersonFit",
    "build_spec",
    "bundle_person_fit",
    "calibrate_lz_threshold",
    "chance_vector",
    "check_estimate",
    "fit_record",
    "fit_warning",
    "fitted_estimate",
    "guessing_test",
    "held_out_lz",
    "lowest_score",
    "lz",
    "one_sided",
    "person_fit",
    "population_floor",
    "widen_for_fit",
]
