"""How often the misfit check flags ordinary new models, by source population size.

The check flags a model whose l_z* lies below the 4 % quantile of the source models' l_z*
(``personfit.BUILD_LZ_QUANTILE``). Two ways to score the sources for that quantile:

- ``before``: by the IRT they were fitted with (the rule until 2026-12-03; under 20 source
  models, the N(0, 1) 5 % quantile, -1.645);
- ``now``: each by an IRT fitted without it (``personfit.held_out_lz``), what
  ``personfit.build_spec`` does.

On every matrix of the peer suite but psn (IFEval and MuSR, the six Open LLM Leaderboard v1
matrices), seeds 0-2: a fifth of the models held out at random (the same held-out models for
every population size), sources the first 12, 25, 50, 100 or all of the others (v1: at most
1,000), 50 balanced items (the floor of ``--method auto``) selected on the sources, the
bundle's IRT fitted on them as ``build`` fits it. ``false alarm``: the share of held-out models
(ordinary ones: real leaderboard models like the sources) whose l_z* lies under the threshold;
``random``: the share of 300 simulated responders flagged, each item right at the rate of the
weakest 5 % of sources (the stand-in chance level of a build without ``--chance``), the
check's power against answers unrelated to ability.

    python tools/bench_personfit_sources.py --jobs 2     # about 10 minutes on 2 cores
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
from peer_cells import DATA, V1, V2, load_matrix, require_data
from tqdm.auto import tqdm
from worker_pool import worker_pool

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.irt import fit_source_irt
from lmeval_microbench.personfit import (
    BUILD_LZ_QUANTILE,
    DEFAULT_LZ_THRESHOLD,
    build_spec,
    calibrate_lz_threshold,
    lz,
    person_fit,
)
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import make_selector

REPO = Path(__file__).resolve().parents[1]
POPULATIONS = (12, 25, 50, 100, None)
"""Source models per cell; None: all the others (v1: at most :data:`V1_CAP`)."""
V1_CAP = 1000
ORDER = {"12": 0, "25": 1, "50": 2, "100": 3, "all": 4}
SEEDS = (0, 1, 2)
BUDGET = 50
HELD_OUT_SHARE = 0.2
RESPONDERS = 300
RATES = (
    "held_out_before",
    "held_out_now",
    "held_out_any_now",
    "random_before",
    "random_now",
    "random_any_now",
)
BEFORE_MIN_ROWS = 20
"""Source models with an l_z* the rule before needed to calibrate (else N(0, 1))."""


def before_threshold(irt: Any, values: np.ndarray, ids: list[str]) -> float:
    """The rule before: the quantile of the sources' l_z* under the IRT fitted on them."""
    if np.isfinite(lz(irt, values, ids)).sum() < BEFORE_MIN_ROWS:
        return DEFAULT_LZ_THRESHOLD
    return calibrate_lz_threshold(irt, values, ids, false_alarm=BUILD_LZ_QUANTILE)


def measure_cell(task: tuple[Path, str, int, int | None]) -> dict[str, Any]:
    """Both thresholds, and what they flag, on one matrix x seed x population."""
    data, name, seed, population = task
    values, truth, ids = load_matrix(name, data)
    order = np.random.default_rng(seed).permutation(values.shape[0])
    n_held = round(HELD_OUT_SHARE * values.shape[0])
    held, rest = order[:n_held], order[n_held:]
    rows = rest[: population or (V1_CAP if name in V1 else rest.size)]
    source = ResponseMatrix(values[rows], [f"m{k}" for k in rows], ids)
    subset = make_selector("balanced").select(source, BUDGET, seed=seed, target=truth[rows])
    items = list(subset.item_ids)
    positions = source.item_positions(items)
    irt = fit_source_irt(source, seed=seed)
    start = time.perf_counter()
    spec = build_spec(source, items, truth[rows], None, seed=seed)
    seconds = time.perf_counter() - start
    thresholds = {
        "before": before_threshold(irt, source.values[:, positions], items),
        "now": spec.lz_threshold,
    }
    rates = np.array([spec.chance[item] for item in items])
    responders = np.random.default_rng(seed + 1).random((RESPONDERS, len(items))) < rates
    flagged = {}
    for kind, answers in (("held_out", values[held][:, positions]), ("random", responders)):
        answers = answers.astype(np.float64)
        stats = lz(irt, answers, items)
        stats = stats[np.isfinite(stats)]
        for rule, threshold in thresholds.items():
            flagged[f"{kind}_{rule}"] = float(np.mean(stats < threshold))
        fits = person_fit(
            irt, answers, items, rates, lz_threshold=spec.lz_threshold, alpha=spec.alpha
        )
        flagged[f"{kind}_any_now"] = float(np.mean([fit.flagged for fit in fits]))
    return {
        "matrix": name,
        "group": "v2" if name in V2 else "v1",
        "seed": seed,
        "sources": int(rows.size),
        "population": "all" if population is None else str(population),
        "held_out": int(held.size),
        "threshold_before": thresholds["before"],
        "threshold_now": thresholds["now"],
        "seconds_now": seconds,
        **flagged,
    }


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per matrix group and population: mean and range of each rate over matrices x seeds."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["group"], row["population"])].append(row)
    out = []
    for (group, population), members in groups.items():
        entry: dict[str, Any] = {"group": group, "population": population, "cells": len(members)}
        for key in RATES:
            rates = [m[key] for m in members]
            entry[key] = [float(np.mean(rates)), float(np.min(rates)), float(np.max(rates))]
        for key in ("threshold_before", "threshold_now", "seconds_now"):
            entry[key] = float(np.mean([m[key] for m in members]))
        entry["sources"] = sorted({m["sources"] for m in members})
        out.append(entry)
    return sorted(out, key=lambda e: (e["group"] != "v2", ORDER[e["population"]]))


