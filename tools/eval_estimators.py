"""Accuracy and interval coverage of the score estimators on held-out real models.

For each Open LLM Leaderboard v1 benchmark in ``../shared/data/openllm_v1`` and each of
``--repeats`` seeded splits of its models into source (80 %) and held-out (20 %):

1. fit a 2PL IRT model on the source models (all matrix items);
2. for each budget, draw a subset from the source models: ``random`` (uniform items, equal
   weights) and ``anchor_points`` (k-means medoids weighted by cluster share);
3. fit every estimator on the source models, estimate the held-out models from their subset
   scores, and compare with their true full-benchmark score (metabench's
   ``full_score_metabench``; hellaswag: the leaderboard's ``hellaswag`` column).

Errors are in score points (percent). ``coverage90`` is the share of held-out models whose
true score lies in the 90 % interval, pooled over repeats; ``se_coverage90`` is the same for
``value +- 1.645 se`` where the estimator has a model-based se. The default estimator is also
run with each interval scale to compare them.

    python tools/eval_estimators.py            # full run, writes bench/estimators.{json,md}
    python tools/eval_estimators.py --quick    # 2 benchmarks, 2 repeats, 2 budgets
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from lmeval_microbench._conformal import SCALE_MODES
from lmeval_microbench._io import atomic_path, write_json_atomic
from lmeval_microbench._rng import spawn
from lmeval_microbench.errors import ConvergenceWarning, InputError
from lmeval_microbench.estimators import (
    DEFAULT_ESTIMATOR,
    ESTIMATORS,
    ScoreEstimator,
    make_estimator,
)
from lmeval_microbench.irt import IRTModel
from lmeval_microbench.irt.params import ItemParams
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection.anchor_points import AnchorPointsSelector
from lmeval_microbench.selection.base import Subset
from lmeval_microbench.selection.random import RandomSelector

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / ".." / "shared" / "data" / "openllm_v1"
BENCHMARKS = ("arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande")
SUBSETS = {"random": RandomSelector(), "anchor_points": AnchorPointsSelector()}
HELDOUT_SHARE = 0.2
Z90 = 1.6448536269514722


# ---------------------------------------------------------------------- data
def load_benchmark(data: Path, benchmark: str) -> tuple[ResponseMatrix, np.ndarray]:
    """Response matrix of the models with a known full score, and that score as a fraction."""
    matrix = ResponseMatrix.read_parquet(data / "responses" / f"{benchmark}_B.parquet")
    scores_file = data / "scores" / f"{benchmark}_B_scores.csv"
    if scores_file.exists():
        table = pd.read_csv(scores_file).drop_duplicates("model").set_index("model")
        truth = table["full_score_metabench"]
    else:  # hellaswag: the leaderboard's own score over all 10,042 items
        table = (
            pd.read_csv(data / "open-llm-leaderboard.csv").drop_duplicates("name").set_index("name")
        )
        truth = table[benchmark]
    truth = truth.reindex(list(matrix.model_ids))
    known = [m for m, value in truth.items() if np.isfinite(value)]
    if len(known) < 100:
        raise InputError(f"{benchmark}: only {len(known)} models have a known full score")
    return matrix.select_models(known), truth.loc[known].to_numpy(dtype=np.float64) / 100.0


def metabench_reference(data: Path, benchmark: str) -> dict[str, float] | None:
    """metabench's own held-out error (IRT on all matrix items, test-split models)."""
    path = data / "scores" / f"{benchmark}_B_scores.csv"
    if not path.exists():
        return None
    table = pd.read_csv(path)
    test = table[table["split"] == "test"]
    error = test["pred_from_subset_irt"] - test["full_score_metabench"]
    return {
        "mae": float(error.abs().mean()),
        "rmse": float(np.sqrt(np.mean(error**2))),
        "n": len(test),
    }


