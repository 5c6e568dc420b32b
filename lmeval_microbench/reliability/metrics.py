"""From pooled target estimates to the summary metrics: errors, ranking, MDAD, coverage.

Every function here takes estimates and truths that the evaluation already produced; nothing
selects items or fits a model, so the metrics can be tested (and reused) on plain arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InputError
from ..rank.dior import decision_impact, kendall_tau

MDAD_BIN_WIDTH = 0.5
MDAD_AGREEMENT = 0.8
MDAD_MIN_PAIRS = 10
_ZERO_GAP = 1e-9
_PAIR_BLOCK = 512


def gap_agreement_counts(
    estimate: np.ndarray, truth: np.ndarray, *, bin_width: float = MDAD_BIN_WIDTH
) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of models per true-gap bin, and how many of them the estimates order correctly.

    ``estimate`` and ``truth`` are in score points. Bin ``k`` holds the pairs with true gap
    ``|truth_i - truth_j|`` in ``[k w, (k + 1) w)``; pairs with no true gap are left out. A
    pair agrees when ``sign(est_i - est_j) == sign(truth_i - truth_j)``, so tied estimates of
    models with different truths count as disagreement. Pairs are enumerated in row blocks so
    that a few thousand models stay within memory.
    """
    estimate = np.asarray(estimate, dtype=np.float64).reshape(-1)
    truth = np.asarray(truth, dtype=np.float64).reshape(-1)
    if estimate.shape != truth.shape:
        raise InputError(f"estimate has {estimate.size} values, truth has {truth.size}")
    if bin_width <= 0:
        raise InputError(f"bin width must be positive, got {bin_width!r}")
    n = truth.size
    pairs = np.zeros(0, dtype=np.int64)
    agreeing = np.zeros(0, dtype=np.int64)
    for start in range(0, max(n - 1, 0), _PAIR_BLOCK):
        rows = np.arange(start, min(start + _PAIR_BLOCK, n - 1))
        upper = np.arange(n)[None, :] > rows[:, None]
        true_diff = truth[rows, None] - truth[None, :]
        est_diff = estimate[rows, None] - estimate[None, :]
        gap = np.abs(true_diff)
        keep = upper & (gap > _ZERO_GAP)
        bins = np.floor(gap[keep] / bin_width + 1e-9).astype(np.int64)
        agree = (np.sign(est_diff) == np.sign(true_diff))[keep]
        block_pairs = np.bincount(bins)
        block_agree = np.bincount(bins, weights=agree).astype(np.int64)
        pairs = _add_padded(pairs, block_pairs)
        agreeing = _add_padded(agreeing, block_agree)
    return pairs, agreeing


