"""Balanced against uniform random items, read with ``guarded``: bench/balanced_guarded.*.

``tools/bench_balanced.py`` shows that ``balanced`` items bring the plain mean closer; the
default recipe reads its items with ``guarded`` instead, which regresses on the sources inside
them (``kridge``) and reads the model's own answers beyond. This builds that recipe (``build
--method random|balanced --estimator guarded``, no choice) on the peer suite's splits
(:mod:`bench_peers`: seed 0, random and strongest-fifth held out; all source models at 25, 50
and 100 items, and 25 or 50 source models at 50 items), several times with other item draws,
and scores the held-out models: MAE, 90 % coverage and width, each averaged over the draws.
The peer suite itself draws the items once per cell, which leaves a change of the selection
inside its noise; the draws here average that out.

    python tools/bench_balanced_guarded.py --draws 6 --jobs 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from dataclasses import asdict, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from bench_peers import (
    DATA,
    V1,
    V1_ALL,
    V2,
    Cell,
    build_recipe,
    cell_rows,
    load_matrix,
    split_matrices,
)
from tqdm.auto import tqdm
from worker_pool import worker_pool

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.estimators import estimator_from_state

REPO = Path(__file__).resolve().parents[1]
SELECTIONS = ("random", "balanced")
ALL_BUDGETS = (25, 50, 100)
POPULATIONS = ("25", "50")
POPULATION_BUDGET = 50
DRAW_SEED = 1000
"""Item draws use seeds 1000, 1001, ... (the split keeps the cell's seed)."""


def cells_of(matrix: str, n_items: int, seed: int) -> list[Cell]:
    cells = []
    for protocol in ("random", "extrapolation"):
        cells += [Cell(matrix, "all", protocol, b, seed) for b in ALL_BUDGETS if b < n_items]
        cells += [Cell(matrix, p, protocol, POPULATION_BUDGET, seed) for p in POPULATIONS]
    return cells


@lru_cache(maxsize=1)
def matrix_of(name: str, data: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """:func:`bench_peers.load_matrix`, read once per worker while its cells share a matrix."""
    return load_matrix(name, data)


def measure_cell(task: tuple[Path, Cell, int]) -> dict[str, Any]:
    """Both selections read with ``guarded`` on one split, over ``draws`` item draws."""
    data, cell, draws = task
    values, truth, ids = matrix_of(cell.matrix, data)
    rows = cell_rows(truth, cell, V1_ALL)
    source, target = split_matrices(values, ids, rows)
    source_truth, target_truth = truth[rows[0]], truth[rows[1]]
    found: dict[str, list[tuple[float, float, float]]] = {name: [] for name in SELECTIONS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for draw in range(draws):
            drawn = replace(cell, seed=DRAW_SEED + draw)  # the bundle's selection seed
            for name in SELECTIONS:
                bundle = build_recipe(drawn, source, source_truth, name, "guarded")
                estimator = estimator_from_state(bundle.estimator_state())
                value, lower, upper = estimator.estimate_matrix(
                    target.select_items(bundle.item_ids)
                )
                found[name].append(
                    (
                        100 * float(np.mean(np.abs(value - target_truth))),
                        float(np.mean((lower <= target_truth) & (target_truth <= upper))),
                        100 * float(np.mean(upper - lower)),
                    )
                )
    row: dict[str, Any] = {"key": cell.key, **asdict(cell)}
    for name, results in found.items():
        array = np.asarray(results)
        row[name] = {
            "mae": float(array[:, 0].mean()),
            "mae_se": float(array[:, 0].std(ddof=1) / np.sqrt(draws)) if draws > 1 else None,
            "coverage": float(array[:, 1].mean()),
            "width": float(array[:, 2].mean()),
        }
    return row


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per protocol and population group: cells, wins of balanced, mean MAE and coverage."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        group = "all sources" if row["population"] == "all" else "25-50 sources"
        groups.setdefault((row["protocol"], group), []).append(row)
    out = []
    for (protocol, group), members in sorted(groups.items()):
        entry: dict[str, Any] = {"protocol": protocol, "sources": group, "cells": len(members)}
        entry["balanced_lower"] = sum(r["balanced"]["mae"] < r["random"]["mae"] for r in members)
        for name in SELECTIONS:
            for key in ("mae", "coverage", "width"):
                entry[f"{name}_{key}"] = float(np.mean([r[name][key] for r in members]))
            entry[f"{name}_min_coverage"] = float(min(r[name]["coverage"] for r in members))
        out.append(entry)
    return out


def markdown(rows: list[dict[str, Any]], groups: list[dict[str, Any]], info: dict) -> str:
    lines = [
        "# Balanced against uniform random items, read with `guarded`",
        "",
        f"Generated by `{info['command']}` ({info['draws']} item draws per cell, split seed "
        f"{info['seed']}; load average {info['load_average'][0]:.1f} -> "
        f"{info['load_average'][1]:.1f}; {info['seconds'] / 60:.0f} min). `build --method "
        "random|balanced --estimator guarded` (no choice) on the peer suite's splits; MAE in "
        "points, 90 % coverage and width of the held-out models, averaged over the draws.",
        "",
        "| protocol | sources | cells | balanced lower | MAE random | MAE balanced | "
        "cov90 random (min) | cov90 balanced (min) | width random | width balanced |",
        "|---|---|---:|---:|---:|---:|---|---|---:|---:|",
    ]
    for g in groups:
        lines.append(
            f"| {g['protocol']} | {g['sources']} | {g['cells']} | {g['balanced_lower']} | "
            f"{g['random_mae']:.2f} | {g['balanced_mae']:.2f} | "
            f"{g['random_coverage']:.3f} ({g['random_min_coverage']:.2f}) | "
            f"{g['balanced_coverage']:.3f} ({g['balanced_min_coverage']:.2f}) | "
            f"{g['random_width']:.1f} | {g['balanced_width']:.1f} |"
        )
    lines += [
        "",
        "| cell | MAE random | MAE balanced | cov90 random | cov90 balanced |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        uniform, balanced = r["random"], r["balanced"]
        lines.append(
            f"| {r['key']} | {_mae(uniform)} | {_mae(balanced)} | {uniform['coverage']:.2f} | "
            f"{balanced['coverage']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def _mae(metrics: dict[str, Any]) -> str:
    se = metrics["mae_se"]
    return f"{metrics['mae']:.2f}" + (f" ± {se:.2f}" if se is not None else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--draws", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0, help="the split's seed")
    parser.add_argument("--matrices", default=",".join(V2 + V1))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        sys.exit(f"no real data at {args.data}: this benchmark needs ../shared/data")
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    tasks = [
        (args.data, cell, args.draws)
        for matrix in args.matrices.split(",")
        for cell in cells_of(matrix, load_matrix(matrix, args.data)[0].shape[1], args.seed)
    ]
    with worker_pool(args.jobs) as pool:
        rows = list(tqdm(pool.map(measure_cell, tasks), total=len(tasks), desc="cells"))
    groups = summary(rows)
    info = {
        "command": "python tools/bench_balanced_guarded.py " + " ".join(argv or sys.argv[1:]),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "draws": args.draws,
        "seed": args.seed,
        "seconds": time.perf_counter() - started,
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
    }
    write_json_atomic(
        args.out / "balanced_guarded.json", {"info": info, "summary": groups, "cells": rows}
    )
    write_text_if_changed(args.out / "balanced_guarded.md", markdown(rows, groups, info))
    print(f"wrote {args.out / 'balanced_guarded.md'} ({len(rows)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
