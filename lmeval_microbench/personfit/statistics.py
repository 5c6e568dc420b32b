"""The two person-fit statistics: Snijders' l_z* and the guessing test (see the package)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from .._types import ItemId
from ..errors import InputError
from ..irt import ItemParams, _math, estimate_abilities
from ..irt.ability import EAP_STEP, _checked_values

DEFAULT_LZ_THRESHOLD = -1.645
"""l_z* threshold when none was calibrated: the 5 % quantile of its N(0, 1) reference."""
DEFAULT_ALPHA = 0.01
"""Guessing is "not rejected" when its bootstrap p-value is at least this."""
DEFAULT_SIMULATIONS = 2000
"""Simulated random responders per missingness pattern for the guessing p-value."""
DEFAULT_PRIOR_GUESS = 0.2
"""Prior P(guessing) behind the posterior that moves a flagged estimate toward chance (odds
1:4). The flag does not use it (its p-values do), only how far the estimate moves. At even
odds the move went too far for leaderboard models flagged after few answers; at 1:4 every MAE
sum over the peer suite's splits fell or held, static and adaptive (measured with the
sources' N(0, 1) ability prior in the posterior: ``bench/fit_effect_before_sd3.md``,
``bench/guess_weight_before_sd3.md``, which lists the cells where it loses). Odds 1:9 gained a
little more there but moves true guessers less (``bench/random_models.md``): a user cannot tell
which kind their model is."""
POSTERIOR_ABILITY_SD = 3.0
"""Sd of the ability prior under which the posterior weighs an ordinary model against
guessing (the flag keeps the sources' N(0, 1)). A model weaker than every source sits in the
tail of N(0, 1), so its answers looked like guessing there, and its estimate moved toward
chance: under N(0, 3²) they need no guessing to explain them. On adaptive runs after 10 items
the MAE of the held-out weakest fifth summed over six pools fell from 44.46 to 31.23 points,
and random responders ended closer to chance in every protocol (34.97 -> 30.08 points on
random splits); the price is random splits, 17.66 -> 19.86 (0.05-0.61 points per pool).
After 25 items it is level or better everywhere, and on the static build the MAE summed over
the matrices moves by under 0.1 points (``bench/guess_weight.md``, ``bench/fit_effect.md``,
each with the rule before as a column)."""
CHANCE_FLOOR = 1e-3
"""Per-item chance levels are clipped to [CHANCE_FLOOR, 1 - CHANCE_FLOOR] (gsm8k has 0)."""

SPREAD_STEP = 0.05
"""Rows whose :func:`answer_spread` rounds alike share their simulated random responders."""
MAX_SPREAD = 0.95
"""Largest spread simulated: scores closer to the mean than this are drawn as this."""

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
    probability ``chance``; with partial credit, scores of mean ``chance`` spread as the row's
    own, :func:`answer_spread`) whose ``log_ratio`` is at least as large; large means the
    answers look like guessing. ``posterior``: P(guessing | answers) at prior ``prior_guess``,
    against an ordinary model under the ability prior of ``posterior_sd`` (by default the
    wider :data:`POSTERIOR_ABILITY_SD`).
    ``score_p_value``: two-sided, twice the share of those random responders whose right
    answers lie at least as far from their chance expectation on the same side: small means
    far more right, or far fewer, than guessing gives. The likelihood ratio alone cannot say
    so for a pattern that neither model fits (a strong model answering unlike the source
    models), so guessing needs both to be large. Far fewer: systematically wrong, or weaker
    than the weakest sources where they stand in for chance, is not guessing either.
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
    prior_guess: float = DEFAULT_PRIOR_GUESS,
    prior_mean: float = 0.0,
    prior_sd: float = 1.0,
    posterior_sd: float = POSTERIOR_ABILITY_SD,
) -> GuessingTest:
    """Can the answers of each row be told apart from answering at chance? See GuessingTest.

    ``chance``: probability of a right answer by guessing, a scalar or one per column (1 /
    number of choices; for items without choices use :func:`population_floor`). Rows with
    the same scored items share their simulated random responders. The p-values use the
    ability prior N(prior_mean, prior_sd²); the posterior uses N(prior_mean, posterior_sd²)
    (:data:`POSTERIOR_ABILITY_SD`).
    """
    values = _checked_values(values, item_ids)
    columns = params.subset(list(item_ids))
    chance = chance_vector(chance, values.shape[1])
    if not 0 < prior_guess < 1:
        raise InputError(f"guessing_test: prior_guess must be in (0, 1), got {prior_guess}")
    if not (math.isfinite(posterior_sd) and posterior_sd > 0):
        raise InputError(f"guessing_test: posterior_sd must be positive, got {posterior_sd}")
    guess_loglik = _guess_loglik(values, chance)
    ratio = _marginal_loglik(columns, values, prior_mean, prior_sd) - guess_loglik
    observed = ~np.isnan(values)
    p_value = np.full(values.shape[0], np.nan)
    score_p = np.full(values.shape[0], np.nan)
    excess = np.sum(np.where(observed, values - chance, 0.0), axis=1)
    rng = np.random.default_rng(seed)
    spread = answer_spread(values)
    patterns: dict[tuple[bytes, float], list[int]] = {}
    for row in range(values.shape[0]):
        if observed[row].any():
            key = (np.packbits(observed[row]).tobytes(), float(spread[row]))
            patterns.setdefault(key, []).append(row)
    for (_, row_spread), rows in patterns.items():
        mask = observed[rows[0]]
        sub = columns.subset([columns.item_ids[k] for k in np.flatnonzero(mask)])
        simulated, sums = [], []
        for start in range(0, n_simulations, _SIM_CHUNK):
            size = min(_SIM_CHUNK, n_simulations - start)
            draws = _random_responders(rng, chance[mask], size, row_spread)
            simulated.append(
                _marginal_loglik(sub, draws, prior_mean, prior_sd)
                - _guess_loglik(draws, chance[mask])
            )
            sums.append(np.sum(draws - chance[mask], axis=1))
        p_value[rows] = _upper_tail(np.concatenate(simulated), ratio[rows])
        score_p[rows] = _two_sided(np.concatenate(sums), excess[rows])
    wide_ratio = ratio
    if posterior_sd != prior_sd:
        wide_ratio = _marginal_loglik(columns, values, prior_mean, posterior_sd) - guess_loglik
    prior_logit = math.log(prior_guess / (1.0 - prior_guess))
    posterior = expit(prior_logit - wide_ratio)
    posterior[~observed.any(axis=1)] = prior_guess
    return GuessingTest(ratio, p_value, posterior, score_p)


def answer_spread(values: np.ndarray) -> np.ndarray:
    """How fractional each row's scores are, in [0, MAX_SPREAD], in steps of SPREAD_STEP.

    The mean of ``y (1 - y)`` over the scored items as a share of ``m (1 - m)`` at the row's
    mean score ``m``: 0 for right/wrong answers, 3/4 for the mean of four right/wrong parts,
    near 1 for scores that sit close to the row's mean. A random responder of a benchmark with
    partial credit scores alike (:func:`_random_responders`); drawn right or wrong instead, it
    spread its scores far wider than a real model's fractional ones, so a real model's
    likelihood ratio looked like guessing: with every four MuSR items scored as one (the share
    right), the test took 0.74 of held-out leaderboard models for guessers, against 0.11 of
    them as answered right/wrong; with responders of the answers' spread, 0.35, and 0.98-0.99
    of simulated guessers still caught (``bench/fractional_fit.md``).
    """
    values = np.asarray(values, dtype=np.float64)
    scored = (~np.isnan(values)).sum(axis=1)
    mean = np.nansum(values, axis=1) / np.maximum(scored, 1)
    fractional = np.nansum(values * (1.0 - values), axis=1) / np.maximum(scored, 1)
    binary_part = mean * (1.0 - mean)
    share = np.divide(fractional, binary_part, out=np.zeros_like(mean), where=binary_part > 0)
    share = np.clip(share, 0.0, MAX_SPREAD)
    return np.round(share / SPREAD_STEP) * SPREAD_STEP


def _random_responders(
    rng: np.random.Generator, chance: np.ndarray, size: int, spread: float
) -> np.ndarray:
    """``size`` random responders' scores on items of chance levels ``chance``: right with
    probability ``chance`` for right/wrong answers (``spread`` 0), else Beta scores of mean
    ``chance`` whose ``y (1 - y)`` keeps the share ``spread`` of ``chance (1 - chance)`` (the
    precision ``spread / (1 - spread)``; 3/4: the variance of the mean of four right/wrong
    parts)."""
    if spread <= 0:
        return (rng.random((size, chance.size)) < chance).astype(np.float64)
    precision = spread / (1.0 - spread)
    return rng.beta(chance * precision, (1.0 - chance) * precision, size=(size, chance.size))


def _two_sided(null: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Twice the smaller Monte Carlo tail p-value, at most 1."""
    tails = np.minimum(_upper_tail(null, observed), _upper_tail(-null, -observed))
    return np.minimum(1.0, 2.0 * tails)


def _upper_tail(null: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Monte Carlo p-value: (1 + #null >= observed) / (1 + #null), per observed value."""
    null = np.sort(null)
    at_least = null.size - np.searchsorted(null, observed - 1e-9, side="left")
    return (1.0 + at_least) / (1.0 + null.size)