def _add_padded(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros(max(a.size, b.size), dtype=np.int64)
    out[: a.size] += a
    out[: b.size] += b
    return out


def mdad_from_counts(
    pairs: np.ndarray,
    agreeing: np.ndarray,
    *,
    bin_width: float = MDAD_BIN_WIDTH,
    threshold: float = MDAD_AGREEMENT,
    min_pairs: int = MDAD_MIN_PAIRS,
) -> float:
    """Minimum detectable accuracy difference (MDAD) from per-bin pair counts, in points.

    Following Yauney et al., "How reliable is LM micro-benchmarking?": the smallest true gap
    between two models that the estimates still order correctly with probability at least
    ``threshold``. Concretely:

    1. pairs are binned by true gap (bins of ``bin_width`` points, see
       :func:`gap_agreement_counts`; empty bins are skipped);
    2. bins with fewer than ``min_pairs`` pairs are merged upward: consecutive non-empty bins,
       from the smallest gap up, are pooled into one group until it holds ``min_pairs`` pairs;
       a last group still short of ``min_pairs`` (the sparse large-gap tail) joins the group
       below it. A group's lower edge is the lower edge of its first bin;
    3. MDAD is the lowest group lower edge from which every group upward has an agreement rate
       of at least ``threshold``.

    Returns ``inf`` when even the largest-gap group is ordered worse than ``threshold`` and NaN
    when there are fewer than ``min_pairs`` pairs in all.
    """
    pairs = np.asarray(pairs, dtype=np.int64)
    agreeing = np.asarray(agreeing, dtype=np.int64)
    starts, group_pairs, group_agree = _merge_sparse_bins(pairs, agreeing, min_pairs)
    if not starts:
        return math.nan
    ok = np.asarray(group_agree) >= threshold * np.asarray(group_pairs)
    failing = np.flatnonzero(~ok)
    if failing.size == 0:
        return starts[0] * bin_width
    if failing[-1] == len(starts) - 1:
        return math.inf
    return starts[failing[-1] + 1] * bin_width


def _merge_sparse_bins(
    pairs: np.ndarray, agreeing: np.ndarray, min_pairs: int
) -> tuple[list[int], list[int], list[int]]:
    """Groups of consecutive non-empty bins with at least ``min_pairs`` pairs each."""
    starts: list[int] = []
    group_pairs: list[int] = []
    group_agree: list[int] = []
    open_start, open_pairs, open_agree = -1, 0, 0
    for k in np.flatnonzero(pairs > 0):
        if open_pairs == 0:
            open_start = int(k)
        open_pairs += int(pairs[k])
        open_agree += int(agreeing[k])
        if open_pairs >= min_pairs:
            starts.append(open_start)
            group_pairs.append(open_pairs)
            group_agree.append(open_agree)
            open_pairs, open_agree = 0, 0
    if open_pairs and starts:  # sparse tail: join the group below
        group_pairs[-1] += open_pairs
        group_agree[-1] += open_agree
    return starts, group_pairs, group_agree


def mdad(
    estimate: np.ndarray,
    truth: np.ndarray,
    *,
    bin_width: float = MDAD_BIN_WIDTH,
    threshold: float = MDAD_AGREEMENT,
    min_pairs: int = MDAD_MIN_PAIRS,
) -> float:
    """MDAD of one set of models (estimates and truths in points); see :func:`mdad_from_counts`."""
    pairs, agreeing = gap_agreement_counts(estimate, truth, bin_width=bin_width)
    return mdad_from_counts(
        pairs, agreeing, bin_width=bin_width, threshold=threshold, min_pairs=min_pairs
    )


def pooled_mdad(
    groups: Iterable[tuple[np.ndarray, np.ndarray]],
    *,
    bin_width: float = MDAD_BIN_WIDTH,
    threshold: float = MDAD_AGREEMENT,
    min_pairs: int = MDAD_MIN_PAIRS,
) -> float:
    """MDAD over the pairs within each ``(estimate, truth)`` group (one group per repeat).

    Pairs are only formed inside a group: models of different repeats were estimated from
    different subsets, and a pair's ordering is what one subset gets right or wrong.
    """
    pairs = np.zeros(0, dtype=np.int64)
    agreeing = np.zeros(0, dtype=np.int64)
    for estimate, truth in groups:
        p, a = gap_agreement_counts(estimate, truth, bin_width=bin_width)
        pairs, agreeing = _add_padded(pairs, p), _add_padded(agreeing, a)
    return mdad_from_counts(
        pairs, agreeing, bin_width=bin_width, threshold=threshold, min_pairs=min_pairs
    )


def mdad_status(value: float) -> str:
    """``ok``, ``never`` (inf: no gap is ordered reliably) or ``too_few_pairs`` (NaN)."""
    if math.isfinite(value):
        return "ok"
    return "never" if value > 0 else "too_few_pairs"


def interval_coverage(truth: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
    """Share of ``truth`` values inside ``[lower, upper]`` (ends included)."""
    truth = np.asarray(truth, dtype=np.float64)
    inside = (np.asarray(lower) <= truth) & (truth <= np.asarray(upper))
    return float(np.mean(inside)) if truth.size else math.nan


MIN_PER_THIRD = 5
"""Fewest targets in a third of the score range for its coverage to be reported."""
THIRD_FIELDS = (
    "cov90_low",
    "cov90_mid",
    "cov90_high",
    "cov90_min_third",
    "cov90_min_third_truth",
)


def coverage_by_thirds(
    truth: np.ndarray,
    value: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    min_count: int = MIN_PER_THIRD,
) -> dict[str, float]:
    """Interval coverage per third of the score range, grouped by estimate and by truth.

    The thirds cut the range of ``truth`` (min to max) into equal widths, so a third with few
    models (the weak tail of a leaderboard) counts as much as a crowded one: a band that is
    right on average but wrong at the ends shows up here. Thirds with fewer than ``min_count``
    targets (too few to measure a coverage), and rows without intervals (NaN bounds), give NaN.
    """
    truth, value = np.asarray(truth, dtype=np.float64), np.asarray(value, dtype=np.float64)
    lower, upper = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    if truth.size == 0 or np.isnan(lower).all():
        return dict.fromkeys(THIRD_FIELDS, math.nan)
    cuts = truth.min() + np.ptp(truth) * np.array([1.0, 2.0]) / 3.0

    def per_third(key: np.ndarray) -> list[float]:
        third = np.digitize(key, cuts)
        return [
            interval_coverage(truth[third == k], lower[third == k], upper[third == k])
            if np.count_nonzero(third == k) >= min_count
            else math.nan
            for k in range(3)
        ]

    by_estimate, by_truth = per_third(value), per_third(truth)
    values = (*by_estimate, _nanmin(by_estimate), _nanmin(by_truth))
    return dict(zip(THIRD_FIELDS, values, strict=True))


def _nanmin(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return min(finite) if finite else math.nan


# ---------------------------------------------------------------------- summaries
@dataclass
class ResultPool:
    """Target truths and estimates of one configuration, grouped by repeat."""

    groups: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = field(
        default_factory=dict
    )
    seconds: float = 0.0
    selection_seconds: float = 0.0
    n_items: int = 0
    n_source: int = 0

    def add(
        self,
        repeat: int,
        truth: np.ndarray,
        value: np.ndarray,
        lower: np.ndarray,
        upper: np.ndarray,
    ) -> None:
        self.groups.setdefault(repeat, []).append((truth, value, lower, upper))

    def by_repeat(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """(truth, value, lower, upper) per repeat, the repeat's splits joined, repeat order."""
        return [
            tuple(np.concatenate([part[k] for part in parts]) for k in range(4))  # type: ignore[misc]
            for _, parts in sorted(self.groups.items())
        ]


Repeat = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Truths, estimates, lower and upper interval ends of the targets of one repeat (fractions)."""


def error_metrics(repeats: Sequence[Repeat]) -> dict[str, float]:
    """MAE, RMSE, max error and bias of estimate - truth over every target, in points."""
    truth, value = (np.concatenate([r[k] for r in repeats]) * 100.0 for k in range(2))
    error = value - truth
    return {
        "mae": float(np.mean(np.abs(error))),
        "rmse": float(np.sqrt(np.mean(error**2))),
        "max_error": float(np.max(np.abs(error))),
        "bias": float(np.mean(error)),
    }


def ranking_metrics(repeats: Sequence[Repeat]) -> dict[str, Any]:
    """Kendall's tau (mean over repeats) and MDAD (pairs within a repeat), in points."""
    taus = [kendall_tau(r[1], r[0]) for r in repeats]
    finite_taus = [t for t in taus if np.isfinite(t)]
    result = pooled_mdad((r[1] * 100.0, r[0] * 100.0) for r in repeats)
    return {
        "kendall_tau": float(np.mean(finite_taus)) if finite_taus else math.nan,
        "mdad": result,
        "mdad_status": mdad_status(result),
    }


ZERO_WIDTH = 1e-6
"""Mean interval width (points) below which an interval is taken as zero-width."""
ZERO_WIDTH_STATUS = "zero width"
ONE_REPEAT_STATUS = "one repeat"


def interval_metrics(repeats: Sequence[Repeat]) -> dict[str, Any]:
    """Coverage and mean width of the 90 % intervals, overall and by thirds of the range.

    A zero-width interval (every matrix item, with a truth that is their mean or too few
    source models for a calibration line: the residuals on the sources are 0) covers a truth
    only by floating-point accident, so its coverages are NaN and the record says
    ``interval_status: "zero width"`` instead of printing a coverage that means nothing.
    """
    truth, value, lower, upper = (np.concatenate([r[k] for r in repeats]) * 100.0 for k in range(4))
    width = float(np.mean(upper - lower))
    if math.isfinite(width) and width < ZERO_WIDTH:
        return {
            "coverage90": math.nan,
            "width90": width,
            **dict.fromkeys(THIRD_FIELDS, math.nan),
            "interval_status": ZERO_WIDTH_STATUS,
        }
    return {
        "coverage90": interval_coverage(truth, lower, upper),
        "width90": width,
        **coverage_by_thirds(truth, value, lower, upper),
    }


def decision_metrics(repeats: Sequence[Repeat]) -> dict[str, float]:
    """DIoR (Perlitz et al.): the 95 % lower bound over the repeats (random subset, seed and
    source-model draws) of Kendall's tau and of top-10 agreement with the full ranking.

    The mean says how well a recipe ranks on average; DIoR says how badly it can rank under an
    unlucky draw of the decisions made in building it, which is what a user relying on one
    subset risks. With one repeat (a leave-one-out cycle) there is one draw, whose "lower
    bound" would just repeat ``kendall_tau``: the DIoRs are NaN and ``dior_status`` says why.
    """
    if not repeats:
        return {"tau_dior": math.nan, "top10": math.nan, "top10_dior": math.nan}
    impact = decision_impact([(r[1], r[0]) for r in repeats], k=10)
    if len(repeats) < 2:  # the lower bound of one draw is that draw: not a DIoR at all
        return {
            "tau_dior": math.nan,
            "top10": impact.top_k_mean,
            "top10_dior": math.nan,
            "dior_status": ONE_REPEAT_STATUS,
        }
    return {
        "tau_dior": impact.tau_dior,
        "top10": impact.top_k_mean,
        "top10_dior": impact.top_k_dior,
    }


def spread_metrics(repeats: Sequence[Repeat]) -> dict[str, float]:
    """How much the MAE varies from repeat to repeat (NaN with one repeat)."""
    per_repeat_mae = [float(np.mean(np.abs(r[1] - r[0]))) * 100.0 for r in repeats]
    return {
        "mae_sd": float(np.std(per_repeat_mae, ddof=1)) if len(repeats) > 1 else math.nan,
    }


SUMMARY_METRICS: tuple[Callable[[Sequence[Repeat]], dict[str, Any]], ...] = (
    error_metrics,
    ranking_metrics,
    decision_metrics,
    interval_metrics,
    spread_metrics,
)
"""The metric groups of a record, in the order of its columns: a new metric is one more
function of the repeats here."""


def pool_facts(pool: ResultPool, repeats: Sequence[Repeat]) -> dict[str, Any]:
    """What a record was measured on (targets, sources, items, repeats) and what it cost."""
    return {
        "n_targets": round(float(np.mean([r[0].size for r in repeats]))),
        "n_sources": pool.n_source,
        "items": pool.n_items,
        "repeats": len(repeats),
        "seconds": round(pool.seconds, 3),
        "selection_seconds": round(pool.selection_seconds, 3),
    }


def summarise(pool: ResultPool) -> dict[str, Any]:
    """Metrics of one configuration in score points (see the package docstring)."""
    repeats = pool.by_repeat()
    record: dict[str, Any] = {}
    for metrics in SUMMARY_METRICS:
        record |= metrics(repeats)
    return record | pool_facts(pool, repeats)
