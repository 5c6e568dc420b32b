"""Supervised greedy selection: add the item that most lowers the cross-validated score error.

Why this should beat unsupervised selection: random, Anchor Points, tinyBenchmarks, metabench
and DPP all optimise a proxy (coverage of item profiles, IRT information, diversity) and
hope the full score follows. What a user pays for is the error of the reconstructed full
score on a *new* model. This selector optimises that directly on the source models: it adds,
one at a time, the item whose column most reduces the K-fold cross-validated error (MAE by
default) of a ridge regression of the full score (``target``) on the selected item columns.
Three things come with that for free: redundant items are not picked (a copy of a chosen item
does not lower the error), items that separate the models where the target varies most are
preferred, and when the matrix holds only part of the benchmark (the Open LLM matrices keep
100-250 of 1,000-14,000 items), items are judged by how well they predict the *whole*
benchmark's score, which no method that sees only the matrix can do. Cross-validation keeps
it honest: an item that only fits noise of the training folds does not lower the held-out
error. (The error path in ``info["cv_error"]`` is still slightly optimistic, since the path
itself is chosen on the same folds.)

The weights are uniform: the item columns enter a regression, not a weighted mean, so the
estimator to use with this subset is a regression on the subset (``calibrated``), not the
weighted anchor sum.

Computation: ridge forward selection is ordinary least squares on data augmented with a
pseudo-row ``sqrt(lambda) e_c`` per candidate column, so each fold keeps the swept (Schur
complement) Gram matrix ``R`` of all candidates given the chosen ones, the swept
cross-products ``q`` with the target, the validation columns ``W`` residualised the same way
and the validation residuals ``e``. Candidate ``c`` would get coefficient ``q_c / R_cc`` and
validation residuals ``e - W_c q_c / R_cc``: every candidate is scored at once, and adding
item ``j`` is one rank-one update of ``R``, ``q``, ``W`` and ``e``: O(K p^2 + m p) per step for
p candidates and m models (3,000 models x 250 items, budget 100: well under a second).
Large item sets are reduced to a random pool of ``max_candidates`` items (default 1,000) drawn
with the seed, which bounds the K p x p matrices (40 MB at the default).

Missing scores are replaced by the item's mean over the source models. ``strong_tilt`` > 0
weights source models by ``exp(strong_tilt * z)``, z the standardised target, in both the fit
and the error: new models tend to be stronger than most of the source, so errors at the top
may matter more than at the bottom.
"""

from __future__ import annotations

import numpy as np

from .._rng import SeedLike, as_generator
from ..errors import InputError
from ..responses import ResponseMatrix
from .base import Selector, Subset
from .dpp import filled_values
from .random import _seed_value

LOSSES = ("mae", "rmse")


def cv_folds(n_rows: int, n_folds: int, rng: np.random.Generator) -> np.ndarray:
    """Fold label of each row: a random permutation cut into near-equal folds."""
    labels = np.arange(n_rows) % n_folds
    return labels[rng.permutation(n_rows)]


def candidate_pool(n_items: int, max_candidates: int, rng: np.random.Generator) -> np.ndarray:
    """All item positions, or a sorted random sample of ``max_candidates`` of them."""
    if n_items <= max_candidates:
        return np.arange(n_items)
    return np.sort(rng.choice(n_items, size=max_candidates, replace=False))


def tilted_model_weights(target: np.ndarray, strong_tilt: float) -> np.ndarray:
    """``exp(strong_tilt * z)`` with z the standardised target, scaled to mean 1."""
    spread = target.std()
    z = (target - target.mean()) / spread if spread > 0 else np.zeros_like(target)
    weights = np.exp(strong_tilt * z)
    return weights / weights.mean()


class _FoldSweep:
    """One cross-validation fold of the ridge forward selection, in swept form.

    Attributes: ``gram`` (p, p) the Gram matrix of the centred, weighted training columns plus
    ``lambda I``, swept on the chosen items; ``cross`` (p,) the swept cross-products with the
    target; ``valid_x`` (n_v, p) the validation columns residualised on the chosen items
    through the training fit; ``valid_residual`` (n_v,) the validation errors of the current
    fit; ``valid_weight`` (n_v,) the model weights.
    """

    def __init__(
        self, x: np.ndarray, y: np.ndarray, weights: np.ndarray, held: np.ndarray, alpha: float
    ) -> None:
        train = ~held
        w_train = weights[train]
        share = w_train / w_train.sum()
        x_mean = share @ x[train]
        y_mean = float(share @ y[train])
        root = np.sqrt(w_train)
        x_train = (x[train] - x_mean) * root[:, None]
        self.gram = x_train.T @ x_train
        self.gram[np.diag_indices_from(self.gram)] += alpha * w_train.sum()
        self.cross = x_train.T @ ((y[train] - y_mean) * root)
        self.valid_x = x[held] - x_mean
        self.valid_residual = y[held] - y_mean
        self.valid_weight = weights[held]

    def candidate_losses(self, loss: str) -> np.ndarray:
        """Weighted sum of absolute (``mae``) or squared errors on the fold, per candidate."""
        diagonal = np.diagonal(self.gram)
        gamma = np.divide(self.cross, diagonal, out=np.zeros_like(self.cross), where=diagonal > 0)
        e, w, cols = self.valid_residual, self.valid_weight, self.valid_x
        if loss == "mae":
            return np.abs(e[:, None] - cols * gamma).T @ w
        base = float(w @ e**2)
        return base - 2.0 * gamma * (cols.T @ (w * e)) + gamma**2 * ((cols**2).T @ w)

    def current_loss(self, loss: str) -> float:
        e = self.valid_residual
        return float(self.valid_weight @ (np.abs(e) if loss == "mae" else e**2))

    def add(self, j: int) -> None:
        """Sweep item ``j`` into the fit: rank-one updates of every stored quantity."""
        column = self.gram[:, j].copy()
        factor = column / column[j]
        step = self.cross[j] / column[j]
        valid_j = self.valid_x[:, j].copy()
        self.gram -= np.outer(column, factor)
        self.cross -= column * step
        self.valid_residual -= valid_j * step
        self.valid_x -= np.outer(valid_j, factor)


