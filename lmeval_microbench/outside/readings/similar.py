"""Similar reading (AIPW): the model's answers predicted from the source models' answers.

The other readings place a model on the sources' item difficulties (a Rasch level); this one
learns, for the one model it reads, how its answers relate to each source model's answers: a
ridge regression with the subset items as the samples and the source models' answers as the
features (the model-similarity predictor of benchpred's ``aipw``, Zhang, Dorner & Hardt
2025). It predicts the model's answer on every item it was not asked, and the mean of its
leave-one-item-out residuals on the asked items corrects those predictions (augmented
inverse-probability weighting with a finite population, cross-fitted):

    matrix mean = (sum of asked answers + sum of predictions on the rest
                   + N_rest * mean leave-one-out residual) / N

On a random sample of items (``random``; ``balanced``, random within difficulty bins) the
correction is unbiased whatever the model is, and the standard error follows from the
residuals alone, ``(N_rest / N) * s / sqrt(k) * sqrt(1 - k / N)``: no assumption that the
model resembles the sources. On informative (chosen) items the correction is not unbiased.

It is the whole estimate of the ``similar`` estimator. In ``guarded`` it serves only when asked
for (``reading="similar"``), not among the readings ``reading="auto"`` chooses from: tried
there at its fixed penalty (a scratch run of 2026-12-06: the peer suite's 132 cells of the v1 and
v2 matrices with all sources at 25-100 items, each with the recipe the default chose there),
it was chosen in 38 and the mean error went 2.19 -> 2.20 points: v1 random splits 1.99 ->
1.91, v1 strongest fifth 1.76 -> 1.89 (Winogrande at 25 items 1.23 -> 2.42), whole benchmarks
within 0.06; coverage 0.95 either way.

Fitted, the reading keeps the source models' answers on every item (its features), so a
bundle that uses it grows with sources x items.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import InputError
from ...responses import decode_rows, encode_rows
from ...selection.dpp import item_mean_filled
from .base import Reading, ScaleMap, SourceView

PENALTY = 2.0
"""The ridge penalty, in units of the mean kernel diagonal, fixed for every model.

It was chosen per model among :data:`ALPHAS` by the least leave-one-item-out error. With 25-50
asked items that choice is noisy and often lands on a small penalty, whose weights then follow
the few asked items too closely. With 10 source models (where the small-matrix fallback reads
with it) a fixed penalty of 2 erred 3.69 / 3.68 points on random / strongest-fifth splits of
the v1 and v2 matrices against 3.76 / 3.81, and 4.67 / 2.62 on psn against 4.75 / 3.01; with
50 sources 3.46 / 3.51 against 3.50 / 3.69. The best fixed penalty falls as sources grow: with
278 and 1,000 sources 2 erred 0.02-0.13 points more than the per-model choice, and 1 within
0.05 of it (``tools/bench_similar_penalty.py``, ``bench/similar_penalty.md``)."""
ALPHAS = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
"""The penalties a reading saved before :data:`PENALTY` chooses among per model (the one with
the least leave-one-item-out error); such states load with them and keep their numbers."""
MIN_ITEMS = 4
"""Fewest asked items: leave-one-item-out residuals of a centred regression need a few."""
MIN_RESIDUAL_VARIANCE = 0.01
"""Floor of the residual variance (residuals that happen to agree do not make it exact)."""
CHUNK = 512
"""Models whose predictions are computed at once."""


# ---------------------------------------------------------------------- the regression
def _loo_for_alpha(
    kernel_eig: tuple[np.ndarray, np.ndarray],
    features: np.ndarray,
    answers: np.ndarray,
    alpha: float,
    leave_self_out: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Dual ridge coefficients ``(k, T)`` and leave-one-item-out residuals ``(k, T)``.

    ``features`` are the centred source answers on the asked items ``(k, m)``, ``answers``
    the centred answers of the T models ``(k, T)``. With ``leave_self_out`` model t is source
    t and its own column is removed from the kernel by a rank-one downdate (Woodbury).
    """
    values, vectors = kernel_eig
    inverse = (vectors / (values + alpha)) @ vectors.T
    coef = inverse @ answers
    diag = np.diag(inverse)[:, None]
    if leave_self_out:
        pushed = inverse @ features
        denom = 1.0 - np.sum(features * pushed, axis=0)
        denom = np.where(np.abs(denom) < 1e-12, 1e-12, denom)
        coef = coef + pushed * (np.sum(pushed * answers, axis=0) / denom)
        diag = diag + pushed**2 / denom
    k = answers.shape[0]
    leverage = 1.0 - alpha * diag + 1.0 / k
    residual = alpha * coef / np.clip(1.0 - leverage, 1e-6, None)
    return coef, residual


