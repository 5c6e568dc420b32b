"""Pure IRT formulas on arrays (no ids, no I/O); everything else builds on these."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, log_expit, logit, logsumexp


def logits(theta: np.ndarray, a: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Slope-intercept logits ``theta @ a.T + d``: theta (m, D), a (n, D), d (n,) -> (m, n)."""
    return np.asarray(theta, dtype=np.float64) @ np.asarray(a, dtype=np.float64).T + d


def probability(
    theta: np.ndarray, a: np.ndarray, d: np.ndarray, g: np.ndarray, u: np.ndarray
) -> np.ndarray:
    """4PL response probability ``g + (u - g) * sigmoid(theta . a + d)``, shape (m, n)."""
    return g + (u - g) * expit(logits(theta, a, d))


def fisher_information(
    theta: np.ndarray, a: np.ndarray, d: np.ndarray, g: np.ndarray, u: np.ndarray
) -> np.ndarray:
    """Item information at each ability, shape (m, n); for D > 1, along the norm of ``a``.

    For the 4PL, I(theta) = |a|^2 (P - g)^2 (u - P)^2 / ((u - g)^2 P (1 - P)).
    """
    star = expit(logits(theta, a, d))
    p = g + (u - g) * star
    slope_sq = np.sum(np.asarray(a, dtype=np.float64) ** 2, axis=1)
    numerator = slope_sq * (p - g) ** 2 * (u - p) ** 2
    denominator = (u - g) ** 2 * p * (1.0 - p)
    with np.errstate(divide="ignore", invalid="ignore"):
        info = np.where(denominator > 0, numerator / denominator, 0.0)
    return info


# ---------------------------------------------------------------------------------------------
# Everything below serves the fitting (fit.py) and ability (ability.py) engines. Conventions:
# nodes (Q, D) are points of the latent space, r/n (Q, J) expected correct/observed counts of
# each item at each node, eta (J, K) the free item parameters packed as
# [a_1..a_D, d, logit(g) (3PL/4PL), logit(1 - u) (4PL)].
# ---------------------------------------------------------------------------------------------

GRID_BOUND = 6.0
"""Half-width, in prior standard deviations, of the equally spaced 1-D grid (as in mirt)."""

_TINY = 1e-300


# ------------------------------------------------------------------------------ latent grids
def equispaced_normal_grid(
    n_points: int, bound: float = GRID_BOUND
) -> tuple[np.ndarray, np.ndarray]:
    """Equally spaced nodes on [-bound, bound] with normalised N(0, 1) log-weights, (Q, 1), (Q,).

    Equal spacing (rather than Gauss-Hermite) keeps nodes where very easy or very hard items
    bend, which the 1-D EM needs for items with extreme difficulty.
    """
    nodes = np.linspace(-bound, bound, n_points)
    log_w = -0.5 * nodes**2
    log_w -= logsumexp(log_w)
    return nodes[:, None], log_w


