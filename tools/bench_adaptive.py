"""Adaptive evaluation replayed on Open LLM Leaderboard answers: bench/adaptive.{md,json,png}.

Per benchmark and protocol (``random``: 80/20 model split; ``extrapolation``: the strongest
fifth as targets; ``weak``: the weakest fifth; from :mod:`lmeval_microbench.reliability`), a
pool is built on the source models only
(:func:`lmeval_microbench.adaptive.pool.fit_adaptive_state`: IRT, ``kridge`` score map, bands
from cross-fitted replays) and held-out target models are replayed through the adaptive loop
(their recorded answers are looked up). Reported at 10, 25 and 50 items: MAE,
RMSE, Kendall tau, MDAD, 90 % coverage for max-information selection, and for randomesque
selection (top 5) the same over ``--repeats`` seeds plus the spread of a model's estimate
across seeds and the largest item exposure. Beside them, on the same split and the same target
models: the shipped static recipe (method, estimator and budget from ``bench/defaults.json``
for v1, from the shipped micro task's bundle for v2's ``ifeval`` and ``musr``, whole
benchmarks whose full score is the mean over the pool) fitted on the split's sources; the
whole pool through the pool's score map (every item
answered: the best an adaptive run of this pool can reach); and the MAE of the unshifted
imputation (version 1 pools, :func:`lmeval_microbench.adaptive.estimation.impute`). The cost of
asking K = 1, 4, 16 items per step (fewer, larger batches for an accelerator) is measured on the
random split.

    python tools/bench_adaptive.py                        # all six (long: a pool fit each)
    python tools/bench_adaptive.py --benchmarks mmlu --max-targets 200
    python tools/bench_adaptive.py --protocols weak   # adds a protocol to bench/adaptive.json
    python tools/bench_adaptive.py --benchmarks ifeval,musr --protocols random,extrapolation,weak
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_reliability import load_openllm

from lmeval_microbench.adaptive.pool import fit_adaptive_state
from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
from lmeval_microbench.adaptive.selection import MaxInfoSelector, RandomesqueSelector
from lmeval_microbench.adaptive.simulate import exposure, replay
from lmeval_microbench.bundle.io import load_bundle
from lmeval_microbench.estimators import make_estimator
from lmeval_microbench.personfit import lowest_score
from lmeval_microbench.reliability import (
    complete_models,
    extrapolation_splits,
    interval_coverage,
    kendall_tau,
    mdad,
    random_splits,
    weakest_splits,
)
from lmeval_microbench.reliability.evaluate import all_items_subset, select_items
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import make_selector

REPO = Path(__file__).resolve().parents[1]
V2 = ("ifeval", "musr")
V2_TASKS = REPO / "lmeval_microbench" / "task_configs" / "openllm_v2"
BUDGETS = (10, 25, 50)
PROTOCOLS = ("random", "extrapolation", "weak")
SPLITS = {"random": random_splits, "extrapolation": extrapolation_splits, "weak": weakest_splits}
BATCHES = (1, 4, 16)
FLUID_CLAIM = (
    "Fluid Benchmarking (Hofmann et al. 2025, arXiv 2509.11106, abstract): 'higher validity "
    "and less variance on MMLU with fifty times fewer items' than random sampling of the "
    "whole benchmark. Their IRT models are fitted on Open LLM Leaderboard results of the same "
    "six benchmarks (Ai2 blog post), but they measure efficiency, validity, variance and "
    "saturation, not the error of a full-benchmark score on held-out models, so no number of "
    "theirs is comparable with the tables above."
)


def load_benchmark(shared: Path, bm: str) -> tuple[Any, np.ndarray, dict[str, Any]]:
    """Complete answers, true full scores and the shipped static recipe of one benchmark."""
    if bm in V2:
        matrix = ResponseMatrix.read(shared / "openllm_v2" / "responses" / f"{bm}.parquet")
        bundle = load_bundle(V2_TASKS / bm / "bundle.json")
        recipe = {
            "method": bundle.subset.method,
            "estimator": bundle.default_estimator,
            "budget": bundle.subset.budget,
            "all_items": False,
        }
        return (*complete_models(matrix, matrix.mean_scores()), recipe)
    matrix, truth, _ = load_openllm(shared / "openllm_v1", bm)
    recipe = json.loads((REPO / "bench" / "defaults.json").read_text())["benchmarks"][bm]
    return (*complete_models(matrix, truth), recipe)


def metrics(estimate: np.ndarray, truth: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> dict:
    error = 100 * (estimate - truth)
    return {
        "mae": float(np.mean(np.abs(error))),
        "rmse": float(np.sqrt(np.mean(error**2))),
        "kendall_tau": kendall_tau(estimate, truth),
        "mdad": mdad(100 * estimate, 100 * truth),
        "coverage90": interval_coverage(truth, lower, upper),
        "width90": float(100 * np.mean(upper - lower)),
    }


def static_recipe(split: Any, recipe: dict[str, Any], rows: np.ndarray) -> dict[str, Any]:
    """The shipped recipe fitted on the split's sources, scored on the same target rows."""
    start = time.perf_counter()
    if recipe["all_items"]:
        subset = all_items_subset(split.source)
    else:
        subset = select_items(make_selector(recipe["method"]), split, int(recipe["budget"]))
    estimator = make_estimator(recipe["estimator"]).fit(split.source, subset, split.source_truth)
    target = split.target.select_models([split.target.model_ids[r] for r in rows])
    value, lower, upper = estimator.estimate_matrix(target, level=0.9)
    out = metrics(value, split.target_truth[rows], lower, upper)
    out["items"] = subset.budget
    out["seconds"] = round(time.perf_counter() - start, 1)
    return out


