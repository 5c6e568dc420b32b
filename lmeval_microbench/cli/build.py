"""``microbench build``: select a subset of a response matrix and write a bundle folder."""

from __future__ import annotations

import argparse

from ._options import add_seed, positive_int, print_json, split_list


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "build",
        help="select items from a response matrix and write a bundle",
        description=(
            "Select BUDGET items with METHOD from the source models of MATRIX, fit IRT and every "
            "score estimator on them, and write a bundle folder (bundle.json)."
        ),
        epilog=(
            "example: microbench build mmlu_B.parquet --method anchor_points --budget 50 "
            "--scores mmlu_B_scores.csv --score-column full_score_metabench --benchmark mmlu "
            "--out bundles/mmlu-50"
        ),
    )
    parser.add_argument("matrix", help="response matrix of the source models (.parquet or .csv)")
    parser.add_argument(
        "--method", default="anchor_points", help="selection method (default: anchor_points)"
    )
    parser.add_argument(
        "--budget", type=positive_int, required=True, help="number of items to keep"
    )
    parser.add_argument(
        "--scores", help="CSV/parquet of true full-benchmark scores (default: matrix row means)"
    )
    parser.add_argument(
        "--score-column", default="score", help="column of --scores holding the score"
    )
    parser.add_argument("--score-scale", choices=("auto", "fraction", "percent"), default="auto")
    parser.add_argument("--estimators", help="comma-separated estimators to fit (default: all)")
    parser.add_argument("--default-estimator", default=None, help="estimator used by default")
    parser.add_argument("--irt-model", choices=("1pl", "2pl", "3pl", "4pl"), default="2pl")
    parser.add_argument("--benchmark", required=True, help="benchmark name, e.g. mmlu")
    parser.add_argument("--name", help="bundle name (default: BENCHMARK-BUDGET-METHOD)")
    parser.add_argument(
        "--metric", default="acc", help="lm-eval metric the scores are (default: acc)"
    )
    parser.add_argument(
        "--filter", default="none", help="lm-eval filter of the metric (default: none)"
    )
    parser.add_argument(
        "--dataset-path", help="Hugging Face dataset path of the benchmark documents"
    )
    parser.add_argument("--dataset-name", help="dataset config name")
    parser.add_argument("--dataset-split", help="dataset split")
    parser.add_argument("--dataset-revision", help="dataset revision (commit sha)")
    parser.add_argument("--license", help="licence of the bundle content (for the Hub card)")
    parser.add_argument("--out", required=True, help="bundle folder to write")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing bundle folder"
    )
    add_seed(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..build import build_bundle
    from ..bundle import DatasetCoordinates, MetricSpec, save_bundle
    from ..estimators import DEFAULT_ESTIMATOR
    from ..responses import ResponseMatrix
    from ..truth import align_target, read_scores

    matrix = ResponseMatrix.read(args.matrix)
    scores = (
        read_scores(args.scores, args.score_column, scale=args.score_scale) if args.scores else None
    )
    source, target = align_target(matrix, scores)
    estimators = split_list(args.estimators)
    default = args.default_estimator or (
        DEFAULT_ESTIMATOR if not estimators or DEFAULT_ESTIMATOR in estimators else estimators[0]
    )
    dataset = (
        DatasetCoordinates(
            args.dataset_path, args.dataset_name, args.dataset_split, args.dataset_revision
        )
        if args.dataset_path
        else None
    )
    bundle = build_bundle(
        source,
        target,
        name=args.name or f"{args.benchmark}-{args.budget}-{args.method}",
        benchmark=args.benchmark,
        method=args.method,
        budget=args.budget,
        seed=args.seed,
        estimators=estimators,
        default_estimator=default,
        irt_model=args.irt_model,
        metric=MetricSpec(name=args.metric, filter=args.filter),
        dataset=dataset,
        license=args.license,
    )
    folder = save_bundle(bundle, args.out, overwrite=args.overwrite)
    print_json(
        {
            "bundle": str(folder),
            "name": bundle.name,
            "items": bundle.budget,
            "source_models": source.n_models,
            "source_items": source.n_items,
            "default_estimator": bundle.default_estimator,
            "reliability": bundle.reliability,
        }
    )
    return 0
