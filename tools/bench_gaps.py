"""What gaps in the source matrix cost the default build: bench/gaps.*.

Matrices of HELM and of a lab's own runs have gaps: an instance that failed for one model, a
shard that never ran. ``microbench build`` chooses its recipe on such a matrix with its gaps
filled (``gaps.filled``), draws its items from its part without gaps (``gaps.complete_core``,
``build.selection_pool``) and fits its estimators on every model scored on the items. This
script measures what that costs: on the whole Open LLM Leaderboard v2 matrices (IFEval, MuSR),
the peer suite's splits (a random fifth or the strongest fifth held out; all other models or 66
of them as sources, 50 items, seeds 0 and 1), gaps are punched into the *source* rows only, and
the default build's estimates of the held-out models (run fresh on the bundle's items, so
without gaps) are scored against their true scores (the row means of the whole matrix):

- ``none``: the matrix as it is;
- ``scattered 2 %`` / ``scattered 5 %``: every cell missing with that probability;
- ``blocks``: a fifth of the source models each lack a run of a tenth of the items (a shard
  that never ran).

The sources' own scores are what a user without ``--scores`` has: the mean over the items each
answered.

    python tools/bench_gaps.py --jobs 2      # about 30 minutes on 2 shared cores
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_guard_cost import grid_parser, run_jobs, write_report
from bench_peers import build_ours, cell_metrics, estimate_record, seed_range
from peer_cells import V1_ALL, Cell, cell_rows, load_matrix, split_rows

MATRICES = ("ifeval", "musr")
POPULATIONS = ("all", "66")
PROTOCOLS = ("random", "extrapolation")
PATTERNS = ("none", "scattered 2 %", "scattered 5 %", "blocks")
BUDGET = 50
BLOCK_MODELS, BLOCK_ITEMS = 0.2, 0.1


def punch_gaps(values: np.ndarray, rows: np.ndarray, pattern: str, seed: int) -> np.ndarray:
    """``values`` with gaps of ``pattern`` in ``rows`` (a copy; other rows untouched)."""
    if pattern not in PATTERNS:
        raise ValueError(f"unknown gap pattern {pattern!r}")
    rng = np.random.default_rng([seed, PATTERNS.index(pattern)])
    out = values.astype(np.float64, copy=True)
    if pattern == "none":
        return out
    if pattern.startswith("scattered"):
        share = float(pattern.split()[1]) / 100
        gaps = rng.random((rows.size, values.shape[1])) < share
        block = out[rows]
        block[gaps] = np.nan
        out[rows] = block
        return out
    width = max(1, round(BLOCK_ITEMS * values.shape[1]))  # blocks
    hit = rng.choice(rows, max(1, round(BLOCK_MODELS * rows.size)), replace=False)
    for row in hit:
        start = int(rng.integers(0, values.shape[1] - width + 1))
        out[row, start : start + width] = np.nan
    return out


def measure(job: tuple[str, str, str, int, str, str]) -> dict[str, Any]:
    """The default build on one cell's sources with gaps of one pattern, scored."""
    matrix, population, protocol, seed, pattern, data = job
    cell = Cell(matrix, population, protocol, BUDGET, seed)
    values, truth, ids = load_matrix(matrix, Path(data))
    rows = cell_rows(truth, cell, V1_ALL)
    gapped = punch_gaps(values, rows[0], pattern, seed)
    seen = truth.astype(np.float64, copy=True)
    with np.errstate(invalid="ignore"):
        seen[rows[0]] = np.nanmean(gapped[rows[0]], axis=1)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        split = split_rows(gapped, seen, ids, rows)
        bundle, recipe = build_ours("ours", cell, split)
        record = estimate_record(cell, bundle, split.target, recipe, start)
    protocol_record = bundle.reliability["auto"]["protocol"]
    return {
        "matrix": matrix,
        "population": population,
        "protocol": protocol,
        "seed": seed,
        "pattern": pattern,
        "missing": float(np.isnan(gapped[rows[0]]).mean()),
        "models_used": protocol_record["models_used"],
        "items_used": protocol_record.get("items_used", values.shape[1]),
        "sources": int(rows[0].size),
        **cell_metrics(record, truth[rows[1]]),
    }


def summary(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for r in results:
        key = (r["matrix"], r["population"], r["protocol"], r["pattern"])
        groups.setdefault(key, []).append(r)
    rows = []
    for (matrix, population, protocol, pattern), members in groups.items():
        names = ("missing", "models_used", "items_used", "sources", "mae", "bias", "coverage")
        means = {name: float(np.mean([m[name] for m in members])) for name in (*names, "width")}
        rows.append(
            {
                "matrix": matrix,
                "population": population,
                "protocol": protocol,
                "pattern": pattern,
                "seeds": len(members),
                **means,
                "recipes": sorted({m["recipe"] for m in members}),
            }
        )
    order = {p: k for k, p in enumerate(PATTERNS)}
    return sorted(
        rows, key=lambda r: (r["matrix"], r["population"], r["protocol"], order[r["pattern"]])
    )


def render(rows: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [
        "## Gaps in the source matrix: what they cost the default build",
        "",
        f"Generated by `tools/bench_gaps.py`; command: `{info['command']}`; "
        f"{info['seconds']:.0f} s; load average {info['load'][0]} -> {info['load'][1]} "
        "(2 shared cores). The default build (`--method auto`, 50 items) on the peer suite's "
        "splits of the whole v2 matrices, with gaps punched into the source rows only "
        "(see the script's docstring); the held-out models, without gaps, estimated and scored "
        "against the row means of the whole matrix. `missing`: share of source cells missing; "
        "`choice on`: models x items the recipe was chosen on (of `sources` models). MAE, bias "
        "and width in points, mean over seeds; `cov`: the 90 % interval's coverage.",
        "",
        "| matrix | sources | protocol | gaps | missing | choice on | MAE | bias | cov "
        "| width | recipes |",
        "|---|---|---|---|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['matrix']} | {r['population']} | {r['protocol']} | {r['pattern']} "
            f"| {100 * r['missing']:.1f} % | {r['models_used']:.0f} x {r['items_used']:.0f} "
            f"(of {r['sources']:.0f}) | {r['mae']:.2f} | {r['bias']:+.2f} "
            f"| {r['coverage']:.2f} | {r['width']:.1f} | {', '.join(r['recipes'])} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = grid_parser(__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1", help="e.g. 0,1 or 0-4")
    args = parser.parse_args(argv)
    seeds = seed_range(args.seeds)
    jobs = [
        (matrix, population, protocol, seed, pattern, str(args.data))
        for matrix in MATRICES
        for population in POPULATIONS
        for protocol in PROTOCOLS
        for seed in seeds
        for pattern in PATTERNS
    ]
    results, info = run_jobs(measure, jobs, args.jobs, "bench_gaps.py", argv)
    rows = summary(results)
    payload = {"info": info, "summary": rows, "cells": results}
    write_report(args.out, "gaps", payload, render(rows, info))


if __name__ == "__main__":
    main()
