"""The ``similar`` estimator (model-similarity AIPW) on the peer suite's splits: bench/similar.*.

``build --method balanced --estimator similar`` (no choice) on the cells of
:mod:`bench_peers` (the same splits and the same item seed as ``ours``' floor): every matrix,
random and strongest-fifth held out, all source models at 25, 50 and 100 items, and 25, 50
and 100 source models at 50 items (v1 and v2); the weakest fifth held out (near-random
models), all source models at 50 items; the psn blocks (10 source models) at every budget
with their own seeds. Beside it, from ``bench/peers.json`` (nothing else rerun): the
default ``ours``, benchpred's ``aipw`` (the same model-similarity predictor, with in-sample
residuals, on uniformly random items), the random-item mean and the best benchpred method of
each case. MAE in points, the 90 % interval's coverage and width.

    python tools/bench_similar.py --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from bench_peers import BUDGETS, PEERS, POPULATION_BUDGET, POPULATIONS, build_recipe, seed_range
from cell_scoring import interval_metrics, points, rows_by_case
from peer_cells import DATA, PSN, V1, V2, Cell, matrix_of, require_data, split_cell
from tqdm.auto import tqdm
from worker_pool import worker_pool

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.estimators import estimator_from_state

REPO = Path(__file__).resolve().parents[1]
ALL_BUDGETS = (25, 50, 100)
SHOWN = ("random_sampling", "aipw")


def cells_of(matrix: str, n_items: int, seeds: list[int]) -> list[Cell]:
    cells = []
    for seed in seeds:
        for protocol in ("random", "extrapolation"):
            budgets = BUDGETS if matrix in PSN else ALL_BUDGETS
            cells += [Cell(matrix, "all", protocol, b, seed) for b in budgets if b < n_items]
            if matrix not in PSN:
                cells += [
                    Cell(matrix, str(p), protocol, POPULATION_BUDGET, seed) for p in POPULATIONS
                ]
        if POPULATION_BUDGET < n_items:
            cells.append(Cell(matrix, "all", "weak", POPULATION_BUDGET, seed))
    return cells


def measure_cell(task: tuple[Path, Cell]) -> dict[str, Any]:
    """Balanced items read with ``similar`` on one split: MAE, coverage, width, seconds."""
    data, cell = task
    source, target, source_truth, target_truth = split_cell(cell, data)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bundle = build_recipe(cell, source, source_truth, "balanced", "similar")
        estimator = estimator_from_state(bundle.estimator_state())
        value, lower, upper = estimator.estimate_matrix(target.select_items(bundle.item_ids))
    return {
        "key": cell.key,
        "case": [cell.matrix, cell.population, cell.protocol, cell.budget],
        **interval_metrics(value, lower, upper, target_truth),
        "seconds": time.perf_counter() - started,
    }


def cases(rows: list[dict[str, Any]], peers: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per case, means over its seeds of ``similar`` and of the peer suite's methods."""
    out = []
    for case, members in rows_by_case(rows).items():
        entry: dict[str, Any] = {"case": list(case), "seeds": len(members)}
        for key in ("mae", "bias", "coverage", "width"):
            entry[f"similar_{key}"] = float(np.mean([m[key] for m in members]))
        found = [peers[m["key"]] for m in members if m["key"] in peers]
        if len(found) == len(members):
            entry.update(peer_means(found))
        out.append(entry)
    return out