def _rate(values: list[float]) -> str:
    return f"{100 * values[0]:.1f} ({100 * values[1]:.0f}-{100 * values[2]:.0f})"


def markdown(groups: list[dict[str, Any]], rows: list[dict[str, Any]], info: dict) -> str:
    lines = [
        "## Person fit with few sources: the misfit check's false alarms",
        "",
        f"Generated by `tools/bench_personfit_sources.py`; command: `{info['command']}`; "
        f"{info['minutes']:.1f} min; load average {info['load_average'][0]:.1f} -> "
        f"{info['load_average'][1]:.1f} (2 shared cores). Matrices {', '.join(info['matrices'])}; "
        f"seeds {info['seeds']}; {BUDGET} balanced items; a fifth of the models held out at "
        "random. `before`: the threshold is the 4 % quantile of the source models' l_z* under "
        "the IRT fitted on them (N(0, 1) 5 % quantile under 20 sources); `now`: each source "
        "scored by an IRT fitted without it (5 folds; one model at a time under 25). "
        "`false alarm`: percent of held-out leaderboard models flagged by l_z*, mean over "
        "matrices x seeds (least-most); `any flag now`: flagged by either check (l_z* or the "
        "guessing test), as `microbench estimate` reports them; `random`: percent of "
        "simulated responders (each item right at the weakest 5 % of sources' rate) flagged "
        "by l_z*, and by either check; `s`: seconds the build spends on "
        "the threshold now.",
        "",
        "| matrices | sources | cells | false alarm before | false alarm now | any flag now | "
        "random before | random now | random: any flag now | threshold before | "
        "threshold now | s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for g in groups:
        sources = g["population"]
        if sources == "all":
            sources = f"all ({g['sources'][0]}-{g['sources'][-1]})"
        rates = " | ".join(_rate(g[key]) for key in RATES)
        lines.append(
            f"| {g['group']} | {sources} | {g['cells']} | {rates} | "
            f"{g['threshold_before']:.2f} | {g['threshold_now']:.2f} | {g['seconds_now']:.1f} |"
        )
    lines += [
        "",
        "| matrix | sources | false alarm before | false alarm now | any flag now | "
        "random before | random now | random: any flag now |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    by_case: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_case[(row["matrix"], row["population"])].append(row)
    for (matrix, population), members in sorted(
        by_case.items(), key=lambda kv: (kv[0][0], ORDER[kv[0][1]])
    ):
        means = " | ".join(f"{100 * np.mean([m[key] for m in members]):.1f}" for key in RATES)
        lines.append(f"| {matrix} | {population} | {means} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--matrices", default=",".join(V2 + V1))
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    require_data(args.data)
    matrices = args.matrices.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    tasks = [(args.data, m, s, p) for m in matrices for s in seeds for p in POPULATIONS]
    with worker_pool(args.jobs) as pool:
        rows = list(tqdm(pool.map(measure_cell, tasks), total=len(tasks), desc="cells"))
    info = {
        "command": "python tools/bench_personfit_sources.py " + " ".join(argv or sys.argv[1:]),
        "minutes": (time.perf_counter() - started) / 60,
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "matrices": matrices,
        "seeds": args.seeds,
    }
    groups = summary(rows)
    write_json_atomic(
        args.out / "personfit_sources.json", {"info": info, "summary": groups, "cells": rows}
    )
    write_text_if_changed(args.out / "personfit_sources.md", markdown(groups, rows, info))
    print(f"wrote {args.out / 'personfit_sources.md'} ({len(rows)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
