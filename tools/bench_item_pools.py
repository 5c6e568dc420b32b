"""Part of a benchmark as the matrix, read against the whole benchmark's score: bench/item_pools.*

A user's matrix often holds only some of a benchmark's items (a pool someone pre-selected, as
metabench did for the Open LLM Leaderboard v1 matrices, or the shards that were run) while the
scores given with ``--scores`` are the whole benchmark's. On a benchmark whose models lie close
together and whose items are noisy, the pool's mean then moves with the score across all the
source models but hardly at all among a part of them, such as the weaker half an extrapolation
fold is trained on. This script measures the default build there: on the whole Open LLM
Leaderboard v2 matrices (IFEval, MuSR), a random pool of 100 or 200 items is the matrix and the
row mean of the whole matrix is every model's score; the peer suite's splits (a random fifth or
the strongest fifth held out; 25, 66 or all other models as sources; seeds 0 and 1), 50 items.
Each build either refuses (its message is kept) or estimates the held-out models, scored
against their whole-benchmark scores; ``dropped`` counts the choice's splits left out because
the floor could not be fitted on their sources.

    python tools/bench_item_pools.py --jobs 2      # about 10 minutes on 2 shared cores
    python tools/bench_item_pools.py --jobs 2 --before bench/item_pools_before.json
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_guard_cost import grid_parser, run_jobs, write_report
from bench_peers import build_ours, cell_metrics, estimate_record, seed_range
from peer_cells import V1_ALL, Cell, cell_rows, load_matrix, require_data, split_rows

from lmeval_microbench.errors import InputError

MATRICES = ("ifeval", "musr")
POOLS = (100, 200)
POPULATIONS = ("25", "66", "all")
PROTOCOLS = ("random", "extrapolation")
BUDGET = 50


def pool_items(n_items: int, size: int, seed: int) -> np.ndarray:
    """Sorted columns of a random pool of ``size`` of ``n_items`` items."""
    return np.sort(np.random.default_rng([seed, size]).choice(n_items, size, replace=False))


def measure(job: tuple[str, int, str, str, int, str]) -> dict[str, Any]:
    """The default build on one cell's sources, a pool of the matrix's items as their matrix."""
    matrix, size, population, protocol, seed, data = job
    cell = Cell(matrix, population, protocol, BUDGET, seed)
    values, truth, ids = load_matrix(matrix, Path(data))
    rows = cell_rows(truth, cell, V1_ALL)
    columns = pool_items(values.shape[1], size, seed)
    found = {"matrix": matrix, "pool": size, "population": population, "protocol": protocol}
    found.update(seed=seed, sources=int(rows[0].size))
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            split = split_rows(values[:, columns], truth, [ids[c] for c in columns], rows)
            bundle, recipe = build_ours("ours", cell, split)
            record = estimate_record(cell, bundle, split.target, recipe, start)
    except InputError as exc:
        return {**found, "refused": str(exc).splitlines()[0][:300]}
    metrics = cell_metrics(record, truth[rows[1]])
    if "error" in metrics:
        return {**found, "refused": str(metrics["error"]).splitlines()[0][:300]}
    protocol_record = bundle.reliability["auto"]["protocol"]
    dropped = protocol_record.get("dropped_splits", {}).get(str(BUDGET), 0)
    return {**found, "refused": None, "dropped": dropped, **metrics}


def _key(r: dict[str, Any]) -> tuple[str, int, str, str]:
    return r["matrix"], r["pool"], r["population"], r["protocol"]


def summary(results: list[dict[str, Any]], before: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per case (matrix, pool, sources, protocol): refusals now and before, and the means of
    the builds that ran."""
    refused_before: dict[tuple, int] = {}
    for r in before:
        refused_before[_key(r)] = refused_before.get(_key(r), 0) + (r["refused"] is not None)
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(_key(r), []).append(r)
    rows = []
    for key, members in sorted(groups.items()):
        ran = [m for m in members if m["refused"] is None]
        means = {
            name: float(np.mean([m[name] for m in ran])) if ran else None
            for name in ("mae", "bias", "coverage", "width", "dropped")
        }
        rows.append(
            {
                **dict(zip(("matrix", "pool", "population", "protocol"), key, strict=True)),
                "seeds": len(members),
                "refused": len(members) - len(ran),
                "refused_before": refused_before.get(key),
                **means,
                "recipes": sorted({m["recipe"] for m in ran}),
                "reasons": sorted({m["refused"] for m in members if m["refused"]}),
            }
        )
    return rows


def render(rows: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [
        "## Part of a benchmark as the matrix, read against the whole benchmark's score",
        "",
        f"Generated by `tools/bench_item_pools.py`; command: `{info['command']}`; "
        f"{info['seconds']:.0f} s; load average {info['load'][0]} -> {info['load'][1]} "
        "(2 shared cores). The default build (`--method auto`, 50 items) on the peer suite's "
        "splits of the whole v2 matrices, with a random pool of the benchmark's items as the "
        "matrix and the whole benchmark's score (the row mean of the whole matrix) as each "
        "model's score. `refused`: builds that stopped with an error, of the seeds (`before`: "
        f"{info['before'] or 'not given'}); `dropped`: the choice's splits left out because the "
        "floor could not be fitted on their sources (mean over the builds that ran). MAE, bias "
        "and width in points; `cov`: the 90 % interval's coverage.",
        "",
        "| matrix | pool | sources | protocol | refused | before | dropped | MAE | bias | cov "
        "| width | recipes |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        before = "-" if r["refused_before"] is None else f"{r['refused_before']}/{r['seeds']}"
        if r["mae"] is None:
            measured = "- | - | - | - | - | -"
        else:
            measured = (
                f"{r['dropped']:.1f} | {r['mae']:.2f} | {r['bias']:+.2f} | {r['coverage']:.2f} "
                f"| {r['width']:.1f} | {', '.join(r['recipes'])}"
            )
        lines.append(
            f"| {r['matrix']} | {r['pool']} | {r['population']} | {r['protocol']} "
            f"| {r['refused']}/{r['seeds']} | {before} | {measured} |"
        )
    reasons = sorted({reason for r in rows for reason in r["reasons"]})
    if reasons:
        lines += ["", "Refusals:", "", *(f"- {reason}" for reason in reasons)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = grid_parser(__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1", help="e.g. 0,1 or 0-4")
    parser.add_argument(
        "--before", type=Path, help="an earlier run's JSON: its refusals beside these"
    )
    args = parser.parse_args(argv)
    require_data(args.data)
    seeds = seed_range(args.seeds)
    jobs = [
        (matrix, size, population, protocol, seed, str(args.data))
        for matrix in MATRICES
        for size in POOLS
        for population in POPULATIONS
        for protocol in PROTOCOLS
        for seed in seeds
    ]
    before = json.loads(args.before.read_text())["cells"] if args.before else []
    results, info = run_jobs(measure, jobs, args.jobs, "bench_item_pools.py", argv)
    info["before"] = str(args.before) if args.before else None
    rows = summary(results, before)
    payload = {"info": info, "summary": rows, "cells": results}
    write_report(args.out, "item_pools", payload, render(rows, info))


if __name__ == "__main__":
    main()