def greedy_forward_selection(
    x: np.ndarray,
    y: np.ndarray,
    budget: int,
    folds: np.ndarray,
    *,
    alpha: float = 0.01,
    loss: str = "mae",
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Columns of ``x`` (m, p) picked in order, and the CV error after each pick.

    ``y`` (m,) is the target, ``folds`` (m,) the fold label of each row; the ridge penalty is
    ``alpha`` times the training weight (the number of training rows without weights).
    Ties go to the lowest column. The errors are MAE or RMSE in the units of ``y``.
    """
    weights = np.ones(len(y)) if weights is None else weights
    sweeps = [_FoldSweep(x, y, weights, folds == fold, alpha) for fold in np.unique(folds)]
    total_weight = float(weights.sum())
    available = np.ones(x.shape[1], dtype=bool)
    picked: list[int] = []
    errors: list[float] = []
    for _ in range(budget):
        losses = sum(sweep.candidate_losses(loss) for sweep in sweeps) / total_weight
        j = int(np.argmin(np.where(available, losses, np.inf)))
        picked.append(j)
        available[j] = False
        for sweep in sweeps:
            sweep.add(j)
        current = sum(sweep.current_loss(loss) for sweep in sweeps) / total_weight
        errors.append(current if loss == "mae" else float(np.sqrt(max(current, 0.0))))
    return np.asarray(picked, dtype=np.intp), np.asarray(errors)


class GreedySelector(Selector):
    """Greedy forward selection minimising the K-fold CV error of a ridge fit of the target.

    Parameters
    ----------
    n_folds
        Folds of source models for the cross-validated error.
    alpha
        Ridge penalty per unit of model weight (per source model without ``strong_tilt``),
        on the raw 0/1 item columns (variance at most 0.25).
    loss
        ``"mae"`` (default, the error users read) or ``"rmse"``.
    strong_tilt
        0 (default): all source models count alike; > 0 weights stronger models up.
    max_candidates
        Items considered; larger item sets are sampled down to this many with the seed.
    """

    name = "greedy"
    uses_target = True

    def __init__(
        self,
        *,
        n_folds: int = 5,
        alpha: float = 0.01,
        loss: str = "mae",
        strong_tilt: float = 0.0,
        max_candidates: int = 1000,
    ) -> None:
        self.n_folds = n_folds
        self.alpha = alpha
        self.loss = loss
        self.strong_tilt = strong_tilt
        self.max_candidates = max_candidates

    def _check_options(self, source: ResponseMatrix, budget: int) -> None:
        if self.loss not in LOSSES:
            raise InputError(f"{self.name}: loss must be one of {LOSSES}, got {self.loss!r}")
        n_folds = self.n_folds
        if not isinstance(n_folds, (int, np.integer)) or not 2 <= n_folds <= source.n_models:
            raise InputError(
                f"{self.name}: n_folds must be an integer from 2 to the {source.n_models} "
                f"source models, got {self.n_folds!r}"
            )
        for name in ("alpha", "strong_tilt"):
            value = getattr(self, name)
            if not isinstance(value, (int, float, np.floating)) or not np.isfinite(value):
                raise InputError(f"{self.name}: {name} must be a finite number, got {value!r}")
        if self.alpha <= 0:
            raise InputError(f"{self.name}: alpha must be > 0, got {self.alpha!r}")
        if not isinstance(self.max_candidates, (int, np.integer)) or self.max_candidates < budget:
            raise InputError(
                f"{self.name}: max_candidates must be an integer >= the budget {budget}, "
                f"got {self.max_candidates!r}"
            )

    def _select(self, source: ResponseMatrix, budget: int, seed: SeedLike) -> Subset:
        return self._select_for_target(source, budget, seed, self._checked_target(source, None))

    def _select_for_target(
        self, source: ResponseMatrix, budget: int, seed: SeedLike, target: np.ndarray
    ) -> Subset:
        self._check_options(source, budget)
        rng = as_generator(seed)
        pool = candidate_pool(source.n_items, int(self.max_candidates), rng)
        folds = cv_folds(source.n_models, int(self.n_folds), rng)
        weights = tilted_model_weights(target, float(self.strong_tilt))
        columns = filled_values(source)[:, pool]
        picked, errors = greedy_forward_selection(
            columns, target, budget, folds, alpha=float(self.alpha), loss=self.loss, weights=weights
        )
        chosen = pool[picked]
        order = np.argsort(chosen)
        return Subset(
            tuple(source.item_ids[k] for k in chosen[order]),
            np.full(budget, 1.0 / budget),
            self.name,
            _seed_value(seed),
            {
                "pick_order": [source.item_ids[k] for k in chosen],
                "cv_error": errors.tolist(),
                "loss": self.loss,
                "n_candidates": int(pool.size),
            },
        )
