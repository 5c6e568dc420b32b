"""Abilities of models from their item scores, given fitted item parameters.

Columns are joined to parameters by item id, never by position, and NaN scores are ignored,
so a model evaluated on any subset of the fitted items gets an ability on the same scale.

Methods
-------
``"eap"``
    Posterior mean and standard deviation under the prior N(prior_mean, prior_sd^2 I).
    D = 1: equally spaced grid of step 0.05 prior sd over +-6 prior sd (241 nodes); when the
    posterior is narrower than the grid can resolve, the reported se is floored at
    step / sqrt(12) (the rounding error of a grid point). D > 1: adaptive quadrature, a
    Gauss-Hermite tensor rule (11^2, 7^3, 5^4 nodes; 1,024 quasi-Monte-Carlo points for
    D >= 5) centred at each model's posterior mode and shaped by its Laplace covariance, so
    it stays accurate however many items sharpen the posterior.
``"map"``
    Posterior mode by Fisher scoring (vectorised over models, with step halving), se from the
    posterior information ``I(theta) + 1 / prior_sd^2``.
``"mle"``
    Likelihood maximum by the same Newton iteration, confined to the box [-6, 6]^D, se from
    ``I(theta)``. A pattern without a finite maximum (all correct, all wrong) returns the box
    edge it runs to and ``se = 12`` (the width of the box) in that dimension: a finite value
    that says "nothing is known beyond the direction"; a model with no observed item gets
    theta = 0 and se = 12.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .._types import ItemId, duplicate_ids
from ..errors import InputError
from . import _math
from .params import ItemParams

ABILITY_METHODS = ("eap", "map", "mle")
MLE_BOUND = 6.0
"""Box [-MLE_BOUND, MLE_BOUND] that confines maximum-likelihood abilities."""
MLE_UNBOUNDED_SE = 2 * MLE_BOUND
"""Standard error reported where the MLE does not exist (the width of the box)."""
EAP_STEP = 0.05
"""Grid step of the 1-D EAP, in prior standard deviations."""

_MAX_NEWTON_ITER = 100
_NEWTON_TOL = 1e-8
_CHUNK_ELEMENTS = 1 << 22


def estimate_abilities(
    params: ItemParams,
    values: np.ndarray,
    item_ids: Sequence[ItemId],
    *,
    method: str = "eap",
    prior_mean: float = 0.0,
    prior_sd: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Abilities and standard errors of ``m`` models, each of shape (m, D).

    Parameters
    ----------
    params
        Fitted item parameters; every id of ``item_ids`` must be among them
        (:class:`~lmeval_microbench.errors.ItemMismatchError` otherwise).
    values
        Scores (m, n) in [0, 1], NaN where a model was not evaluated on an item.
    item_ids
        The item id of each column of ``values``.
    method
        ``"eap"``, ``"map"`` or ``"mle"`` (see the module docstring).
    prior_mean, prior_sd
        Normal prior of each ability dimension (used by EAP and MAP).
    """
    if method not in ABILITY_METHODS:
        raise InputError(
            f"estimate_abilities: method must be one of {ABILITY_METHODS}, got {method!r}"
        )
    if not (np.isfinite(prior_sd) and prior_sd > 0 and np.isfinite(prior_mean)):
        raise InputError(
            f"estimate_abilities: prior needs a finite mean and positive sd, got "
            f"mean={prior_mean!r}, sd={prior_sd!r}"
        )
    values = _checked_values(values, item_ids)
    columns = params.subset(list(item_ids))
    if method == "eap":
        return _eap(columns, values, prior_mean, prior_sd)
    if method == "map":
        return _newton(columns, values, prior_mean, prior_sd)
    return _newton(columns, values, prior_mean, None)


