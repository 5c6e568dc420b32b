"""Joint vs per-benchmark estimation on Open LLM Leaderboard v1 models that have all six.

The models present in all six ``responses/{bm}_B.parquet`` matrices with a true score on each
(``scores/{bm}_B_scores.csv`` ``full_score_metabench``; hellaswag: the leaderboard's column)
are split ``--repeats`` times at random into source (80 %) and held-out (20 %) models. On each
split, for each budget per benchmark and each selection method (run on that benchmark's source
models):

1. a 2PL per benchmark on the source models (shared by every estimator of the split);
2. per benchmark, ``calibrated`` fitted on the source models: the per-benchmark estimate;
   the per-benchmark *average* is the mean of the six, with a conformal interval from the
   cross-fitted per-benchmark estimates of the source models;
3. ``JointEstimator`` on the same subsets and source models, predicting each benchmark and
   the average from all of a model's subset answers; variants: ``joint`` (estimates + items,
   the default), ``stack`` (the six estimates only), ``joint+mirtD`` (plus abilities of a
   D-dimensional 2PL over all subset items, with ``--mirt-dims``).

Errors are in score points (percent) on the held-out models; ``gain`` is
``1 - MAE(joint) / MAE(calibrated)``.

    python tools/eval_joint.py                      # writes bench/joint.{json,md}
    python tools/eval_joint.py --quick              # 1 repeat, budget 25, random subsets
    python tools/eval_joint.py --mirt-dims 6 --repeats 1 --budgets 25 --subsets random \\
        --out bench/joint_mirt6                     # the multidimensional-IRT variant
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from lmeval_microbench._conformal import fit_band
from lmeval_microbench._io import atomic_path, write_json_atomic
from lmeval_microbench._rng import spawn
from lmeval_microbench.build import fit_source_irt
from lmeval_microbench.errors import ConvergenceWarning, InputError
from lmeval_microbench.estimators import make_estimator
from lmeval_microbench.estimators.joint import AVERAGE, JointEstimator
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import make_selector
from lmeval_microbench.selection.base import Subset

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / ".." / "shared" / "data" / "openllm_v1"
BENCHMARKS = ("arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande")
OUTPUTS = (*BENCHMARKS, AVERAGE)
SUBSET_METHODS = ("random", "anchor_points", "greedy")
HELDOUT_SHARE = 0.2
LEVEL = 0.9
BASELINE = "calibrated"
SHIPPED = "kridge"
"""The per-benchmark estimator the shipped v1 tasks mostly use: the joint estimator's gain is
also reported against it, not only against ``calibrated`` (its own base estimator)."""


# ---------------------------------------------------------------------- data
def load_truth(data: Path, benchmark: str) -> pd.Series:
    """True full-benchmark score per model id, as a fraction."""
    scores_file = data / "scores" / f"{benchmark}_B_scores.csv"
    if scores_file.exists():
        table = pd.read_csv(scores_file).drop_duplicates("model").set_index("model")
        truth = table["full_score_metabench"]
    else:  # hellaswag: the leaderboard's own score over all 10,042 items
        board = pd.read_csv(data / "open-llm-leaderboard.csv").drop_duplicates("name")
        truth = board.set_index("name")[benchmark]
    truth.index = truth.index.map(str)
    return truth.dropna() / 100.0


def load_all(data: Path) -> tuple[dict[str, ResponseMatrix], dict[str, pd.Series], list[str]]:
    """Matrices restricted to the models with responses and a true score on all six."""
    matrices = {
        b: ResponseMatrix.read_parquet(data / "responses" / f"{b}_B.parquet") for b in BENCHMARKS
    }
    truths = {b: load_truth(data, b) for b in BENCHMARKS}
    present = {b: set(matrices[b].model_ids) & set(truths[b].index) for b in BENCHMARKS}
    common = [
        m for m in matrices[BENCHMARKS[0]].model_ids if all(m in present[b] for b in BENCHMARKS)
    ]
    if len(common) < 100:
        raise InputError(f"{data}: only {len(common)} models have all six benchmarks")
    return {b: matrices[b].select_models(common) for b in BENCHMARKS}, truths, common


# ---------------------------------------------------------------------- pooling
@dataclass
class Pool:
    """Held-out truths and (value, lower, upper) of one method and output, over repeats."""

    truth: list[np.ndarray] = field(default_factory=list)
    value: list[np.ndarray] = field(default_factory=list)
    lower: list[np.ndarray] = field(default_factory=list)
    upper: list[np.ndarray] = field(default_factory=list)

    def add(self, truth: np.ndarray, value, lower, upper) -> None:
        self.truth.append(np.asarray(truth, dtype=np.float64))
        self.value.append(np.asarray(value, dtype=np.float64))
        self.lower.append(np.asarray(lower, dtype=np.float64))
        self.upper.append(np.asarray(upper, dtype=np.float64))

    def summary(self) -> dict[str, float | int | list[float]]:
        truth, value = np.concatenate(self.truth), np.concatenate(self.value)
        lower, upper = np.concatenate(self.lower), np.concatenate(self.upper)
        error = value - truth
        return {
            "mae": 100 * float(np.mean(np.abs(error))),
            "rmse": 100 * float(np.sqrt(np.mean(error**2))),
            "bias": 100 * float(np.mean(error)),
            "coverage90": float(np.mean((lower <= truth) & (truth <= upper))),
            "width90": 100 * float(np.mean(upper - lower)),
            "mae_by_repeat": [
                100 * float(np.mean(np.abs(v - t)))
                for v, t in zip(self.value, self.truth, strict=True)
            ],
            "n_heldout": int(self.truth[0].size),
            "repeats": len(self.truth),
        }


# ---------------------------------------------------------------------- one split
def split_models(models: list[str], rng: np.random.Generator) -> tuple[list[str], list[str]]:
    order = rng.permutation(len(models))
    n_heldout = round(HELDOUT_SHARE * len(models))
    return [models[k] for k in np.sort(order[n_heldout:])], [
        models[k] for k in np.sort(order[:n_heldout])
    ]


def variants(mirt_dims: list[int], with_stack: bool) -> dict[str, dict]:
    """Joint variants by label: constructor arguments of ``JointEstimator``."""
    configs: dict[str, dict] = {"joint": {"features": ("estimates", "items")}}
    if with_stack:
        configs["stack"] = {"features": ("estimates",)}
    for dims in mirt_dims:
        configs[f"joint+mirt{dims}"] = {
            "features": ("estimates", "items", "mirt"),
            "mirt_dims": dims,
        }
    return configs


def select_subsets(
    method: str,
    sources: dict[str, ResponseMatrix],
    targets: dict[str, np.ndarray],
    budget: int,
    seed: int,
) -> dict[str, Subset]:
    selector = make_selector(method)
    return {
        b: selector.select(
            sources[b], min(budget, sources[b].n_items), seed=seed, target=targets[b]
        )
        for b in BENCHMARKS
    }


def evaluate_split(
    matrices: dict[str, ResponseMatrix],
    truths: dict[str, pd.Series],
    models: list[str],
    rng: np.random.Generator,
    args: argparse.Namespace,
    pools: dict[tuple, Pool],
    timings: dict[str, float],
    progress: tqdm,
) -> None:
    source_ids, heldout_ids = split_models(models, rng)
    sources = {b: matrices[b].select_models(source_ids) for b in BENCHMARKS}
    targets = {b: truths[b].loc[source_ids].to_numpy(dtype=np.float64) for b in BENCHMARKS}
    heldout = {b: matrices[b].select_models(heldout_ids) for b in BENCHMARKS}
    truth = np.column_stack([truths[b].loc[heldout_ids].to_numpy() for b in BENCHMARKS])
    truth = np.column_stack([truth, truth.mean(axis=1)])
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        irt = {b: fit_source_irt(sources[b], seed=int(rng.integers(2**31))) for b in BENCHMARKS}
    timings["irt_unconverged"] = timings.get("irt_unconverged", 0) + sum(
        issubclass(w.category, ConvergenceWarning) for w in caught
    )
    timings["irt_fit_s"] = timings.get("irt_fit_s", 0.0) + time.perf_counter() - start
    for budget in args.budgets:
        for method in args.subsets:
            start = time.perf_counter()
            subsets = select_subsets(method, sources, targets, budget, int(rng.integers(2**31)))
            timings[f"select_{method}_s"] = (
                timings.get(f"select_{method}_s", 0.0) + time.perf_counter() - start
            )
            joined = ResponseMatrix.concat_items(
                [heldout[b].select_items(subsets[b].item_ids) for b in BENCHMARKS]
            ).select_models(heldout_ids)
            seed = int(rng.integers(2**31))
            baseline_done = False
            for label, kwargs in variants(args.mirt_dims, not args.no_stack).items():
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    joint = JointEstimator(random_state=seed, **kwargs).fit(
                        sources, subsets, targets, irt=irt
                    )
                leaked = set(joint.model_ids_) & set(heldout_ids)
                if leaked:  # the tool's own guard: fits must see source models only
                    raise AssertionError(f"held-out models in the joint fit: {sorted(leaked)[:3]}")
                estimates = joint.estimate_matrix(joined, level=LEVEL)
                timings[f"{label}_s"] = timings.get(f"{label}_s", 0.0) + time.perf_counter() - start
                for k, out in enumerate(OUTPUTS):
                    pools.setdefault((budget, method, label, out), Pool()).add(
                        truth[:, k], *estimates[out]
                    )
                if not baseline_done:
                    add_baseline(joint, joined, truth, budget, method, pools)
                    start = time.perf_counter()
                    add_shipped(sources, subsets, targets, joined, truth, (budget, method), pools)
                    timings[f"{SHIPPED}_s"] = (
                        timings.get(f"{SHIPPED}_s", 0.0) + time.perf_counter() - start
                    )
                    baseline_done = True
            progress.update()


def add_baseline(
    joint: JointEstimator,
    joined: ResponseMatrix,
    truth: np.ndarray,
    budget: int,
    method: str,
    pools: dict[tuple, Pool],
) -> None:
    """Per-benchmark estimates (the joint fit's own base estimators) and their average.

    The base estimators are ``calibrated`` fitted on all source models with the same subsets:
    exactly the per-benchmark estimator. The average's interval is conformal on the mean of
    the cross-fitted per-benchmark estimates of the source models.
    """
    values = []
    for k, b in enumerate(BENCHMARKS):
        value, lower, upper = joint.base_[b].estimate_matrix(joined, level=LEVEL)
        values.append(value)
        pools.setdefault((budget, method, BASELINE, b), Pool()).add(
            truth[:, k], value, lower, upper
        )
    mean = np.mean(values, axis=0)
    cv_mean = np.mean([joint.cv_base_[b] for b in BENCHMARKS], axis=0)
    band = fit_band(cv_mean, joint.cv_targets_[:, -1], joint.interval)
    half = band.half_width(mean, LEVEL)
    pools.setdefault((budget, method, BASELINE, AVERAGE), Pool()).add(
        truth[:, -1], mean, np.clip(mean - half, 0, 1), np.clip(mean + half, 0, 1)
    )


def add_shipped(
    sources: dict[str, ResponseMatrix],
    subsets: dict[str, Subset],
    targets: dict[str, np.ndarray],
    joined: ResponseMatrix,
    truth: np.ndarray,
    where: tuple[int, str],
    pools: dict[tuple, Pool],
) -> None:
    """``kridge`` per benchmark on the same subsets and source models, and their average
    (interval: conformal on the mean of the six out-of-fold estimates of the source models)."""
    values, oof = [], []
    for k, b in enumerate(BENCHMARKS):
        estimator = make_estimator(SHIPPED).fit(sources[b], subsets[b], targets[b])
        value, lower, upper = estimator.estimate_matrix(joined, level=LEVEL)
        values.append(value)
        oof.append(estimator.oof_)
        pools.setdefault((*where, SHIPPED, b), Pool()).add(truth[:, k], value, lower, upper)
    mean = np.mean(values, axis=0)
    band = fit_band(np.mean(oof, axis=0), np.mean([targets[b] for b in BENCHMARKS], axis=0))
    half = band.half_width(mean, LEVEL)
    pools.setdefault((*where, SHIPPED, AVERAGE), Pool()).add(
        truth[:, -1], mean, np.clip(mean - half, 0, 1), np.clip(mean + half, 0, 1)
    )


# ---------------------------------------------------------------------- report
def mean_mae(
    records: list[dict], budget: int, subset: str, label: str, outputs: tuple[str, ...]
) -> float:
    """MAE of ``label`` averaged over ``outputs``, at one budget and subset method."""
    return float(
        np.mean(
            [
                r["mae"]
                for r in records
                if (r["budget"], r["subset"], r["method"]) == (budget, subset, label)
                and r["output"] in outputs
            ]
        )
    )


def gain(records: list[dict], budget: int, method: str, label: str, output: str) -> float:
    return 1.0 - mean_mae(records, budget, method, label, (output,)) / mean_mae(
        records, budget, method, BASELINE, (output,)
    )


def summary_table(records: list[dict], labels: list[str]) -> list[str]:
    """Per budget and subset: mean MAE over the six benchmarks, MAE of the average, gains."""
    lines = [
        "| budget | subset | method | mean MAE (6) | gain | average MAE | gain | cov90 (6) | "
        "average cov90 |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    combos = dict.fromkeys((r["budget"], r["subset"]) for r in records)
    for budget, method in combos:
        for label in [BASELINE, *labels]:
            rows = {
                r["output"]: r
                for r in records
                if (r["budget"], r["subset"], r["method"]) == (budget, method, label)
            }
            label_mae = np.mean([rows[b]["mae"] for b in BENCHMARKS])
            base_mae = mean_mae(records, budget, method, BASELINE, BENCHMARKS)
            coverage = np.mean([rows[b]["coverage90"] for b in BENCHMARKS])
            mean_gain = "" if label == BASELINE else f"{100 * (1 - label_mae / base_mae):+.0f} %"
            avg_gain = (
                ""
                if label == BASELINE
                else f"{100 * gain(records, budget, method, label, AVERAGE):+.0f} %"
            )
            lines.append(
                f"| {budget} | {method} | {label} | {label_mae:.2f} | {mean_gain} | "
                f"{rows[AVERAGE]['mae']:.2f} | {avg_gain} | {coverage:.3f} | "
                f"{rows[AVERAGE]['coverage90']:.3f} |"
            )
    return lines


def against_shipped(records: list[dict]) -> list[str]:
    """The joint estimator against ``kridge`` (the shipped per-benchmark estimator)."""
    lines = [
        "| budget | subset | kridge mean MAE (6) | joint mean MAE (6) | gain | kridge average "
        "MAE | joint average MAE | gain |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for budget, subset in dict.fromkeys((r["budget"], r["subset"]) for r in records):
        six = [mean_mae(records, budget, subset, name, BENCHMARKS) for name in (SHIPPED, "joint")]
        avg = [mean_mae(records, budget, subset, name, (AVERAGE,)) for name in (SHIPPED, "joint")]
        lines.append(
            f"| {budget} | {subset} | {six[0]:.2f} | {six[1]:.2f} | "
            f"{100 * (1 - six[1] / six[0]):+.0f} % | {avg[0]:.2f} | {avg[1]:.2f} | "
            f"{100 * (1 - avg[1] / avg[0]):+.0f} % |"
        )
    return lines


def detail_table(records: list[dict], labels: list[str]) -> list[str]:
    """Every output: MAE, coverage and width of the baseline and each joint variant."""
    header = "| budget | subset | output | " + " | ".join(
        f"{name} MAE / cov / width" for name in [BASELINE, *labels]
    )
    lines = [header + " | gain (joint) |", "|---:|---|---|" + "---:|" * (len(labels) + 2)]
    combos = dict.fromkeys((r["budget"], r["subset"], r["output"]) for r in records)
    for budget, method, output in combos:
        cells = []
        for name in [BASELINE, *labels]:
            r = next(
                r
                for r in records
                if (r["budget"], r["subset"], r["method"], r["output"])
                == (budget, method, name, output)
            )
            cells.append(f"{r['mae']:.2f} / {r['coverage90']:.3f} / {r['width90']:.1f}")
        lines.append(
            f"| {budget} | {method} | {output} | " + " | ".join(cells) + " | "
            f"{100 * gain(records, budget, method, 'joint', output):+.0f} % |"
        )
    return lines


def markdown(records: list[dict], labels: list[str], command: str, notes: str) -> str:
    first = records[0]
    lines = [
        "# Joint estimation across the six Open LLM Leaderboard v1 benchmarks",
        "",
        "Generated by `tools/eval_joint.py`; do not edit by hand. Command:",
        "",
        f"    {command}",
        "",
        f"Models with responses and a true score on all six benchmarks, {first['repeats']} "
        f"random 80/20 splits ({first['n_heldout']} held-out models per split). Per split, "
        "budget and selection method, each benchmark's subset is chosen on its source models "
        "and shared by every method. `calibrated`: the per-benchmark estimator on that "
        "benchmark's subset only; its `average` is the mean of the six estimates. `joint`: "
        "`JointEstimator` (cross-fitted `calibrated` estimates of all six plus all subset item "
        "scores, ridge head per output with GCV). `stack`: the six estimates only. "
        "`joint+mirtD`: plus abilities of a D-dimensional 2PL over all subset items. "
        "`kridge`: the per-benchmark estimator most shipped tasks use, on the same subsets "
        "(its `average`: the mean of the six). Errors "
        "in score points (percent) against the true full score (`full_score_metabench`; "
        "hellaswag: the leaderboard column); `average` is the mean of the six true scores "
        "(metabench's micro-averaged MMLU, not the leaderboard's mean over subjects). `cov90`: "
        "share of held-out models inside the 90 % conformal interval; `gain`: "
        "1 - MAE / MAE(calibrated).",
        "",
        notes,
        "",
        "## Summary",
        "",
        *summary_table(records, labels),
        "",
        "## Joint against the shipped per-benchmark estimator (`kridge`)",
        "",
        *against_shipped(records),
        "",
        "## Per benchmark (MAE / cov90 / mean width of the 90 % interval)",
        "",
        *detail_table(records, labels),
        "",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="openllm_v1 folder")
    parser.add_argument("--budgets", nargs="+", type=int, default=[25, 50])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--subsets", nargs="+", default=list(SUBSET_METHODS), choices=SUBSET_METHODS
    )
    parser.add_argument(
        "--mirt-dims",
        nargs="*",
        type=int,
        default=[],
        help="add a joint+mirtD variant for each D (a D-dimensional 2PL over all subset items)",
    )
    parser.add_argument("--no-stack", action="store_true", help="skip the estimates-only variant")
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument(
        "--out", type=Path, default=REPO / "bench" / "joint", help="writes OUT.json, OUT.md"
    )
    parser.add_argument("--quick", action="store_true", help="1 repeat, budget 25, random")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.budgets, args.subsets = 1, [25], ["random"]
    if args.repeats < 1 or min(args.budgets) < 2 or any(d < 1 for d in args.mirt_dims):
        parser.error("--repeats must be >= 1, budgets >= 2 and --mirt-dims >= 1")
    if not (args.data / "responses").is_dir():
        parser.error(f"{args.data}: no responses/ folder (the shared data is missing)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = " ".join(["python tools/eval_joint.py", *(sys.argv[1:] if argv is None else argv)])
    started = time.perf_counter()
    load_at_start = os.getloadavg()[0]
    matrices, truths, models = load_all(args.data)
    pools: dict[tuple, Pool] = {}
    timings: dict[str, float] = {}
    total = args.repeats * len(args.budgets) * len(args.subsets)
    with tqdm(total=total, desc="split x budget x subset") as progress:
        for rng in spawn(args.seed, args.repeats):
            evaluate_split(matrices, truths, models, rng, args, pools, timings, progress)
    records = [
        {"budget": budget, "subset": method, "method": label, "output": out, **pool.summary()}
        for (budget, method, label, out), pool in pools.items()
    ]
    labels = [SHIPPED, *variants(args.mirt_dims, not args.no_stack)]
    minutes = (time.perf_counter() - started) / 60
    n_fits = len(BENCHMARKS) * args.repeats
    notes = (
        f"{len(models)} models have all six. Run time {minutes:.1f} min on {os.cpu_count()} "
        f"cores (1-min load average {load_at_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end: other jobs shared the machine); 2PL "
        f"fits that hit their iteration limit: {int(timings.pop('irt_unconverged', 0))} of "
        f"{n_fits}. Seconds by step (fit + estimate, all splits): "
        + ", ".join(f"{k.removesuffix('_s')} {v:.0f}" for k, v in sorted(timings.items()))
        + "."
    )
    write_json_atomic(
        args.out.with_suffix(".json"),
        {"command": command, "notes": notes, "n_models": len(models), "records": records},
    )
    with atomic_path(args.out.with_suffix(".md")) as tmp:
        tmp.write_text(markdown(records, labels, command, notes) + "\n", encoding="utf-8")
    print(f"wrote {args.out.with_suffix('.json')} and .md. {notes}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
