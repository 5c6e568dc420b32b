"""Few source models: the default build beside the floor and the fallback, bench/small_sources.*.

A user's own benchmark may have been answered by 10-20 models. There ``--method auto`` can
hardly cross-validate a choice (with 10 models whose truth is the matrix mean it cannot, and
falls back to ``auto.FALLBACK``), and a selection that looks at the sources' answers can
hardly have its optimism measured by re-selecting folds (:mod:`lmeval_microbench.crossfit`).
This script cuts the peer suite's real matrices to 10, 15 and 20 source models (the same
splits as ``tools/bench_peers.py``: 20 % of the models held out at random or the strongest
20 %, sources drawn from the rest) and builds, on each cell:

* ``default``: what ``microbench build`` does (``--method auto``), then ``estimate``;
* ``floor``: ``--method balanced --estimator guarded``, the floor of the choice;
* ``fallback``: ``--method stratified --estimator blend``, what a matrix too small to
  choose on gets where the truth is the matrix mean (``auto.FALLBACK``);
* ``guarded``: ``--method stratified --estimator guarded``, the fallback before the blend
  (and still where the truth is another score, ``auto.FALLBACK_CALIBRATED``).

The psn MMLU and BBH blocks have 12 models, so their cells have 10 sources and 2 targets
(more seeds). The ``score`` cells read the six v1 matrices against each model's score on the
whole benchmark (``leaderboard_bench.load_openllm``), which is not the mean over the matrix
items, with 22 or 28 source models: there a fold needs 20 training models (a calibration
line), so the choice's margin starts from 20, not 10 (``default`` and ``floor`` only: the
fallback's ``blend`` is for the matrix mean). Errors in points; coverage of the 90 %
interval (mean over cells, and the tenth percentile of the cells' coverage: with 10 sources
the interval rests on 10 residuals, so it is loose in one cell and tight in the next).

    python tools/bench_small_sources.py --jobs 2       # about 15 minutes on 2 idle cores
    python tools/bench_small_sources.py --jobs 2 --populations 10 --scored-seeds 0 \
        --stem small_sources_penalty                   # the 10-source cells only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections import Counter
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm
from worker_pool import worker_pool

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_peers import build_ours, build_recipe
from cell_scoring import interval_metrics
from leaderboard_bench import load_openllm
from peer_cells import (
    DATA,
    PSN,
    V1,
    V1_ALL,
    V2,
    Cell,
    cell_rows,
    matrix_of,
    require_data,
    split_rows,
)

from lmeval_microbench._io import write_text_if_changed
from lmeval_microbench.auto import FALLBACK, FALLBACK_CALIBRATED, FLOOR
from lmeval_microbench.estimators import estimator_from_state
from lmeval_microbench.truth import complete_models

REPO = Path(__file__).resolve().parents[1]
POPULATIONS = ("10", "15", "20")
PROTOCOLS = ("random", "extrapolation")
BUDGETS = (25, 50)
RECIPES = {"floor": FLOOR, "fallback": FALLBACK, "guarded": FALLBACK_CALIBRATED}
SCORED_POPULATIONS = ("22", "28")
"""Source models of the ``score`` cells (truth: the whole benchmark's score)."""
SCORED = "score"
"""Key prefix of those cells."""


def cells(seeds: int, psn_seeds: int, populations: tuple[str, ...] = POPULATIONS) -> list[Cell]:
    out = [
        Cell(matrix, population, protocol, budget, seed)
        for matrix in (*V1, *V2)
        for population in populations
        for protocol in PROTOCOLS
        for budget in BUDGETS
        for seed in range(seeds)
    ]
    out += [
        Cell(matrix, "all", protocol, budget, seed)
        for matrix in PSN
        for protocol in PROTOCOLS
        for budget in BUDGETS
        for seed in range(psn_seeds)
    ]
    return out


def scored_cells(seeds: int) -> list[Cell]:
    """The v1 matrices against the whole benchmark's score, 22 and 28 source models."""
    return [
        Cell(matrix, population, protocol, budget, seed)
        for matrix in V1
        for population in SCORED_POPULATIONS
        for protocol in PROTOCOLS
        for budget in BUDGETS
        for seed in range(seeds)
    ]


@lru_cache(maxsize=1)
def scored_matrix(name: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A v1 matrix on its models with a whole-benchmark score, that score (read once per
    worker while its cells share a matrix, as :func:`peer_cells.matrix_of`)."""
    responses, truth, _ = load_openllm(DATA / "openllm_v1", name)
    responses, truth = complete_models(responses, truth)
    return responses.values, truth, list(responses.item_ids)


def measure(task: tuple[str, Cell]) -> dict[str, Any]:
    """Every recipe's error, coverage and width on one cell's held-out models (``score``
    cells: the default and the floor)."""
    kind, cell = task
    scored = kind == SCORED
    values, truth, ids = scored_matrix(cell.matrix) if scored else matrix_of(cell.matrix, DATA)
    split = split_rows(values, truth, ids, cell_rows(truth, cell, V1_ALL if scored else len(truth)))
    source, target, source_truth, target_truth = split
    key = f"{SCORED}:{cell.key}" if scored else cell.key
    out: dict[str, Any] = {"key": key, "sources": source.n_models}
    recipes = {"floor": FLOOR} if scored else RECIPES
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bundle, out["default_recipe"] = build_ours("ours", cell, split)
        out["default"] = _metrics(bundle, target, target_truth)
        for name, recipe in recipes.items():
            bundle = build_recipe(cell, source, source_truth, recipe.method, recipe.estimator)
            out[name] = _metrics(bundle, target, target_truth)
    return out


def _metrics(bundle: Any, target: Any, truth: np.ndarray) -> dict[str, float]:
    estimator = estimator_from_state(bundle.estimator_state())
    return interval_metrics(*estimator.estimate_matrix(target.select_items(bundle.item_ids)), truth)


def group_of(key: str) -> tuple[str, str]:
    scored = key.startswith(f"{SCORED}:")
    matrix, population, protocol, _, _ = key.removeprefix(f"{SCORED}:").split("/")
    sources = "10 (psn)" if matrix in PSN else population
    return f"{sources} ({SCORED})" if scored else sources, protocol


def summary(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(group_of(r["key"]), []).append(r)
    rows = []
    for (sources, protocol), members in sorted(groups.items()):
        row: dict[str, Any] = {"sources": sources, "protocol": protocol, "cells": len(members)}
        for name in ("default", *RECIPES):
            if name not in members[0]:
                continue
            coverage = [m[name]["coverage"] for m in members]
            row[name] = {
                "mae": float(np.mean([m[name]["mae"] for m in members])),
                "coverage": float(np.mean(coverage)),
                "coverage_p10": float(np.quantile(coverage, 0.1)),
                "width": float(np.mean([m[name]["width"] for m in members])),
            }
        row["default_is"] = _default_is(members)
        rows.append(row)
    return rows


def _default_is(members: list[dict[str, Any]]) -> dict[str, int]:
    labels = {f"{r.method}+{r.estimator}": name for name, r in RECIPES.items()}
    return dict(Counter(labels.get(m["default_recipe"], "chosen") for m in members))


def render(results: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [
        "## Few source models: the default beside the floor and the fallback",
        "",
        f"Generated by `tools/bench_small_sources.py`; command: `{info['command']}`; "
        f"{info['seconds']:.0f} s; load average {info['load'][0]} -> {info['load'][1]} "
        "(2 shared cores). The peer suite's matrices cut to 10, 15 or 20 source models "
        "(v1 six and v2 two: 4 seeds x budgets 25 and 50; psn MMLU and BBH: 10 sources, 10 "
        "seeds), 20 % of the models held out at random or the strongest 20 %; `(score)` rows: "
        "the six v1 matrices against each model's score on the whole benchmark (not the "
        "matrix mean) with 22 or 28 source models, 3 seeds. `default`: "
        "`microbench build` as shipped; "
        + "; ".join(
            f"`{name}`: `--method {r.method} --estimator {r.estimator}`"
            for name, r in RECIPES.items()
        )
        + ". `fallback` is what a matrix too small to choose on gets where the truth is the "
        "matrix mean, `guarded` the fallback before the blend. MAE in points; `cov`: mean over "
        "cells of the 90 % interval's coverage, `p10`: the tenth percentile of the cells' "
        "coverage.",
        "",
        "| sources | protocol | cells | "
        + " | ".join(f"{name} MAE | cov | p10 | width" for name in ("default", *RECIPES))
        + " | default was |",
        "|---|---|---:|" + "---:|" * (4 * (1 + len(RECIPES))) + "---|",
    ]
    for r in summary(results):
        cols = []
        for name in ("default", *RECIPES):
            m = r.get(name)
            cols.append(
                f"{m['mae']:.2f} | {m['coverage']:.2f} | {m['coverage_p10']:.2f} | {m['width']:.1f}"
                if m
                else "- | - | - | -"
            )
        was = ", ".join(f"{k} {v}" for k, v in sorted(r["default_is"].items()))
        lines.append(
            f"| {r['sources']} | {r['protocol']} | {r['cells']} | "
            + " | ".join(cols)
            + f" | {was} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--psn-seeds", type=int, default=10)
    parser.add_argument("--scored-seeds", type=int, default=3)
    parser.add_argument(
        "--populations",
        default=",".join(POPULATIONS),
        help="source populations of the v1/v2 cells (the psn cells always have 10)",
    )
    parser.add_argument(
        "--stem", default="small_sources", help="report file names: STEM.md and STEM.json"
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    require_data(DATA)
    populations = tuple(args.populations.split(","))
    todo = [("mean", c) for c in cells(args.seeds, args.psn_seeds, populations)]
    todo += [(SCORED, c) for c in scored_cells(args.scored_seeds)]
    todo.sort(key=lambda t: (t[0], t[1].matrix))  # one matrix per worker at a time: caches hold
    start, load = time.perf_counter(), [round(os.getloadavg()[0], 2)]
    with worker_pool(args.jobs) as pool:
        results = list(tqdm(pool.map(measure, todo, chunksize=8), total=len(todo), unit="cell"))
    load.append(round(os.getloadavg()[0], 2))
    info = {
        "command": "python tools/bench_small_sources.py " + " ".join(argv or sys.argv[1:]),
        "seconds": time.perf_counter() - start,
        "load": load,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {"info": info, "summary": summary(results), "cells": results}
    write_text_if_changed(
        args.out / f"{args.stem}.json", json.dumps(payload, indent=1, allow_nan=False) + "\n"
    )
    write_text_if_changed(args.out / f"{args.stem}.md", render(results, info))


if __name__ == "__main__":
    main()
