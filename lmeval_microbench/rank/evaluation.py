"""A ranking against the truth (replays only): agreement, rank-interval coverage, rank error."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .dior import kendall_tau, top_k_agreement
from .intervals import point_ranks
from .tiers import FLASH_HELM_TIERS, Tier, parse_tiers, tier_index

TOP_K = 10


def true_ranks(rows: Sequence[Mapping[str, Any]], truth: Mapping[str, float]) -> np.ndarray:
    """Rank of each row's model among the rows' models by true score (1 = best)."""
    return point_ranks(np.array([truth[row["model"]] for row in rows]))


def rank_error_by_tier(
    estimated: np.ndarray, actual: np.ndarray, tiers: Sequence[Tier]
) -> dict[str, float]:
    """Mean |estimated rank - true rank| of the models whose true rank is in each tier."""
    labels = np.array([tier_index(tiers, int(r)) for r in actual])
    return {
        tier.label: float(np.mean(np.abs(estimated - actual)[labels == k]))
        for k, tier in enumerate(tiers)
        if (labels == k).any()
    }


def ranking_quality(
    rows: Sequence[Mapping[str, Any]],
    truth: Mapping[str, float],
    *,
    k: int = TOP_K,
    tiers: Sequence[Tier] | None = None,
) -> dict[str, Any]:
    """Kendall tau, top-k agreement, rank-interval coverage and rank error per tier."""
    tiers = tiers or parse_tiers(FLASH_HELM_TIERS)
    actual = true_ranks(rows, truth)
    estimate = np.array([row["estimate"] for row in rows])
    true_scores = np.array([truth[row["model"]] for row in rows])
    low = np.array([row["rank_low"] for row in rows])
    high = np.array([row["rank_high"] for row in rows])
    estimated = point_ranks(estimate)
    covered = (low <= actual) & (actual <= high)
    return {
        "kendall_tau": kendall_tau(estimate, true_scores),
        f"top{k}": top_k_agreement(estimate, true_scores, min(k, len(rows))),
        "rank_coverage": float(covered.mean()),
        "rank_width": float(np.mean(high - low + 1)),
        "rank_error": rank_error_by_tier(estimated, actual, tiers),
    }
