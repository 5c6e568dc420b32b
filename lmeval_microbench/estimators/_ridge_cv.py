"""Ridge regression with its penalty chosen by generalised cross-validation (GCV) on a grid.

The one ridge behind three callers, each with its own grid:

- ``calibrated``'s spline head (:func:`.calibrated.ridge_gcv`): one penalty per column (the
  spline columns get the grid's, the linear ones a tiny fixed one), so every grid point is
  its own linear solve;
- the joint head (:func:`.joint.head.fit_ridge_head`): one penalty for all columns, several
  outputs at once, all penalties from one eigendecomposition of the Gram matrix;
- the ridge-on-items baseline of ``tools/leaderboard_baselines.py``: one penalty, one output,
  the residual sum of squares in closed form and fits as flexible as the data refused.

For a penalty ``P`` (the diagonal added to the Gram matrix ``X^T X`` of the centred design)
the fit is ``coef = (X^T X + P)^-1 X^T y``, its degrees of freedom ``dof = tr(H) + 1`` (the
hat matrix, plus the intercept) and its GCV score ``n * rss / (n - dof)^2``; the grid point
with the lowest score wins (the first on ties), per output. The two options keep each
caller's arithmetic as it was (so fitted states and benchmark numbers did not move when the
three became one): ``rss`` says how the residual sum of squares is computed and ``dof_rule``
what a fit with ``n - 1`` or more degrees of freedom scores.

Not scikit-learn's ``RidgeCV``: with ``cv=None`` it picks the penalty by the exact
leave-one-out error (not GCV), has no penalty per column and no refusal of saturated fits,
so it would choose other penalties than these callers have always chosen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

RSS_MODES = ("residuals", "closed-form")
DOF_RULES = ("clamp", "refuse")


@dataclass(frozen=True)
class GCVChoice:
    """The grid point GCV picked, per output (scalars for a 1-D target).

    ``index`` is the position in the grid, ``score`` its GCV score and ``coef`` the
    coefficients of the centred columns there: ``(p,)`` or ``(p, O)``.
    """

    index: np.ndarray
    score: np.ndarray
    coef: np.ndarray


def standardise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and standard deviations (1 for constant columns): ``(x - center) / scale``."""
    center = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    return center, scale


def gcv_score(
    n: int, rss: np.ndarray, dof: np.ndarray, dof_rule: Literal["clamp", "refuse"] = "clamp"
) -> np.ndarray:
    """``n * rss / (n - dof)^2`` per grid point (rows) and output (columns, if any).

    ``"clamp"``: a fit with more than ``n - 1`` degrees of freedom is scored as if it had
    ``n - 1``; ``"refuse"``: one with ``n`` or more scores infinity.
    """
    if dof_rule == "clamp":
        return n * rss / _expand(np.maximum(n - dof, 1.0), rss) ** 2
    with np.errstate(divide="ignore"):
        return np.where(_expand(dof < n, rss), n * rss / _expand(n - dof, rss) ** 2, np.inf)


