"""Does a model's own answers say it lies beyond the sources? bench/placement.*.

``microbench estimate``, ``reconstruct`` and the lm-eval run name the side where the guard's
reading places a model above the strongest source model's score or under the weakest's
(:mod:`lmeval_microbench.outside.placement`). This measures that on the peer suite's cells
with all source models (every matrix, random / strongest-fifth / weakest-fifth held out,
25/50/100 items; the weakest fifth at 50), each rebuilt with the recipe the default build
chose there (``ours`` in ``bench/peers.json``, its interval factor applied): of the held-out
models that do lie beyond every source (truth above the strongest source's or under the
weakest's), how many were named, and how many named models do not. The error and coverage of
the named and the unnamed models tell a user how far to trust each. The rebuilt estimates
must reproduce the peer suite's MAE of each cell (checked, the largest difference reported).

    python tools/bench_placement.py --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_peers import MATRICES, build_recipe
from cell_scoring import interval_metrics, measured_rows
from peer_cells import DATA, PSN, V1, V2, Cell, require_data, split_cell
from tqdm.auto import tqdm
from worker_pool import worker_pool

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.estimators import ScoreEstimator, estimator_from_state
from lmeval_microbench.outside import placement_records
from lmeval_microbench.responses import ResponseMatrix

REPO = Path(__file__).resolve().parents[1]
BUDGETS = (25, 50, 100)
PROTOCOLS = ("random", "extrapolation", "weak")
REPRODUCED = 0.01
"""Points of MAE within which a rebuilt cell counts as the peer suite's."""
GROUPS = {"OLL v2 (IFEval, MuSR)": V2, "OLL v1 (six)": V1, "psn (MMLU, BBH; 10 sources)": PSN}


def peer_cells(peers: Path, matrices: list[str]) -> list[tuple[Cell, dict[str, Any]]]:
    """The peer suite's cells with all sources at 25/50/100 items and ``ours``'s record."""
    out = []
    for cell in json.loads(peers.read_text())["cells"]:
        ours = cell["methods"].get("ours")
        if cell["population"] != "all" or cell["budget"] not in BUDGETS or not ours:
            continue
        if cell["matrix"] in matrices:
            key = Cell(cell["matrix"], "all", cell["protocol"], cell["budget"], cell["seed"])
            out.append((key, ours))
    return out


