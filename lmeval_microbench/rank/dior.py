"""DIoR (Decision Impact on Reliability, Perlitz et al.): how far a design decision can move
a ranking.

A *decision* (which items, which seed, which source models fit the estimator) is drawn many
times; each draw gives a ranking, compared with the reference ranking (here the full
benchmark's) by a meta-metric: Kendall tau, or top-k agreement (the share of the reference
top k that the draw also puts in its top k). DIoR is the lower end of the central 95 %
interval of that meta-metric over the draws: the agreement one can count on for a draw, not
the average one. A decision with high mean agreement but a heavy lower tail gets a low DIoR.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import kendalltau

from ..errors import InputError

DIOR_LEVEL = 0.95


def top_k_agreement(estimate: np.ndarray, truth: np.ndarray, k: int) -> float:
    """Share of the true top ``k`` (highest truths) that the estimate also puts in its top ``k``."""
    estimate, truth = np.asarray(estimate, float), np.asarray(truth, float)
    if estimate.shape != truth.shape or estimate.ndim != 1:
        raise InputError("estimate and truth must be 1-D arrays of one length")
    if not 1 <= k <= truth.size:
        raise InputError(f"k must be between 1 and the model count {truth.size}, got {k}")
    top_true = set(np.argsort(-truth, kind="stable")[:k].tolist())
    top_estimate = set(np.argsort(-estimate, kind="stable")[:k].tolist())
    return len(top_true & top_estimate) / k


def kendall_tau(estimate: np.ndarray, truth: np.ndarray) -> float:
    """Kendall's tau-b of estimates vs truths; NaN for fewer than 2 models or constant input.

    The one Kendall tau of the package (ranking rounds, DIoR and the reliability metrics). The
    NaN cases are answered here, before scipy, which would warn on fewer than 2 models.
    """
    estimate = np.asarray(estimate, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    if estimate.size < 2 or np.ptp(estimate) == 0 or np.ptp(truth) == 0:
        return math.nan
    return float(kendalltau(estimate, truth).statistic)


ranking_tau = kendall_tau
"""The name ``rank`` exported before the two wrappers became one (kept for callers)."""


def dior(values: Iterable[float], level: float = DIOR_LEVEL) -> float:
    """Lower end of the central ``level`` interval of a meta-metric over decision draws.

    The empirical ``(1 - level) / 2`` quantile (linear interpolation); NaN draws are
    skipped, and with no finite draw the result is NaN.
    """
    values = np.asarray(list(values), dtype=np.float64)
    values = values[np.isfinite(values)]
    if not 0.0 < level < 1.0:
        raise InputError(f"level must be in (0, 1), got {level!r}")
    if values.size == 0:
        return float("nan")
    return float(np.quantile(values, (1.0 - level) / 2.0))


@dataclass(frozen=True)
class DIoR:
    """Mean and DIoR of Kendall tau and of top-k agreement over draws of one decision."""

    draws: int
    tau_mean: float
    tau_dior: float
    top_k: int
    top_k_mean: float
    top_k_dior: float

    def as_dict(self) -> dict[str, float | int]:
        return {
            "draws": self.draws,
            "tau_mean": self.tau_mean,
            "tau_dior": self.tau_dior,
            "top_k": self.top_k,
            "top_k_mean": self.top_k_mean,
            "top_k_dior": self.top_k_dior,
        }


def decision_impact(
    draws: Sequence[tuple[np.ndarray, np.ndarray]], *, k: int = 10, level: float = DIOR_LEVEL
) -> DIoR:
    """DIoR over draws, each ``(estimate, truth)`` of the models ranked in that draw.

    Draws may rank different models (a source-model draw changes the population); each is
    compared with the reference ranking of its own models. ``k`` is capped at the smallest
    population.
    """
    if not draws:
        raise InputError("DIoR needs at least one draw")
    k = min(k, min(np.asarray(t).size for _, t in draws))
    taus = [kendall_tau(e, t) for e, t in draws]
    tops = [top_k_agreement(e, t, k) for e, t in draws]
    return DIoR(
        draws=len(draws),
        tau_mean=float(np.nanmean(taus)) if np.isfinite(taus).any() else float("nan"),
        tau_dior=dior(taus, level),
        top_k=k,
        top_k_mean=float(np.mean(tops)),
        top_k_dior=dior(tops, level),
    )
