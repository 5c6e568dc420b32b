"""Every item right: what the shipped micro tasks said, and what the open upper end costs.

A model that answers every item of a bundle's subset right gets an interval open to 100 %
(:mod:`lmeval_microbench.outside.ceiling`). Two parts, both written to bench/ceiling.*:

1. The shipped bundles and pools, read by this script: a model answering every subset item
   right, and an adaptive run answering every asked item right (maximum-information
   selection, 10 / 25 / 50 items), each read with the upper end as the estimator gives it and
   as it is printed now; beside them, how many source models answered the whole subset right,
   their full scores, and the strongest source's full score and subset score (real data).
2. The shipped micro tasks' own setting: the default build (``tools/bench_v1_default.py``)
   on the Open LLM Leaderboard v1 matrices against the whole benchmark's score, random and
   strongest-fifth splits, 50 items, seed 0: held-out models with every item right, their
   coverage and width before and now, and all held-out models' coverage and width.
3. The cost on the peer suite's cells with all source models (25-100 items, random,
   strongest fifth and weakest fifth held out), each rebuilt with the recipe the default
   build chose there as ``tools/bench_placement.py`` does: how many held-out models answered
   every item right, and the coverage and width of all held-out models before and after.

    python tools/bench_ceiling.py --jobs 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from bench_adaptive import load_benchmark, suite_of
from bench_placement import GROUPS, PROTOCOLS, cell_options, rebuilt, run_cells
from bench_v1_default import built
from cell_scoring import interval_metrics, measured_rows
from peer_cells import Cell, require_data
from tqdm.auto import tqdm
from worker_pool import worker_pool

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.adaptive import MaxInfoSelector, pool_state, replay
from lmeval_microbench.adaptive.pool import estimate_pool
from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
from lmeval_microbench.bundle.io import load_bundle
from lmeval_microbench.estimators import estimator_from_state
from lmeval_microbench.outside.ceiling import saturated

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "lmeval_microbench" / "task_configs"
BENCHMARKS = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k", "ifeval", "musr")
ADAPTIVE_ITEMS = (10, 25, 50)


def _points(low: float, high: float, value: float) -> str:
    return f"{100 * value:.1f} [{100 * low:.1f}, {100 * high:.1f}]"


def shipped(shared: Path, bm: str) -> dict[str, Any]:
    """One benchmark's shipped bundle and pool, read for a model with every item right."""
    suite = suite_of(bm)
    bundle = load_bundle(TASKS / suite / bm)
    estimator = estimator_from_state(bundle.estimator_state())
    right = np.ones((1, len(bundle.item_ids)))
    raw = [float(x[0]) for x in estimator.predict_rows(right, 0.9)[:3]]
    printed = estimator.estimate(dict.fromkeys(bundle.item_ids, 1.0), level=0.9)
    matrix, truth, _ = load_benchmark(shared, bm)
    subset = matrix.select_items(list(bundle.item_ids)).values
    full = saturated(subset)
    strongest = int(np.argmax(truth))
    out = {
        "benchmark": bm,
        "items": len(bundle.item_ids),
        "static_before": _points(raw[1], raw[2], raw[0]),
        "static_now": _points(printed.lower, printed.upper, printed.value),
        "sources": int(truth.size),
        "sources_all_right": int(full.sum()),
        "their_scores": [float(truth[full].min()), float(truth[full].max())] if full.any() else [],
        "strongest_score": float(truth[strongest]),
        "strongest_subset": float(np.mean(subset[strongest])),
    }
    pool = pool_state(load_bundle(SHIPPED_POOLS / suite / bm))
    run = replay(
        pool.params,
        np.ones((1, len(pool.item_ids))),
        selector=MaxInfoSelector(),
        max_items=max(ADAPTIVE_ITEMS),
    )
    adaptive = {}
    for n in ADAPTIVE_ITEMS:
        found = estimate_pool(pool, {pool.item_ids[k]: 1.0 for k in run.order[0, :n]})
        adaptive[str(n)] = _points(found.lower, found.upper, found.value)
    out["adaptive_now"] = adaptive
    return out


V1_BUILDS = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")
V1_PROTOCOLS = ("random", "extrapolation")


