"""The default build on Open LLM Leaderboard v1, against the true full score: bench/v1_default.*.

The peer suite (:mod:`bench_peers`) scores the v1 matrices against the mean over their
58-249 items, so that benchpred's methods, which can only predict that mean, compete on the
same target, and it caps the sources at 1,000. Issue 19's target for the v1 benchmarks is
about the score a user reads: the whole benchmark's (metabench's ``full_score_metabench``;
HellaSwag: the leaderboard's column), with every leaderboard model as a source, at most 1.5
points MAE at 50 items when the strongest fifth is estimated from the rest.

This runs what ``microbench build`` runs with its defaults (``choose_recipe``, then the
bundle with the chosen recipe and its interval factor) on the reliability benchmark's splits
(:mod:`lmeval_microbench.reliability.splits`, the same targets as ``bench/reliability.md``):
the strongest fifth and the weakest fifth held out, and a random 80/20 split, every other
model a source; one build per selection seed. It reports MAE, bias, the 90 % interval's
coverage and width, and the recipe chosen.

    python tools/bench_v1_default.py --jobs 2        # about 10 minutes on 2 idle cores

``--recipe balanced+kridge --stem v1_balanced_kridge`` builds one fixed recipe instead (no
choice), to see what the guard does on these splits.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from bench_peers import seed_range
from leaderboard_bench import load_openllm
from peer_cells import DATA, V1
from tqdm.auto import tqdm
from worker_pool import worker_pool

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.auto import choose_recipe
from lmeval_microbench.build import build_bundle
from lmeval_microbench.estimators import ScoreEstimator, estimator_from_state
from lmeval_microbench.reliability.splits import (
    extrapolation_splits,
    random_splits,
    weakest_splits,
)
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.truth import complete_models

REPO = Path(__file__).resolve().parents[1]
SPLITS = {"extrapolation": extrapolation_splits, "weak": weakest_splits, "random": random_splits}
PROTOCOLS = tuple(SPLITS)
GOAL = 1.5


def split_of(matrix: str, protocol: str, seed: int, data: Path) -> Any:
    """The reliability benchmark's split of ``protocol`` for ``seed`` (its first repeat)."""
    responses, truth, _ = load_openllm(data / "openllm_v1", matrix)
    responses, truth = complete_models(responses, truth)
    return next(iter(SPLITS[protocol](responses, truth, repeats=1, seed=seed)))


def measure(task: tuple[Path, str, str, int, int, str | None]) -> dict[str, Any]:
    """One build on one split, its held-out models estimated: the default one, or with
    ``recipe`` (``method+estimator``) the one ``build --method M --estimator E`` makes."""
    _, matrix, protocol, budget, seed, _ = task
    started = time.perf_counter()
    split, estimator, answers, recipe = built(task)
    value, lower, upper = estimator.estimate_matrix(answers)
    truth = split.target_truth
    return {
        "matrix": matrix,
        "protocol": protocol,
        "budget": budget,
        "seed": seed,
        "n_sources": split.source.n_models,
        "n_targets": split.target.n_models,
        "recipe": recipe,
        "mae": 100 * float(np.mean(np.abs(value - truth))),
        "bias": 100 * float(np.mean(value - truth)),
        "coverage": float(np.mean((lower <= truth) & (truth <= upper))),
        "width": 100 * float(np.mean(upper - lower)),
        "seconds": time.perf_counter() - started,
    }