def _best_ridge(
    features: np.ndarray,
    centred: np.ndarray,
    leave_self_out: bool,
    penalty_scale: float | None,
    penalties: Sequence[float],
) -> tuple[np.ndarray, np.ndarray]:
    """Per model, the dual coefficients and leave-one-out residuals of the penalty in
    ``penalties`` with the least leave-one-out error (one penalty: that one)."""
    kernel = features @ features.T
    if penalty_scale is None:
        penalty_scale = float(np.trace(kernel)) / features.shape[0]
    scale = max(penalty_scale, 1e-9)
    eig = np.linalg.eigh(kernel)
    best_error = np.full(centred.shape[1], np.inf)
    best_coef = np.zeros_like(centred)
    best_residual = np.zeros_like(centred)
    for alpha in penalties:
        coef, residual = _loo_for_alpha(eig, features, centred, alpha * scale, leave_self_out)
        error = np.mean(residual**2, axis=0)
        better = error < best_error
        best_error = np.where(better, error, best_error)
        best_coef[:, better] = coef[:, better]
        best_residual[:, better] = residual[:, better]
    return best_coef, best_residual


def _predicted_sums(
    rest: np.ndarray,
    features: np.ndarray,
    coef: np.ndarray,
    level: np.ndarray,
    leave_self_out: bool,
) -> np.ndarray:
    """Each model's predicted answers on the other items, clipped to [0, 1] and summed; in
    blocks of :data:`CHUNK` models, so that thousands of sources never need a sources x
    models weight matrix at once."""
    sums = np.empty(coef.shape[1])
    for start in range(0, coef.shape[1], CHUNK):
        block = slice(start, min(start + CHUNK, coef.shape[1]))
        weights = features.T @ coef[:, block]
        if leave_self_out:  # model t is source t: its own column predicts nothing
            columns = np.arange(block.start, block.stop)
            weights[columns, columns - block.start] = 0.0
        predicted = np.clip(level[None, block] + rest @ weights, 0.0, 1.0)
        sums[block] = predicted.sum(axis=0)
    return sums


def similarity_aipw(
    asked_features: np.ndarray,
    rest_features: np.ndarray,
    answers: np.ndarray,
    leave_self_out: bool = False,
    penalty_scale: float | None = None,
    penalties: Sequence[float] = (PENALTY,),
) -> tuple[np.ndarray, np.ndarray]:
    """AIPW estimates of the matrix mean and their standard errors, one per model.

    ``asked_features`` ``(k, m)`` and ``rest_features`` ``(N_rest, m)``: the source models'
    answers on the asked and the other items; ``answers`` ``(T, k)``: the models' answers on
    the asked items. ``leave_self_out``: the T models are the m sources themselves, each read
    without its own column (the penalties keep the scale of the kernel with every column).
    ``penalty_scale``: the unit of the penalties (default: the mean kernel diagonal);
    ``penalties``: the penalty, or several to choose among per model (:data:`ALPHAS`).
    """
    k, n_rest = asked_features.shape[0], rest_features.shape[0]
    total = k + n_rest
    answers = np.asarray(answers, dtype=np.float64)
    asked_sum = answers.sum(axis=1)
    if n_rest == 0:
        return asked_sum / total, np.zeros(answers.shape[0])
    centre = asked_features.mean(axis=0)
    features = asked_features - centre
    level = answers.mean(axis=1)
    centred = (answers - level[:, None]).T
    coef, residual = _best_ridge(features, centred, leave_self_out, penalty_scale, penalties)
    predicted = _predicted_sums(rest_features - centre, features, coef, level, leave_self_out)
    estimate = (asked_sum + predicted + n_rest * residual.mean(axis=0)) / total
    variance = np.maximum(residual.var(axis=0, ddof=1), MIN_RESIDUAL_VARIANCE)
    se = n_rest / total * np.sqrt(variance / k * max(1.0 - k / total, 0.0))
    return np.clip(estimate, 0.0, 1.0), se


