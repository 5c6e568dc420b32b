"""How well ``--method auto``'s rule picks among its candidates: bench/choice_rules.*.

On the peer suite's splits (:mod:`bench_peers`: seeds 0, 1 and 2 of the Open LLM Leaderboard
v1 and v2 matrices; random and strongest-fifth held out; all source models at 25, 50 and 100
items, and 25, 50 or 100 source models at 50 items), ``choose_recipe`` runs as ``microbench
build`` runs it, and then *every* candidate it scored is built (``build --method M
--estimator E``, same seed, so the same items the choice's own build would take) and
estimates the held-out models. So each cell shows what every rule would have erred, not only
the one the code applies:

- ``floor``: balanced items + ``guarded`` always;
- ``margin``: the rule before 2026-11-27, the lowest inner-CV score kept only when it beat
  the floor's by more than z standard errors of their paired difference (z: one-sided 84 %
  normal quantile, Bonferroni over the competing candidates);
- ``lowest``: the lowest inner-CV score outright (ties to the floor), the rule now;
- ``oracle``: the candidate that erred least on the held-out models, a bound no rule can
  reach (it looks at the answer);
- :data:`VARIANTS`: the lowest of another score (the worse of the two kinds of fold, one
  kind alone, extrapolation counted twice, each kind relative to its best);
- each candidate on its own.

Seeds 0 and 1 were the splits on which ``lowest`` was chosen; seed 2 was drawn later, and the
report's per-seed table shows each rule on it apart.

Intervals are the estimators' own, before the factor the choice's folds add
(``auto/widen.py``), so coverage here is that of the unwidened band. The psn blocks are left
out: with 10 source models the choice falls back to the floor without scoring candidates.
The last table sets the rules beside benchpred's best method of each target case (population
all, budgets 25/50/100), read from ``bench/peers.json``.

    python tools/bench_choice_rules.py --jobs 2      # about 25 minutes on 2 idle cores

``--paired balanced+similar`` adds a candidate to the choice's paired candidates
(``auto.choice.PAIRED_CANDIDATES``, where a new one would join; a method not among the
default methods joins those, and with a default estimator that alone makes the candidate)
in every worker, and ``--stem``
names the report, so a candidate can be tried before the code adopts it:

    python tools/bench_choice_rules.py --jobs 2 --paired balanced+similar \
        --stem choice_rules_similar

The committed ``choice_rules_similar`` and ``choice_rules_lasso`` reports ran on seeds 0 and 1,
the default then (``--seeds 0,1`` repeats them), and ``choice_rules_before_seed2`` is this
report on those seeds before seed 2 was added; ``choice_rules_sim_blend`` offered
``balanced+similar`` (at its fixed penalty) and ``balanced+blend`` together on seeds 0-2.
``--report-only`` re-renders a report from its JSON (a new rule here, a new
``bench/peers.json``) without measuring anything.
``--extrapolation-repeats 6`` doubles the item draws of each extrapolation fold (the code
draws 3): whether a less noisy fold score would bring the rule's picks nearer the best
candidate of each cell (``bench/choice_rules_repeats6.md``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_peers import POPULATION_BUDGET, POPULATIONS, build_recipe
from cell_scoring import measured_rows
from peer_cells import DATA, V1, V2, Cell, load_matrix, require_data, split_cell
from scipy.stats import norm
from tqdm.auto import tqdm
from worker_pool import worker_pool

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.auto import FLOOR, choose_recipe
from lmeval_microbench.auto import _cv as auto_cv
from lmeval_microbench.auto import choice as auto_choice
from lmeval_microbench.auto._cv import Candidate
from lmeval_microbench.auto._rule import competing, pick
from lmeval_microbench.estimators import estimator_from_state

REPO = Path(__file__).resolve().parents[1]
PAIRED = auto_choice.PAIRED_CANDIDATES
REPEATS = auto_cv.EXTRAPOLATION_REPEATS
DEFAULT_METHODS = auto_choice.DEFAULT_METHODS
SEEDS = (0, 1, 2)
"""Seeds 0 and 1 were the splits the rule was chosen on (2026-11-27); seed 2 was drawn after,
so its row of the per-seed table is the held-out check of that choice."""
BUDGETS = (25, 50, 100)
MARGIN = 0.1
"""Points within which a case counts as level with the best peer (as in bench/peers.md)."""
NAMED = ("floor", "margin", "lowest", "oracle")
RATIO_FLOOR = 0.05
"""Points added to a kind's best fold MAE before it divides (a subset that covers every item
errs 0 on its folds)."""
BIG = 0.5
"""Points by which one rule's pick must beat the other's for the cell to be listed."""


def cells_of(matrix: str, n_items: int, seeds: tuple[int, ...] = SEEDS) -> list[Cell]:
    cells = []
    for seed in seeds:
        for protocol in ("random", "extrapolation"):
            cells += [Cell(matrix, "all", protocol, b, seed) for b in BUDGETS if b < n_items]
            cells += [Cell(matrix, str(p), protocol, POPULATION_BUDGET, seed) for p in POPULATIONS]
    return cells


def measure_cell(task: tuple[Path, Cell, tuple[Candidate, ...], int]) -> dict[str, Any]:
    """The choice's candidate rows on one cell and every candidate's held-out error, with
    ``extra`` candidates among the paired ones and each extrapolation fold repeated
    ``repeats`` times with new items (the code's own count: ``_cv.EXTRAPOLATION_REPEATS``)."""
    data, cell, extra, repeats = task
    auto_cv.EXTRAPOLATION_REPEATS = repeats
    # a paired candidate joins only where its method is among the default methods; one whose
    # estimator is a default one is then already a method x estimator candidate
    auto_choice.DEFAULT_METHODS = DEFAULT_METHODS + tuple(
        dict.fromkeys(c.method for c in extra if c.method not in DEFAULT_METHODS)
    )
    auto_choice.PAIRED_CANDIDATES = PAIRED + tuple(
        c for c in extra if c.estimator not in auto_choice.DEFAULT_ESTIMATORS
    )
    source, target, source_truth, target_truth = split_cell(cell, data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        choice = choose_recipe(
            source, source_truth, budgets=[cell.budget], seed=cell.seed, progress=False
        )
    candidates = [r for r in choice.as_record()["candidates"] if r["budget"] == cell.budget]
    held_out = {}
    for row in candidates:
        if row.get("score") is None:
            continue
        bundle = build_recipe(cell, source, source_truth, row["method"], row["estimator"])
        estimator = estimator_from_state(bundle.estimator_state())
        value, lower, upper = estimator.estimate_matrix(target.select_items(bundle.item_ids))
        held_out[label(row)] = {
            "mae": 100.0 * float(np.mean(np.abs(value - target_truth))),
            "bias": 100.0 * float(np.mean(value - target_truth)),
            "coverage": float(np.mean((lower <= target_truth) & (target_truth <= upper))),
        }
    return {
        "key": cell.key,
        "chosen": f"{choice.method}+{choice.estimator}",
        "candidates": candidates,
        "held_out": held_out,
    }


def label(row: dict[str, Any]) -> str:
    return f"{row['method']}+{row['estimator']}"


# ---------------------------------------------------------------------- rules
def margin_rule(rows: list[dict[str, Any]]) -> str:
    """The rule before 2026-11-27: a win over the floor by more than z paired SEs."""
    scored = competing(rows, FLOOR)
    best = min(scored, key=lambda r: r["score"])
    tail = 1.0 - norm.cdf(1.0)
    z = float(norm.ppf(1.0 - tail / max(len(scored) - 1, 1)))
    se = best["diff_se"] if best["diff_se"] is not None and math.isfinite(best["diff_se"]) else 0
    return label(best) if best["diff_vs_floor"] < -z * se else FLOOR.label


def lowest_rule(rows: list[dict[str, Any]]) -> str:
    """The rule now: :func:`lmeval_microbench.auto._rule.pick` itself."""
    chosen = pick(rows, FLOOR)
    assert chosen is not None  # every cell here scored its floor
    return chosen.label


def oracle(cell: dict[str, Any]) -> str:
    return min(cell["held_out"], key=lambda c: cell["held_out"][c]["mae"])


def _kind_best(rows: list[dict[str, Any]], key: str) -> float:
    """The least of one kind's fold MAE among ``rows``, kept off zero (a ratio's divisor)."""
    return min(r[key] for r in rows) + RATIO_FLOOR


Score = Callable[[dict[str, Any], list[dict[str, Any]]], float]
"""``(candidate row, competing rows) -> score``: lower is kept."""

VARIANTS: dict[str, Score] = {
    "lowest of max": lambda r, rows: max(r["cv_mae"], r["extrapolation_mae"]),
    "lowest of extrapolation": lambda r, rows: r["extrapolation_mae"],
    "lowest of random": lambda r, rows: r["cv_mae"],
    "lowest of 1:2": lambda r, rows: (r["cv_mae"] + 2.0 * r["extrapolation_mae"]) / 3.0,
    "lowest of ratios": lambda r, rows: (
        r["cv_mae"] / _kind_best(rows, "cv_mae")
        + r["extrapolation_mae"] / _kind_best(rows, "extrapolation_mae")
    ),
}
"""Other ways to weigh the two kinds of fold, each a :data:`Score`, lowest kept, ties to the
floor: the max of the two MAEs (the worse case a user could be in), one kind alone,
extrapolation counted twice, and each kind's MAE over that kind's best (so neither kind's
scale dominates). Rules a reader would ask for; none is the code's."""


RULES = (*NAMED, *VARIANTS)


def variant_rule(rows: list[dict[str, Any]], score: Score) -> str:
    """The competing candidate with the lowest ``score``; the floor unless it is lower."""
    scored = competing(rows, FLOOR)
    values = {label(r): score(r, scored) for r in scored}
    best = min(values, key=values.__getitem__)
    return best if values[best] < values[FLOOR.label] else FLOOR.label


def picks(cell: dict[str, Any]) -> dict[str, str]:
    """What each rule (and each fixed candidate) takes on a cell."""
    out = {
        "floor": FLOOR.label,
        "margin": margin_rule(cell["candidates"]),
        "lowest": lowest_rule(cell["candidates"]),
        "oracle": oracle(cell),
    }
    out |= {name: variant_rule(cell["candidates"], f) for name, f in VARIANTS.items()}
    return out | {c: c for c in cell["held_out"] if c != FLOOR.label}


# ---------------------------------------------------------------------- summaries
def group_of(key: str) -> str:
    matrix, population, protocol, _, _ = key.split("/")
    source = "v2" if matrix in V2 else "v1"
    return f"{source} {protocol} {'all sources' if population == 'all' else '25-100 sources'}"


def summary(cells: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Rule -> group -> mean held-out MAE and coverage of its picks."""
    found: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for cell in cells:
        for rule, chosen in picks(cell).items():
            metrics = cell["held_out"][chosen]
            for group in (group_of(cell["key"]), "every cell"):
                found[rule][group].append((metrics["mae"], metrics["coverage"]))
    return {
        rule: {
            group: {
                "mae": float(np.mean([m for m, _ in v])),
                "coverage": float(np.mean([c for _, c in v])),
                "cells": len(v),
            }
            for group, v in groups.items()
        }
        for rule, groups in found.items()
    }


def by_seed(cells: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Seed -> rule -> mean held-out MAE of its picks, over that seed's cells.

    The rules were compared on seeds 0 and 1 when ``lowest`` replaced ``margin``; a later
    seed's row shows whether that comparison held on splits it had not seen."""
    found: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for cell in cells:
        seed = cell["key"].rsplit("/", 1)[1]
        for rule, chosen in picks(cell).items():
            if rule in RULES:
                found[seed][rule].append(cell["held_out"][chosen]["mae"])
    return {
        seed: {"cells": len(rules["floor"])} | {r: float(np.mean(v)) for r, v in rules.items()}
        for seed, rules in sorted(found.items())
    }


def big_differences(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cells where ``lowest`` and ``margin`` picked differently and erred more than BIG apart."""
    out = []
    for cell in cells:
        chosen = picks(cell)
        lowest, margin = (cell["held_out"][chosen[r]]["mae"] for r in ("lowest", "margin"))
        if abs(lowest - margin) > BIG:
            out.append(
                {
                    "key": cell["key"],
                    "margin": chosen["margin"],
                    "margin_mae": margin,
                    "lowest": chosen["lowest"],
                    "lowest_mae": lowest,
                }
            )
    return sorted(out, key=lambda r: r["lowest_mae"] - r["margin_mae"])


def against_peers(cells: list[dict[str, Any]], peers_path: Path) -> dict[str, dict[str, float]]:
    """Per rule: target cases within the best benchpred method + MARGIN, and mean MAEs."""
    peer_cells = {c["key"]: c["methods"] for c in json.loads(peers_path.read_text())["cells"]}
    cases: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for cell in cells:
        matrix, population, protocol, budget, _ = cell["key"].split("/")
        if population == "all" and cell["key"] in peer_cells:
            cases[(matrix, protocol, budget)].append(cell)
    best = [_best_peer_mae([peer_cells[c["key"]] for c in members]) for members in cases.values()]
    chosen = [[(c, picks(c)) for c in members] for members in cases.values()]
    out = {}
    for rule in RULES:
        ours = [float(np.mean([c["held_out"][p[rule]]["mae"] for c, p in m])) for m in chosen]
        out[rule] = {
            "cases": len(cases),
            "within": sum(mine <= peer + MARGIN for mine, peer in zip(ours, best, strict=True)),
            "mae": float(np.mean(ours)),
            "best_peer_mae": float(np.mean(best)),
        }
    return out


def _best_peer_mae(methods: list[dict[str, Any]]) -> float:
    """The least seed-averaged MAE among the benchpred methods every seed of a case ran."""
    names = set.intersection(*({n for n in m if not n.startswith("ours")} for m in methods))
    return min(float(np.mean([m[n]["mae"] for m in methods])) for n in names)


def markdown(report: dict[str, Any]) -> str:
    info, table = report["info"], report["summary"]
    rendered = (
        f"; tables re-rendered from its JSON by `{info['rendered']}`" if "rendered" in info else ""
    )
    groups = sorted({g for rule in table.values() for g in rule}, key=_last_every)
    rules = [*RULES, *sorted(set(table) - set(RULES))]
    lines = [
        "# `--method auto`: which candidate each rule picks, and how it erred",
        "",
        f"Written by `{info['command']}` ({info['seconds']:.0f} s, load average "
        f"{info['load_average'][0]} -> {info['load_average'][1]}){rendered}. Every candidate "
        "the choice scored is built on the cell's sources and estimates its held-out models; "
        "a rule's MAE is that of its picks (mean over cells, score points), coverage that of the "
        "estimator's own 90 % interval (before the choice's factor). `margin`: the rule "
        "before 2026-11-27; `lowest`: the rule now; `oracle`: the candidate that erred least "
        "(a bound, it looks at the answer). See the module docstring of "
        "`tools/bench_choice_rules.py`.",
        "",
        "| rule | " + " | ".join(groups) + " |",
        "|---|" + "---:|" * len(groups),
    ]
    for rule in rules:
        cols = [_mae_coverage(table[rule].get(g)) for g in groups]
        lines.append(f"| {rule} | " + " | ".join(cols) + " |")
    lines += [
        "",
        "Cells per group: " + ", ".join(f"{g} {table['floor'][g]['cells']}" for g in groups) + ".",
        "",
        "## Seed by seed",
        "",
        "Mean held-out MAE of each rule's picks over one seed's cells. The rules were compared "
        "on seeds 0 and 1 when `lowest` replaced `margin` (2026-11-27); seed 2 was drawn after, "
        "so its row is the check on splits that comparison had not seen.",
        "",
        "| seed | cells | " + " | ".join(RULES) + " |",
        "|---:|---:|" + "---:|" * len(RULES),
        *(
            f"| {seed} | {row['cells']} | " + " | ".join(f"{row[r]:.2f}" for r in RULES) + " |"
            for seed, row in report.get("by_seed", {}).items()
        ),
        "",
        "## Against benchpred's best method (target cases: all sources, 25/50/100 items)",
        "",
        f"Peers from `bench/peers.json`; a case counts as level within {MARGIN} points of the "
        "best peer's seed-averaged MAE.",
        "",
        "| rule | within | of | mean MAE | best peer's mean MAE |",
        "|---|---:|---:|---:|---:|",
    ]
    for rule, row in report["against_peers"].items():
        lines.append(
            f"| {rule} | {row['within']} | {row['cases']} | {row['mae']:.2f} | "
            f"{row['best_peer_mae']:.2f} |"
        )
    lines += [
        "",
        f"## Cells where `lowest` and `margin` erred more than {BIG} points apart",
        "",
        "| cell | margin | MAE | lowest | MAE |",
        "|---|---|---:|---|---:|",
    ]
    for row in report["big_differences"]:
        lines.append(
            f"| {row['key']} | {row['margin']} | {row['margin_mae']:.2f} | {row['lowest']} | "
            f"{row['lowest_mae']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def _last_every(group: str) -> tuple[bool, str]:
    return group == "every cell", group


def _mae_coverage(metrics: dict[str, float] | None) -> str:
    return f"{metrics['mae']:.2f} ({metrics['coverage']:.2f})" if metrics else ""


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every cell measured afresh (the slow part), and how the run went."""
    require_data(args.data)
    extra = tuple(Candidate(*text.split("+", 1)) for text in args.paired)
    seeds = tuple(int(s) for s in args.seeds.split(","))
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    tasks = [
        (args.data, cell, extra, args.extrapolation_repeats)
        for matrix in args.matrices.split(",")
        for cell in cells_of(matrix, load_matrix(matrix, args.data)[0].shape[1], seeds)
    ]
    with worker_pool(args.jobs) as pool:
        cells = list(tqdm(pool.map(measure_cell, tasks), total=len(tasks), desc="cells"))
    info = {
        "command": "python tools/bench_choice_rules.py " + " ".join(args.argv),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": time.perf_counter() - started,
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
    }
    return info, cells


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--matrices", default=",".join(V1 + V2))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)), help="e.g. 0,1,2")
    parser.add_argument("--peers", type=Path, default=REPO / "bench" / "peers.json")
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument(
        "--paired", action="append", default=[], help="METHOD+ESTIMATOR, an extra candidate"
    )
    parser.add_argument("--stem", default="choice_rules", help="report name in --out")
    parser.add_argument(
        "--extrapolation-repeats",
        type=int,
        default=REPEATS,
        help="item draws per extrapolation fold in the choice (a less noisy fold score)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="re-render --out/STEM.md from its JSON (new rules, a new bench/peers.json)",
    )
    args = parser.parse_args(argv)
    saved = args.out / f"{args.stem}.json"
    info, cells = measured_rows(args, argv, "bench_choice_rules", saved, measure)
    report = {
        "info": info,
        "summary": summary(cells),
        "against_peers": against_peers(cells, args.peers),
        "big_differences": big_differences(cells),
        "by_seed": by_seed(cells),
        "cells": cells,
    }
    write_json_atomic(args.out / f"{args.stem}.json", report)
    write_text_if_changed(args.out / f"{args.stem}.md", markdown(report))
    print(f"wrote {args.out / f'{args.stem}.md'} ({len(cells)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
