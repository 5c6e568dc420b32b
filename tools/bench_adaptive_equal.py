"""Adaptive runs beside static items at the same item count: bench/adaptive_equal.{md,json}.

``bench/adaptive.md`` sets each adaptive run beside the shipped static recipe at that
recipe's own budget: 249 items on GSM8K, 25 on HellaSwag, 100 on TruthfulQA and Winogrande,
50 on the others. Whether a user with 10, 25 or 50 items to spend should run them adaptively
or as fixed items it does not say. Here, on the same splits and the same target models as
``bench/adaptive.json`` (its seed and target count; :func:`bench_adaptive.run_protocol`),
each pool's benchmark gets, fitted on the split's sources only:

- the shipped micro task's reading at 10, 25 and 50 items: its selection method (from
  ``bench/defaults.json`` for v1, from the task's bundle for v2) and the estimator its bundle
  reads by default (``guarded`` on every shipped task; GSM8K's task asks every item, here
  random items);
- the default build, ``microbench build --budget 50`` with ``--method auto`` (the choice by
  cross-validation on random and extrapolation folds, then the chosen recipe).

The adaptive numbers (max-information selection) are read from ``bench/adaptive.json``,
not replayed. Its own static column is ``bench/defaults.json``'s recipe with that recipe's
estimator (``kridge`` or ``ridge`` on v1) at the recipe's budget, not what the shipped v1
tasks read with. A check that the splits are the same ones: that recipe refitted here must
reproduce its MAE in ``bench/adaptive.json`` (``check`` in the JSON; the tool stops where it
does not).

    python tools/bench_adaptive_equal.py --jobs 2
    python tools/bench_adaptive_equal.py --benchmarks hellaswag --protocols extrapolation
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from bench_adaptive import BUDGETS, PROTOCOLS, first_split, load_benchmark, static_recipe, suite_of
from cell_scoring import interval_metrics
from tqdm.auto import tqdm
from worker_pool import worker_pool

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.auto import choose_recipe
from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle.io import load_bundle
from lmeval_microbench.estimators import estimator_from_state

REPO = Path(__file__).resolve().parents[1]
AUTO_BUDGET = 50
LEVEL = 0.1
"""Points within which a static reading counts as level with the adaptive one."""
TASKS = REPO / "lmeval_microbench" / "task_configs"


def shipped_estimator(bm: str) -> str:
    """The estimator the shipped micro task's bundle reads with by default."""
    return load_bundle(TASKS / suite_of(bm) / bm / "bundle.json").default_estimator


def built_reading(
    split: Any,
    rows: np.ndarray,
    method: str,
    estimator: str,
    budget: int,
    seed: int,
    choice: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``microbench build --method M --estimator E --budget B`` on the split's sources (with
    the ``choice`` record of ``--method auto`` its interval factor applies), scored on the
    target rows: MAE, coverage and width in the report's units."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bundle = build_bundle(
            split.source,
            split.source_truth,
            name="adaptive-equal",
            benchmark="adaptive-equal",
            method=method,
            budget=budget,
            seed=seed,
            estimators=[estimator],
            default_estimator=estimator,
            choice=choice,
        )
    target = split.target.select_models([split.target.model_ids[r] for r in rows])
    reader = estimator_from_state(bundle.estimator_state())
    value, lower, upper = reader.estimate_matrix(target.select_items(bundle.item_ids))
    found = interval_metrics(value, lower, upper, split.target_truth[rows])
    return {
        "mae": found["mae"],
        "coverage90": found["coverage"],
        "width90": found["width"],
        "recipe": f"{method}+{estimator}",
        "items": bundle.budget,
        "seconds": round(time.perf_counter() - start, 1),
    }


def default_build(split: Any, rows: np.ndarray, budget: int, seed: int) -> dict[str, Any]:
    """``microbench build --budget B`` (``--method auto``): the choice on the split's sources,
    then its recipe built and read as :func:`built_reading` does."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        choice = choose_recipe(
            split.source, split.source_truth, budgets=[budget], seed=seed, progress=False
        )
    record = choice.as_record()
    return built_reading(split, rows, choice.method, choice.estimator, budget, seed, record)


def measure(task: tuple[Path, str, str, dict[str, Any], float]) -> dict[str, Any]:
    """One benchmark and protocol: the check, the task's reading at each item count, the
    default build."""
    shared, bm, protocol, config, recorded_mae = task
    matrix, truth, recipe = load_benchmark(shared, bm)
    split = first_split(matrix, truth, protocol, config["seed"])
    rows = np.random.default_rng(config["seed"]).permutation(split.target.n_models)
    rows = rows[: config["max_targets"]]
    check = static_recipe(split, recipe, rows)["mae"]
    if abs(check - recorded_mae) > 1e-6:
        raise SystemExit(
            f"{bm} {protocol}: the static recipe refitted gives MAE {check:.4f}, "
            f"bench/adaptive.json has {recorded_mae:.4f}: not the same split or targets"
        )
    estimator, seed = shipped_estimator(bm), config["seed"]
    return {
        "benchmark": bm,
        "protocol": protocol,
        "check": check,
        "recipe": f"{recipe['method']} + {estimator}",
        "static": {
            str(n): built_reading(split, rows, recipe["method"], estimator, n, seed)
            for n in BUDGETS
        },
        "default_build": default_build(split, rows, AUTO_BUDGET, seed),
    }


def tasks_of(adaptive: dict[str, Any], args: argparse.Namespace) -> list[tuple]:
    """(data, benchmark, protocol, config, shipped static MAE) for each replayed protocol."""
    wanted = args.benchmarks.split(",") if args.benchmarks else list(adaptive["results"])
    protocols = args.protocols.split(",")
    return [
        (args.shared, bm, p, adaptive["config"], per[p]["static_same_split"]["mae"])
        for bm, per in adaptive["results"].items()
        if bm in wanted
        for p in protocols
        if p in per
    ]


def rows_of(found: list[dict[str, Any]], adaptive: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per benchmark, protocol and item count: adaptive beside the static readings."""
    rows = []
    for cell in found:
        per = adaptive["results"][cell["benchmark"]]
        for n in BUDGETS:
            run = per[cell["protocol"]]["maxinfo"][str(n)]
            static = cell["static"][str(n)]
            auto = cell["default_build"] if n == AUTO_BUDGET else None
            rows.append(
                {
                    "benchmark": cell["benchmark"],
                    "protocol": cell["protocol"],
                    "items": n,
                    "recipe": cell["recipe"],
                    "adaptive": {k: run[k] for k in ("mae", "coverage90", "width90")},
                    "static": {k: static[k] for k in ("mae", "coverage90", "width90")},
                    "default_build": auto,
                }
            )
    return rows