def rebuilt(
    task: tuple[Path, Cell, dict[str, Any]],
) -> tuple[ScoreEstimator, ResponseMatrix, np.ndarray, np.ndarray]:
    """A cell's ``ours`` recipe rebuilt on its source models, its interval factor applied: the
    estimator, the held-out models' subset answers, and the sources' and their true scores."""
    data, cell, ours = task
    source, target, source_truth, truth = split_cell(cell, data)
    method, estimator_name = ours["recipe"].split("+", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bundle = build_recipe(cell, source, source_truth, method, estimator_name)
    estimator = estimator_from_state(bundle.estimator_state())
    if ours.get("widen", 1.0) > 1.0:
        estimator.widen_intervals(ours["widen"])
    return estimator, target.select_items(bundle.item_ids), source_truth, truth


def measure_cell(task: tuple[Path, Cell, dict[str, Any]]) -> dict[str, Any]:
    """One cell rebuilt with ``ours``'s recipe: its held-out models counted by side and truth."""
    _, cell, ours = task
    started = time.perf_counter()
    estimator, answers, source_truth, truth = rebuilt(task)
    value, lower, upper = estimator.estimate_matrix(answers)
    records = placement_records(estimator, answers.values)
    sides = np.array([r["side"] if r else "" for r in records], dtype=object)
    return {
        "key": cell.key,
        "case": [cell.matrix, cell.protocol, cell.budget],
        "recipe": ours["recipe"],
        **counts(
            sides,
            truth > source_truth.max(),
            truth < source_truth.min(),
            100 * np.abs(value - truth),
            (lower <= truth) & (truth <= upper),
        ),
        **{k: v for k, v in interval_metrics(value, lower, upper, truth).items() if k != "bias"},
        "seconds": time.perf_counter() - started,
    }


COUNTS = ("models", "beyond", "named", "named_right", "named_wrong", "inside", "named_of_inside")


def counts(
    side: np.ndarray, above: np.ndarray, below: np.ndarray, error: np.ndarray, covered: np.ndarray
) -> dict[str, Any]:
    """One cell's held-out models counted: beyond the sources or not, named or not, and the
    summed errors and hits of the named and the unnamed (a report pools them over cells)."""
    named_up, named_down = side == "above", side == "below"
    named = named_up | named_down
    inside = ~above & ~below

    def sums(mask: np.ndarray) -> list[float]:
        return [int(mask.sum()), float(error[mask].sum()), int(covered[mask].sum())]

    return {
        "models": int(side.size),
        "beyond": int((~inside).sum()),
        "named": int(named.sum()),
        "named_right": int((named_up & above).sum() + (named_down & below).sum()),
        "named_wrong": int(((named_up & ~above) | (named_down & ~below)).sum()),
        "inside": int(inside.sum()),
        "named_of_inside": int((named & inside).sum()),
        "named_sums": sums(named),
        "unnamed_sums": sums(~named),
    }


def reproduction(rows: list[dict[str, Any]], peers: Path) -> dict[str, Any]:
    """How far each rebuilt cell's MAE and coverage lie from the peer suite's ``ours``: the
    largest gaps of the cells within :data:`REPRODUCED` points, and the cells beyond it."""
    cells = json.loads(peers.read_text())["cells"]
    ours = {c["key"]: c["methods"].get("ours") or {} for c in cells}
    gaps = {
        row["key"]: (
            abs(row["mae"] - ours.get(row["key"], {}).get("mae", np.nan)),
            abs(row["coverage"] - ours.get(row["key"], {}).get("coverage", np.nan)),
        )
        for row in rows
    }
    kept = [g for g in gaps.values() if g[0] <= REPRODUCED]
    return {
        "cells": len(gaps),
        "reproduced": len(kept),
        "max_mae_gap": max((g[0] for g in kept), default=0.0),
        "max_coverage_gap": max((g[1] for g in kept), default=0.0),
        "not_reproduced": {k: g[0] for k, g in gaps.items() if not g[0] <= REPRODUCED},
    }


def tally(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`counts` pooled over the cells of ``rows``, with the named and the unnamed
    models' MAE and coverage."""

    def errors(key: str) -> dict[str, float | None]:
        n, error, covered = np.sum([r[key] for r in rows], axis=0)
        if not n:
            return {"mae": None, "coverage": None}
        return {"mae": float(error / n), "coverage": float(covered / n)}

    return {
        "cells": len(rows),
        **{key: int(sum(r[key] for r in rows)) for key in COUNTS},
        "named_errors": errors("named_sums"),
        "unnamed_errors": errors("unnamed_sums"),
    }


def summaries(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per matrix group x protocol, and per matrix x protocol x budget."""
    by_group: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    by_case: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        matrix, protocol, budget = row["case"]
        group = next(g for g, members in GROUPS.items() if matrix in members)
        by_group[(group, protocol)].append(row)
        by_case[(matrix, protocol, budget)].append(row)
    order = {p: k for k, p in enumerate(PROTOCOLS)}
    groups = [
        {"group": g, "protocol": p, **tally(members)}
        for (g, p), members in sorted(
            by_group.items(), key=lambda kv: (list(GROUPS).index(kv[0][0]), order[kv[0][1]])
        )
    ]
    cases = [
        {"matrix": m, "protocol": p, "budget": b, **tally(members)}
        for (m, p, b), members in sorted(
            by_case.items(), key=lambda kv: (MATRICES.index(kv[0][0]), order[kv[0][1]], kv[0][2])
        )
    ]
    return {"groups": groups, "cases": cases}


def _share(part: int, whole: int) -> str:
    return "-" if not whole else f"{part}/{whole} ({100 * part / whole:.0f} %)"


def _errors(found: dict[str, float | None]) -> str:
    if found["mae"] is None:
        return "-"
    return f"{found['mae']:.2f} / {found['coverage']:.2f}"


def _row(label: list[str], entry: dict[str, Any]) -> str:
    cells = [
        *label,
        str(entry["models"]),
        _share(entry["named_right"], entry["beyond"]),
        _share(entry["named_of_inside"], entry["inside"]),
        _share(entry["named_wrong"], entry["named"]),
        _errors(entry["named_errors"]),
        _errors(entry["unnamed_errors"]),
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "held-out models | beyond every source: named | inside the sources: named | named "
    "but not beyond | named: MAE / cov | unnamed: MAE / cov"
)


def _reproduced(check: dict[str, Any]) -> str:
    text = (
        f"the rebuilt estimates reproduce the peer suite's of {check['reproduced']} of "
        f"{check['cells']} cells (MAE within {check['max_mae_gap']:.1e} points, coverage within "
        f"{check['max_coverage_gap']:.3f})"
    )
    if check["not_reproduced"]:
        listed = ", ".join(f"{k} ({gap:.2f})" for k, gap in check["not_reproduced"].items())
        text += f"; not: {listed} (MAE gap in points)"
    return text


def markdown(
    found: dict[str, list[dict[str, Any]]], info: dict[str, Any], check: dict[str, Any]
) -> str:
    rendered = f"; re-rendered from its JSON by `{info['rendered']}`" if "rendered" in info else ""
    lines = [
        "# Where the answers place a model: above or below every source model",
        "",
        f"Generated by `{info['command']}`; {info['minutes']:.0f} min, load average "
        f"{info['load_average'][0]:.1f} -> {info['load_average'][1]:.1f} (2 shared cores"
        f"{rendered}). "
        "The peer suite's cells with all source models, each rebuilt with the recipe the "
        "default build chose there (`ours` in `bench/peers.json`, its interval factor "
        f"applied); {_reproduced(check)}. A model is *named* above (below) when the guard's "
        "reading places it above the strongest source's score (under the weakest's) with "
        "probability at least 0.5 (`outside.placement.SIDE_P`); it *is* beyond when its true "
        "score lies strictly above (under) every source model's. Named but not beyond: on "
        "the wrong side, or level with the edge source (the v1 matrices' scores take few "
        "values). MAE in points and 90 % coverage of the estimates of the named and the "
        "unnamed models.",
        "",
        "## By matrix group",
        "",
        f"| matrices | protocol | {HEADER} |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for entry in found["groups"]:
        lines.append(_row([entry["group"], entry["protocol"]], entry))
    lines += [
        "",
        "## Every case (seeds pooled)",
        "",
        f"| matrix | protocol | budget | {HEADER} |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for entry in found["cases"]:
        lines.append(_row([entry["matrix"], entry["protocol"], str(entry["budget"])], entry))
    return "\n".join(lines) + "\n"


def run_cells(
    args: argparse.Namespace,
    measure_one: Callable[[tuple[Path, Cell, dict[str, Any]]], dict[str, Any]],
    tool: str,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``measure_one`` on every cell of :func:`peer_cells` (``args.jobs`` workers; the slow
    part), and how the run went."""
    require_data(args.data)
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    tasks = [(args.data, cell, ours) for cell, ours in peer_cells(args.peers, args.matrices)]
    with worker_pool(args.jobs) as pool:
        rows = list(tqdm(pool.map(measure_one, tasks), total=len(tasks), desc="cells"))
    info = {
        "command": f"python tools/{tool}.py " + " ".join(args.argv),
        "minutes": (time.perf_counter() - started) / 60,
        "load_average": [load_start, os.getloadavg()[0]],
    }
    return info, rows


def cell_options(description: str, report: str) -> argparse.ArgumentParser:
    """The options of a tool over the peer suite's cells with all sources (``report``: the
    file ``--report-only`` re-renders)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--matrices", default=",".join(MATRICES))
    parser.add_argument("--peers", type=Path, default=REPO / "bench" / "peers.json")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument(
        "--report-only", action="store_true", help=f"re-render --out/{report} from its JSON"
    )
    return parser


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every cell rebuilt and estimated (the slow part), and how the run went."""
    return run_cells(args, measure_cell, "bench_placement")


def main(argv: list[str] | None = None) -> int:
    args = cell_options(__doc__.splitlines()[0], "placement.md").parse_args(argv)
    args.matrices = args.matrices.split(",")
    saved = args.out / "placement.json"
    info, rows = measured_rows(args, argv, "bench_placement", saved, measure)
    found = summaries(rows)
    check = reproduction(rows, args.peers)
    payload = {"info": info, "reproduction": check, **found, "cells": rows}
    write_json_atomic(args.out / "placement.json", payload)
    write_text_if_changed(args.out / "placement.md", markdown(found, info, check))
    print(f"wrote {args.out / 'placement.md'} ({len(rows)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
