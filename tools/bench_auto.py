"""``--method auto`` on small real populations: held-out MAE of its choice vs random + mean.

Cases:

- Open LLM Leaderboard v1 (``openllm_v1``, the six B matrices): sub-populations of 15, 25 and
  50 models, drawn at random (``--seeds``) and by model-name keyword (``--families``, at 25
  models). ``choose_recipe`` sees only the sub-population; the chosen recipe and random +
  mean, both fitted on it at the same budget, then estimate ``--heldout`` other models of
  the same population (the rest of the leaderboard, or of the family). Truth: the whole
  benchmark score (``full_score_metabench``; hellaswag: the leaderboard csv) at 25 and 50
  models; at 15 models no calibration line can be fitted (the package refuses fewer than 20
  source models unless the truth is the matrix mean), so there the truth is the mean over
  the B matrix, i.e. the B matrix stands for the whole benchmark.
- psn_irt whole benchmarks (12 models; ``--psn-blocks``): leave-one-model-out, i.e. the
  nested estimate of ``choose_recipe`` with one outer split per model: auto's choice on 11
  models scored on the 12th, beside random + mean fitted on the same 11.

Writes ``bench/auto.json`` and ``bench/auto.md``.

    python tools/bench_auto.py --jobs 2   # 45 min on 2 shared cores (load ~9); psn BBH: 24
    python tools/bench_auto.py --jobs 2 --psn-blocks ARC-C   # without the BBH case
    python tools/bench_auto.py --quick    # one benchmark, one seed
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from bench_reliability import OPENLLM, load_openllm, load_psn_block, strict_json
from worker_pool import worker_pool

from lmeval_microbench.auto import FLOOR, choose_recipe
from lmeval_microbench.auto.choice import INNER_REPEATS
from lmeval_microbench.reliability import (
    IRTCache,
    Plan,
    ResultPool,
    Split,
    evaluate_split,
    summarise,
)
from lmeval_microbench.responses import ResponseMatrix

REPO = Path(__file__).resolve().parents[1]
SIZES = (15, 25, 50)
BUDGETS = (25, 50)
PSN_BUDGETS = (50, 100)
FULL_TRUTH_FROM = 25
"""Sub-populations at least this large use the whole-benchmark score as truth."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=REPO / ".." / "shared" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument("--benchmarks", default=",".join(OPENLLM))
    parser.add_argument("--seeds", type=int, default=2, help="random draws per size")
    parser.add_argument("--families", default="llama,mistral", help="keywords, 25 models each")
    parser.add_argument("--heldout", type=int, default=400, help="held-out models per case")
    parser.add_argument("--psn-blocks", default="BBH,ARC-C")
    parser.add_argument("--inner-repeats", type=int, default=INNER_REPEATS)
    parser.add_argument("--jobs", type=int, default=1, help="cases run in parallel")
    parser.add_argument("--quick", action="store_true", help="arc only, one seed, no psn")
    return parser.parse_args(argv)


# ---------------------------------------------------------------------- cases
def leaderboard_cases(args: argparse.Namespace) -> list[dict[str, Any]]:
    """(benchmark, size, draw) of every leaderboard sub-population."""
    benchmarks = ["arc"] if args.quick else args.benchmarks.split(",")
    seeds = 1 if args.quick else args.seeds
    families = [] if args.quick else [f for f in args.families.split(",") if f]
    cases = [
        {"kind": "openllm", "benchmark": bm, "size": n, "draw": f"random/{s}", "seed": s}
        for bm in benchmarks
        for n in SIZES
        for s in range(seeds)
    ]
    cases += [
        {"kind": "openllm", "benchmark": bm, "size": 25, "draw": f"family/{f}", "seed": 0}
        for bm in benchmarks
        for f in families
    ]
    return cases