def peer_means(found: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over a case's seeds (``bench/peers.json`` cells): ours' MAE and coverage, the MAE
    of :data:`SHOWN` and of the best benchpred method."""
    means = {
        name: float(np.mean([f[name]["mae"] for f in found]))
        for name in ("ours", *PEERS)
        if all(name in f and f[name].get("mae") is not None for f in found)
    }
    peer_means = {n: v for n, v in means.items() if n in PEERS}
    best = min(peer_means, key=lambda n: peer_means[n]) if peer_means else None
    entry: dict[str, Any] = {f"{n}_mae": means.get(n) for n in ("ours", *SHOWN)}
    entry["ours_coverage"] = float(np.mean([f["ours"]["coverage"] for f in found]))
    entry["best_peer"], entry["best_peer_mae"] = best, peer_means.get(best) if best else None
    return entry


def group_of(case: list[Any]) -> str:
    matrix, population, protocol, _ = case
    family = "v2" if matrix in V2 else "v1" if matrix in V1 else "psn"
    sources = "all sources" if population == "all" else "25-100 sources"
    return f"{family}, {protocol}, {sources}"


def summary(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per family x protocol x population: mean MAE of similar, ours, benchpred's aipw and
    the best peer, and the coverage ranges of similar and ours (ours' from the peer suite)."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        if entry.get("ours_mae") is not None and entry["case"][3] != 10:
            grouped[group_of(entry["case"])].append(entry)
    out = []
    for name, members in sorted(grouped.items()):
        out.append(
            {
                "group": name,
                "cases": len(members),
                "similar_lower": sum(m["similar_mae"] < m["ours_mae"] for m in members),
                "below_aipw": sum(m["similar_mae"] < m["aipw_mae"] for m in members),
                "similar_mae": float(np.mean([m["similar_mae"] for m in members])),
                "ours_mae": float(np.mean([m["ours_mae"] for m in members])),
                "aipw_mae": float(np.mean([m["aipw_mae"] for m in members])),
                "best_peer_mae": float(np.mean([m["best_peer_mae"] for m in members])),
                "similar_coverage": [
                    min(m["similar_coverage"] for m in members),
                    max(m["similar_coverage"] for m in members),
                ],
                "ours_coverage": [
                    min(m["ours_coverage"] for m in members),
                    max(m["ours_coverage"] for m in members),
                ],
            }
        )
    return out


def markdown(entries: list[dict[str, Any]], groups: list[dict[str, Any]], info: dict) -> str:
    lines = [
        "# `similar`: model-similarity AIPW on the peer suite's splits",
        "",
        f"Generated by `{info['command']}` ({info['minutes']:.0f} min, load average "
        f"{info['load_average'][0]:.1f} -> {info['load_average'][1]:.1f}, 2 shared cores). "
        "`build --method balanced --estimator similar` (no choice) on the peer suite's cells, "
        "the held-out models estimated. `ours` (the default build), `aipw` and `random_sampling` "
        "(benchpred) and the best benchpred method of each case are read from "
        "`bench/peers.json`: the same splits, one item draw each. MAE in points, the 90 % "
        "interval's coverage. Budget 10 is left out of the summary.",
        "",
        "| cases | n | similar lower than ours | than aipw | MAE similar | MAE ours | MAE aipw | "
        "MAE best peer | coverage similar | coverage ours |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for g in groups:
        lines.append(
            f"| {g['group']} | {g['cases']} | {g['similar_lower']} | {g['below_aipw']} | "
            f"{g['similar_mae']:.2f} | {g['ours_mae']:.2f} | {g['aipw_mae']:.2f} | "
            f"{g['best_peer_mae']:.2f} | "
            f"{g['similar_coverage'][0]:.2f}-{g['similar_coverage'][1]:.2f} | "
            f"{g['ours_coverage'][0]:.2f}-{g['ours_coverage'][1]:.2f} |"
        )
    lines += [
        "",
        "| matrix | sources | protocol | budget | seeds | similar | cov | width | ours | "
        "aipw | random_sampling | best peer |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for e in sorted(
        entries, key=lambda e: (e["case"][0], e["case"][2], *e["case"][1:2], e["case"][3])
    ):
        matrix, population, protocol, budget = e["case"]
        best = f"{e['best_peer']} {e['best_peer_mae']:.2f}" if e.get("best_peer") else "-"
        lines.append(
            f"| {matrix} | {population} | {protocol} | {budget} | {e['seeds']} | "
            f"{e['similar_mae']:.2f} | {e['similar_coverage']:.2f} | {e['similar_width']:.1f} | "
            f"{points(e.get('ours_mae'))} | {points(e.get('aipw_mae'))} | "
            f"{points(e.get('random_sampling_mae'))} | {best} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--psn-seeds", default="0-9")
    parser.add_argument("--matrices", default=",".join(V2 + V1 + PSN))
    parser.add_argument("--peers", type=Path, default=REPO / "bench" / "peers.json")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    require_data(args.data)
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    tasks = []
    for matrix in args.matrices.split(","):
        seeds = seed_range(args.psn_seeds if matrix in PSN else args.seeds)
        n_items = matrix_of(matrix, args.data)[0].shape[1]
        tasks += [(args.data, cell) for cell in cells_of(matrix, n_items, seeds)]
    with worker_pool(args.jobs) as pool:
        rows = list(tqdm(pool.map(measure_cell, tasks), total=len(tasks), desc="cells"))
    peers = {c["key"]: c["methods"] for c in json.loads(args.peers.read_text())["cells"]}
    entries = cases(rows, peers)
    groups = summary(entries)
    info = {
        "command": "python tools/bench_similar.py " + " ".join(argv or sys.argv[1:]),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "minutes": (time.perf_counter() - started) / 60,
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
    }
    payload = {"info": info, "summary": groups, "cases": entries, "cells": rows}
    write_json_atomic(args.out / "similar.json", payload)
    write_text_if_changed(args.out / "similar.md", markdown(entries, groups, info))
    print(f"wrote {args.out / 'similar.md'} ({len(rows)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
