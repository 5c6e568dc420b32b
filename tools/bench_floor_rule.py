"""Where an adaptive run's interval reaches down to the floor: the product's rule beside others.

An adaptive run's lower edge drops to the pool's floor (the chance-level score, or the weakest
sources' item rates) where the run may lie below every source: its 90 % lower edge, lowered by
a share of its own half-width, at or under the weakest source's true score, or its ability
beyond the sources' edge (``adaptive.scoring.ScoreMap.interval``). With the 90 % edge itself as
the test, MuSR's weakest fifth was covered 0.81-0.83 at 25-50 items (the ``edge`` column):
every run that missed had its interval above the true score, and the floor had not applied to
it. The bands are fitted on the sources' own replays, whose true scores never lie below the
weakest source: near that edge they cannot show how far below it a model may be. The rules
below differ only in that share; only the lower edge of a run moves.

Each rule is applied through the product's own ``estimate_pool`` (with its person-fit check),
the pool's score map changed only in where the floor applies:

- ``edge``: the 90 % lower edge itself (the product's rule until the half band);
- ``+0.5 band`` / ``+1 band``: the lower edge lowered by half / one of the run's lower
  half-width (at 90 %) before it is compared with the weakest source. The product's rule is
  the one whose share is ``adaptive.scoring.FLOOR_TEST_MARGIN``.

    python tools/bench_floor_rule.py                        # 8 pools x 3 protocols, 10/25/50 items
    python tools/bench_floor_rule.py --benchmarks musr --protocols weak --out /tmp/check
    python tools/bench_floor_rule.py --merge /tmp/a/floor_rule.json  # into --out's report
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_adaptive import BUDGETS
from bench_adaptive_fit import merge, parse_args, replayed_runs, report_header, run_cells

from lmeval_microbench._io import write_text_if_changed
from lmeval_microbench.adaptive.pool import Pool, estimate_pool, posterior_estimate
from lmeval_microbench.adaptive.scoring import FLOOR_TEST_MARGIN, ScoreMap

BEFORE = "edge"
RULES = {BEFORE: 0.0, "+0.5 band": 0.5, "+1 band": 1.0}
"""Share of the run's lower half-width its lower edge is lowered by before the floor test."""
PRODUCT = next(name for name, share in RULES.items() if share == FLOOR_TEST_MARGIN)
"""The rule ``estimate_pool`` prints."""
LOW_COVERAGE = 0.85


@dataclass(frozen=True)
class LoweredFloorTest(ScoreMap):
    """The pool's score map whose floor test lowers a run's 90 % lower edge by ``share`` of
    the run's lower half-width at ``n_items`` (the product's share: its own test)."""

    share: float = FLOOR_TEST_MARGIN
    n_items: int = 1

    def _below(
        self,
        prediction: np.ndarray,
        reach: np.ndarray,
        ability: tuple[np.ndarray, np.ndarray] | None,
    ) -> np.ndarray:
        down = self.halves(prediction, self.n_items, 0.9, ability)[0]
        extra = self.share - FLOOR_TEST_MARGIN  # ``reach`` is lowered by the product's share
        return super()._below(prediction, reach - extra * down, ability)


def rule_pool(pool: Pool, share: float, n_items: int) -> Pool:
    """``pool`` whose score map applies the floor by rule ``share`` to runs of ``n_items``."""
    given = pool.state.score_map
    values = {f.name: getattr(given, f.name) for f in fields(given)}
    score_map = LoweredFloorTest(**values, share=share, n_items=n_items)
    return replace(pool, state=replace(pool.state, score_map=score_map))


