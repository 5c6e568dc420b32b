"""Balanced against uniform random items, read with their plain mean: bench/balanced.*.

The ``balanced`` selection draws one random item from each of ``budget`` equal strata of
source difficulty (:class:`lmeval_microbench.selection.BalancedSelector`); ``random`` draws
``budget`` items uniformly. Both are probability samples, so the weighted mean of a model's
answers estimates its mean over the matrix items without bias wherever the model lies: the
one estimator that needs nothing from the sources but the design. This measures how much
closer balanced items bring it, on the peer suite's own splits (:mod:`bench_peers`: every
matrix, random / strongest-fifth / weakest-fifth held out, all source models), over many
draws of the items: MAE of the plain mean, and the coverage and width of the binomial 90 %
interval with the finite-population correction (exact for uniform draws, conservative for
balanced ones, whose variance is smaller).

    python tools/bench_balanced.py                 # -> bench/balanced.json, bench/balanced.md
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_peers import MATRICES
from peer_cells import DATA, PSN, Cell, matrix_of, require_data, split_cell
from scipy.stats import norm
from tqdm.auto import tqdm

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.estimators.mean import binomial_se
from lmeval_microbench.selection import make_selector

REPO = Path(__file__).resolve().parents[1]
BUDGETS = (10, 25, 50, 100)
PROTOCOLS = ("random", "extrapolation", "weak")
SELECTIONS = ("random", "balanced")
Z90 = float(norm.ppf(0.95))


def plain_mean(values: np.ndarray, positions: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Each target model's weighted mean over the drawn items."""
    return values[:, positions] @ (weights / weights.sum())


def binomial_halfwidth(estimate: np.ndarray, budget: int, n_items: int) -> np.ndarray:
    """90 % half-width of a uniform draw's mean: binomial, finite-population corrected."""
    correction = max(1.0 - budget / n_items, 0.0) * n_items / max(n_items - 1, 1)
    return Z90 * binomial_se(np.clip(estimate, 0.0, 1.0), budget) * np.sqrt(correction)


def measure_cell(cell: Cell, data: Path, draws: int) -> dict[str, dict[str, float]]:
    """Both selections' plain-mean MAE, coverage and width on one split, over ``draws``."""
    source, target, _, target_truth = split_cell(cell, data)
    out = {}
    for name in SELECTIONS:
        selector = make_selector(name)
        errors, covered, widths = [], [], []
        for draw in range(draws):
            subset = selector.select(source, cell.budget, seed=draw)
            positions = target.item_positions(subset.item_ids)
            estimate = plain_mean(target.values, positions, np.asarray(subset.weights))
            half = binomial_halfwidth(estimate, cell.budget, source.n_items)
            errors.append(np.mean(np.abs(estimate - target_truth)))
            covered.append(np.mean(np.abs(estimate - target_truth) <= half))
            widths.append(np.mean(2 * half))
        out[name] = {
            "mae": 100 * float(np.mean(errors)),
            "mae_se": 100 * float(np.std(errors, ddof=1) / np.sqrt(draws)),
            "coverage": float(np.mean(covered)),
            "width": 100 * float(np.mean(widths)),
        }
    return out


def cells_of(matrix: str, n_items: int, seeds: list[int], psn_seeds: list[int]) -> list[Cell]:
    return [
        Cell(matrix, "all", protocol, budget, seed)
        for seed in (psn_seeds if matrix in PSN else seeds)
        for protocol in PROTOCOLS
        for budget in BUDGETS
        if budget < n_items
    ]


def run(data: Path, draws: int, seeds: list[int], psn_seeds: list[int]) -> list[dict[str, Any]]:
    """Case rows (matrix, protocol, budget), each averaged over its seeds' splits."""
    rows = []
    for matrix in tqdm(MATRICES, desc="balanced", unit="matrix"):
        n_items = len(matrix_of(matrix, data)[2])
        per_case: dict[tuple[str, int], list[dict]] = {}
        for cell in cells_of(matrix, n_items, seeds, psn_seeds):
            found = measure_cell(cell, data, draws)
            per_case.setdefault((cell.protocol, cell.budget), []).append(found)
        for (protocol, budget), found in per_case.items():
            row: dict[str, Any] = {
                "matrix": matrix,
                "protocol": protocol,
                "budget": budget,
                "splits": len(found),
            }
            for name in SELECTIONS:
                row[name] = {
                    key: float(np.mean([f[name][key] for f in found]))
                    for key in ("mae", "mae_se", "coverage", "width")
                }
            rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [
        "# Balanced against uniform random items, read with their plain mean",
        "",
        f"Generated by `{info['command']}` ({info['draws']} draws of the items per split; "
        f"seeds {info['seeds']}, psn {info['psn_seeds']}; load average "
        f"{info['load_average'][0]:.1f} -> {info['load_average'][1]:.1f}). The splits are the "
        "peer suite's (all source models; the strongest or weakest fifth held out, or a "
        "random fifth). MAE of each held-out model's plain (weighted) mean against its mean "
        "over the matrix items, in points, averaged over draws and splits; coverage and width "
        "of the binomial 90 % interval with the finite-population correction (exact for "
        "uniform draws, conservative for balanced ones).",
        "",
    ]
    ratios = [r["balanced"]["mae"] / r["random"]["mae"] for r in rows if r["random"]["mae"] > 0]
    better = sum(r["balanced"]["mae"] < r["random"]["mae"] for r in rows)
    lines += [
        f"Balanced items erred less in {better} of {len(rows)} cases; their MAE was "
        f"{min(ratios):.2f}-{max(ratios):.2f} of uniform random items' (median "
        f"{float(np.median(ratios)):.2f}).",
        "",
        "| matrix | protocol | budget | splits | random MAE | balanced MAE | ratio | "
        "random cov90 | balanced cov90 | random width | balanced width |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        uniform, balanced = r["random"], r["balanced"]
        ratio = balanced["mae"] / uniform["mae"] if uniform["mae"] > 0 else float("nan")
        lines.append(
            f"| {r['matrix']} | {r['protocol']} | {r['budget']} | {r['splits']} | "
            f"{uniform['mae']:.2f} | {balanced['mae']:.2f} | {ratio:.2f} | "
            f"{uniform['coverage']:.2f} | {balanced['coverage']:.2f} | {uniform['width']:.1f} | "
            f"{balanced['width']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--psn-seeds", default="0,1,2,3,4,5,6,7,8,9")
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    require_data(args.data)
    seeds = [int(s) for s in args.seeds.split(",")]
    psn_seeds = [int(s) for s in args.psn_seeds.split(",")]
    load_start = os.getloadavg()[0]
    rows = run(args.data, args.draws, seeds, psn_seeds)
    info = {
        "command": "python tools/bench_balanced.py " + " ".join(argv or sys.argv[1:]),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "draws": args.draws,
        "seeds": seeds,
        "psn_seeds": psn_seeds,
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
    }
    write_json_atomic(args.out / "balanced.json", {"info": info, "cases": rows})
    write_text_if_changed(args.out / "balanced.md", markdown(rows, info))
    print(f"wrote {args.out / 'balanced.md'} ({len(rows)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