def suite_of(bm: str) -> str:
    """The leaderboard suite of benchmark ``bm`` (the folder of its shipped task and pool)."""
    return "openllm_v2" if bm in V2 else "openllm_v1"


def first_split(matrix: Any, truth: np.ndarray, protocol: str, seed: int) -> Any:
    """The first split of ``protocol`` (:data:`SPLITS`) for ``seed``: what every adaptive
    report replays."""
    return next(SPLITS[protocol](matrix, truth, repeats=1, seed=seed))


def pool_floor(bm: str) -> float:
    """The floor of runs below the sources a pool of ``bm`` gets (``build_pool``: from its
    chance levels, which are the benchmark's, so the shipped pool's person-fit block gives it;
    a pool built without them, GSM8K's and IFEval's, has 0)."""
    return lowest_score(load_bundle(SHIPPED_POOLS / suite_of(bm) / bm).person_fit)


def run_protocol(
    split: Any, args: argparse.Namespace, recipe: dict[str, Any], floor: float
) -> dict[str, Any]:
    start = time.perf_counter()
    params, state = fit_adaptive_state(split.source, split.source_truth, seed=args.seed)
    fit_seconds = time.perf_counter() - start
    rng = np.random.default_rng(args.seed)
    rows = rng.permutation(split.target.n_models)[: args.max_targets]
    values, truth = split.target.values[rows], split.target_truth[rows]
    smap = state.score_map.with_floor(floor)
    out: dict[str, Any] = {"n_source": split.source.n_models, "n_targets": len(rows)}
    out["pool_fit_seconds"] = round(fit_seconds, 1)
    result = replay(
        params,
        values,
        selector=MaxInfoSelector(),
        max_items=max(BUDGETS),
        score_map=smap,
        checkpoints=BUDGETS,
    )

    def read(score_map: Any) -> dict[str, dict]:
        """The max-information runs' metrics at each budget, intervals of ``score_map``."""
        return {
            str(n): metrics(
                result.predictions[n],
                truth,
                *score_map.interval(
                    result.predictions[n], n, span=result.spans[n], ability=result.ability_at(n)
                ),
            )
            for n in BUDGETS
        }

    out["maxinfo"] = read(smap)
    out["maxinfo_without_floor"] = read(replace(smap, floor=None))
    out["floor"] = floor
    unshifted = replay(
        params,
        values,
        selector=MaxInfoSelector(),
        max_items=max(BUDGETS),
        score_map=replace(smap, imputation="posterior"),
        checkpoints=BUDGETS,
    )
    out["unshifted_mae"] = {
        str(n): float(100 * np.mean(np.abs(unshifted.predictions[n] - truth))) for n in BUDGETS
    }
    whole = smap.predict(values)
    out["whole_pool"] = {
        "items": int(params.n_items),
        "mae": float(100 * np.mean(np.abs(whole - truth))),
    }
    out["static_same_split"] = static_recipe(split, recipe, rows)
    out["maxinfo_max_exposure"] = float(exposure(result.order, params.n_items).max())
    runs = [
        replay(
            params,
            values,
            selector=RandomesqueSelector(5),
            max_items=max(BUDGETS),
            score_map=smap,
            checkpoints=BUDGETS,
            seed=args.seed + r,
        )
        for r in range(args.repeats)
    ]
    randomesque = {}
    for n in BUDGETS:
        rows_metrics = [
            metrics(
                r.predictions[n],
                truth,
                *smap.interval(r.predictions[n], n, span=r.spans[n], ability=r.ability_at(n)),
            )
            for r in runs
        ]
        merged = {k: float(np.nanmean([m[k] for m in rows_metrics])) for k in rows_metrics[0]}
        spread = np.std([100 * r.predictions[n] for r in runs], axis=0)
        merged["sd_across_repeats"] = float(np.mean(spread))
        randomesque[str(n)] = merged
    out["randomesque"] = randomesque
    out["randomesque_max_exposure"] = float(
        np.mean([exposure(r.order, params.n_items).max() for r in runs])
    )
    if split.protocol == "random":
        out["batches"] = {}
        for k in BATCHES:
            r = replay(
                params,
                values,
                selector=MaxInfoSelector(),
                max_items=50,
                batch=k,
                score_map=smap,
                checkpoints=(50,),
            )
            p = r.predictions[50]
            out["batches"][str(k)] = {
                "steps": r.steps,
                "loop_ms_per_model": 1000 * r.seconds / len(rows),
                "mae": float(100 * np.mean(np.abs(p - truth))),
            }
    return out