def draw_population(
    matrix: ResponseMatrix, draw: str, size: int, heldout: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the sub-population and of its held-out models (same population, disjoint)."""
    rng = np.random.default_rng(seed)
    if draw.startswith("family/"):
        keyword = draw.split("/", 1)[1]
        pool = np.flatnonzero([keyword in m.lower() for m in matrix.model_ids])
    else:
        pool = np.arange(matrix.n_models)
    pool = rng.permutation(pool)
    return np.sort(pool[:size]), np.sort(pool[size : size + heldout])


def fit_and_score(
    source: ResponseMatrix,
    source_truth: np.ndarray,
    target: ResponseMatrix,
    target_truth: np.ndarray,
    recipe: tuple[str, str, int],
    seed: int,
) -> dict[str, Any]:
    """One recipe fitted on the sources, scored on the targets (reliability's evaluation)."""
    method, estimator, budget = recipe
    split = Split("heldout", 0, "heldout", source, source_truth, target, target_truth, seed, seed)
    plan = Plan((method,), (estimator,), (budget,), ("heldout",), 1, seed)
    pools: dict[tuple, ResultPool] = {}
    evaluate_split(split, plan, pools, IRTCache("2pl"))
    record = summarise(next(iter(pools.values())))
    return {k: record[k] for k in ("mae", "coverage90", "width90")}


def run_openllm(case: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    matrix, full_truth, _ = load_openllm(args.data / "openllm_v1", case["benchmark"])
    truth = full_truth if case["size"] >= FULL_TRUTH_FROM else matrix.mean_scores()
    rows, held = draw_population(matrix, case["draw"], case["size"], args.heldout, case["seed"])
    pick = lambda r: matrix.select_models([matrix.model_ids[k] for k in r])  # noqa: E731
    source, target = pick(rows), pick(held)
    start = time.perf_counter()
    choice = choose_recipe(
        source,
        truth[rows],
        budgets=BUDGETS,
        seed=case["seed"],
        inner_repeats=args.inner_repeats,
        outer_repeats=0,
        progress=False,
    )
    result = case | {
        "truth": "full" if case["size"] >= FULL_TRUTH_FROM else "matrix_mean",
        "heldout_models": int(held.size),
        "choice_seconds": round(time.perf_counter() - start, 1),
        "budgets": {},
    }
    for budget, chosen in choice.per_budget.items():
        recipe = (chosen.chosen.method, chosen.chosen.estimator, budget)
        floor = (FLOOR.method, FLOOR.estimator, budget)
        result["budgets"][str(budget)] = {
            "pick": chosen.chosen.label,
            "cv_mae": chosen.cv_mae,
            "auto": fit_and_score(source, truth[rows], target, truth[held], recipe, case["seed"]),
            "floor": fit_and_score(source, truth[rows], target, truth[held], floor, case["seed"]),
        }
    return result


def run_psn(case: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    matrix, truth, _ = load_psn_block(args.data / "psn_irt", case["benchmark"])
    start = time.perf_counter()
    choice = choose_recipe(
        matrix,
        truth,
        budgets=PSN_BUDGETS,
        seed=0,
        inner_repeats=args.inner_repeats,
        outer_repeats=matrix.n_models,
        progress=False,
    )
    result = case | {
        "truth": "block mean",
        "choice_seconds": round(time.perf_counter() - start, 1),
        "left_out": choice.protocol["left_out"],
        "budgets": {},
    }
    for budget, chosen in choice.per_budget.items():
        nested = chosen.nested or {}
        result["budgets"][str(budget)] = {
            "pick": chosen.chosen.label,
            "cv_mae": chosen.cv_mae,
            "picks": nested.get("picks"),
            "auto": {"mae": nested.get("auto_mae"), "coverage90": nested.get("auto_coverage90")},
            "floor": {
                "mae": nested.get("floor_mae"),
                "coverage90": nested.get("floor_coverage90"),
            },
        }
    return result


def run_case(case: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_openllm(case, args) if case["kind"] == "openllm" else run_psn(case, args)


# ---------------------------------------------------------------------- report
def summary_rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per population kind x size x budget: mean held-out MAE of auto and floor, wins, picks."""
    groups: dict[tuple, list[tuple[dict, dict]]] = {}
    for result in results:
        source = "psn " + result["benchmark"] if result["kind"] == "psn" else "openllm"
        size = result.get("size", 12)
        for budget, entry in result["budgets"].items():
            groups.setdefault((source, size, result["truth"], int(budget)), []).append(
                (result, entry)
            )
    rows = []
    for (source, size, truth, budget), members in groups.items():
        auto = np.array([e["auto"]["mae"] for _, e in members], dtype=float)
        floor = np.array([e["floor"]["mae"] for _, e in members], dtype=float)
        cover = np.array([e["auto"]["coverage90"] for _, e in members], dtype=float)
        picks: dict[str, int] = {}
        for _, entry in members:
            picks[entry["pick"]] = picks.get(entry["pick"], 0) + 1
        rows.append(
            {
                "source": source,
                "models": size,
                "truth": truth,
                "budget": budget,
                "cases": len(members),
                "auto_mae": float(np.mean(auto)),
                "floor_mae": float(np.mean(floor)),
                "auto_worse": int(np.sum(auto > floor + 1e-9)),
                "worst_loss": float(np.max(auto - floor)),
                "auto_coverage90": float(np.mean(cover)),
                "picks": dict(sorted(picks.items(), key=lambda kv: -kv[1])),
            }
        )
    return rows


def markdown(results: Sequence[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [
        "# `--method auto` on small populations",
        "",
        f"Written by `tools/bench_auto.py` ({info['seconds']:.0f} s, {info['jobs']} jobs). "
        "Held-out MAE in score points of the recipe `choose_recipe` picks (inner CV with "
        f"{info['inner_repeats']} random splits) and of random items + plain mean at the same "
        "budget, both fitted on the same source models. Leaderboard: "
        f"{info['heldout']} held-out models of the same population per case (truth: whole "
        f"benchmark score from {FULL_TRUTH_FROM} models, the B-matrix mean below that); psn: "
        "leave-one-model-out over the 12 models (nested: the choice is made on 11).",
        "",
        "## Summary",
        "",
        "| source | models | truth | budget | cases | auto MAE | random+mean MAE | auto worse"
        " | worst loss | auto cov90 | picks |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in summary_rows(results):
        picks = ", ".join(f"{k} {v}" for k, v in r["picks"].items())
        lines.append(
            f"| {r['source']} | {r['models']} | {r['truth']} | {r['budget']} | {r['cases']} | "
            f"{r['auto_mae']:.2f} | {r['floor_mae']:.2f} | {r['auto_worse']} | "
            f"{r['worst_loss']:+.2f} | {r['auto_coverage90']:.2f} | {picks} |"
        )
    lines += [
        "",
        "`auto worse`: cases where auto's held-out MAE is above random + mean's; "
        "`worst loss`: the largest auto - floor difference (negative: auto never lost).",
        "",
        "## Cases",
        "",
        "| source | benchmark | models | draw | budget | pick | CV MAE | auto MAE | floor MAE |",
        "|---|---|---:|---|---:|---|---:|---:|---:|",
    ]
    for res in results:
        for budget, e in res["budgets"].items():
            lines.append(
                f"| {res['kind']} | {res['benchmark']} | {res.get('size', 12)} | "
                f"{res.get('draw', 'loo')} | {budget} | {e['pick']} | {e['cv_mae']:.2f} | "
                f"{e['auto']['mae']:.2f} | {e['floor']['mae']:.2f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cases = leaderboard_cases(args)
    if not args.quick:
        cases += [{"kind": "psn", "benchmark": b} for b in args.psn_blocks.split(",") if b]
    start = time.perf_counter()
    if args.jobs > 1:
        with worker_pool(args.jobs) as pool:
            results = list(pool.map(run_case, cases, [args] * len(cases)))
    else:
        results = []
        for k, case in enumerate(cases):
            results.append(run_case(case, args))
            print(f"[{k + 1}/{len(cases)}] {case} {time.perf_counter() - start:.0f} s", flush=True)
    info = {
        "seconds": time.perf_counter() - start,
        "jobs": args.jobs,
        "inner_repeats": args.inner_repeats,
        "heldout": args.heldout,
        "budgets": {"openllm": BUDGETS, "psn": PSN_BUDGETS},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {"info": info, "summary": summary_rows(results), "cases": results}
    (args.out / "auto.json").write_text(json.dumps(strict_json(payload), indent=1) + "\n")
    (args.out / "auto.md").write_text(markdown(results, info))
    print(f"wrote {args.out / 'auto.md'}")


if __name__ == "__main__":
    main()