def read_rules(pool: Pool, values: np.ndarray, order: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """Each run's first ``n`` answers through ``estimate_pool`` under every rule: rows
    (value, lower, upper) x runs, fractions. The product's rule is the pool itself; a rule
    whose interval before the person-fit check equals the product's reuses its estimate (the
    check reads only the answers and that interval), which saves most of the checks."""
    others = {name: rule_pool(pool, share, n) for name, share in RULES.items() if name != PRODUCT}
    read: dict[str, list[tuple[float, float, float]]] = {name: [] for name in RULES}
    for answers, asked in zip(values, order[:, :n], strict=True):
        scores = {pool.item_ids[j]: float(answers[j]) for j in asked}
        printed = estimate_pool(pool, scores)
        raw = posterior_estimate(pool, scores)[0]
        found = {PRODUCT: printed}
        for name, ruled in others.items():
            same = posterior_estimate(ruled, scores)[0] == raw
            found[name] = printed if same else estimate_pool(ruled, scores)
        for name, estimate in found.items():
            read[name].append((estimate.value, estimate.lower, estimate.upper))
    return {name: np.array(rows).T for name, rows in read.items()}


def score_rules(read: dict[str, np.ndarray], truth: np.ndarray) -> dict[str, Any]:
    """Coverage, width (points) and misses on each side per rule, and the runs whose lower edge
    differs from the rule before (``edge``); whether every rule gave the same estimates and
    upper edges (only the lower edge may move)."""
    before = read[BEFORE]
    same = all(
        np.allclose(rows[0], before[0]) and np.allclose(rows[2], before[2])
        for rows in read.values()
    )
    out: dict[str, Any] = {"targets": int(truth.size), "same_value_and_upper": bool(same)}
    for key in ("coverage", "width", "miss_low", "miss_high", "moved"):
        out[key] = {}
    for name, (_, lower, upper) in read.items():
        above, below = lower > truth + 1e-12, upper < truth - 1e-12
        out["coverage"][name] = float(np.mean(~above & ~below))
        out["width"][name] = float(100 * np.mean(upper - lower))
        out["miss_low"][name] = int(above.sum())  # the interval lies above the truth
        out["miss_high"][name] = int(below.sum())
        out["moved"][name] = int(np.sum(~np.isclose(lower, before[1])))
    return out


def run_protocol(bm: str, matrix: Any, truth: np.ndarray, protocol: str, args: Any) -> list[dict]:
    pool, values, result, target_truth, _, _ = replayed_runs(
        bm, matrix, truth, protocol, args, BUDGETS
    )
    rows = []
    for n in BUDGETS:
        row = {"benchmark": bm, "protocol": protocol, "items": n}
        row.update(score_rules(read_rules(pool, values, result.order, n), target_truth))
        rows.append(row)
    return rows


def totals(rows: list[dict]) -> dict[str, dict[str, dict[str, float]]]:
    """Per protocol and rule: cells, cells under :data:`LOW_COVERAGE`, the least coverage and
    the mean width."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for protocol in dict.fromkeys(r["protocol"] for r in rows):
        mine = [r for r in rows if r["protocol"] == protocol]
        out[protocol] = {
            name: {
                "cells": len(mine),
                "low": sum(r["coverage"][name] < LOW_COVERAGE for r in mine),
                "least": min(r["coverage"][name] for r in mine),
                "width": float(np.mean([r["width"][name] for r in mine])),
            }
            for name in RULES
        }
    return out


def write_report(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    results["totals"] = totals(results["rows"])
    write_text_if_changed(out / "floor_rule.json", json.dumps(results, indent=1) + "\n")
    info = results["info"]
    title = "Where an adaptive run's interval reaches down to the floor"
    lines = report_header(title, info, __doc__)
    lines += [
        f"Splits and runs as in ``bench/adaptive_fit.md`` (seed {info['seed']}, at most "
        f"{info['max_targets']} held-out models per protocol, max-information runs). Per rule: "
        "90 % coverage, mean width (points) and, in brackets, the runs whose interval lay "
        f"above / below the true score; moved: runs whose lower edge differs from {BEFORE}'s "
        f"(the rule before). The product prints {PRODUCT}. 'same': estimates and upper edges "
        "equal under every rule. Benchmarks in "
        f"this report: {', '.join(sorted({r['benchmark'] for r in results['rows']}))} (any "
        "benchmark the command names that this list lacks was stopped before it finished a "
        "cell).",
        "",
        "| benchmark | protocol | items | targets | " + " | ".join(RULES) + " | moved | same |",
        "|---|---|---:|---:|" + "---|" * len(RULES) + "---|---|",
    ]
    for row in results["rows"]:
        cells = [
            f"{row['coverage'][k]:.2f}, {row['width'][k]:.1f} "
            f"({row['miss_low'][k]}/{row['miss_high'][k]})"
            for k in RULES
        ]
        moved = ", ".join(str(row["moved"][k]) for k in RULES if k != BEFORE)
        lines.append(
            f"| {row['benchmark']} | {row['protocol']} | {row['items']} | {row['targets']} | "
            + " | ".join(cells)
            + f" | {moved} | {'yes' if row['same_value_and_upper'] else 'NO'} |"
        )
    lines += [
        "",
        f"Per protocol: cells with coverage under {LOW_COVERAGE}, the least coverage and the "
        "mean width (points) over the cells above.",
        "",
        "| protocol | " + " | ".join(RULES) + " |",
        "|---|" + "---|" * len(RULES),
    ]
    for protocol, by_rule in results["totals"].items():
        cells = [
            f"{r['low']} of {r['cells']}, least {r['least']:.2f}, width {r['width']:.1f}"
            for r in (by_rule[k] for k in RULES)
        ]
        lines.append(f"| {protocol} | " + " | ".join(cells) + " |")
    write_text_if_changed(out / "floor_rule.md", "\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv, __doc__)
    if args.merge:
        merge(args.out, args.merge, name="floor_rule", write=write_report)
        return
    run_cells(args, argv, run_protocol, write_report, tool="bench_floor_rule")


if __name__ == "__main__":
    main()
