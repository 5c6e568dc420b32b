"""``microbench demo``: the offline toolkit end to end on real leaderboard data (or synthetic).

Builds a micro-benchmark from the source models of a response matrix, applies it to held-out
models and prints estimates next to their true full-benchmark scores.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from ._options import add_seed, positive_int, print_table

DEFAULT_DATA = Path("../shared/data")


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "demo",
        help="build a micro-benchmark and check it on held-out models, offline",
        description=(
            "Split the models of the Open LLM Leaderboard MMLU matrix (DATA/openllm_v1) into "
            "source and held-out models, build a subset on the source ones and estimate the "
            "held-out models' full MMLU scores. Without DATA, a synthetic 2PL matrix is used."
        ),
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="shared data folder")
    parser.add_argument("--benchmark", default="mmlu", help="openllm_v1 benchmark (default: mmlu)")
    parser.add_argument("--budget", type=positive_int, default=30)
    parser.add_argument("--method", default="anchor_points")
    parser.add_argument("--show", type=positive_int, default=8, help="held-out models to print")
    add_seed(parser)
    parser.set_defaults(run=run)


def _load(args: argparse.Namespace):
    from ..responses import ResponseMatrix
    from ..synthetic import random_item_params, simulate_responses
    from ..truth import align_target, read_scores

    root = args.data / "openllm_v1"
    matrix_path = root / "responses" / f"{args.benchmark}_B.parquet"
    scores_path = root / "scores" / f"{args.benchmark}_B_scores.csv"
    if matrix_path.exists() and scores_path.exists():
        matrix = ResponseMatrix.read(matrix_path)
        scores = read_scores(scores_path, "full_score_metabench")
        source, target = align_target(matrix, scores)
        return (
            source,
            target,
            f"{matrix_path} (true score: full {args.benchmark} from {scores_path.name})",
        )
    matrix, _ = simulate_responses(random_item_params(200, seed=args.seed), 2000, seed=args.seed)
    source, target = align_target(matrix, None)
    return source, target, f"synthetic 2PL matrix ({args.data} not found)"


def run(args: argparse.Namespace) -> int:
    from .._rng import as_generator
    from ..build import build_bundle

    started = time.perf_counter()
    matrix, target, description = _load(args)
    order = as_generator(args.seed).permutation(matrix.n_models)
    n_heldout = matrix.n_models // 5
    heldout, source = order[:n_heldout], order[n_heldout:]
    print(f"data: {description}")
    print(
        f"{len(source)} source models, {n_heldout} held-out models, "
        f"{matrix.n_items} items in the matrix"
    )
    bundle = build_bundle(
        matrix.select_models([matrix.model_ids[k] for k in source]),
        target[source],
        name=f"demo-{args.benchmark}",
        benchmark=args.benchmark,
        method=args.method,
        budget=args.budget,
        seed=args.seed,
    )
    from ..reconstruct import estimate_models

    records = estimate_models(bundle, matrix.select_models([matrix.model_ids[k] for k in heldout]))
    truth = target[heldout]
    value = np.array([r["estimate_value"] for r in records])
    inside = np.array(
        [
            r["estimate_lower"] <= t <= r["estimate_upper"]
            for r, t in zip(records, truth, strict=True)
        ]
    )
    rows = [
        {
            "model": r["model"],
            "subset mean": 100 * r["subset_mean"],
            "estimate": 100 * r["estimate_value"],
            "90% interval": f"[{100 * r['estimate_lower']:.1f}, {100 * r['estimate_upper']:.1f}]",
            "true": 100 * t,
        }
        for r, t in zip(records[: args.show], truth[: args.show], strict=True)
    ]
    print(
        f"\n{args.budget} items ({args.method}), estimator {bundle.default_estimator}; "
        "scores in percent:"
    )
    print_table(rows, ["model", "subset mean", "estimate", "90% interval", "true"])
    print(
        f"\nheld-out MAE {100 * np.mean(np.abs(value - truth)):.2f} points, "
        f"90% interval coverage {inside.mean():.1%} over {n_heldout} models, "
        f"{time.perf_counter() - started:.1f} s"
    )
    return 0
