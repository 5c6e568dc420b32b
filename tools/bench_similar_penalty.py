"""The ``similar`` reading's ridge penalty: fixed, or chosen per model: bench/similar_penalty.*.

The reading regresses one model's answers on the source models' answers over the asked
items (:mod:`lmeval_microbench.outside.readings.similar`). Its penalty was chosen for each
model among :data:`~lmeval_microbench.outside.readings.similar.ALPHAS` by the least
leave-one-item-out error on its 25-50 asked items. This script scores that choice beside
fixed penalties (units of the mean kernel diagonal) on the peer suite's splits
(:mod:`bench_peers`: 20 % of the models held out at random or the strongest 20 %), with the
items of the small-matrix fallback (``stratified``, :data:`lmeval_microbench.auto.FALLBACK`):

* 10 source models: the six v1 matrices and IFEval and MuSR, 10 seeds, and the psn MMLU and
  BBH blocks (10 sources, 2 held-out models), 10 seeds: where the fallback reads with it; and
  the psn matrix's nine other whole benchmarks, which nothing here was chosen on (the held-out
  check of ``tools/bench_psn_held_out.py``), 10 seeds;
* 50 source models, 6 seeds; every source model of IFEval and MuSR (278), 6 seeds; 1,000 of
  the v1 matrices' (the peer suite's cap), 3 seeds: where ``--estimator similar`` reads with
  it when asked.

Budgets 25 and 50. Only the point estimate is scored here (MAE in points, mean over cells):
``tools/bench_similar.py`` and ``tools/bench_small_sources.py`` measure the estimator and the
fallback, intervals included, as shipped.

    python tools/bench_similar_penalty.py          # about a minute on 2 cores
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_balanced_guarded import matrix_of
from bench_peers import DATA, PSN, PSN_BLOCKS, V1, V1_ALL, V2, Cell, cell_rows

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.outside.readings.similar import ALPHAS, PENALTY, similarity_aipw
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import make_selector

REPO = Path(__file__).resolve().parents[1]
FIXED = (1.0, 2.0, 3.0, 5.0, 10.0)
"""Fixed penalties scored beside the per-model choice."""
PER_MODEL = "per model"
BUDGETS = (25, 50)
PROTOCOLS = ("random", "extrapolation")
GROUPS = {
    "10 sources (v1, v2)": ([*V1, *V2], "10", 10),
    "10 sources (psn)": (list(PSN), "all", 10),
    "10 sources (psn, nine others)": ([b for b in PSN_BLOCKS if b not in PSN], "all", 10),
    "50 sources (v1, v2)": ([*V1, *V2], "50", 6),
    "278 sources (v2)": (list(V2), "all", 6),
    "1000 sources (v1)": (list(V1), "all", 3),
}
"""Group: (matrices, population of the cell, seeds)."""


def variants() -> dict[str, tuple[float, ...]]:
    """Each scored penalty rule by its report name."""
    return {PER_MODEL: ALPHAS, **{f"{p:g}": (p,) for p in FIXED}}


def measure(cell: Cell) -> dict[str, Any]:
    """Every penalty rule's MAE (points) on one cell's held-out models."""
    values, truth, ids = matrix_of(cell.matrix, DATA)
    rows = cell_rows(truth, cell, V1_ALL)
    source = ResponseMatrix(values[rows[0]], [f"m{r}" for r in rows[0]], ids)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        subset = make_selector("stratified").select(source, cell.budget, seed=cell.seed)
    asked = source.item_positions(subset.item_ids)
    rest = np.setdiff1d(np.arange(len(ids)), asked)
    sources, targets = values[rows[0]], values[rows[1]]
    out: dict[str, Any] = {"key": cell.key, "sources": int(rows[0].size)}
    for name, penalties in variants().items():
        estimate, _ = similarity_aipw(
            sources[:, asked].T, sources[:, rest].T, targets[:, asked], penalties=penalties
        )
        out[name] = 100 * float(np.mean(np.abs(estimate - truth[rows[1]])))
    return out


def cells() -> dict[str, list[Cell]]:
    return {
        group: [
            Cell(matrix, population, protocol, budget, seed)
            for matrix in matrices
            for protocol in PROTOCOLS
            for budget in BUDGETS
            for seed in range(seeds)
        ]
        for group, (matrices, population, seeds) in GROUPS.items()
    }


def summary(results: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    rows = []
    for group, members in results.items():
        by_protocol: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for m in members:
            by_protocol[m["key"].split("/")[2]].append(m)
        for protocol, found in by_protocol.items():
            means = {n: float(np.mean([f[n] for f in found])) for n in variants()}
            rows.append({"group": group, "protocol": protocol, "cells": len(found), **means})
    return rows


def render(rows: list[dict[str, Any]], info: dict[str, Any]) -> str:
    names = list(variants())
    lines = [
        "# `similar`: the ridge penalty, fixed or chosen per model",
        "",
        f"Generated by `{info['command']}` ({info['seconds']:.0f} s, load average "
        f"{info['load'][0]} -> {info['load'][1]}, 2 shared cores). The reading's point "
        "estimate on the peer suite's splits with the fallback's `stratified` items, budgets "
        "25 and 50; MAE in points, mean over cells. `per model`: the penalty of "
        f"{list(ALPHAS)} with the least leave-one-item-out error on the model's asked items "
        "(the rule before); a number: that penalty for every model, in units of the mean "
        f"kernel diagonal (shipped: {PENALTY:g}). Intervals: `bench/similar.md` (the "
        "estimator as built); the fallback as built with it: `bench/small_sources.md` (its "
        "10-source rows) and `bench/peers_penalty.md`.",
        "",
        "| sources | protocol | cells | " + " | ".join(names) + " |",
        "|---|---|---:|" + "---:|" * len(names),
    ]
    for r in rows:
        best = min(r[n] for n in names)
        cols = [f"**{r[n]:.2f}**" if r[n] == best else f"{r[n]:.2f}" for n in names]
        lines.append(
            f"| {r['group']} | {r['protocol']} | {r['cells']} | " + " | ".join(cols) + " |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    started, load = time.perf_counter(), round(os.getloadavg()[0], 2)
    results = {
        group: [measure(c) for c in tqdm(group_cells, desc=group)]
        for group, group_cells in cells().items()
    }
    info = {
        "command": "python tools/bench_similar_penalty.py",
        "seconds": time.perf_counter() - started,
        "load": [load, round(os.getloadavg()[0], 2)],
    }
    rows = summary(results)
    write_json_atomic(
        args.out / "similar_penalty.json", {"info": info, "summary": rows, "cells": results}
    )
    write_text_if_changed(args.out / "similar_penalty.md", render(rows, info))


if __name__ == "__main__":
    main()
