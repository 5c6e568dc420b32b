"""How long ``microbench reliability`` takes with its defaults, before and after issue 13.

Three measurements, each old and new in the same process (load varies on a shared machine,
so only ratios taken together mean much):

1. **Same work per split**: the first ``--splits`` leave-one-out splits of the default plan
   (every method, estimator and budget) on a synthetic 22 x 2,854 matrix (the size of the
   matrix in the issue), through the code before the change (the last committed
   ``lmeval_microbench/reliability.py``, BLAS threads left at the library default) and the
   package now (one BLAS thread). The records must be equal except for their timings.
2. **Defaults, whole run**: ``run_reliability`` as the CLI calls it with no options on that
   matrix, now (one ``loo`` cycle); before it ran five cycles, so the old run is the old
   seconds per split times 110 splits (an estimate: the old run takes over an hour).
3. **A leaderboard plan**: the arc matrix (random protocol, a small plan), old and new: the
   speed of the large-matrix case must not get worse.

    python tools/bench_reliability_speed.py                # writes bench/reliability_speed.*
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from lmeval_microbench import reliability
from lmeval_microbench.estimators import ESTIMATORS
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import SELECTORS
from lmeval_microbench.synthetic import random_item_params, simulate_responses

sys.path.insert(0, str(Path(__file__).resolve().parent))
from leaderboard_bench import load_openllm

REPO = Path(__file__).resolve().parents[1]
OLD_PATH = "lmeval_microbench/reliability.py"
SHAPE = (22, 2854)
ISSUE_MINUTES = 70
ISSUE_SOURCE = (
    "issue 13: defaults on a 22 x 2,854 matrix ran more than 70 minutes with no output "
    "(4 methods x 4 estimators x 2 budgets alone took 14.5 minutes)"
)
LEADERBOARD_PLAN = {
    "methods": ["random", "anchor_points", "metabench"],
    "estimators": ["mean", "calibrated", "kridge"],
    "budgets": [25, "all"],
    "protocols": ["random"],
    "repeats": 2,
}
TIMING_KEYS = ("seconds", "selection_seconds")


def old_module() -> ModuleType:
    """``reliability.py`` as last committed, imported as a module of the package."""
    commit = subprocess.run(
        ["git", "rev-list", "-1", "HEAD", "--", OLD_PATH],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    source = _git_show(f"{commit}:{OLD_PATH}") or _git_show(f"{commit}^:{OLD_PATH}")
    folder = Path(tempfile.mkdtemp(prefix="reliability_before_"))
    path = folder / "reliability_before.py"
    path.write_text(source)
    name = "lmeval_microbench._reliability_before"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _git_show(ref: str) -> str:
    shown = subprocess.run(["git", "show", ref], cwd=REPO, capture_output=True, text=True)
    return shown.stdout if shown.returncode == 0 else ""


def timed(work: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    """The result of ``work`` and its wall-clock and CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return result, {
        "wall_s": round(time.perf_counter() - wall, 1),
        "cpu_s": round(time.process_time() - cpu, 1),
    }


def synthetic_matrix() -> tuple[ResponseMatrix, np.ndarray]:
    matrix, _ = simulate_responses(random_item_params(SHAPE[1], seed=1), SHAPE[0], seed=2)
    return matrix, matrix.mean_scores()


def records_of_splits(module: ModuleType, matrix: ResponseMatrix, truth: np.ndarray, n: int):
    """Records of the default plan on the first ``n`` loo splits, through ``module``'s engine."""
    plan = module.Plan(
        tuple(SELECTORS),
        tuple(ESTIMATORS),
        module.DEFAULT_BUDGETS,
        ("loo",),
        1,
        0,
    )
    pools: dict = {}
    cache = module.IRTCache("2pl")
    splits = module.loo_splits(matrix, truth, repeats=1, seed=0)
    for _, split in zip(range(n), splits, strict=False):
        module.evaluate_split(split, plan, pools, cache)
    return [{"key": list(key)} | module.summarise(pool) for key, pool in sorted(pools.items())]


def same_results(old: list[dict], new: list[dict]) -> bool:
    """Equal records on the fields both versions report, timings left out (NaN equals NaN).

    The last committed version may predate a metric (the coverage by thirds): the fields it
    lacks cannot be compared.
    """
    if len(old) != len(new):
        return False
    shared = [set(a) & set(b) - set(TIMING_KEYS) for a, b in zip(old, new, strict=True)]
    strip = [
        [{k: r[k] for k in keys} for r, keys in zip(rs, shared, strict=True)] for rs in (old, new)
    ]
    return json.dumps(strip[0], default=str) == json.dumps(strip[1], default=str)


def per_split(old: ModuleType, n_splits: int) -> dict[str, Any]:
    """Measurement 1: the same splits, old and new."""
    matrix, truth = synthetic_matrix()
    old_records, before = timed(lambda: records_of_splits(old, matrix, truth, n_splits))
    with reliability.blas_limit(reliability.BLAS_THREADS):
        new_records, after = timed(lambda: records_of_splits(reliability, matrix, truth, n_splits))
    return {
        "splits": n_splits,
        "before": before,
        "after": after,
        "speedup_wall": round(before["wall_s"] / after["wall_s"], 2),
        "same_records": same_results(old_records, new_records),
    }


