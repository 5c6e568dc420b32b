"""From the leaderboard records to verdicts and defaults: best per budget, targets, the recipe.

``summary_rows`` judges each benchmark x protocol against the project's targets (MAE at 50
items and at all items, the MDAD cut against random sampling); ``choose_default`` picks the
method, estimator and budget each shipped benchmark uses, by :data:`DEFAULTS_RULE`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from leaderboard_baselines import RIDGE

from lmeval_microbench.estimators import ESTIMATORS
from lmeval_microbench.reliability.plan import ADAPTIVE, ALL, Budget, budget_sort_key

TARGET_MAE_ALL = 1.0
TARGET_MAE_50 = 1.5
TARGET_BUDGET = 50
TARGET_MDAD_CUT = 0.30
MDAD_BASELINE = ("random", "mean")
"""Random sampling: uniformly drawn items scored by their mean (calibrated by a line)."""
DEFAULT_MAE = 1.5
DEFAULT_SLACK = {"random": 1.1, "extrapolation": 1.25}
PREFER_WITHIN = 0.1
DEFAULTS_RULE = (
    "per benchmark, a method x estimator x budget is eligible when its MAE is at most "
    f"max({DEFAULT_MAE}, {DEFAULT_SLACK['random']} x the lowest MAE at any budget) under the "
    f"random protocol and at most max({DEFAULT_MAE}, {DEFAULT_SLACK['extrapolation']} x the "
    "lowest) under extrapolation; the default is the smallest budget with an eligible "
    "combination and, at that budget, the eligible one with the lowest extrapolation MAE, "
    "except that one with our estimators wins if its extrapolation MAE is within "
    f"{PREFER_WITHIN} points of it. If nothing is eligible: the lowest sum of the two MAEs. "
    "'all' = every matrix item (method 'random', budget = the item count). The ridge "
    "baseline is not a candidate."
)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def pick(
    records: Sequence[dict[str, Any]], dataset: str, protocol: str, budget: Budget, **match: str
) -> list[dict[str, Any]]:
    """Records of one dataset x protocol x budget (ridge rows left out unless matched)."""
    return [
        r
        for r in records
        if r["dataset"] == dataset
        and r["protocol"] == protocol
        and r["budget"] == budget
        and (r["estimator"] != RIDGE or match.get("estimator") == RIDGE)
        and all(r[k] == v for k, v in match.items())
    ]


def best_by_mae(
    records: Sequence[dict[str, Any]], dataset: str, protocol: str, budget: Budget
) -> dict[str, Any] | None:
    """The method x estimator with the lowest MAE (ridge baseline excluded); None if none ran."""
    rows = [r for r in pick(records, dataset, protocol, budget) if _finite(r["mae"])]
    # ties (equal weights make anchor = mean) go to a published pairing over a grid row
    return min(rows, key=lambda r: (r["mae"], r["role"] == "grid")) if rows else None


def mdad_cut(best: float | None, baseline: float | None) -> float | None:
    """Relative MDAD reduction ``1 - best / baseline``; None when it cannot be formed.

    An infinite baseline (random never orders pairs reliably) against a finite best counts
    as a full cut (1.0); an infinite best gives None (the target is then missed).
    """
    if best is None or baseline is None or math.isinf(best):
        return None
    if math.isinf(baseline):
        return 1.0
    return 1.0 - best / baseline if baseline > 0 else None


def verdict(met: bool | None) -> str:
    return "n/a" if met is None else ("met" if met else "missed")


def summary_rows(records: Sequence[dict[str, Any]], datasets: Sequence[str]) -> list[dict]:
    """Per dataset x protocol: the best combination at 50 items and at all items, and targets."""
    rows = []
    for name in datasets:
        protocols = list(dict.fromkeys(r["protocol"] for r in records if r["dataset"] == name))
        for protocol in protocols:
            at50 = best_by_mae(records, name, protocol, TARGET_BUDGET)
            full = best_by_mae(records, name, protocol, ALL)
            base = pick(
                records,
                name,
                protocol,
                TARGET_BUDGET,
                method=MDAD_BASELINE[0],
                estimator=MDAD_BASELINE[1],
            )
            rcal = pick(
                records, name, protocol, TARGET_BUDGET, method="random", estimator="calibrated"
            )
            base_mdad = _mdad_value(base[0]) if base else None
            best_mdad = _mdad_value(at50) if at50 else None
            cut = mdad_cut(best_mdad, base_mdad)
            rows.append(
                {
                    "dataset": name,
                    "protocol": protocol,
                    "best50": _brief(at50),
                    "mae50": at50["mae"] if at50 else None,
                    "target_mae50": verdict(None if at50 is None else at50["mae"] <= TARGET_MAE_50),
                    "best_all": _brief(full),
                    "mae_all": full["mae"] if full else None,
                    "target_mae_all": verdict(
                        None if full is None else full["mae"] <= TARGET_MAE_ALL
                    ),
                    "mdad50": best_mdad,
                    "mdad50_random_mean": base_mdad,
                    "mdad50_random_calibrated": _mdad_value(rcal[0]) if rcal else None,
                    "mdad_cut": cut,
                    "target_mdad": verdict(
                        None
                        if base_mdad is None or best_mdad is None
                        else (cut is not None and cut >= TARGET_MDAD_CUT)
                    ),
                }
            )
    return rows


def _mdad_value(record: dict[str, Any]) -> float | None:
    """A record's MDAD: a number, ``inf`` (never ordered reliably) or None (too few pairs)."""
    value = record["mdad"]
    return None if value is None or math.isnan(value) else float(value)