def measure_build(task: tuple[Path, str, str, int, int, None]) -> dict[str, Any]:
    """One default build of ``tools/bench_v1_default.py``: its held-out models' intervals as
    the estimator gives them and as printed, over all of them and over those with every item
    right."""
    split, estimator, answers, recipe = built(task)
    truth = split.target_truth
    before = estimator.predict_rows(answers.values, 0.9)[:3]
    now = estimator.estimate_matrix(answers)
    full = saturated(answers.values)

    def read(found: tuple[np.ndarray, ...], rows: np.ndarray) -> dict[str, float] | None:
        return interval_metrics(*(x[rows] for x in found), truth[rows]) if rows.any() else None

    everyone = np.ones(truth.size, dtype=bool)
    return {
        "case": list(task[1:3]),
        "recipe": recipe,
        "models": int(truth.size),
        "all_right": int(full.sum()),
        "all_right_above_sources": int((full & (truth > split.source_truth.max())).sum()),
        "all_right_truths": [float(truth[full].min()), float(truth[full].max())]
        if full.any()
        else [],
        "before": read(before, everyone),
        "now": read(now, everyone),
        "all_right_before": read(before, full),
        "all_right_now": read(now, full),
    }


def measure_cell(task: tuple[Path, Cell, dict[str, Any]]) -> dict[str, Any]:
    """One peer-suite cell rebuilt with ``ours``'s recipe: coverage and width of its held-out
    models with the upper end as the estimator gives it and as printed (opened above)."""
    cell = task[1]
    estimator, answers, source_truth, truth = rebuilt(task)
    before = estimator.predict_rows(answers.values, 0.9)[:3]
    now = estimator.estimate_matrix(answers)
    full = saturated(answers.values)
    return {
        "key": cell.key,
        "case": [cell.matrix, cell.protocol, cell.budget],
        "models": int(truth.size),
        "all_right": int(full.sum()),
        "all_right_above_sources": int((full & (truth > source_truth.max())).sum()),
        "before": interval_metrics(*before, truth),
        "now": interval_metrics(*now, truth),
    }