def estimate_ability(
    params: ItemParams,
    scores: Mapping[ItemId, float],
    *,
    method: str = "eap",
    prior_mean: float = 0.0,
    prior_sd: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Ability (D,) and standard error (D,) of one model from its scores keyed by item id."""
    item_ids = list(scores)
    values = np.array([[scores[item] for item in item_ids]], dtype=np.float64).reshape(1, -1)
    theta, se = estimate_abilities(
        params, values, item_ids, method=method, prior_mean=prior_mean, prior_sd=prior_sd
    )
    return theta[0], se[0]


def posterior_draws(
    params: ItemParams,
    values: np.ndarray,
    item_ids: Sequence[ItemId],
    n_draws: int,
    rng: np.random.Generator,
    *,
    prior_mean: float = 0.0,
    prior_sd: float = 1.0,
) -> np.ndarray:
    """Abilities drawn from each model's posterior given its scores: shape (m, n_draws, D).

    Multiple imputation of unscored items needs the whole posterior, not its mean: a model
    scored on ten items has a wide, often skewed one. D = 1 samples the EAP grid by its
    posterior weights, jittered within a grid step; D > 1 draws from the normal with the
    EAP mean and standard deviation (the adaptive quadrature keeps no grid to sample).
    """
    values = _checked_values(values, item_ids)
    columns = params.subset(list(item_ids))
    if columns.n_dims > 1:
        mean, se = _adaptive_eap(columns, values, prior_mean, prior_sd)
        noise = rng.standard_normal((values.shape[0], n_draws, columns.n_dims))
        return mean[:, None, :] + se[:, None, :] * noise
    n_nodes = round(2 * _math.GRID_BOUND / EAP_STEP) + 1
    std_nodes, log_w = _math.equispaced_normal_grid(n_nodes)
    nodes = prior_mean + prior_sd * std_nodes
    loglik = _math.grid_loglik(
        _math.ScoreArrays(values), nodes, columns.a, columns.d, columns.g, columns.u
    )
    weights, _ = _math.posterior_weights(loglik, log_w)
    cumulative = np.cumsum(weights, axis=1)
    uniform = rng.random((values.shape[0], n_draws)) * cumulative[:, -1:]
    index = np.minimum(np.sum(cumulative[:, None, :] < uniform[:, :, None], axis=2), n_nodes - 1)
    step = EAP_STEP * prior_sd
    jitter = (rng.random(index.shape) - 0.5) * step
    return (nodes[index, 0] + jitter)[:, :, None]


# ------------------------------------------------------------------------------ input checks
def _checked_values(values: np.ndarray, item_ids: Sequence[ItemId]) -> np.ndarray:
    """Coerce scores to a float (m, n) array matching ``item_ids``; reject bad entries by id."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"estimate_abilities: scores are not numeric ({exc})") from exc
    if array.ndim == 1:
        array = array[None, :]
    ids = [str(i) for i in item_ids]
    if array.ndim != 2 or array.shape[1] != len(ids):
        raise InputError(
            f"estimate_abilities: scores have shape {array.shape}, expected (n_models, {len(ids)}) "
            "to match item_ids"
        )
    dups = sorted(duplicate_ids(ids))
    if dups:
        raise InputError(f"estimate_abilities: duplicate item ids {dups[:5]}")
    with np.errstate(invalid="ignore"):
        bad = np.isinf(array) | (array < 0) | (array > 1)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise InputError(
            f"estimate_abilities: score {float(array[row, col])!r} of row {row} for item "
            f"{ids[col]!r} "
            "is outside [0, 1] (use NaN for a missing score)"
        )
    return array


# ------------------------------------------------------------------------------ EAP
def _eap(
    params: ItemParams, values: np.ndarray, prior_mean: float, prior_sd: float
) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mean and sd: a fixed fine grid for D = 1, adaptive quadrature for D > 1."""
    if params.n_dims > 1:
        return _adaptive_eap(params, values, prior_mean, prior_sd)
    n_nodes = round(2 * _math.GRID_BOUND / EAP_STEP) + 1
    std_nodes, log_w = _math.equispaced_normal_grid(n_nodes)
    resolution = EAP_STEP * prior_sd / np.sqrt(12.0)
    nodes = prior_mean + prior_sd * std_nodes
    data = _math.ScoreArrays(values)
    loglik = _math.grid_loglik(data, nodes, params.a, params.d, params.g, params.u)
    weights, _ = _math.posterior_weights(loglik, log_w)
    mean = weights @ nodes
    variance = weights @ nodes**2 - mean**2
    se = np.sqrt(np.maximum(variance, resolution**2))
    return mean, se


def _adaptive_eap(
    params: ItemParams, values: np.ndarray, prior_mean: float, prior_sd: float
) -> tuple[np.ndarray, np.ndarray]:
    """Adaptive quadrature: per model, a standard rule moved to the posterior mode and
    stretched by the Cholesky factor L of its Laplace covariance.

    int f(t) dt = int f(mode + L z) |L| / phi(z) phi(z) dz, so node k gets the log weight
    log w_k + |z_k|^2 / 2 + log f(mode + L z_k); |L| cancels when normalising. A fixed grid
    scaled to the prior would need ever more nodes as more items sharpen the posterior.
    """
    std_nodes, log_w = _math.adaptive_grid(params.n_dims)
    log_w = log_w + 0.5 * np.sum(std_nodes**2, axis=1)
    n_rows, n_cols = values.shape
    chunk = max(1, _CHUNK_ELEMENTS // max(1, n_cols * len(std_nodes)))
    mean = np.empty((n_rows, params.n_dims))
    se = np.empty((n_rows, params.n_dims))
    for start in range(0, n_rows, chunk):
        rows = slice(start, start + chunk)
        mode, cov, _ = _posterior_mode(params, values[rows], prior_mean, prior_sd)
        factor = np.linalg.cholesky(cov)
        nodes = mode[:, None, :] + np.einsum("mkl,ql->mqk", factor, std_nodes)
        log_post = _math.loglik_at_row_nodes(
            nodes, values[rows], params.a, params.d, params.g, params.u
        )
        log_post -= 0.5 * np.sum(((nodes - prior_mean) / prior_sd) ** 2, axis=2)
        log_post += log_w
        weights = np.exp(log_post - log_post.max(axis=1, keepdims=True))
        weights /= weights.sum(axis=1, keepdims=True)
        mean[rows] = np.einsum("mq,mqk->mk", weights, nodes)
        second = np.einsum("mq,mqk->mk", weights, nodes**2)
        se[rows] = np.sqrt(np.maximum(second - mean[rows] ** 2, 0.0))
    return mean, se


# ------------------------------------------------------------------------------ MAP / MLE
def _newton(
    params: ItemParams, values: np.ndarray, prior_mean: float, prior_sd: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """MAP (``prior_sd`` given) or box-constrained MLE (``prior_sd`` None), in row chunks."""
    n_rows, n_cols = values.shape
    chunk = max(1, _CHUNK_ELEMENTS // max(1, n_cols * params.n_dims))
    theta = np.empty((n_rows, params.n_dims))
    se = np.empty((n_rows, params.n_dims))
    for start in range(0, n_rows, chunk):
        rows = slice(start, start + chunk)
        theta[rows], cov, unbounded = _posterior_mode(params, values[rows], prior_mean, prior_sd)
        se[rows] = np.sqrt(np.maximum(np.diagonal(cov, axis1=1, axis2=2), 0.0))
        se[rows] = np.where(unbounded, MLE_UNBOUNDED_SE, se[rows])
    return theta, se


def _posterior_mode(
    params: ItemParams, values: np.ndarray, prior_mean: float, prior_sd: float | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mode (m, D), inverse-information covariance (m, D, D) and, for the MLE, which
    dimensions ran to the box without a finite maximum (m, D).

    Fisher scoring from the prior mean (MLE: from 0) with per-row step halving; MLE steps
    are projected onto the box [-MLE_BOUND, MLE_BOUND]^D.
    """
    observed = ~np.isnan(values)
    n_dims = params.n_dims
    item_args = (values, observed, params.a, params.d, params.g, params.u)
    precision = 0.0 if prior_sd is None else 1.0 / prior_sd**2

    def objective(point: np.ndarray) -> np.ndarray:
        penalty = 0.5 * precision * np.sum((point - prior_mean) ** 2, axis=1)
        return _math.ability_loglik(point, *item_args) - penalty

    def score_and_information(point: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        grad, info = _math.ability_score_and_information(point, *item_args)
        return grad - precision * (point - prior_mean), info + precision * np.eye(n_dims)

    theta = np.full((len(values), n_dims), prior_mean if prior_sd is not None else 0.0)
    value = objective(theta)
    for _ in range(_MAX_NEWTON_ITER):
        grad, info = score_and_information(theta)
        step = np.linalg.solve(info + 1e-9 * np.eye(n_dims), grad[:, :, None])[:, :, 0]
        step = _math.clip_step(step, 1.0)
        theta, value, moved = _halving_line_search(theta, step, value, objective, prior_sd is None)
        if np.max(moved, initial=0.0) < _NEWTON_TOL:
            break
    grad, info = score_and_information(theta)
    cov = np.linalg.inv(info + 1e-12 * np.eye(n_dims))
    unbounded = np.zeros(theta.shape, dtype=bool)
    if prior_sd is None:
        unbounded = _at_unbounded_edge(theta, grad, observed)
    return theta, cov, unbounded


def _halving_line_search(
    theta: np.ndarray,
    step: np.ndarray,
    value: np.ndarray,
    objective: Callable[[np.ndarray], np.ndarray],
    boxed: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row, the longest of step, step/2, ... (8 tries) that does not lower the objective."""
    scale = np.ones((len(theta), 1))
    accepted = np.zeros(len(theta), dtype=bool)
    new_theta = theta.copy()
    new_value = value.copy()
    for _ in range(8):
        candidate = theta + scale * step
        if boxed:
            candidate = np.clip(candidate, -MLE_BOUND, MLE_BOUND)
        cand_value = objective(candidate)
        ok = ~accepted & (cand_value >= value - 1e-12)
        new_theta[ok] = candidate[ok]
        new_value[ok] = cand_value[ok]
        accepted |= ok
        if accepted.all():
            break
        scale[~accepted] *= 0.5
    moved = np.max(np.abs(new_theta - theta), axis=1)
    return new_theta, new_value, moved


def _at_unbounded_edge(theta: np.ndarray, grad: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Dimensions stuck on the MLE box with the likelihood still rising outwards (or no data)."""
    on_edge = np.abs(theta) >= MLE_BOUND - 1e-6
    outward = np.sign(grad) == np.sign(theta)
    no_data = ~observed.any(axis=1, keepdims=True)
    return (on_edge & (outward | (np.abs(grad) < 1e-8))) | no_data