def _decoded(encoded: Any, width: int, where: str) -> np.ndarray:
    """Saved source answers (:func:`~lmeval_microbench.responses.decode_rows`), checked."""
    if not isinstance(encoded, list) or not encoded:
        raise InputError(f"{where}: state has no source answers")
    rows = decode_rows(encoded, width)
    if rows.ndim != 2 or rows.shape[1] != width:
        raise InputError(f"{where}: the saved source answers are not {width} items wide")
    return rows


def _penalties(saved: Any, where: str) -> tuple[float, ...]:
    """Saved penalties as positive finite floats (states before :data:`PENALTY`: the grid)."""
    values = tuple(float(p) for p in saved)
    if not values or not all(math.isfinite(p) and p > 0 for p in values):
        raise InputError(f"{where}: penalties must be positive numbers, got {saved!r}")
    return values


class SimilarReading(Reading):
    """Model-similarity prediction of the unasked items plus the mean asked residual."""

    name = "similar"

    @classmethod
    def available(cls, view: SourceView) -> str | None:
        if view.positions.size < MIN_ITEMS:
            return f"the subset has {view.positions.size} items; the reading needs {MIN_ITEMS}"
        return None

    def fit(self, view: SourceView) -> SimilarReading:
        reason = self.available(view)
        if reason is not None:
            raise InputError(f"outside reading 'similar': {reason}")
        rest = np.setdiff1d(np.arange(view.n_items), view.positions)
        self.asked_ = view.values.copy()
        self.rest_ = item_mean_filled(view.all_values[:, rest])
        self.scale_ = view.scale_map()
        self.penalties_: tuple[float, ...] = (PENALTY,)
        return self

    def read(self, values: np.ndarray, inner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.scale_(
            *similarity_aipw(self.asked_.T, self.rest_.T, values, penalties=self.penalties_)
        )

    def read_sources(self) -> tuple[np.ndarray, np.ndarray]:
        """``(value, se)`` of every source model read from the other sources."""
        mean, se = similarity_aipw(
            self.asked_.T, self.rest_.T, self.asked_, leave_self_out=True, penalties=self.penalties_
        )
        return self.scale_(mean, se)

    def state(self) -> dict[str, Any]:
        return {
            "asked": encode_rows(self.asked_),
            "rest": encode_rows(self.rest_),
            "n_rest": int(self.rest_.shape[1]),
            "scale": self.scale_.to_dict(),
            "penalties": list(self.penalties_),
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> SimilarReading:
        where = "outside reading 'similar'"
        reading = cls()
        try:
            asked, rest = state["asked"], state["rest"]
            n_rest = int(state["n_rest"])
            reading.scale_ = ScaleMap.from_dict(state["scale"])
            reading.penalties_ = _penalties(state.get("penalties", ALPHAS), where)
        except KeyError as exc:
            raise InputError(f"{where}: state lacks field {exc.args[0]!r}") from exc
        except (TypeError, ValueError) as exc:
            raise InputError(f"{where}: malformed state ({exc})") from exc
        width = len(asked[0]) if asked and isinstance(asked[0], (str, list)) else 0
        reading.asked_ = _decoded(asked, width, where)
        reading.rest_ = (
            _decoded(rest, n_rest, where) if n_rest else np.zeros((reading.asked_.shape[0], 0))
        )
        if reading.asked_.shape[0] != reading.rest_.shape[0]:
            raise InputError(f"{where}: the asked and other items' answers hold different models")
        return reading