def whole_run(seconds_per_old_split: float) -> dict[str, Any]:
    """Measurement 2: the CLI's defaults now, against the old run estimated from its splits."""
    matrix, truth = synthetic_matrix()
    result, after = timed(lambda: reliability.run_reliability(matrix, truth, repeats=None))
    old_splits = reliability.DEFAULT_REPEATS * matrix.n_models
    return {
        "after": after,
        "after_splits": result.info["repeats"] * matrix.n_models,
        "before_estimated_wall_s": round(seconds_per_old_split * old_splits, 0),
        "before_splits": old_splits,
        "before_issue_minutes": ISSUE_MINUTES,
        "before_issue_source": ISSUE_SOURCE,
    }


def leaderboard(old: ModuleType, data: Path) -> dict[str, Any]:
    """Measurement 3: a small plan on the arc matrix, old and new.

    Old and new are compared at the same BLAS threads (they must agree exactly); against
    the old run on the library's default threads the largest difference of any metric is
    reported: threaded BLAS sums in another order, which moves the last bits of an estimate
    and can flip a near-tie in Kendall's tau.
    """
    matrix, truth, _ = load_openllm(data / "openllm_v1", "arc")
    matrix, truth = reliability.complete_models(matrix, truth)
    plan = dict(LEADERBOARD_PLAN, progress=False)
    old_result, before = timed(lambda: old.run_reliability(matrix, truth, **plan))
    new_result, after = timed(lambda: reliability.run_reliability(matrix, truth, **plan))
    with reliability.blas_limit(reliability.BLAS_THREADS):
        old_one_thread = old.run_reliability(matrix, truth, **plan)
    return {
        "matrix": f"arc_B: {matrix.n_models} models x {matrix.n_items} items",
        "plan": LEADERBOARD_PLAN,
        "before": before,
        "after": after,
        "speedup_wall": round(before["wall_s"] / after["wall_s"], 2),
        "same_records": same_results(old_one_thread.records, new_result.records),
        "largest_difference_vs_old_threads": largest_differences(
            old_result.records, new_result.records
        ),
    }


def largest_differences(old: list[dict], new: list[dict]) -> dict[str, float]:
    """Per metric, the largest absolute difference between two runs' records (nonzero only)."""
    worst: dict[str, float] = {}
    for a, b in zip(old, new, strict=True):
        for key, value in a.items():
            other = b.get(key)
            if key in TIMING_KEYS or not isinstance(value, float) or not isinstance(other, float):
                continue
            if math.isfinite(value) and math.isfinite(other) and value != other:
                worst[key] = max(worst.get(key, 0.0), abs(value - other))
    return {k: float(f"{v:.2g}") for k, v in sorted(worst.items())}


def markdown(report: dict[str, Any]) -> str:
    split, run, board = report["per_split"], report["defaults"], report["leaderboard"]
    minutes = run["before_estimated_wall_s"] / 60
    return "\n".join(
        [
            "# Speed of `microbench reliability` (issue 13)",
            "",
            "Generated by `tools/bench_reliability_speed.py`; do not edit by hand. Machine: "
            f"{report['machine']['cores']} cores, load average "
            f"{report['machine']['load_average_at_start']} at the start (shared: compare the "
            "ratios, which were measured together, rather than the seconds).",
            "",
            "| measurement | before | after | ratio | records equal |",
            "|---|---:|---:|---:|---|",
            f"| defaults plan, first {split['splits']} loo splits of a synthetic 22 x 2,854 "
            f"matrix (wall s) | {split['before']['wall_s']:.0f} | {split['after']['wall_s']:.0f} "
            f"| {split['speedup_wall']:.1f}x | {'yes' if split['same_records'] else '**no**'} |",
            f"| `microbench reliability` defaults on it, whole run (wall s) | "
            f"{run['before_estimated_wall_s']:.0f} (est., {run['before_splits']} splits) | "
            f"{run['after']['wall_s']:.0f} ({run['after_splits']} splits) | "
            f"{run['before_estimated_wall_s'] / run['after']['wall_s']:.1f}x | - |",
            f"| {board['matrix']}, small plan (wall s) | {board['before']['wall_s']:.0f} | "
            f"{board['after']['wall_s']:.0f} | {board['speedup_wall']:.1f}x | "
            f"{'yes' if board['same_records'] else '**no**'} |",
            "",
            f"Before the change, the defaults ran {run['before_splits']} splits (5 loo cycles) "
            f"with BLAS on every core: about {minutes:.0f} minutes estimated here from the "
            f"per-split time; {ISSUE_SOURCE}. After: one BLAS thread (small matrices: the "
            "threads cost more than they bring) and one loo cycle by default (`--repeats` "
            f"still sets more); the whole run took {run['after']['wall_s'] / 60:.1f} minutes "
            f"wall, {run['after']['cpu_s'] / 60:.1f} minutes of CPU.",
            "",
            "Leaderboard plan: " + json.dumps(board["plan"]) + ". Records equal: old and new "
            "at the same BLAS threads. Against the old run on the default threads the largest "
            "differences are rounding (threaded BLAS sums in another order): "
            + json.dumps(board["largest_difference_vs_old_threads"])
            + " (score points; `kendall_tau`: a near-tie flipped).",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--splits", type=int, default=2, help="loo splits of measurement 1")
    parser.add_argument("--data", type=Path, default=REPO / ".." / "shared" / "data")
    parser.add_argument("--out-dir", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    old = old_module()
    report: dict[str, Any] = {
        "machine": {
            "cores": os.cpu_count(),
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        },
    }
    report["per_split"] = per_split(old, args.splits)
    seconds = report["per_split"]["before"]["wall_s"] / args.splits
    report["defaults"] = whole_run(seconds)
    report["leaderboard"] = leaderboard(old, args.data)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "reliability_speed.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out_dir / "reliability_speed.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