def built(
    task: tuple[Path, str, str, int, int, str | None],
) -> tuple[Any, ScoreEstimator, ResponseMatrix, str]:
    """The split of ``task``, the estimator its build gives (:func:`measure`), the held-out
    models' subset answers and the recipe ``method+estimator``."""
    data, matrix, protocol, budget, seed, recipe = task
    split = split_of(matrix, protocol, seed, data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if recipe is None:
            choice = choose_recipe(
                split.source, split.source_truth, budgets=[budget], seed=seed, progress=False
            )
            method, estimator_name, record = choice.method, choice.estimator, choice.as_record()
        else:
            (method, estimator_name), record = recipe.split("+", 1), None
        bundle = build_bundle(
            split.source,
            split.source_truth,
            name=f"{matrix}-{protocol}-{seed}",
            benchmark=matrix,
            method=method,
            budget=budget,
            seed=seed,
            estimators=[estimator_name],
            default_estimator=estimator_name,
            choice=record,
        )
        estimator = estimator_from_state(bundle.estimator_state())
    answers = split.target.select_items(bundle.item_ids)
    return split, estimator, answers, f"{method}+{estimator_name}"


def cases(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Means over seeds per benchmark x protocol x budget."""
    grouped: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault((row["matrix"], row["protocol"], row["budget"]), []).append(row)
    out = []
    for (matrix, protocol, budget), members in grouped.items():
        entry = {"matrix": matrix, "protocol": protocol, "budget": budget, "seeds": len(members)}
        for key in ("mae", "bias", "coverage", "width"):
            entry[key] = float(np.mean([m[key] for m in members]))
        entry["recipes"] = sorted({m["recipe"] for m in members})
        out.append(entry)
    return out


def markdown(entries: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [
        f"# {info['what']} on Open LLM Leaderboard v1, against the true full score",
        "",
        f"Generated by `{info['command']}` ({info['minutes']:.0f} min, load average "
        f"{info['load_average'][0]:.1f} -> {info['load_average'][1]:.1f}, 2 shared cores). "
        f"{info['how']}, on the "
        "reliability benchmark's splits (strongest fifth, weakest fifth, a random 80/20 "
        "split; every other leaderboard model a source), one build per seed. Truth: the whole "
        "benchmark's score (metabench's `full_score_metabench`; HellaSwag: the leaderboard's "
        f"column). MAE, bias and width in points; ✗: MAE above {GOAL}.",
        "",
        "| benchmark | protocol | budget | seeds | MAE | bias | cov | width | recipes |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    order = {p: k for k, p in enumerate(PROTOCOLS)}
    for e in sorted(entries, key=lambda e: (order[e["protocol"]], e["matrix"], e["budget"])):
        mark = " ✗" if e["mae"] > GOAL else ""
        lines.append(
            f"| {e['matrix']} | {e['protocol']} | {e['budget']} | {e['seeds']} | "
            f"{e['mae']:.2f}{mark} | {e['bias']:+.2f} | {e['coverage']:.2f} | "
            f"{e['width']:.1f} | {', '.join(e['recipes'])} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--matrices", default=",".join(V1))
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--budgets", default="50")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument("--recipe", help="METHOD+ESTIMATOR instead of the default choice")
    parser.add_argument("--stem", default="v1_default", help="report name in --out")
    args = parser.parse_args(argv)
    if args.recipe is not None and "+" not in args.recipe:
        parser.error(f"--recipe must be METHOD+ESTIMATOR, got {args.recipe!r}")
    tasks = [
        (args.data, matrix, protocol, int(budget), seed, args.recipe)
        for matrix in args.matrices.split(",")
        for protocol in args.protocols.split(",")
        for budget in args.budgets.split(",")
        for seed in seed_range(args.seeds)
    ]
    load_before, started = os.getloadavg()[0], time.time()
    with worker_pool(args.jobs) as pool:
        rows = list(tqdm(pool.map(measure, tasks), total=len(tasks), desc="v1 default builds"))
    given = " ".join(argv if argv is not None else sys.argv[1:])
    info = {
        "command": f"python tools/bench_v1_default.py {given}".strip(),
        "minutes": (time.time() - started) / 60,
        "load_average": [load_before, os.getloadavg()[0]],
        "what": "The default build" if args.recipe is None else f"`{args.recipe}`",
        "how": "`choose_recipe` then `build_bundle`, as `microbench build` with its defaults"
        if args.recipe is None
        else "`build_bundle` with that method and estimator, as `microbench build --method "
        "M --estimator E`",
    }
    entries = cases(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        args.out / f"{args.stem}.json", {"info": info, "cases": entries, "cells": rows}
    )
    write_text_if_changed(args.out / f"{args.stem}.md", markdown(entries, info))
    print(markdown(entries, info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
