"""Reference numbers beside the selection methods: ridge on item responses, metabench's own.

Ridge regression of the full score on the item responses needs no selection method and no
IRT: if a method x estimator cannot beat it on the same split, the method adds nothing.
metabench's published held-out error is read from its score files (other models than ours).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from lmeval_microbench._rng import spawn
from lmeval_microbench.errors import InputError
from lmeval_microbench.estimators._ridge_cv import centred_ridge_gcv
from lmeval_microbench.reliability.metrics import ResultPool
from lmeval_microbench.reliability.plan import ALL, Budget
from lmeval_microbench.reliability.splits import Split
from lmeval_microbench.selection import make_selector

RIDGE = "ridge_items"
"""Estimator label of the ridge baseline rows (not a registered estimator)."""
RIDGE_SUBSET = 50
RIDGE_ALPHAS = np.logspace(-3, 6, 37)
RIDGE_FOLDS = 5
SEED = 0


# ---------------------------------------------------------------------- anchors
def read_table(path: Path, columns: Sequence[str]) -> pd.DataFrame:
    """A CSV that must have ``columns``; a missing one is named with the ones there are."""
    table = pd.read_csv(path)
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InputError(f"{path}: no column {missing[0]!r}; columns are {list(table.columns)}")
    return table


def ridge_gcv(
    x: np.ndarray, y: np.ndarray, alphas: np.ndarray = RIDGE_ALPHAS
) -> tuple[float, np.ndarray, float]:
    """Ridge regression of ``y`` on the columns of ``x``; GCV over ``alphas`` picks the penalty.

    The intercept is not penalised (columns and ``y`` are centred). One eigendecomposition of
    the small Gram matrix ``x_c^T x_c = V diag(s2) V^T`` serves every penalty: with
    ``z = V^T x_c^T y`` the coefficients are ``V z / (s2 + alpha)``, the residual sum of
    squares ``y^T y - sum(z^2 (s2 + 2 alpha) / (s2 + alpha)^2)`` and the degrees of freedom
    ``sum(s2 / (s2 + alpha))``; a fit with ``n`` or more degrees of freedom (intercept
    included) is refused. The package's one GCV ridge does it
    (:func:`lmeval_microbench.estimators._ridge_cv.ridge_gcv`). Returns (intercept,
    coefficients, alpha).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    intercept, coef, index = centred_ridge_gcv(x, y, alphas, rss="closed-form", dof_rule="refuse")
    return intercept, coef, float(alphas[index])


def ridge_predict(intercept: float, coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Ridge predictions clipped to the score range [0, 1]."""
    return np.clip(intercept + np.asarray(x, dtype=np.float64) @ coef, 0.0, 1.0)


def ridge_cv(
    values: np.ndarray,
    truth: np.ndarray,
    *,
    n_items: int | None = None,
    n_folds: int = RIDGE_FOLDS,
    seed: int = SEED,
) -> dict[str, float]:
    """K-fold CV error (points) of ridge on every item, or on ``n_items`` random ones per fold.

    Every model is predicted once, by the fit on the other folds; a fold's random items are
    drawn anew, so the error averages over item draws too.
    """
    values = np.asarray(values, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    if np.isnan(values).any():
        raise InputError("ridge baseline needs a complete matrix (no missing responses)")
    fold_rng, item_rng = spawn(seed, 2)
    labels = (np.arange(truth.size) % n_folds)[fold_rng.permutation(truth.size)]
    prediction = np.empty_like(truth)
    for fold in range(n_folds):
        held = labels == fold
        columns = (
            np.arange(values.shape[1])
            if n_items is None
            else np.sort(item_rng.choice(values.shape[1], n_items, replace=False))
        )
        intercept, coef, _ = ridge_gcv(values[~held][:, columns], truth[~held])
        prediction[held] = ridge_predict(intercept, coef, values[held][:, columns])
    error = (prediction - truth) * 100.0
    return {
        "mae": float(np.mean(np.abs(error))),
        "rmse": float(np.sqrt(np.mean(error**2))),
        "items": int(values.shape[1] if n_items is None else n_items),
        "models": int(truth.size),
        "folds": n_folds,
    }


def metabench_own_error(scores_file: Path) -> dict[str, float] | None:
    """metabench's held-out error: |pred_from_subset_irt - full_score_metabench| on ``test`` rows.

    None when the file does not exist (hellaswag has none). These test models are not in our
    matrices, so the number is a reference on other models, not on our splits.
    """
    if not scores_file.exists():
        return None
    table = read_table(scores_file, ("split", "full_score_metabench", "pred_from_subset_irt"))
    test = table[table["split"] == "test"]
    if test.empty:
        raise InputError(f"{scores_file}: no rows with split == 'test'")
    error = (test["pred_from_subset_irt"] - test["full_score_metabench"]).to_numpy(dtype=float)
    if not np.all(np.isfinite(error)):
        raise InputError(f"{scores_file}: missing scores or predictions on test rows")
    return {
        "mae": float(np.mean(np.abs(error))),
        "rmse": float(np.sqrt(np.mean(error**2))),
        "n": len(test),
    }


def ridge_on_split(split: Split, pools: dict[tuple, ResultPool], budgets: Sequence[Budget]) -> None:
    """Ridge baseline on one split: all items, and the random selector's items at each budget."""
    for budget in budgets:
        start = time.perf_counter()
        if budget == ALL:
            method, items = ALL, list(split.source.item_ids)
        else:
            method = "random"
            items = list(
                make_selector("random")
                .select(split.source, int(budget), seed=split.selection_seed)
                .item_ids
            )
        source = split.source.values[:, split.source.item_positions(items)]
        target = split.target.values[:, split.target.item_positions(items)]
        intercept, coef, _ = ridge_gcv(source, split.source_truth)
        value = ridge_predict(intercept, coef, target)
        nan = np.full_like(value, np.nan)
        pool = pools.setdefault((split.protocol, method, RIDGE, budget), ResultPool())
        pool.add(split.repeat, split.target_truth, value, nan, nan)
        pool.seconds += time.perf_counter() - start
        pool.n_items = len(items)
        pool.n_source = split.source.n_models
