"""The choice rule: the lowest cross-validated score among candidates whose intervals held.

A candidate's *score* is the mean of its MAE on the random folds (models like the sources)
and on the extrapolation folds (the strongest sources estimated from weaker ones): a user
cannot tell which case their model is, so the recipe must do well in both. The lowest score
is kept outright; a tie goes to the floor (balanced random items + the guarded estimator),
whose behaviour on new models is the best understood. Each row also reports the candidate's
paired difference to the floor and its standard error (errors of all candidates come from
the same splits and the same target models), so a reader sees how clear a win was.

A margin over the floor was required before: the lowest score had to beat the floor's by
more than a Bonferroni-corrected standard error, against the winner's curse among candidates
that included greedy and DPP items and plain ``kridge``. Those left the default list
(``choice.INSIDE_METHODS``, ``choice.DEFAULT_ESTIMATORS``), and with the guarded candidates
left the margin mostly kept the floor where a candidate was better: on the peer suite's
splits of the v1 and v2 matrices (184 cells, all sources and 25-100 of them) the lowest
score's picks erred 2.30 points against the margin's 2.40 (the floor's: 2.55), the strongest
fifth with all sources 2.02 -> 1.73 on v1, and no worse with 25-100 sources
(``bench/choice_rules.md``; the peer suite before and after: ``bench/peers_no_margin.md``).

Only candidates whose 90 % intervals held on the folds compete: a candidate that covered
fewer than :data:`MIN_COVERAGE` of the held-out models on the random or on the extrapolation
folds is left out, whatever its error (the floor always competes). A low error with an
interval that misses the strongest models is the failure a user cannot see: on MuSR's
strongest fifth, ``kridge`` after lasso or greedy items erred least at 50 and 100 items while
its intervals covered 0.46-0.64 of those models (``bench/supervised.md``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._cv import EXTRAPOLATION, KINDS, RANDOM, Candidate, Outcome, Table

RULE = (
    "lowest inner-CV score (mean of the random-fold and extrapolation-fold MAE), ties to the "
    "floor; candidates whose 90 % intervals covered fewer than 80 % of the held-out models "
    "on either kind of fold do not compete"
)
MIN_COVERAGE = 0.8
"""Least coverage of a 90 % interval on the folds for a candidate to compete with the floor
(10 points under nominal: a fold's coverage is itself measured on a few dozen models)."""


def _se(values: np.ndarray) -> float:
    return float(np.std(values, ddof=1) / math.sqrt(values.size)) if values.size > 1 else math.nan


def paired_difference(outcome: Outcome, floor: Outcome) -> tuple[float, float]:
    """Score difference to the floor and its standard error.

    The difference is weighted like the score: the mean of the per-split MAE differences of
    each kind of split, averaged over the kinds. Each kind's standard error comes from the
    spread of its per-split differences: for random folds their variance, for extrapolation
    splits the variance between the repeats of the same fold (pooled over folds; the folds
    differ on purpose, one scoring models farther beyond its training models than the other).
    A kind whose spread cannot be measured borrows the other's.
    """
    kinds = [k for k in KINDS if k in outcome.kinds]
    parts = {}
    for kind in kinds:
        diffs = outcome.split_mae(kind) - floor.split_mae(kind)
        groups = outcome.split_groups(kind) if kind == EXTRAPOLATION else np.zeros(diffs.size)
        parts[kind] = (float(np.mean(diffs)), _pooled_variance(diffs, groups), diffs.size)
    measured = [v for _, v, _ in parts.values() if math.isfinite(v)]
    fallback = measured[0] if measured else 0.0
    weight = 1.0 / len(kinds)
    mean = sum(weight * m for m, _, _ in parts.values())
    variance = sum(
        weight**2 * (v if math.isfinite(v) else fallback) / n for _, v, n in parts.values()
    )
    return mean, math.sqrt(variance)


def _pooled_variance(values: np.ndarray, groups: np.ndarray) -> float:
    """Variance of ``values`` within groups, pooled (NaN when no group has two values)."""
    squares, dof = 0.0, 0
    for group in np.unique(groups):
        member = values[groups == group]
        if member.size > 1:
            squares += float(np.sum((member - member.mean()) ** 2))
            dof += member.size - 1
    return squares / dof if dof else math.nan


def candidate_row(candidate: Candidate, budget: int, outcome: Outcome, floor: Outcome) -> dict:
    """One candidate's measured errors at one budget, in score points, beside the floor's."""
    row: dict[str, Any] = {
        "method": candidate.method,
        "estimator": candidate.estimator,
        "budget": budget,
        "cv_mae": None,
        "cv_mae_se": None,
        "extrapolation_mae": None,
        "score": None,
        "diff_vs_floor": None,
        "diff_se": None,
        "coverage90": None,
        "extrapolation_coverage90": None,
        "splits": len(outcome.errors),
        "status": "ok" if outcome.ok else f"failed: {outcome.failure or 'no split'}",
    }
    if not outcome.ok:
        return row
    row.update(
        cv_mae=outcome.mae(RANDOM),
        cv_mae_se=_se(outcome.split_mae(RANDOM)),
        extrapolation_mae=outcome.mae(EXTRAPOLATION),
        score=outcome.score(),
        coverage90=outcome.coverage(RANDOM),
        extrapolation_coverage90=outcome.coverage(EXTRAPOLATION),
    )
    if floor.ok and floor.kinds == outcome.kinds:
        row["diff_vs_floor"], row["diff_se"] = paired_difference(outcome, floor)
    return row


def candidate_rows(
    table: Table, candidates: Sequence[Candidate], budget: int, floor: Candidate
) -> list[dict]:
    """Rows of every candidate at ``budget``, sorted by score (failed ones last)."""
    floor_outcome = table.get((floor, budget), Outcome())
    rows = [
        candidate_row(c, budget, table.get((c, budget), Outcome()), floor_outcome)
        for c in candidates
    ]
    return sorted(rows, key=lambda r: (r["score"] is None, r["score"] or 0.0))


def pick(rows: Sequence[dict], floor: Candidate) -> Candidate | None:
    """The candidate the rule keeps among ``rows``; None when the floor itself failed."""
    by_key = {Candidate(r["method"], r["estimator"]): r for r in rows}
    floor_row = by_key.get(floor)
    if floor_row is None or floor_row["score"] is None:
        return None
    best = min(competing(rows, floor), key=lambda r: r["score"])
    if best["diff_vs_floor"] < 0:
        return Candidate(best["method"], best["estimator"])
    return floor


def competing(rows: Sequence[dict], floor: Candidate) -> list[dict]:
    """The scored rows that compete: the floor's, and those whose intervals held."""
    return [
        r
        for r in rows
        if r["score"] is not None
        and r["diff_vs_floor"] is not None
        and (Candidate(r["method"], r["estimator"]) == floor or intervals_held(r))
    ]


def intervals_held(row: dict) -> bool:
    """Whether the candidate's intervals covered at least :data:`MIN_COVERAGE` of the
    held-out models on every kind of fold it was scored on (a kind not run does not count)."""
    found = [row.get("coverage90"), row.get("extrapolation_coverage90")]
    return all(c is None or not np.isfinite(c) or c >= MIN_COVERAGE for c in found)