# ---------------------------------------------------------------------- one evaluation
@dataclass
class Pooled:
    """Held-out truths and predictions of one configuration, pooled over repeats."""

    truth: list[np.ndarray]
    value: list[np.ndarray]
    lower: list[np.ndarray]
    upper: list[np.ndarray]
    se: list[np.ndarray]
    n_heldout: int = 0

    @classmethod
    def empty(cls) -> Pooled:
        return cls([], [], [], [], [])

    def add(self, truth: np.ndarray, value, lower, upper, se) -> None:
        for store, array in zip(
            (self.truth, self.value, self.lower, self.upper, self.se),
            (truth, value, lower, upper, se),
            strict=True,
        ):
            store.append(np.asarray(array, dtype=np.float64))
        self.n_heldout = truth.size

    def summary(self) -> dict[str, float | int | list[float] | None]:
        truth, value = np.concatenate(self.truth), np.concatenate(self.value)
        lower, upper, se = (
            np.concatenate(self.lower),
            np.concatenate(self.upper),
            np.concatenate(self.se),
        )
        inside = (lower <= truth) & (truth <= upper)
        error = value - truth
        low = truth < np.quantile(truth, 1 / 3)
        high = truth > np.quantile(truth, 2 / 3)
        per_repeat = [
            float(np.mean((lo <= t) & (t <= hi)))
            for t, lo, hi in zip(self.truth, self.lower, self.upper, strict=True)
        ]
        has_se = bool(np.all(np.isfinite(se)))
        return {
            "mae": 100 * float(np.mean(np.abs(error))),
            "rmse": 100 * float(np.sqrt(np.mean(error**2))),
            "bias": 100 * float(np.mean(error)),
            "coverage90": float(np.mean(inside)),
            "coverage90_low_third": float(np.mean(inside[low])),
            "coverage90_high_third": float(np.mean(inside[high])),
            "coverage90_by_repeat": per_repeat,
            "width90": 100 * float(np.mean(upper - lower)),
            "se_coverage90": float(np.mean(np.abs(error) <= Z90 * se)) if has_se else None,
            "mean_se": 100 * float(np.mean(se)) if has_se else None,
            "n_heldout": self.n_heldout,
            "repeats": len(self.truth),
        }


