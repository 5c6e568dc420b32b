"""Fit 1PL-4PL and multidimensional 2PL models to a response matrix (scikit-learn style).

Method: marginal maximum likelihood (Bock-Aitkin EM) with the latent trait integrated over a
fixed grid (:func:`_math.latent_grid`: 1-D equally spaced nodes on [-6, 6], 2-3-D
Gauss-Hermite products, >= 4-D quasi-Monte-Carlo) under an N(0, I) population, which sets
location and scale of theta. One EM step (:meth:`IRTModel._em_step`) is

1. E-step (:meth:`IRTModel._e_step`): posterior weights of every model over the grid;
2. expected counts r (correct) and n (observed) per node and item: two matrix products
   (float32 for matrices of 16.8M entries or more, see :class:`_math.ScoreArrays`);
3. M-step (:meth:`IRTModel._m_step`): Fisher-scoring steps for all items at once, under weak
   priors (:class:`_math.ItemPrior`) that keep separating items finite;
4. 1PL/2PL only: parameter expansion (:meth:`IRTModel._standardise_population`), which
   rescales the items so the population's posterior moments are exactly 0 and 1.

Steps are chained by safeguarded SQUAREM extrapolation (:meth:`IRTModel._accelerated_em`),
which falls back to plain EM when the parameter expansion keeps lowering the log posterior
(small, wide matrices), keeps every parameter in a +-30 box and records how the fit went in
``IRTModel.fit_report_`` (a :class:`FitReport`; untrusted fits also warn). 3PL/4PL fits
start from the fitted 2PL. After convergence :meth:`IRTModel._identify` orients the scale
(summed slope >= 0: higher theta = higher score) and, for D > 1, rotates it so the first
dimension is the principal direction of the slopes. Abilities are EAP estimates from
:func:`~lmeval_microbench.irt.ability.estimate_abilities`, so ``abilities_`` equals what that
function returns for the same rows.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from scipy.special import logit
from tqdm.auto import tqdm

from .._rng import as_generator
from ..errors import ConvergenceWarning, InputError
from ..responses import ResponseMatrix
from . import _math
from .ability import estimate_abilities
from .params import MODEL_TYPES, ItemParams
from .report import PARAMETER_BOUND, FitReport

_NEWTON_STEPS = {"1pl": 1, "2pl": 1, "3pl": 2, "4pl": 2}
"""Fisher-scoring steps per M-step: one suffices for the concave logistic M-step; the
asymptote models took the fewest EM iterations with two (mmlu 3PL: 218 / 63 / 104 for 1/2/3)."""
_MAX_NEWTON_STEP = 1.0
_LINE_SEARCH_HALVINGS = 6
_EXPANSION_DIPS = 3
"""Decreases of the log posterior tolerated from parameter-expanded EM steps before plain EM
takes over (an isolated dip of ~1e-5 is grid rounding and harmless; see _accelerated_em)."""
_MONOTONE_SLACK = 1e-4
"""Relative drop of the log posterior over one EM step that counts as a real decrease rather
than rounding (float32 products give ~1e-7)."""


@dataclass
class _EMTrace:
    """Book-keeping of one EM run (see :meth:`IRTModel._accelerated_em`)."""

    expanded: bool
    n_steps: int = 0
    accepted: int = 0
    rejected: int = 0
    fallback_at: int | None = None
    dips: int = 0
    worst_row: int = -1

    def finish(
        self, eta: np.ndarray, change: tuple[float, int], tol: float
    ) -> tuple[np.ndarray, bool, int, float]:
        self.worst_row = change[1]
        return eta, change[0] < tol, self.n_steps, change[0]


def _bounded(eta: np.ndarray) -> np.ndarray:
    """Clip packed parameters to the +-PARAMETER_BOUND box (NaN stays NaN)."""
    return np.clip(eta, -PARAMETER_BOUND, PARAMETER_BOUND)


class IRTModel:
    """Item response model fitted by marginal maximum likelihood.

    Parameters
    ----------
    model
        ``"1pl"`` (one shared slope), ``"2pl"``, ``"3pl"`` (free lower asymptote g) or
        ``"4pl"`` (free g and upper asymptote u).
    n_dims
        Ability dimensions; values above 1 are only supported for the ``"2pl"``.
    max_iter, tol
        EM stops when one EM step changes no item parameter by ``tol`` or more (slopes,
        intercepts, and g, u on the logit scale), or after ``max_iter`` EM steps with a
        :class:`ConvergenceWarning`. 3PL/4PL fits first run a 2PL fit under the same limits.
    n_quadrature
        Grid nodes per dimension (capped at 21 for D = 2 and 11 for D = 3; D >= 4 uses 4,096
        quasi-random points).
    prior_sd
        Standard deviation of the N(0, prior_sd^2) priors on slopes and intercepts (``None``:
        flat). The default 5 is weak on the logistic scale: it only bites on items that (nearly)
        separate the models, whose ML estimates diverge.
    random_state
        Seed of the multidimensional start values (the 1-D fit is deterministic anyway).
    progress
        Show a tqdm bar over EM iterations.

    Attributes
    ----------
    params_ : ItemParams keyed by the matrix item ids.
    abilities_, ability_se_ : (n_models, n_dims) EAP abilities and posterior sds.
    model_ids_ : tuple of the matrix model ids (rows of ``abilities_``).
    converged_, n_iter_ : whether EM met ``tol``, and the number of EM steps it took (for
        3PL/4PL, not counting the 2PL start).
    fit_report_ : :class:`FitReport`: convergence details, whether the fit can be trusted
        (``fit_report_.trusted``) and, if not, why (also issued as a ConvergenceWarning).
    loglik_ : log marginal likelihood of the data at the final parameters.
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "model": MODEL_TYPES,
        "n_dims": (Integral, 1, None),
        "max_iter": (Integral, 1, None),
        "tol": (Real, 0.0, None),
        "n_quadrature": (Integral, 5, None),
        "prior_sd": (Real, 0.0, None),
    }

    def __init__(
        self,
        model: str = "2pl",
        n_dims: int = 1,
        *,
        max_iter: int = 500,
        tol: float = 1e-4,
        n_quadrature: int = 41,
        prior_sd: float | None = 5.0,
        random_state: int | np.random.Generator | None = None,
        progress: bool = False,
    ) -> None:
        self.model = model
        self.n_dims = n_dims
        self.max_iter = max_iter
        self.tol = tol
        self.n_quadrature = n_quadrature
        self.prior_sd = prior_sd
        self.random_state = random_state
        self.progress = progress

    def __repr__(self) -> str:
        return f"IRTModel(model={self.model!r}, n_dims={self.n_dims})"

    # ------------------------------------------------------------------ public
    def fit(self, matrix: ResponseMatrix) -> IRTModel:
        """Fit item parameters and abilities to ``matrix``; returns ``self``."""
        self._validate_parameters()
        if not isinstance(matrix, ResponseMatrix):
            raise InputError(
                f"IRTModel.fit: expected a ResponseMatrix, got {type(matrix).__name__}"
            )
        matrix.check_fittable()
        data = _math.ScoreArrays(matrix.values)
        with tqdm(total=self.max_iter, desc=f"EM {self.model}", disable=not self.progress) as bar:
            eta, converged, n_iter, change = self._fit_parameters(data, bar)
        trace = self._trace
        at_bound = np.flatnonzero(np.any(np.abs(eta) >= PARAMETER_BOUND, axis=1))
        nodes, log_w = _math.latent_grid(self.n_dims, self.n_quadrature)
        a, d, g, u = self._identify(*_math.unpack(self.model, self.n_dims, eta))
        self.params_ = ItemParams(matrix.item_ids, a, d, g, u, self.model)
        _, marginal = self._e_step(data, nodes, log_w, _math.pack(self.model, a, d, g, u))
        self.loglik_ = float(marginal.sum())
        self.fit_report_ = FitReport(
            source=matrix.source,
            shape=matrix.shape,
            model=self.model,
            converged=converged,
            n_iter=n_iter,
            max_iter=self.max_iter,
            tol=self.tol,
            max_change=change,
            worst_item=matrix.item_ids[trace.worst_row] if trace.worst_row >= 0 else None,
            expansion_fallback_at=trace.fallback_at,
            extrapolations_accepted=trace.accepted,
            extrapolations_rejected=trace.rejected,
            items_at_bound=tuple(matrix.item_ids[k] for k in at_bound),
            loglik=self.loglik_,
        )
        if not self.fit_report_.trusted:
            warnings.warn(
                f"{self!r}: {self.fit_report_.message()}", ConvergenceWarning, stacklevel=2
            )
        self.abilities_, self.ability_se_ = estimate_abilities(
            self.params_, matrix.values, matrix.item_ids, method="eap"
        )
        self.model_ids_ = matrix.model_ids
        self.converged_ = converged
        self.n_iter_ = n_iter
        return self

    # ------------------------------------------------------------------ validation
    def _validate_parameters(self) -> None:
        """Check every constructor argument against ``_parameter_constraints``."""
        if self.model not in MODEL_TYPES:
            raise InputError(f"IRTModel: model must be one of {MODEL_TYPES}, got {self.model!r}")
        for name, constraint in self._parameter_constraints.items():
            if name == "model" or (name == "prior_sd" and self.prior_sd is None):
                continue
            kind, low, _ = constraint
            value = getattr(self, name)
            bad_type = not isinstance(value, kind) or isinstance(value, bool)
            if bad_type or not np.isfinite(value) or value < low or (low == 0.0 and value == 0):
                relation = "> 0" if low == 0.0 else f">= {low}"
                raise InputError(
                    f"IRTModel: {name} must be a {kind.__name__} {relation}, got {value!r}"
                )
        if self.n_dims > 1 and self.model != "2pl":
            raise InputError(
                f"IRTModel: n_dims={self.n_dims} is only supported for model='2pl', "
                f"got model={self.model!r}"
            )

    def _item_prior(self) -> _math.ItemPrior:
        sd = np.inf if self.prior_sd is None else float(self.prior_sd)
        return _math.ItemPrior(slope_sd=sd, intercept_sd=sd)

    # ------------------------------------------------------------------ start values
    def _fit_parameters(
        self, data: _math.ScoreArrays, bar: tqdm
    ) -> tuple[np.ndarray, bool, int, float]:
        """Run EM from start values; returns packed parameters, converged, iterations, change."""
        nodes, log_w = _math.latent_grid(self.n_dims, self.n_quadrature)
        eta = self._initial_parameters(data)
        eta, converged, n_iter, change = self._accelerated_em(
            data, nodes, log_w, self._item_prior(), eta, bar
        )
        if self._trace.fallback_at is not None:
            # plain EM leaves the scale where J item priors outweigh N ability priors (abilities
            # spread wider than N(0, 1) when items outnumber models): standardise once at the end
            weights, _ = self._e_step(data, nodes, log_w, eta)
            eta = _bounded(self._standardise_population(eta, weights, nodes))
        return eta, converged, n_iter, change

    def _initial_parameters(self, data: _math.ScoreArrays) -> np.ndarray:
        """Start values. 1PL/2PL: slopes from item-total correlations (D = 1) or a randomized SVD
        of the standardised scores (D > 1), intercepts matching each item's mean score.

        3PL/4PL: the fitted 2PL curve with g = 0.1 (and u = 0.98). Asymptote models have
        several local optima (an item that weak *and* strong models get right fits a rising or
        a falling curve); starting from the 2PL reached a higher likelihood than data-driven
        starts on the Open LLM mmlu matrix (-94,126 against -94,424).
        """
        if self.model in ("3pl", "4pl"):
            return self._start_from_2pl(data)
        n_rows = data.shape[0]
        n_obs = data.expected_observed(np.ones((n_rows, 1)))[0]
        p = np.clip(data.expected_correct(np.ones((n_rows, 1)))[0] / n_obs, 0.02, 0.98)
        if self.n_dims == 1:
            a = _item_total_slopes(data, p)[:, None]
        else:
            a = _svd_slopes(data, p, self.n_dims, as_generator(self.random_state))
        if self.model == "1pl":
            a = np.full_like(a, max(float(np.mean(a)), 0.5))
        d = logit(p) * np.sqrt(1.0 + np.pi / 8.0 * np.sum(a**2, axis=1))
        return _math.pack(self.model, a, d, np.zeros(len(p)), np.ones(len(p)))

    def _start_from_2pl(self, data: _math.ScoreArrays) -> np.ndarray:
        """Packed 3PL/4PL start values from a 2PL fit with the same settings (no progress bar)."""
        two = IRTModel(
            "2pl",
            self.n_dims,
            max_iter=self.max_iter,
            tol=self.tol,
            n_quadrature=self.n_quadrature,
            prior_sd=self.prior_sd,
            random_state=self.random_state,
        )
        with tqdm(disable=True) as quiet:
            eta_2pl, *_ = two._fit_parameters(data, quiet)
        n_items = len(eta_2pl)
        g = np.full(n_items, 0.1)
        u = np.full(n_items, 0.98 if self.model == "4pl" else 1.0)
        return _math.pack(self.model, eta_2pl[:, : self.n_dims], eta_2pl[:, self.n_dims], g, u)

    # ------------------------------------------------------------------ EM steps
    def _accelerated_em(
        self,
        data: _math.ScoreArrays,
        nodes: np.ndarray,
        log_w: np.ndarray,
        prior: _math.ItemPrior,
        eta: np.ndarray,
        bar: tqdm,
    ) -> tuple[np.ndarray, bool, int, float]:
        """Iterate the EM map with safeguarded SQUAREM extrapolation (Varadhan & Roland, 2008).

        From x0, two EM steps give x1, x2; the extrapolated point
        x0 - 2 alpha (x1 - x0) + alpha^2 (x2 - 2 x1 + x0), alpha = -|r| / |v|, is clipped to
        the parameter box, stabilised by one more EM step and kept only if its log posterior
        is finite and at least that of x1 (else x2, which plain EM guarantees, and the next
        extrapolation may only be a quarter as long).

        Safeguard: every EM step must not lower the log posterior (up to float rounding). The
        parameter-expanded step (:meth:`_standardise_population`) can break that on small,
        wide matrices: when some model's posterior sits on a grid edge (a model that gets
        every non-constant item right) rescaling slopes by the population sd feeds on itself
        and the slopes grow without bound (psn_irt MMLU, 12 models: slopes of 1e13 after 150
        steps). The third decrease of more than ``_MONOTONE_SLACK`` (relative) switches the
        expansion off for the rest of the fit and restarts from the better point: plain EM,
        which is monotone, and one standardisation at the end (:meth:`_fit_parameters`).
        Isolated small dips are grid rounding and harmless (the Open LLM v1 fits of 3-4k
        models see 0-1), so those fits are bit-for-bit what they were without the safeguard.
        Convergence: one EM step moves no parameter by ``tol``. Returns the parameters,
        converged flag, number of EM steps and the change of the last EM step from an
        accepted point; the details land in ``self._trace``.
        """
        trace = self._trace = _EMTrace(expanded=self.model in ("1pl", "2pl"))
        max_alpha = 1.0

        def em_step(point: np.ndarray) -> tuple[np.ndarray, float, tuple[float, int]]:
            new_point, objective = self._em_step(
                data, nodes, log_w, prior, point, expand=trace.expanded
            )
            trace.n_steps += 1
            moved = np.max(np.abs(new_point - point), axis=1)
            worst = int(np.argmax(moved))
            bar.update(1)
            bar.set_postfix(change=f"{moved[worst]:.2e}")
            return new_point, objective, (float(moved[worst]), worst)

        def decreased(objective: float, floor: float) -> bool:
            return objective < floor - _MONOTONE_SLACK * (abs(floor) + 1.0)

        def fall_back() -> bool:
            """Count a decrease; past the allowance, switch the expansion off (True)."""
            trace.dips += 1
            if trace.dips < _EXPANSION_DIPS:
                return False
            trace.expanded = False
            trace.fallback_at = trace.n_steps
            return True

        # eta was reached by one EM step from `previous`, whose log posterior was `floor`
        previous, floor, change = eta, -np.inf, (np.inf, -1)
        while trace.n_steps < self.max_iter:
            x1, objective_eta, change1 = em_step(eta)
            if trace.expanded and decreased(objective_eta, floor) and fall_back():
                eta, floor = previous, -np.inf
                continue
            change = change1
            if change[0] < self.tol or trace.n_steps >= self.max_iter:
                return trace.finish(x1, change, self.tol)
            x2, objective_x1, change2 = em_step(x1)
            if trace.expanded and decreased(objective_x1, objective_eta) and fall_back():
                previous, floor = eta, -np.inf
                continue
            change = change2
            if change[0] < self.tol or trace.n_steps >= self.max_iter:
                return trace.finish(x2, change, self.tol)
            r, v = x1 - eta, x2 - 2.0 * x1 + eta
            alpha = -min(max(np.sqrt(np.sum(r**2) / max(np.sum(v**2), 1e-300)), 1.0), max_alpha)
            extrapolated = _bounded(eta - 2.0 * alpha * r + alpha**2 * v)
            stabilised, objective_ext, change3 = em_step(extrapolated)
            if np.isfinite(objective_ext) and objective_ext >= objective_x1:
                trace.accepted += 1
                previous, floor, eta, change = extrapolated, objective_ext, stabilised, change3
                max_alpha = max_alpha * 4.0 if -alpha >= max_alpha else max_alpha
                if change[0] < self.tol:
                    return trace.finish(eta, change, self.tol)
            else:
                trace.rejected += 1
                previous, floor, eta = x1, objective_x1, x2
                max_alpha = max(1.0, max_alpha / 4.0)
        return trace.finish(eta, change, self.tol)

    def _em_step(
        self,
        data: _math.ScoreArrays,
        nodes: np.ndarray,
        log_w: np.ndarray,
        prior: _math.ItemPrior,
        eta: np.ndarray,
        *,
        expand: bool = True,
    ) -> tuple[np.ndarray, float]:
        """One EM map: updated parameters, and the log posterior (marginal + prior) at ``eta``.

        ``expand``: finish 1PL/2PL steps with the parameter expansion; the result is clipped
        to the parameter box (:func:`_bounded`).
        """
        weights, marginal = self._e_step(data, nodes, log_w, eta)
        correct, observed = data.expected_correct(weights), data.expected_observed(weights)
        objective = float(marginal.sum()) + self._log_prior(eta, prior)
        new_eta = self._m_step(eta, nodes, correct, observed, prior)
        if expand and self.model in ("1pl", "2pl"):
            new_eta = self._standardise_population(new_eta, weights, nodes)
        return _bounded(new_eta), objective

    def _standardise_population(
        self, eta: np.ndarray, weights: np.ndarray, nodes: np.ndarray
    ) -> np.ndarray:
        """Parameter-expanded EM step (Liu, Rubin & Wu, 1998): re-express the items so that
        the population's posterior mean and covariance become 0 and I.

        With theta = mu + L theta' (L the Cholesky factor of the posterior covariance),
        a theta + d = (a L) theta' + (d + a mu). Why: when posteriors are sharper than the
        grid (many items), plain EM creeps along the scale of theta and settles where the grid
        quantises best, not at the continuous maximum (synthetic 1,000 x 10,000 2PL: slopes
        0.68 x the truth and ability sd 1.43; with this step 0.98 x and 1.00, in 7 instead of
        13 EM steps). On arc it also raised the likelihood evaluated on a 401-node grid
        (-94,787 against -94,923). Not used for 3PL/4PL, where it made steep items cycle.
        For D > 1 the rotation is fixed every step as well (N(0, I) is rotation invariant).
        """
        mass = weights.sum(axis=0)
        mass /= mass.sum()
        mean = mass @ nodes
        covariance = (nodes * mass[:, None]).T @ nodes - np.outer(mean, mean)
        try:
            factor = np.linalg.cholesky(covariance)
        except np.linalg.LinAlgError:
            return eta
        a = eta[:, : self.n_dims]
        standardised = eta.copy()
        standardised[:, : self.n_dims] = a @ factor
        if self.n_dims > 1:
            rotated = standardised[:, : self.n_dims] @ _math.principal_rotation(a @ factor)
            standardised[:, : self.n_dims] = rotated
        standardised[:, self.n_dims] = eta[:, self.n_dims] + a @ mean
        return standardised

    def _log_prior(self, eta: np.ndarray, prior: _math.ItemPrior) -> float:
        """Summed log prior of the item parameters (the 1PL's shared slope counted once)."""
        total = float(_math.prior_terms(self.model, self.n_dims, eta, prior)[0].sum())
        if self.model == "1pl":
            total += (len(eta) - 1) * 0.5 * eta[0, 0] ** 2 / prior.slope_sd**2
        return total

    def _e_step(
        self, data: _math.ScoreArrays, nodes: np.ndarray, log_w: np.ndarray, eta: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Posterior weights (N, Q) of every model over the grid, and log marginal likelihoods."""
        a, d, g, u = _math.unpack(self.model, self.n_dims, eta)
        return _math.posterior_weights(_math.grid_loglik(data, nodes, a, d, g, u), log_w)

    def _m_step(
        self,
        eta: np.ndarray,
        nodes: np.ndarray,
        correct: np.ndarray,
        observed: np.ndarray,
        prior: _math.ItemPrior,
    ) -> np.ndarray:
        """A few Fisher-scoring steps on the expected complete-data log posterior of each item."""
        if self.model == "1pl":
            for _ in range(_NEWTON_STEPS[self.model]):
                eta = self._shared_slope_step(eta, nodes, correct, observed, prior)
            return eta
        objective = self._item_objective(eta, nodes, correct, observed, prior)
        for _ in range(_NEWTON_STEPS[self.model]):
            eta, objective = self._item_wise_step(eta, objective, nodes, correct, observed, prior)
        return eta

    def _item_objective(self, eta, nodes, correct, observed, prior) -> np.ndarray:
        """Per-item expected log-likelihood plus log prior, (J,)."""
        loglik = _math.item_loglik(self.model, self.n_dims, eta, nodes, correct, observed)
        return loglik + _math.prior_terms(self.model, self.n_dims, eta, prior)[0]

    def _item_wise_step(
        self, eta, objective, nodes, correct, observed, prior
    ) -> tuple[np.ndarray, np.ndarray]:
        """One clipped Fisher-scoring step per item, halved where it would lower that item's
        objective; returns the new parameters and their objectives."""
        grad, info = _math.item_score_and_information(
            self.model, self.n_dims, eta, nodes, correct, observed
        )
        _, prior_grad, prior_neg_hess = _math.prior_terms(self.model, self.n_dims, eta, prior)
        precision = info + (prior_neg_hess + 1e-8)[:, :, None] * np.eye(eta.shape[1])
        step = np.linalg.solve(precision, (grad + prior_grad)[:, :, None])[:, :, 0]
        step = _math.clip_step(step, _MAX_NEWTON_STEP)
        result, result_objective = eta.copy(), objective.copy()
        pending = np.arange(len(eta))
        for _ in range(_LINE_SEARCH_HALVINGS):
            candidate = eta[pending] + step[pending]
            after = self._item_objective(
                candidate, nodes, correct[:, pending], observed[:, pending], prior
            )
            better = after >= objective[pending]
            result[pending[better]] = candidate[better]
            result_objective[pending[better]] = after[better]
            pending = pending[~better]
            if len(pending) == 0:
                break
            step[pending] *= 0.5
        return result, result_objective

    def _shared_slope_step(self, eta, nodes, correct, observed, prior) -> np.ndarray:
        """Newton step for the 1PL: one slope shared by all items, one intercept per item.

        The Hessian is an arrow (shared slope row/column plus a diagonal over intercepts), so
        the exact joint step follows from the Schur complement in O(J).
        """
        grad, info = _math.item_score_and_information("2pl", 1, eta, nodes, correct, observed)
        slope = eta[0, 0]
        g_a = grad[:, 0].sum() - slope / prior.slope_sd**2
        h_aa = info[:, 0, 0].sum() + 1.0 / prior.slope_sd**2
        g_d = grad[:, 1] - eta[:, 1] / prior.intercept_sd**2
        h_dd = info[:, 1, 1] + 1.0 / prior.intercept_sd**2
        h_ad = info[:, 0, 1]
        step_a = (g_a - np.sum(h_ad * g_d / h_dd)) / (h_aa - np.sum(h_ad**2 / h_dd))
        step = np.column_stack([np.full(len(eta), step_a), (g_d - h_ad * step_a) / h_dd])
        step *= min(1.0, _MAX_NEWTON_STEP / max(np.max(np.abs(step)), 1e-300))
        before = self._item_objective(eta, nodes, correct, observed, prior).sum()
        for _ in range(_LINE_SEARCH_HALVINGS):
            candidate = eta + step
            # the shared slope's prior counts once, not once per item
            extra = (len(eta) - 1) * 0.5 * (candidate[0, 0] ** 2 - slope**2) / prior.slope_sd**2
            after = self._item_objective(candidate, nodes, correct, observed, prior).sum() + extra
            if after >= before:
                return candidate
            step *= 0.5
        return eta

    # ------------------------------------------------------------------ identification
    def _identify(
        self, a: np.ndarray, d: np.ndarray, g: np.ndarray, u: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Fix the sign (summed slope >= 0) and, for D > 1, the rotation of the latent space.

        The N(0, I) population fixes location and scale; theta -> theta R with a -> a R for an
        orthogonal R (a sign flip when D = 1) leaves every probability unchanged, so we pick the
        R of :func:`_math.principal_rotation`.
        """
        if self.n_dims == 1:
            return (-a if a.sum() < 0 else a), d, g, u
        return a @ _math.principal_rotation(a), d, g, u


# ---------------------------------------------------------------------------------- start values
def _item_total_slopes(data: _math.ScoreArrays, p: np.ndarray) -> np.ndarray:
    """Logistic slopes from item-total correlations r: a = 1.7 r / sqrt(1 - r^2), |r| <= 0.9."""
    n_rows = data.shape[0]
    totals = data.scores.sum(axis=1, dtype=np.float64) / np.maximum(data.n_observed_rows, 1)
    centred = (totals - totals.mean())[:, None]
    n_obs = data.expected_observed(np.ones((n_rows, 1)))[0]
    cross = data.expected_correct(centred)[0] - p * data.expected_observed(centred)[0]
    covariance = cross / n_obs
    correlation = covariance / np.sqrt(p * (1.0 - p) * max(float(centred.var()), 1e-12))
    correlation = np.clip(correlation, -0.9, 0.9)
    return 1.7 * correlation / np.sqrt(1.0 - correlation**2)


def _svd_slopes(
    data: _math.ScoreArrays, p: np.ndarray, n_dims: int, rng: np.random.Generator
) -> np.ndarray:
    """Slopes from the leading singular vectors of the standardised scores (randomized SVD)."""
    observed = np.ones(data.shape, dtype=bool) if data.complete else ~_missing_mask(data)
    standardised = np.where(observed, (data.scores - p) / np.sqrt(p * (1.0 - p)), 0.0)
    sketch = standardised @ rng.standard_normal((data.shape[1], n_dims + 10))
    for _ in range(2):
        sketch = standardised @ (standardised.T @ np.linalg.qr(sketch)[0])
    basis = np.linalg.qr(sketch)[0]
    _, singular, vt = np.linalg.svd(basis.T @ standardised, full_matrices=False)
    loadings = (vt[:n_dims].T * singular[:n_dims]) / np.sqrt(data.shape[0])
    loadings *= np.where(loadings.sum(axis=0) < 0, -1.0, 1.0)
    scale = np.sqrt(np.maximum(1.0 - np.sum(loadings**2, axis=1, keepdims=True), 0.1))
    return 1.7 * np.clip(loadings, -0.95, 0.95) / scale


def _missing_mask(data: _math.ScoreArrays) -> np.ndarray:
    if data.observed_dense is not None:
        return data.observed_dense == 0
    return data.missing_sparse.toarray().astype(bool)