def _brief(record: dict[str, Any] | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {k: record[k] for k in ("method", "estimator", "budget", "items", "mae", "mdad")}


# ---------------------------------------------------------------------- defaults
def choose_default(
    records: Sequence[dict[str, Any]], dataset: str, preferred: Sequence[str]
) -> dict[str, Any] | None:
    """Method, estimator and budget of one benchmark by ``DEFAULTS_RULE``; None without data.

    A default must be good where it is used (new models like the source ones: ``random``)
    and not fall apart on stronger models (``extrapolation``); among the good enough ones
    the smallest subset is the point of a micro-benchmark.
    """
    rows = {
        protocol: {
            (r["method"], r["estimator"], r["budget"]): r
            for r in records
            if r["dataset"] == dataset
            and r["protocol"] == protocol
            and r["estimator"] != RIDGE
            and r["method"] != ADAPTIVE  # a static task cannot ship adaptive testing
        }
        for protocol in DEFAULT_SLACK
    }
    keys = [
        k
        for k in rows["random"]
        if k in rows["extrapolation"] and all(_finite(rows[p][k]["mae"]) for p in DEFAULT_SLACK)
    ]
    if not keys:
        return None
    thresholds = {
        p: max(DEFAULT_MAE, slack * min(rows[p][k]["mae"] for k in keys))
        for p, slack in DEFAULT_SLACK.items()
    }
    eligible = [k for k in keys if all(rows[p][k]["mae"] <= thresholds[p] for p in thresholds)]
    if eligible:
        smallest = min((k[2] for k in eligible), key=budget_sort_key)
        at_budget = [k for k in eligible if k[2] == smallest]
        best = min(rows["extrapolation"][k]["mae"] for k in at_budget)
        ours = [
            k
            for k in at_budget
            if k[1] in preferred and rows["extrapolation"][k]["mae"] <= best + PREFER_WITHIN
        ]
        chosen = min(
            ours or at_budget, key=lambda k: (rows["extrapolation"][k]["mae"], _registry_rank(k))
        )
    else:
        chosen = min(
            keys, key=lambda k: (sum(rows[p][k]["mae"] for p in DEFAULT_SLACK), _registry_rank(k))
        )
    row = rows["random"][chosen]
    return {
        "method": "random" if chosen[0] == ALL else chosen[0],
        "estimator": chosen[1],
        "budget": int(row["items"]),
        "all_items": chosen[0] == ALL,
        "eligible": bool(eligible),
        "random_mae": round(row["mae"], 3),
        "extrapolation_mae": round(rows["extrapolation"][chosen]["mae"], 3),
        "random_mdad": row["mdad"],
        "thresholds_mae": {p: round(t, 3) for p, t in thresholds.items()},
    }


def _registry_rank(key: tuple[str, str, Budget]) -> int:
    """Tie-break of equal errors (equal weights make anchor = mean): the registry order."""
    names = list(ESTIMATORS)
    return names.index(key[1]) if key[1] in names else len(names)