def gauss_hermite_grid(n_dims: int, n_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Tensor product of ``n_points``-point Gauss-Hermite rules for N(0, I_D): (n_points^D, D)."""
    x, w = np.polynomial.hermite_e.hermegauss(n_points)
    log_w1 = np.log(w) - np.log(w.sum())
    mesh = np.meshgrid(*([x] * n_dims), indexing="ij")
    nodes = np.stack([m.reshape(-1) for m in mesh], axis=1)
    wmesh = np.meshgrid(*([log_w1] * n_dims), indexing="ij")
    log_w = np.sum(np.stack([m.reshape(-1) for m in wmesh], axis=1), axis=1)
    return nodes, log_w


def sobol_normal_grid(n_dims: int, n_points: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Scrambled Sobol points mapped to N(0, I_D), equal weights: quasi-Monte-Carlo for D > 3."""
    from scipy.stats import norm, qmc

    m = int(np.ceil(np.log2(max(n_points, 2))))
    uniform = qmc.Sobol(d=n_dims, scramble=True, seed=seed).random_base2(m)
    nodes = norm.ppf(np.clip(uniform, 1e-10, 1 - 1e-10))
    return nodes, np.full(len(nodes), -np.log(len(nodes)))


def latent_grid(n_dims: int, n_points: int) -> tuple[np.ndarray, np.ndarray]:
    """Integration grid for a standard normal latent trait of dimension ``n_dims``.

    D = 1: ``n_points`` equally spaced nodes on [-6, 6]. D = 2, 3: Gauss-Hermite tensor grid
    with ``min(n_points, 21)`` resp. ``min(n_points, 11)`` nodes per dimension (441 / 1,331
    nodes; Gauss-Hermite is exact for smooth integrands at far fewer nodes than equal
    spacing). D >= 4: 4,096 scrambled Sobol points (fixed seed, so every fit and estimate uses
    the same points).
    """
    if n_dims == 1:
        return equispaced_normal_grid(n_points)
    if n_dims == 2:
        return gauss_hermite_grid(2, min(n_points, 21))
    if n_dims == 3:
        return gauss_hermite_grid(3, min(n_points, 11))
    return sobol_normal_grid(n_dims, 4096)


def adaptive_grid(n_dims: int) -> tuple[np.ndarray, np.ndarray]:
    """Standard-normal rule for adaptive quadrature (moved and stretched per model, D > 1).

    Gauss-Hermite tensor grids with 11, 7, 5 nodes per dimension for D = 2, 3, 4 (121, 343,
    625 nodes: exact for polynomials of degree 21, 13, 9 around the mode); 1,024 Sobol points
    for D >= 5.
    """
    per_dim = {1: 21, 2: 11, 3: 7, 4: 5}
    if n_dims in per_dim:
        return gauss_hermite_grid(n_dims, per_dim[n_dims])
    return sobol_normal_grid(n_dims, 1024)


# ------------------------------------------------------------------------------ response data
FLOAT32_MIN_ENTRIES = 1 << 24
"""Matrices with at least this many entries (16.8M) run their EM products in float32."""


class ScoreArrays:
    """Scores prepared for the EM products: values (NaN -> 0) and the missing pattern.

    Small matrices are kept in float64. From ``FLOAT32_MIN_ENTRIES`` entries on, scores and
    weights go through the products in float32: twice the speed and half the memory, at a
    relative rounding error of ~1e-7 per sum, which only shows as a ~1e-4 noise floor on
    parameters along flat directions of the likelihood (very steep or 3PL/4PL items).
    Missing entries are kept as a sparse 0/1 matrix when rare (a complete matrix has none),
    so "sum over observed entries" costs a dense column sum minus a sparse correction; when
    more than a third is missing a dense mask is used instead.
    """

    def __init__(self, values: np.ndarray) -> None:
        from scipy import sparse

        values = np.asarray(values)
        missing = np.isnan(values)
        self.shape = values.shape
        self.dtype = np.float32 if values.size >= FLOAT32_MIN_ENTRIES else np.float64
        self.scores = values.astype(self.dtype)
        self.scores[missing] = 0.0
        n_missing = int(missing.sum())
        self.missing_sparse = None
        self.observed_dense = None
        if 0 < n_missing <= missing.size // 3:
            self.missing_sparse = sparse.csr_matrix(missing, dtype=np.float64)
        elif n_missing > missing.size // 3:
            self.observed_dense = (~missing).astype(self.dtype)
        self.n_observed_rows = (~missing).sum(axis=1)

    @property
    def complete(self) -> bool:
        return self.missing_sparse is None and self.observed_dense is None

    def observed_times(self, right: np.ndarray) -> np.ndarray:
        """``M @ right`` for the observed mask M (N, J) and ``right`` (J, Q) -> (N, Q)."""
        if self.observed_dense is not None:
            return (self.observed_dense @ right.astype(self.dtype)).astype(np.float64)
        full = np.broadcast_to(right.sum(axis=0), (self.shape[0], right.shape[1]))
        if self.missing_sparse is None:
            return np.array(full)
        return full - self.missing_sparse @ right

    def scores_times(self, right: np.ndarray) -> np.ndarray:
        """``Y @ right`` for ``right`` (J, Q) (0/1 or fractional scores) -> (N, Q)."""
        return (self.scores @ right.astype(self.dtype)).astype(np.float64)

    def expected_correct(self, weights: np.ndarray) -> np.ndarray:
        """``weights.T @ Y`` (Q, J): expected (fractional) correct count per node and item."""
        return (weights.astype(self.dtype).T @ self.scores).astype(np.float64)

    def expected_observed(self, weights: np.ndarray) -> np.ndarray:
        """``weights.T @ M`` (Q, J): expected number of observed responses per node and item."""
        if self.observed_dense is not None:
            return (weights.astype(self.dtype).T @ self.observed_dense).astype(np.float64)
        full = np.broadcast_to(weights.sum(axis=0)[:, None], (weights.shape[1], self.shape[1]))
        if self.missing_sparse is None:
            return np.array(full)
        return full - (self.missing_sparse.T @ weights).T


# ------------------------------------------------------------------------------ response curve
def log_response_probabilities(
    z: np.ndarray, g: np.ndarray, u: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``log P`` and ``log(1 - P)`` for logits ``z``, computed without cancellation."""
    if not (np.any(g) or np.any(u != 1.0)):
        return log_expit(z), log_expit(-z)
    p = g + (u - g) * expit(z)
    q = (1.0 - u) + (u - g) * expit(-z)
    return np.log(np.maximum(p, _TINY)), np.log(np.maximum(q, _TINY))


def grid_loglik(
    data: ScoreArrays,
    nodes: np.ndarray,
    a: np.ndarray,
    d: np.ndarray,
    g: np.ndarray,
    u: np.ndarray,
) -> np.ndarray:
    """Log-likelihood of each response row at each node, (N, Q); NaN entries contribute 0.

    Fractional scores y count as y successes and 1 - y failures (fractional Bernoulli).
    With g = 0 and u = 1 the logit is linear in theta, so ``Y @ logit`` reduces to the
    sufficient statistics ``Y @ a`` and ``Y @ d``: an O(N J) pass instead of O(N J Q).
    """
    z = nodes @ a.T + d
    log_p, log_q = log_response_probabilities(z, g, u)
    base = data.observed_times(log_q.T)
    if not (np.any(g) or np.any(u != 1.0)):
        stats = data.scores_times(np.column_stack([a, d]))
        return base + stats[:, :-1] @ nodes.T + stats[:, -1:]
    return base + data.scores_times((log_p - log_q).T)


def posterior_weights(loglik: np.ndarray, log_prior: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Posterior weights over nodes per row (N, Q) and each row's log marginal likelihood (N,).

    Weights below 1e-30 are set to exactly 0: they change no sum, and as float32 subnormals
    they would slow the matrix products of the M-step down tenfold.
    """
    joint = loglik + log_prior
    peak = joint.max(axis=1, keepdims=True)
    weights = np.exp(joint - peak)
    total = weights.sum(axis=1, keepdims=True)
    weights /= total
    weights[weights < 1e-30] = 0.0
    return weights, (np.log(total) + peak)[:, 0]


# ------------------------------------------------------------------------------ item parameters
def pack(model: str, a: np.ndarray, d: np.ndarray, g: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Natural parameters -> packed free parameters eta (J, K)."""
    columns = [a, d[:, None]]
    if model in ("3pl", "4pl"):
        columns.append(logit(np.clip(g, 1e-6, 1 - 1e-6))[:, None])
    if model == "4pl":
        columns.append(logit(np.clip(1.0 - u, 1e-6, 1 - 1e-6))[:, None])
    return np.concatenate(columns, axis=1)


def unpack(model: str, n_dims: int, eta: np.ndarray) -> tuple[np.ndarray, ...]:
    """Packed eta (J, K) -> natural (a (J, D), d (J,), g (J,), u (J,))."""
    n_items = eta.shape[0]
    a = eta[:, :n_dims]
    d = eta[:, n_dims]
    g = expit(eta[:, n_dims + 1]) if model in ("3pl", "4pl") else np.zeros(n_items)
    u = 1.0 - expit(eta[:, n_dims + 2]) if model == "4pl" else np.ones(n_items)
    return a, d, g, u


@dataclass(frozen=True)
class ItemPrior:
    """Weak priors that keep the M-step finite when an item separates the population.

    Slopes and intercepts ~ N(0, slope_sd^2), N(0, intercept_sd^2) (mean 0 keeps the
    theta -> -theta symmetry exact); g ~ Beta(guess_alpha, guess_beta) and 1 - u ~
    Beta(slip_alpha, slip_beta), written on the logit scale where the log density is
    ``alpha log x + beta log(1 - x)`` (concave, mode alpha / (alpha + beta)).
    """

    slope_sd: float = 5.0
    intercept_sd: float = 5.0
    guess_alpha: float = 2.0
    guess_beta: float = 8.0
    slip_alpha: float = 1.0
    slip_beta: float = 19.0


def prior_terms(
    model: str, n_dims: int, eta: np.ndarray, prior: ItemPrior
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Log prior (J,), its gradient (J, K) and its negative Hessian diagonal (J, K)."""
    value = np.zeros(eta.shape[0])
    grad = np.zeros_like(eta)
    neg_hess = np.zeros_like(eta)
    sds = np.r_[np.full(n_dims, prior.slope_sd), prior.intercept_sd]
    linear = eta[:, : n_dims + 1]
    value -= 0.5 * np.sum((linear / sds) ** 2, axis=1)
    grad[:, : n_dims + 1] = -linear / sds**2
    neg_hess[:, : n_dims + 1] = 1.0 / sds**2
    logit_priors = []
    if model in ("3pl", "4pl"):
        logit_priors.append((n_dims + 1, prior.guess_alpha, prior.guess_beta))
    if model == "4pl":
        logit_priors.append((n_dims + 2, prior.slip_alpha, prior.slip_beta))
    for col, alpha, beta in logit_priors:
        x = expit(eta[:, col])
        value += alpha * log_expit(eta[:, col]) + beta * log_expit(-eta[:, col])
        grad[:, col] = alpha * (1.0 - x) - beta * x
        neg_hess[:, col] = (alpha + beta) * x * (1.0 - x)
    return value, grad, neg_hess


def item_loglik(
    model: str, n_dims: int, eta: np.ndarray, nodes: np.ndarray, r: np.ndarray, n: np.ndarray
) -> np.ndarray:
    """Expected complete-data log-likelihood of each item, (J,): sum_q r log P + (n - r) log Q."""
    a, d, g, u = unpack(model, n_dims, eta)
    z = nodes @ a.T + d
    if model in ("1pl", "2pl"):
        # r log sigma(z) + (n - r) log sigma(-z) = r z - n softplus(z): one exp, one log1p
        softplus = np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))
        return np.sum(r * z - n * softplus, axis=0)
    log_p, log_q = log_response_probabilities(z, g, u)
    return np.sum(r * log_p + (n - r) * log_q, axis=0)


def item_score_and_information(
    model: str, n_dims: int, eta: np.ndarray, nodes: np.ndarray, r: np.ndarray, n: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Gradient (J, K) and Fisher information (J, K, K) of ``item_loglik`` with respect to eta.

    With J_q = dP/d eta at node q: gradient = sum_q (r - n P) / (P (1 - P)) J_q and
    information = sum_q n / (P (1 - P)) J_q J_q^T (Fisher scoring: always positive
    semi-definite, equal to the Newton Hessian for the 1PL/2PL).
    """
    if model in ("1pl", "2pl"):
        return _logistic_score_and_information(n_dims, eta, nodes, r, n)
    a, d, g, u = unpack(model, n_dims, eta)
    z = nodes @ a.T + d
    sig, sig_c = expit(z), expit(-z)
    p = g + (u - g) * sig
    q = (1.0 - u) + (u - g) * sig_c
    dz = (u - g) * sig * sig_c
    parts = [dz[:, :, None] * nodes[:, None, :], dz[:, :, None]]
    if model in ("3pl", "4pl"):
        parts.append((g * (1.0 - g) * sig_c)[:, :, None])
    if model == "4pl":
        slip = 1.0 - u
        parts.append((-slip * (1.0 - slip) * sig)[:, :, None])
    jac = np.concatenate(parts, axis=2)
    pq = np.maximum(p * q, _TINY)
    grad = np.einsum("qj,qjk->jk", (r - n * p) / pq, jac)
    weighted = jac * (n / pq)[:, :, None]
    info = np.einsum("qjk,qjl->jkl", weighted, jac)
    return grad, info


def _logistic_score_and_information(
    n_dims: int, eta: np.ndarray, nodes: np.ndarray, r: np.ndarray, n: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The 1PL/2PL case of :func:`item_score_and_information` as two matrix products.

    With x_q = (theta_q, 1): gradient = sum_q (r - n P) x_q, information =
    sum_q n P (1 - P) x_q x_q^T; no (Q, J, K) intermediate is needed.
    """
    design = np.column_stack([nodes, np.ones(len(nodes))])
    prob = expit(design @ eta.T)
    grad = (r - n * prob).T @ design
    n_par = design.shape[1]
    outer = (design[:, :, None] * design[:, None, :]).reshape(len(nodes), n_par * n_par)
    info = ((n * prob * (1.0 - prob)).T @ outer).reshape(len(eta), n_par, n_par)
    return grad, info


def clip_step(step: np.ndarray, max_step: float) -> np.ndarray:
    """Scale each row of ``step`` so that its largest component is at most ``max_step``."""
    largest = np.max(np.abs(step), axis=-1, keepdims=True)
    return step * np.minimum(1.0, max_step / np.maximum(largest, _TINY))


# ------------------------------------------------------------------------------ rotation
def principal_rotation(a: np.ndarray) -> np.ndarray:
    """Orthogonal R (D, D) such that ``a @ R`` has its first column along the main direction.

    The columns of R are the right singular vectors of the (uncentred) slope matrix, so the
    first dimension carries the largest share of discrimination (the general factor), the
    next ones are orthogonal to it; each column's sign makes the summed slope non-negative.
    Because the latent prior is N(0, I), ``theta @ R`` with ``a @ R`` leaves every response
    probability unchanged.
    """
    _, _, vt = np.linalg.svd(a, full_matrices=False)
    rotation = vt.T
    signs = np.where((a @ rotation).sum(axis=0) < 0, -1.0, 1.0)
    return rotation * signs


# ------------------------------------------------------------------------------ abilities
def ability_loglik(
    theta: np.ndarray,
    scores: np.ndarray,
    observed: np.ndarray,
    a: np.ndarray,
    d: np.ndarray,
    g: np.ndarray,
    u: np.ndarray,
) -> np.ndarray:
    """Log-likelihood of each row of ``scores`` (m, n) at its own ability ``theta`` (m, D)."""
    log_p, log_q = log_response_probabilities(theta @ a.T + d, g, u)
    y = np.where(observed, scores, 0.0)
    return np.sum(np.where(observed, y * log_p + (1.0 - y) * log_q, 0.0), axis=1)


def loglik_at_row_nodes(
    nodes: np.ndarray,
    scores: np.ndarray,
    a: np.ndarray,
    d: np.ndarray,
    g: np.ndarray,
    u: np.ndarray,
) -> np.ndarray:
    """Log-likelihood of each row of ``scores`` (m, n) at its own nodes (m, Q, D) -> (m, Q)."""
    observed = ~np.isnan(scores)
    y = np.where(observed, scores, 0.0)
    log_p, log_q = log_response_probabilities(nodes @ a.T + d, g, u)
    return np.einsum("mn,mqn->mq", y, log_p - log_q) + np.einsum(
        "mn,mqn->mq", observed.astype(np.float64), log_q
    )


def ability_score_and_information(
    theta: np.ndarray,
    scores: np.ndarray,
    observed: np.ndarray,
    a: np.ndarray,
    d: np.ndarray,
    g: np.ndarray,
    u: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Gradient (m, D) and Fisher information (m, D, D) of :func:`ability_loglik` in theta.

    ``scores`` (m, n) hold 0/1 or fractional values (anything where ``observed`` is False is
    ignored). dP/dtheta = (u - g) sigma (1 - sigma) a, so the gradient is
    sum_j (y - P) / (P (1 - P)) dP/dtheta and the information sum_j dP dP^T / (P (1 - P)),
    the D-dimensional form of :func:`fisher_information`.
    """
    z = theta @ a.T + d
    sig, sig_c = expit(z), expit(-z)
    p = g + (u - g) * sig
    q = (1.0 - u) + (u - g) * sig_c
    obs = observed.astype(np.float64)
    y = np.where(observed, scores, 0.0)
    dz = (u - g) * sig * sig_c
    pq = np.maximum(p * q, _TINY)
    grad = ((y - p) * obs * dz / pq) @ a
    outer = (a[:, :, None] * a[:, None, :]).reshape(a.shape[0], -1)
    info = ((obs * dz**2 / pq) @ outer).reshape(len(theta), a.shape[1], a.shape[1])
    return grad, info