def runs_note(config: dict[str, Any]) -> list[str]:
    """Which run made which rows, where the report merges runs of different times (and so
    perhaps of different code: the commit log says what changed between them)."""
    runs = config.get("runs", [])
    if len(runs) < 2:
        return []
    made = [
        f"`{run['command']}` ({run['finished']}): "
        + "; ".join(f"{bm} {', '.join(protocols)}" for bm, protocols in run["rows"].items())
        for run in runs
    ]
    return ["Rows by run (a later run's rows replace an earlier one's): " + " / ".join(made), ""]


def markdown(results: dict[str, Any], config: dict[str, Any]) -> str:
    lines = [
        "# Adaptive evaluation (replayed on real answers)",
        "",
        f"Command: `{config['command']}` ({config['finished']}). Held-out leaderboard models, "
        f"at most {config['max_targets']} per protocol, one split per protocol (seed "
        f"{config['seed']}); randomesque: {config['repeats']} seeds. MAE/RMSE/width in points "
        "of the full benchmark; MDAD in points (smallest true gap ordered right 95 % of the "
        "time); cov90 = share of true scores inside the 90 % interval. 'unshifted' = MAE "
        "with the version-1 imputation (posterior expectations as they are); 'static recipe' "
        "= the shipped recipe (bench/defaults.json) fitted on the same sources and scored on "
        "the same targets, at its own budget (MAE / cov90); 'whole pool' = every pool item "
        "answered, through the same score map: the floor an adaptive run of this pool can "
        "reach.",
        "",
        *runs_note(config),
        "| benchmark | protocol | items | MAE | RMSE | tau | MDAD | cov90 | width "
        "| unshifted MAE | randomesque MAE | sd across seeds | static recipe (items) "
        "| whole pool MAE (items) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for bm, per in results.items():
        for protocol in PROTOCOLS:
            if protocol not in per:
                continue
            row = per[protocol]
            static, whole = row["static_same_split"], row["whole_pool"]
            for n in BUDGETS:
                m, r = row["maxinfo"][str(n)], row["randomesque"][str(n)]
                lines.append(
                    f"| {bm} | {protocol} | {n} | {m['mae']:.2f} | {m['rmse']:.2f} | "
                    f"{m['kendall_tau']:.3f} | {_fmt(m['mdad'])} | {m['coverage90']:.2f} | "
                    f"{m['width90']:.1f} | {row['unshifted_mae'][str(n)]:.2f} | {r['mae']:.2f} | "
                    f"{r['sd_across_repeats']:.2f} | {static['mae']:.2f} / "
                    f"{static['coverage90']:.2f} ({static['items']}) | "
                    f"{whole['mae']:.2f} ({whole['items']}) |"
                )
    lines += [
        "",
        "Targets: 25 adaptive items <= static recipe MAE (random, same split); 50 items <= "
        "1.5 (extrapolation; where the whole pool is above 1.5 the target is out of this "
        "pool's reach); cov90 in 0.85-0.95.",
        "",
    ]
    for bm, per in results.items():
        checks = []
        if "random" in per:
            m25 = per["random"]["maxinfo"]["25"]["mae"]
            static = per["random"]["static_same_split"]["mae"]
            ok = m25 <= static
            verdict = "met" if ok else "missed"
            checks.append(f"random 25 items {m25:.2f} vs static {static:.2f}: {verdict}")
        if "extrapolation" in per:
            m50 = per["extrapolation"]["maxinfo"]["50"]["mae"]
            floor = per["extrapolation"]["whole_pool"]["mae"]
            checks.append(
                f"extrapolation 50 items {m50:.2f} (whole pool {floor:.2f}): "
                f"{'met' if m50 <= 1.5 else 'missed'}"
            )
        if "weak" in per:
            weak = per["weak"]["maxinfo"]["50"]
            checks.append(
                f"weakest fifth 50 items {weak['mae']:.2f}, cov90 {weak['coverage90']:.2f}"
            )
        covs = [
            per[p]["maxinfo"][str(n)]["coverage90"] for p in PROTOCOLS if p in per for n in BUDGETS
        ]
        checks.append(f"cov90 {min(covs):.2f}-{max(covs):.2f}")
        lines.append(f"- {bm}: " + "; ".join(checks))
    lines += floor_lines(results)
    lines += [
        "",
        "## Items per step (K) on the random split, max-information, 50 items",
        "",
        "| benchmark | K | steps | loop ms per model | MAE |",
        "|---|---|---|---|---|",
    ]
    for bm, per in results.items():
        for k, row in per.get("random", {}).get("batches", {}).items():
            ms = row["loop_ms_per_model"]
            lines.append(f"| {bm} | {k} | {row['steps']} | {ms:.3f} | {row['mae']:.2f} |")
    lines += [
        "",
        "Steps = forward passes a live run makes (one batch of requests each); the "
        "loop time is selection + ability update only (replayed answers, no model).",
        "",
        "## Exposure",
        "",
    ]
    for bm, per in results.items():
        for protocol in PROTOCOLS:
            if protocol in per:
                row = per[protocol]
                lines.append(
                    f"- {bm} {protocol}: largest share of models shown one item: "
                    f"max-information {row['maxinfo_max_exposure']:.2f}, randomesque "
                    f"{row['randomesque_max_exposure']:.2f}; pool fit {row['pool_fit_seconds']} s"
                )
    lines += ["", "## Published claims", "", FLUID_CLAIM, ""]
    return "\n".join(lines)


def floor_lines(results: dict[str, Any]) -> list[str]:
    """The floor's effect where a replay measured it: coverage and width with and without."""
    rows = [
        f"| {bm} | {protocol} | {100 * per[protocol]['floor']:.1f} | {n} | "
        f"{without['coverage90']:.2f} -> {m['coverage90']:.2f} | "
        f"{without['width90']:.1f} -> {m['width90']:.1f} |"
        for bm, per in results.items()
        for protocol in PROTOCOLS
        if "maxinfo_without_floor" in per.get(protocol, {})
        for n in BUDGETS
        for m, without in [
            (per[protocol]["maxinfo"][str(n)], per[protocol]["maxinfo_without_floor"][str(n)])
        ]
    ]
    if not rows:
        return []
    return [
        "",
        "## The floor below the sources",
        "",
        "Max-information runs that may lie below every source (their 90 % lower edge, lowered "
        "by `adaptive.scoring.FLOOR_TEST_MARGIN` of its half-width, at or under the weakest "
        "source's true score, or their ability beyond the sources' edge) "
        "have their lower edge reach the floor (the chance-level score less 5 points; 0 for a "
        "pool built without chance levels; `adaptive.scoring.ScoreMap.with_floor`). Same runs, "
        "interval without the floor -> with it (rows replayed since the floor; the others "
        "predate it, and predate the IRT-free reading on the v1 pools).",
        "",
        "| benchmark | protocol | floor (points) | items | cov90 | width |",
        "|---|---|---|---|---|---|",
        *rows,
    ]


def _fmt(value: float) -> str:
    return f"{value:.1f}" if math.isfinite(value) else ("never" if value > 0 else "-")


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [p for p in PROTOCOLS if any(p in per for per in results.values())]
    fig, grid = plt.subplots(1, len(shown), figsize=(5 * len(shown), 4), sharey=True, squeeze=False)
    axes = grid[0]
    for ax, protocol in zip(axes, shown, strict=True):
        for bm, per in results.items():
            if protocol in per:
                ys = [per[protocol]["maxinfo"][str(n)]["mae"] for n in BUDGETS]
                ax.plot(BUDGETS, ys, marker="o", label=bm)
        ax.set_title(f"adaptive, {protocol} protocol")
        ax.set_xlabel("items asked")
        ax.axhline(1.5, color="grey", linestyle=":")
    axes[0].set_ylabel("MAE (points)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def write_reports(out: Path, results: dict[str, Any], config: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "adaptive.json").write_text(
        json.dumps({"config": config, "results": results}, indent=1) + "\n"
    )
    (out / "adaptive.md").write_text(markdown(results, config))
    plot(results, out / "adaptive.png")


RUN_KEYS = ("command", "finished", "runs")
"""Config keys that say which run made the rows, not how the rows were made."""


def run_rows(config: dict[str, Any], results: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs whose rows a report holds: each one's command, when it finished, and the
    benchmark x protocol rows it made (a report not merged yet: one run, every row)."""
    if "runs" in config:
        return config["runs"]
    rows = {bm: [p for p in per if p in PROTOCOLS] for bm, per in results.items()}
    return [{"command": config["command"], "finished": config["finished"], "rows": rows}]


def merge(args: argparse.Namespace) -> int:
    """The protocols of ``args.merge``'s reports replace those of ``--out``'s; the report
    lists which run made which rows, as runs of different code may then sit side by side."""
    saved = json.loads((args.out / "adaptive.json").read_text())
    for path in args.merge:
        other = json.loads(path.read_text())
        if {k: v for k, v in other["config"].items() if k not in RUN_KEYS} != {
            k: v for k, v in saved["config"].items() if k not in RUN_KEYS
        }:
            raise SystemExit(f"{path}: run with other settings than {args.out / 'adaptive.json'}")
        runs = run_rows(saved["config"], saved["results"])
        added = run_rows(other["config"], other["results"])
        taken = {(bm, p) for run in added for bm, ps in run["rows"].items() for p in ps}
        for run in runs:  # the rows the merged runs make are theirs now
            run["rows"] = {
                bm: kept
                for bm, protocols in run["rows"].items()
                if (kept := [p for p in protocols if (bm, p) not in taken])
            }
        saved["config"]["runs"] = [run for run in runs if run["rows"]] + added
        for bm, per in other["results"].items():  # its protocols replace those of --out
            saved["results"].setdefault(bm, {}).update(per)
        extra = " (+ " + other["config"]["command"].split("py ", 1)[1] + ")"
        if extra not in saved["config"]["command"]:
            saved["config"]["command"] += extra
    write_reports(args.out, saved["results"], saved["config"])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO / ".." / "shared" / "data")
    parser.add_argument("--benchmarks", default="mmlu,truthfulqa,arc,hellaswag,winogrande,gsm8k")
    parser.add_argument("--protocols", default="random,extrapolation")
    parser.add_argument("--max-targets", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument(
        "--merge",
        type=Path,
        action="append",
        default=[],
        help="adaptive.json of runs done elsewhere (e.g. benchmarks run in parallel): their "
        "benchmarks' protocols replace --out's, then the reports are rewritten; nothing is run",
    )
    args = parser.parse_args(argv)
    if args.merge:
        return merge(args)
    path = args.out / "adaptive.json"
    saved = json.loads(path.read_text()) if path.exists() else {"results": {}}
    results = saved["results"]
    for bm in args.benchmarks.split(","):
        matrix, truth, d = load_benchmark(args.shared, bm)
        per = dict(results.get(bm, {}))
        per["static"] = {
            "budget": d["budget"],
            "recipe": f"{d['method']} + {d['estimator']}",
        }
        for protocol in args.protocols.split(","):
            split = first_split(matrix, truth, protocol, args.seed)
            per[protocol] = run_protocol(split, args, d, pool_floor(bm))
            print(
                bm,
                protocol,
                {n: round(per[protocol]["maxinfo"][n]["mae"], 2) for n in per[protocol]["maxinfo"]},
                flush=True,
            )
            results[bm] = per
            command = "python tools/bench_adaptive.py " + " ".join(argv or sys.argv[1:])
            if "config" in saved:  # protocols or benchmarks added to an earlier run's report
                command = saved["config"]["command"] + " (+ " + command.split("py ", 1)[1] + ")"
            config = {
                "command": command,
                "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "max_targets": args.max_targets,
                "repeats": args.repeats,
                "seed": args.seed,
            }
            write_reports(args.out, results, config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