def ridge_gcv(
    xc: np.ndarray,
    yc: np.ndarray,
    penalties: np.ndarray,
    *,
    rss: Literal["residuals", "closed-form"] = "residuals",
    dof_rule: Literal["clamp", "refuse"] = "clamp",
) -> GCVChoice:
    """Ridge fits of centred ``yc`` ((n,) or (n, O)) on centred ``xc`` (n, p) over a grid.

    ``penalties`` is the grid: shape (A,) for one penalty on every column (one
    eigendecomposition serves the whole grid), or (A, p) for a penalty per column (a linear
    solve per grid point; ``rss`` must then be ``"residuals"``). ``rss="closed-form"`` takes
    the residual sum of squares from the eigenvalues (``y^T y - sum(z^2 (s2 + 2 a) /
    (s2 + a)^2)`` with ``z = V^T X^T y``) instead of the residuals of every fit.
    """
    if rss not in RSS_MODES or dof_rule not in DOF_RULES:
        raise ValueError(f"ridge_gcv: rss must be one of {RSS_MODES}, dof_rule of {DOF_RULES}")
    penalties = np.asarray(penalties, dtype=np.float64)
    if penalties.ndim == 2:
        if rss != "residuals":
            raise ValueError("ridge_gcv: a penalty per column needs rss='residuals'")
        return _per_column(xc, yc, penalties, dof_rule)
    n = xc.shape[0]
    eigenvalues, vectors = np.linalg.eigh(xc.T @ xc)
    eigenvalues = np.clip(eigenvalues, 0.0, None)
    projected = vectors.T @ (xc.T @ yc)  # (p,) or (p, O)
    denominator = eigenvalues[None, :] + penalties[:, None]  # (A, p)
    dof = np.sum(eigenvalues[None, :] / denominator, axis=1) + 1.0
    if rss == "closed-form":
        explained = np.sum(
            projected**2
            * _expand(eigenvalues + 2.0 * penalties[:, None], projected)
            / _expand(denominator**2, projected),
            axis=1,
        )
        total = float(yc @ yc) if yc.ndim == 1 else np.sum(yc * yc, axis=0)
        scores = gcv_score(n, np.clip(total - explained, 0.0, None), dof, dof_rule)
        index = np.argmin(scores, axis=0)
        if yc.ndim == 1:
            coef = vectors @ (projected / denominator[index])
        else:
            coef = np.column_stack(
                [vectors @ (projected[:, o] / denominator[k]) for o, k in enumerate(index)]
            )
        return GCVChoice(index, _at(scores, index), coef)
    scaled = projected[None] / _expand(denominator, projected)  # (A, p) or (A, p, O)
    if yc.ndim == 1:
        path = scaled @ vectors.T  # (A, p)
        fitted = path @ xc.T  # (A, n)
    else:
        path = vectors[None] @ scaled  # (A, p, O)
        fitted = xc[None] @ path  # (A, n, O)
    scores = gcv_score(n, np.sum((yc[None] - fitted) ** 2, axis=1), dof, dof_rule)
    index = np.argmin(scores, axis=0)
    if yc.ndim == 1:
        return GCVChoice(index, _at(scores, index), path[index])
    return GCVChoice(index, _at(scores, index), path[index, :, np.arange(yc.shape[1])].T)


def centred_ridge_gcv(
    x: np.ndarray, y: np.ndarray, penalties: np.ndarray, **options: str
) -> tuple[float, np.ndarray, int]:
    """:func:`ridge_gcv` of a 1-D ``y`` on ``x`` with an unpenalised intercept (both centred
    here). Returns (intercept, coefficients, grid position)."""
    x_mean = x.mean(axis=0)
    xc = x - x_mean
    y_mean = float(y.mean())
    yc = y - y_mean
    choice = ridge_gcv(xc, yc, penalties, **options)  # type: ignore[arg-type]
    return y_mean - float(x_mean @ choice.coef), choice.coef, int(choice.index)


def _per_column(
    xc: np.ndarray, yc: np.ndarray, penalties: np.ndarray, dof_rule: Literal["clamp", "refuse"]
) -> GCVChoice:
    """Grid points with a penalty per column: one linear solve each."""
    n = xc.shape[0]
    gram = xc.T @ xc
    cross = xc.T @ yc
    coefs, rss, dof = [], [], []
    for penalty in penalties:
        system = gram + np.diag(penalty)
        coef = np.linalg.solve(system, cross)
        coefs.append(coef)
        dof.append(float(np.trace(np.linalg.solve(system, gram))) + 1.0)
        rss.append(np.sum((yc - xc @ coef) ** 2, axis=0))
    scores = gcv_score(n, np.array(rss), np.array(dof), dof_rule)
    index = np.argmin(scores, axis=0)
    if yc.ndim == 1:
        return GCVChoice(index, _at(scores, index), coefs[int(index)])
    columns = [coefs[k][:, o] for o, k in enumerate(index)]
    return GCVChoice(index, _at(scores, index), np.column_stack(columns))


def _expand(values: np.ndarray, like: np.ndarray) -> np.ndarray:
    """``values`` with a trailing axis for the outputs when ``like`` has them (columns)."""
    return values[..., None] if like.ndim > 1 else values


def _at(scores: np.ndarray, index: np.ndarray) -> np.ndarray:
    """The score of each output at its chosen grid point."""
    return scores[index] if scores.ndim == 1 else scores[index, np.arange(scores.shape[1])]