def split_models(n_models: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    order = rng.permutation(n_models)
    n_heldout = round(HELDOUT_SHARE * n_models)
    return np.sort(order[n_heldout:]), np.sort(order[:n_heldout])


@dataclass(frozen=True)
class Config:
    """One estimator setting: registry name, interval scale, extra keyword arguments."""

    name: str
    interval: str = "binned"
    variant: str = ""
    kwargs: tuple[tuple[str, object], ...] = ()

    def make(self) -> ScoreEstimator:
        return make_estimator(self.name, interval=self.interval, **dict(self.kwargs))


VARIANTS = (
    Config("calibrated", variant="theta+mean", kwargs=(("features", ("theta", "mean")),)),
    Config("calibrated", variant="linear", kwargs=(("n_knots", 0),)),
)
"""Ablations of the default: metabench's two features, and no spline terms."""


def configurations(estimators: list[str], subset_kind: str, intervals: list[str]) -> list[Config]:
    """Every estimator with the default scale, the interval-scale study and the ablations."""
    configs = [
        Config(name)
        for name in estimators
        if not (name == "anchor" and subset_kind in ("random", "all"))
    ]
    if DEFAULT_ESTIMATOR in estimators:
        configs += [Config(DEFAULT_ESTIMATOR, mode) for mode in intervals if mode != "binned"]
        configs += [v for v in VARIANTS if v.name == DEFAULT_ESTIMATOR]
    return configs


def draw_subset(kind: str, source: ResponseMatrix, budget: int, seed: int) -> Subset:
    """A subset of ``budget`` source items; ``all`` is every item with equal weights."""
    if kind == "all":
        return Subset(source.item_ids, np.full(source.n_items, 1.0 / source.n_items), "all")
    return SUBSETS[kind].select(source, budget, seed=seed)


def evaluate_split(
    matrix: ResponseMatrix,
    truth: np.ndarray,
    rng: np.random.Generator,
    budgets: list[int],
    estimators: list[str],
    subset_kinds: list[str],
    intervals: list[str],
    pooled: dict[tuple, Pooled],
    timings: dict[str, float],
) -> None:
    source_rows, heldout_rows = split_models(matrix.n_models, rng)
    source = matrix.select_models([matrix.model_ids[k] for k in source_rows])
    heldout = matrix.select_models([matrix.model_ids[k] for k in heldout_rows])
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model = IRTModel(model="2pl", n_dims=1, random_state=int(rng.integers(2**31)))
        params: ItemParams = model.fit(source).params_
    timings["irt_unconverged"] = timings.get("irt_unconverged", 0) + sum(
        issubclass(w.category, ConvergenceWarning) for w in caught
    )
    timings["irt_fit_s"] = timings.get("irt_fit_s", 0.0) + time.perf_counter() - start
    for budget in budgets:
        for kind in subset_kinds if budget < source.n_items else ["all"]:
            subset = draw_subset(kind, source, budget, int(rng.integers(2**31)))
            for config in configurations(estimators, kind, intervals):
                start = time.perf_counter()
                estimator = config.make().fit(source, subset, truth[source_rows], irt=params)
                value, lower, upper, se = estimator.estimate_matrix(heldout, return_se=True)
                timings[config.name] = timings.get(config.name, 0.0) + time.perf_counter() - start
                key = (budget, kind, config)
                pooled.setdefault(key, Pooled.empty()).add(
                    truth[heldout_rows], value, lower, upper, se
                )


# ---------------------------------------------------------------------- report
def _label(record: dict) -> str:
    extras = [
        x
        for x in (record["variant"], record["interval"] if record["interval"] != "binned" else "")
        if x
    ]
    return record["estimator"] + (f" ({', '.join(extras)})" if extras else "")


def summary_table(records: list[dict]) -> list[str]:
    """Mean over benchmarks of MAE and coverage, default settings, per budget and subset kind."""
    main = [r for r in records if not r["variant"] and r["interval"] == "binned"]
    columns = sorted({(r["budget"], r["subset"]) for r in main}, key=lambda c: (c[0], c[1]))
    columns = [c for c in columns if c[1] != "all"]
    lines = [
        "| estimator | " + " | ".join(f"{b} {k}" for b, k in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for name in dict.fromkeys(r["estimator"] for r in main):
        cells = []
        for budget, kind in columns:
            rows = [
                r
                for r in main
                if (r["estimator"], r["budget"], r["subset"]) == (name, budget, kind)
            ]
            if not rows:
                cells.append("-")
                continue
            mae = np.mean([r["mae"] for r in rows])
            coverage = np.mean([r["coverage90"] for r in rows])
            cells.append(f"{mae:.2f} / {coverage:.2f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def benchmark_table(rows: list[dict]) -> list[str]:
    lines = [
        "| budget | subset | estimator | MAE | RMSE | bias | cov90 | low/high | width | se cov |",
        "|---:|---|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        se_cov = "-" if r["se_coverage90"] is None else f"{r['se_coverage90']:.2f}"
        lines.append(
            f"| {r['budget']} | {r['subset']} | {_label(r)} | {r['mae']:.2f} | {r['rmse']:.2f} | "
            f"{r['bias']:+.2f} | {r['coverage90']:.3f} | {r['coverage90_low_third']:.2f}/"
            f"{r['coverage90_high_third']:.2f} | {r['width90']:.2f} | {se_cov} |"
        )
    return lines


def markdown(
    records: list[dict], references: dict[str, dict | None], command: str, notes: str
) -> str:
    lines = [
        "# Score estimators on held-out Open LLM Leaderboard v1 models",
        "",
        "Generated by `tools/eval_estimators.py`; do not edit by hand. Command:",
        "",
        f"    {command}",
        "",
        f"Each row pools {records[0]['repeats']} random 80/20 splits of the models of one "
        "benchmark into source and held-out models. Subsets, the 2PL IRT fit (all matrix "
        "items) and every estimator fit use the source models only. Errors are in score points "
        "(percent) against the true full-benchmark score (metabench's `full_score_metabench`; "
        "hellaswag: the leaderboard's column), which covers 1,000-14,000 items while the "
        "matrices hold 58-249 of them. `cov90`: share of held-out models inside the 90 % "
        "conformal interval; `low/high`: the same among the lowest / highest third of true "
        "scores; `width`: mean interval width; `se cov`: coverage of value +- 1.645 se with "
        "the model-based se. Interval scale `binned` unless noted; `(theta+mean)` and "
        "`(linear)` are ablations of `calibrated`.",
        "",
        notes,
        "",
        "## Summary: MAE / cov90, mean over benchmarks",
        "",
        "A budget column averages the benchmarks with more matrix items than the budget "
        "(a budget at or above the matrix size is the `all` row of that benchmark's table).",
        "",
        *summary_table(records),
        "",
    ]
    by_benchmark: dict[str, list[dict]] = {}
    for record in records:
        by_benchmark.setdefault(record["benchmark"], []).append(record)
    for benchmark, rows in by_benchmark.items():
        first = rows[0]
        lines += [
            f"## {benchmark}: {first['n_items']} matrix items, {first['n_heldout']} held-out "
            "models per split",
            "",
        ]
        reference = references.get(benchmark)
        if reference:
            lines += [
                f"metabench's own reconstruction from all {first['n_items']} items on its "
                f"{reference['n']} test models: MAE {reference['mae']:.2f}, "
                f"RMSE {reference['rmse']:.2f}.",
                "",
            ]
        lines += [*benchmark_table(rows), ""]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="openllm_v1 folder")
    parser.add_argument("--benchmarks", nargs="+", default=list(BENCHMARKS), choices=BENCHMARKS)
    parser.add_argument("--budgets", nargs="+", type=int, default=[25, 50, 100])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--estimators", nargs="+", default=list(ESTIMATORS), choices=list(ESTIMATORS)
    )
    parser.add_argument("--subsets", nargs="+", default=list(SUBSETS), choices=list(SUBSETS))
    parser.add_argument(
        "--intervals",
        nargs="+",
        default=list(SCALE_MODES),
        choices=SCALE_MODES,
        help="interval scales compared on the default estimator",
    )
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument(
        "--out", type=Path, default=REPO / "bench" / "estimators", help="writes OUT.json, OUT.md"
    )
    parser.add_argument(
        "--quick", action="store_true", help="arc and gsm8k, 2 repeats, budgets 25 and 100"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.benchmarks, args.repeats, args.budgets = ["arc", "gsm8k"], 2, [25, 100]
    if args.repeats < 1 or min(args.budgets) < 2:
        parser.error("--repeats must be >= 1 and budgets >= 2")
    if not (args.data / "responses").is_dir():
        parser.error(f"{args.data}: no responses/ folder (the shared data is missing)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = " ".join(
        ["python tools/eval_estimators.py", *(sys.argv[1:] if argv is None else argv)]
    )
    started = time.perf_counter()
    records: list[dict] = []
    references: dict[str, dict | None] = {}
    timings: dict[str, float] = {}
    steps = tqdm(total=len(args.benchmarks) * args.repeats, desc="splits", unit="split")
    for benchmark in args.benchmarks:
        matrix, truth = load_benchmark(args.data, benchmark)
        references[benchmark] = metabench_reference(args.data, benchmark)
        budgets = sorted({min(b, matrix.n_items) for b in args.budgets})
        pooled: dict[tuple, Pooled] = {}
        for rng in spawn(args.seed, args.repeats):
            steps.set_postfix_str(benchmark)
            evaluate_split(
                matrix,
                truth,
                rng,
                budgets,
                args.estimators,
                args.subsets,
                args.intervals,
                pooled,
                timings,
            )
            steps.update()
        for (budget, kind, config), pool in pooled.items():
            records.append(
                {
                    "benchmark": benchmark,
                    "budget": budget,
                    "subset": kind,
                    "estimator": config.name,
                    "variant": config.variant,
                    "interval": config.interval,
                    "n_items": matrix.n_items,
                    **pool.summary(),
                }
            )
    steps.close()
    minutes = (time.perf_counter() - started) / 60
    write_json_atomic(args.out.with_suffix(".json"), records)
    notes = (
        f"Run time {minutes:.1f} min; IRT fits that hit their iteration limit: "
        f"{int(timings.pop('irt_unconverged', 0))} of {len(args.benchmarks) * args.repeats}. "
        "Seconds by step: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(timings.items())) + "."
    )
    with atomic_path(args.out.with_suffix(".md")) as tmp:
        tmp.write_text(markdown(records, references, command, notes) + "\n", encoding="utf-8")
    print(f"wrote {args.out.with_suffix('.json')} and .md. {notes}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