def summaries(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per matrix group x protocol: held-out models, those with every item right, and the
    mean coverage and width over cells before and now."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        matrix, protocol, _ = row["case"]
        group = next(g for g, members in GROUPS.items() if matrix in members)
        grouped[(group, protocol)].append(row)
    out = []
    for group in GROUPS:
        for protocol in PROTOCOLS:
            members = grouped.get((group, protocol), [])
            if not members:
                continue
            entry = {"group": group, "protocol": protocol, "cells": len(members)}
            for key in ("models", "all_right", "all_right_above_sources"):
                entry[key] = int(sum(r[key] for r in members))
            for when in ("before", "now"):
                for metric in ("coverage", "width"):
                    entry[f"{metric}_{when}"] = float(np.mean([r[when][metric] for r in members]))
            entry["cells_changed"] = sum(r["all_right"] > 0 for r in members)
            out.append(entry)
    return out


def _cov_width(found: dict[str, float] | None) -> str:
    return "-" if found is None else f"{found['coverage']:.2f} / {found['width']:.1f}"


def _score_range(scores: list[float]) -> str:
    """A [lowest, highest] pair of full scores (fractions) in percent; "-" when empty."""
    return f"{100 * scores[0]:.1f}-{100 * scores[1]:.1f}" if scores else "-"


def build_lines(builds: list[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        "## The shipped micro tasks' setting: v1, the whole benchmark's score",
        "",
        "The default build of `tools/bench_v1_default.py` (seed 0, 50 items) on each v1 "
        "matrix, its held-out models read against the whole benchmark's score (the "
        "leaderboard's), as the shipped micro tasks are. Coverage / width in points, before "
        "the open end and now.",
        "",
        "| benchmark | protocol | recipe | held-out models | every item right (above every "
        "source) | their scores | theirs: before | theirs: now | all: before | all: now |",
        "|---|---|---|---:|---:|---|---|---|---|---|",
    ]
    for b in builds:
        scores = _score_range(b["all_right_truths"])
        lines.append(
            f"| {b['case'][0]} | {b['case'][1]} | {b['recipe']} | {b['models']} | "
            f"{b['all_right']} ({b['all_right_above_sources']}) | {scores} | "
            f"{_cov_width(b['all_right_before'])} | {_cov_width(b['all_right_now'])} | "
            f"{_cov_width(b['before'])} | {_cov_width(b['now'])} |"
        )
    return lines


def markdown(
    pools: list[dict[str, Any]], groups: list[dict[str, Any]], info: dict[str, Any]
) -> str:
    rendered = f"; re-rendered from its JSON by `{info['rendered']}`" if "rendered" in info else ""
    lines = [
        "# Every item right: the open upper end",
        "",
        f"Generated by `{info['command']}`; {info['minutes']:.0f} min, load average "
        f"{info['load_average'][0]:.1f} -> {info['load_average'][1]:.1f} (2 shared cores"
        f"{rendered}). A model whose every scored answer is right gets an interval open to "
        "100 % (`outside/ceiling.py`): nothing in its answers bounds it above.",
        "",
        "## The shipped micro tasks and pools, for a model with every item right",
        "",
        "`before`: the interval as the estimator gives it (what was printed before the open "
        "end); `now`: as printed. `sources all right`: source models of the real matrix "
        "(`../shared/data`) whose answers on the subset are all right, and their full scores.",
        "",
        "| benchmark | items | before | now | sources all right | their full scores | "
        "strongest source: full / subset | adaptive now (10 / 25 / 50 items, every asked "
        "item right) |",
        "|---|---:|---|---|---:|---|---|---|",
    ]
    for p in pools:
        scores = _score_range(p["their_scores"])
        adaptive = " / ".join(p["adaptive_now"][str(n)] for n in ADAPTIVE_ITEMS)
        lines.append(
            f"| {p['benchmark']} | {p['items']} | {p['static_before']} | {p['static_now']} | "
            f"{p['sources_all_right']} of {p['sources']} | {scores} | "
            f"{100 * p['strongest_score']:.1f} / {100 * p['strongest_subset']:.0f} % | "
            f"{adaptive} |"
        )
    lines += build_lines(info["v1_builds"])
    lines += [
        "",
        "## What it costs on the peer suite's held-out models",
        "",
        "The peer suite's cells with all source models, 25/50/100 items (weakest fifth: 50), "
        "each rebuilt with the default's recipe as `tools/bench_placement.py` does; means over "
        "cells. `above the sources`: held-out models with every item right whose full score "
        "lies above every source's.",
        "",
        "| matrices | protocol | cells | held-out models | every item right | of them above "
        "the sources | cells with one | coverage before -> now | width before -> now |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for g in groups:
        lines.append(
            f"| {g['group']} | {g['protocol']} | {g['cells']} | {g['models']} | "
            f"{g['all_right']} | {g['all_right_above_sources']} | {g['cells_changed']} | "
            f"{g['coverage_before']:.3f} -> {g['coverage_now']:.3f} | "
            f"{g['width_before']:.1f} -> {g['width_now']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """All three parts measured (the peer-suite cells are the slow one)."""
    require_data(args.data)
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    pools = [shipped(args.data, bm) for bm in tqdm(BENCHMARKS, desc="shipped")]
    builds = [(args.data, m, p, 50, 0, None) for m in V1_BUILDS for p in V1_PROTOCOLS]
    with worker_pool(args.jobs) as pool:
        v1 = list(tqdm(pool.map(measure_build, builds), total=len(builds), desc="v1 builds"))
    info, rows = run_cells(args, measure_cell, "bench_ceiling")
    info["minutes"] = (time.perf_counter() - started) / 60
    info["load_average"][0] = load_start
    return {**info, "shipped": pools, "v1_builds": v1}, rows


def main(argv: list[str] | None = None) -> int:
    args = cell_options(__doc__.splitlines()[0], "ceiling.md").parse_args(argv)
    args.matrices = args.matrices.split(",")
    info, rows = measured_rows(args, argv, "bench_ceiling", args.out / "ceiling.json", measure)
    groups = summaries(rows)
    write_json_atomic(args.out / "ceiling.json", {"info": info, "groups": groups, "cells": rows})
    write_text_if_changed(args.out / "ceiling.md", markdown(info["shipped"], groups, info))
    print(f"wrote {args.out / 'ceiling.md'} ({len(rows)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
