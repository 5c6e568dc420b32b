"""Conformal intervals on few items: residuals filed under cross-fitted vs the head's prediction.

On a handful of items hundreds of source models share one answer pattern. Their cross-fitted
predictions differ only by which models were left out, and that jitter sorts a tied group by
its own residuals; the band's bins and regions, cut on those predictions, then cut through
the group, and the group's shared prediction lands where residuals are small. Since this
fix each residual is filed under the fitted head's own prediction (``fit_band(...,
key=...)``), what a new model with the same answers gets.

Per Open LLM Leaderboard v1 benchmark, estimator and budget: ``--repeats`` splits of 400
random target models, the rest are sources; a random subset of the budget's items; the
same fit scored with the band filed under the cross-fitted predictions (``before``) and
under the head's predictions (``after``). Only the interval differs. Writes
``bench/conformal_ties.{json,md}``::

    python tools/bench_conformal_ties.py --shared ../shared/data
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_reliability import load_openllm

from lmeval_microbench._conformal import fit_band
from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.rank.replay import fit_on, select_subset, split_population

BENCHMARKS = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")
ESTIMATORS = ("ridge", "kridge", "mean")
BUDGETS = (10, 25, 50, 100)
TARGETS = 400
LEVEL = 0.9
ROOT = Path(__file__).resolve().parent.parent


def score(fitted, targets, truth) -> dict[str, float]:
    """Coverage and mean width (points) of ``fitted``'s intervals on the targets."""
    _, lower, upper = fitted.estimate_matrix(targets, level=LEVEL)
    return {
        "coverage": float(np.mean((lower <= truth) & (truth <= upper))),
        "width": float(np.mean(upper - lower) * 100),
    }


def one_fit(matrix, truth, estimator: str, budget: int, seed: int) -> dict[str, Any]:
    source, source_truth, targets, target_truth = split_population(
        matrix, truth, TARGETS, seed=seed
    )
    subset = select_subset("random", source, source_truth, budget, seed)
    fitted = fit_on(estimator, source, source_truth, subset.item_ids, None)
    after = score(fitted, targets, target_truth)
    prediction, fit_truth, _ = fitted.band_.fit_data
    fitted.band_ = fit_band(prediction, fit_truth, fitted.band_.mode)
    return {"before": score(fitted, targets, target_truth), "after": after}


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "## Conformal intervals on few items: ties in the answer patterns",
        "",
        f"`{report['command']}` ({report['seconds']:.0f} s). Per row: {report['repeats']} "
        f"splits of {TARGETS} random target models (the rest are sources), a random subset of "
        "the budget's items; 90 % coverage and mean width (points) of the same fit's intervals "
        "with residuals filed under the cross-fitted predictions (before) and under the fitted "
        "head's own predictions (after, the default now). Estimates are identical.",
        "",
        "| benchmark | estimator | items | coverage before | coverage after | "
        "width before | width after |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in report["rows"]:
        b, a = row["before"], row["after"]
        lines.append(
            f"| {row['benchmark']} | {row['estimator']} | {row['budget']} | "
            f"{b['coverage']:.2f} | {a['coverage']:.2f} | {b['width']:.1f} | {a['width']:.1f} |"
        )
    low = [r for r in report["rows"] if r["before"]["coverage"] < 0.85]
    where = sorted({(r["estimator"], r["budget"]) for r in low})
    worst_after = min(r["after"]["coverage"] for r in report["rows"])
    lines += [
        "",
        f"Rows below 0.85 before: {len(low)} of {len(report['rows'])} "
        f"({', '.join(f'{e} {k}' for e, k in where) or 'none'}); "
        f"lowest coverage after: {worst_after:.2f}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench")
    args = parser.parse_args()
    data = args.shared / "openllm_v1"
    if not data.is_dir():
        sys.exit(f"no Open LLM Leaderboard data at {data}; pass --shared")
    warnings.simplefilter("ignore")
    started = time.perf_counter()
    grid = [(b, e, k) for b in BENCHMARKS for e in ESTIMATORS for k in BUDGETS]
    rows, loaded = [], {}
    for benchmark, estimator, budget in tqdm(grid, desc="fits"):
        if benchmark not in loaded:
            loaded = {benchmark: load_openllm(data, benchmark)[:2]}
        matrix, truth = loaded[benchmark]
        fits = [one_fit(matrix, truth, estimator, budget, s) for s in range(args.repeats)]
        row: dict[str, Any] = {"benchmark": benchmark, "estimator": estimator, "budget": budget}
        for side in ("before", "after"):
            row[side] = {k: float(np.mean([f[side][k] for f in fits])) for k in fits[0][side]}
        rows.append(row)
    report = {
        "command": "python tools/bench_conformal_ties.py " + " ".join(sys.argv[1:]),
        "seconds": time.perf_counter() - started,
        "repeats": args.repeats,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / "conformal_ties.json", report)
    write_text_if_changed(args.out / "conformal_ties.md", markdown(report))


if __name__ == "__main__":
    main()
