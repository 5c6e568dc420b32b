"""The choice rule: the lowest cross-validated MAE, kept only when it clearly beats the floor.

Errors of all candidates come from the same splits and the same target models, so a
candidate is compared with the floor (random items + plain mean) split by split: the paired
difference of their per-split MAE has a standard error that is much smaller than either MAE's
own. The lowest-MAE candidate is chosen only when its MAE is lower than the floor's by more
than ``z`` such standard errors; ties and near-ties go to the floor, whose behaviour on new
models is the best understood. ``z`` is the one-standard-error rule corrected for the number
``k`` of candidates that compete with the floor: the lowest of ``k`` noisy MAEs is biased low
(the winner's curse), so ``z`` is the normal quantile that one standard error is for a single
comparison (one-sided 84 %), Bonferroni-split over ``k``: 1.0 for one candidate, 2.4 for 20.
On leaderboard sub-populations of 15-50 models plain one-SE let through winners that lost to
random + mean on held-out models (bench/auto.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import norm

from ._cv import Candidate, Outcome, Table

RULE = (
    "lowest inner-CV MAE; kept only when it is below the floor's by more than z standard "
    "errors of their paired per-split MAE difference (z: one-sided 84 % normal quantile, "
    "Bonferroni over the k candidates beside the floor), else the floor"
)
ONE_SE_TAIL = 1.0 - norm.cdf(1.0)


def margin_z(k: int) -> float:
    """Standard errors a win over the floor must exceed with ``k`` competing candidates."""
    return float(norm.ppf(1.0 - ONE_SE_TAIL / max(k, 1)))


def _se(values: np.ndarray) -> float:
    return float(np.std(values, ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.nan


def candidate_row(candidate: Candidate, budget: int, outcome: Outcome, floor: Outcome) -> dict:
    """One candidate's measured error at one budget, in score points, beside the floor's."""
    row: dict[str, Any] = {
        "method": candidate.method,
        "estimator": candidate.estimator,
        "budget": budget,
        "cv_mae": None,
        "cv_mae_se": None,
        "diff_vs_floor": None,
        "diff_se": None,
        "coverage90": None,
        "splits": len(outcome.errors),
        "status": "ok" if outcome.ok else f"failed: {outcome.failure or 'no split'}",
    }
    if not outcome.ok:
        return row
    mae = outcome.split_mae()
    row.update(cv_mae=outcome.mae(), cv_mae_se=_se(mae), coverage90=outcome.coverage())
    if floor.ok and len(floor.errors) == len(outcome.errors):
        diff = mae - floor.split_mae()
        row.update(diff_vs_floor=float(np.mean(diff)), diff_se=_se(diff))
    return row


def candidate_rows(
    table: Table, candidates: Sequence[Candidate], budget: int, floor: Candidate
) -> list[dict]:
    """Rows of every candidate at ``budget``, sorted by CV MAE (failed ones last)."""
    floor_outcome = table.get((floor, budget), Outcome())
    rows = [
        candidate_row(c, budget, table.get((c, budget), Outcome()), floor_outcome)
        for c in candidates
    ]
    return sorted(rows, key=lambda r: (r["cv_mae"] is None, r["cv_mae"] or 0.0))


def pick(rows: Sequence[dict], floor: Candidate) -> Candidate | None:
    """The candidate the rule keeps among ``rows``; None when the floor itself failed."""
    by_key = {Candidate(r["method"], r["estimator"]): r for r in rows}
    floor_row = by_key.get(floor)
    if floor_row is None or floor_row["cv_mae"] is None:
        return None
    scored = [r for r in rows if r["cv_mae"] is not None and r["diff_vs_floor"] is not None]
    best = min(scored, key=lambda r: r["cv_mae"])
    se = best["diff_se"] if best["diff_se"] is not None and np.isfinite(best["diff_se"]) else 0.0
    if best["diff_vs_floor"] < -margin_z(len(scored) - 1) * se:
        return Candidate(best["method"], best["estimator"])
    return floor