def tally(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per protocol and item count: pools where the adaptive run erred at most the shipped
    task's reading + :data:`LEVEL` at the same count (and, at 50, the default build's)."""
    out = []
    for protocol in PROTOCOLS:
        for n in BUDGETS:
            group = [r for r in rows if r["protocol"] == protocol and r["items"] == n]
            if not group:
                continue
            level = [r["adaptive"]["mae"] <= r["static"]["mae"] + LEVEL for r in group]
            entry = {"protocol": protocol, "items": n, "pools": len(group)}
            entry["level_with_task"] = int(sum(level))
            entry["adaptive_mae"] = float(np.mean([r["adaptive"]["mae"] for r in group]))
            entry["task_mae"] = float(np.mean([r["static"]["mae"] for r in group]))
            autos = [r for r in group if r["default_build"]]
            if autos:
                entry["level_with_default"] = int(
                    sum(r["adaptive"]["mae"] <= r["default_build"]["mae"] + LEVEL for r in autos)
                )
                entry["default_mae"] = float(np.mean([r["default_build"]["mae"] for r in autos]))
            out.append(entry)
    return out


def _cell(m: dict[str, Any] | None) -> str:
    return "-" if m is None else f"{m['mae']:.2f} / {m['coverage90']:.2f} / {m['width90']:.1f}"


def markdown(report: dict[str, Any]) -> str:
    info = report["info"]
    lines = [
        "# Adaptive runs and static items at the same item count",
        "",
        f"Generated by `tools/bench_adaptive_equal.py`; command: `{info['command']}`; "
        f"{info['seconds']} s; load average {info['load'][0]} -> {info['load'][1]} (2 shared "
        "cores). The splits and target models of `bench/adaptive.json` "
        f"({info['adaptive_command']}); its adaptive numbers (max-information selection) are "
        "read, not replayed. Beside them, fitted on each split's sources: the shipped micro "
        "task's selection method read with its bundle's default estimator (`guarded`) at the "
        "same item count, and the default "
        f"build (`microbench build --budget {AUTO_BUDGET}`, `--method auto`). Each cell: MAE "
        "in points / 90 % coverage / width in points. Check: the static recipe of "
        "`bench/adaptive.json` (`bench/defaults.json`'s method and estimator at its "
        "budget) refitted here reproduced that file's MAE (to 1e-6) on every split.",
        "",
        f"## Adaptive level with static items (MAE at most theirs + {LEVEL} points)",
        "",
        "| protocol | items | pools | level with the task's reading | mean MAE adaptive "
        "| task's reading | level with the default build | default build |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in report["tally"]:
        default = (
            f"{t['level_with_default']}/{t['pools']} | {t['default_mae']:.2f}"
            if "default_mae" in t
            else "- | -"
        )
        lines.append(
            f"| {t['protocol']} | {t['items']} | {t['pools']} | "
            f"{t['level_with_task']}/{t['pools']} | {t['adaptive_mae']:.2f} | "
            f"{t['task_mae']:.2f} | {default} |"
        )
    lines += [
        "",
        "## Every pool",
        "",
        "| benchmark | protocol | items | adaptive | shipped task's method + estimator "
        "| its reading | default build | its recipe |",
        "|---|---|---:|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        auto = r["default_build"]
        lines.append(
            f"| {r['benchmark']} | {r['protocol']} | {r['items']} | {_cell(r['adaptive'])} | "
            f"{r['recipe']} | {_cell(r['static'])} | {_cell(auto)} | "
            f"{auto['recipe'] if auto else '-'} |"
        )
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO / ".." / "shared" / "data")
    parser.add_argument("--adaptive", type=Path, default=REPO / "bench" / "adaptive.json")
    parser.add_argument("--benchmarks", default="", help="default: every one in --adaptive")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    adaptive = json.loads(args.adaptive.read_text())
    tasks = tasks_of(adaptive, args)
    start, load_start = time.perf_counter(), os.getloadavg()[0]
    with worker_pool(args.jobs) as pool:
        found = list(tqdm(pool.map(measure, tasks), total=len(tasks), desc="pools"))
    rows = rows_of(found, adaptive)
    report = {
        "info": {
            "command": "python tools/bench_adaptive_equal.py " + " ".join(argv or sys.argv[1:]),
            "adaptive_command": adaptive["config"]["command"],
            "seconds": round(time.perf_counter() - start),
            "load": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        },
        "checks": {f"{c['benchmark']}/{c['protocol']}": c["check"] for c in found},
        "tally": tally(rows),
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "adaptive_equal.json", report)
    write_text_if_changed(args.out / "adaptive_equal.md", markdown(report))
    print(markdown(report).split("## Every pool")[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
