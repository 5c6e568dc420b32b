"""``microbench estimate``: apply a bundle to models' subset scores."""

from __future__ import annotations

import argparse

from ._options import add_format, print_json, print_table

COLUMNS = [
    "model",
    "items_scored",
    "subset_mean",
    "estimate_value",
    "estimate_lower",
    "estimate_upper",
]


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "estimate",
        help="estimate full-benchmark scores from subset scores with a bundle",
        description=(
            "Estimate the full-benchmark score (with an interval) of every model in RESPONSES, "
            "a response matrix that holds the bundle's items (more items are ignored)."
        ),
        epilog=(
            "example: microbench estimate bundles/mmlu-50 --responses new.parquet --model my/model"
        ),
    )
    parser.add_argument("bundle", help="bundle folder, bundle.json, or hf://owner/name[@revision]")
    parser.add_argument("--responses", required=True, help="response matrix (.parquet or .csv)")
    parser.add_argument("--model", action="append", help="only this model (repeatable)")
    parser.add_argument(
        "--estimator", help="estimator stored in the bundle (default: the bundle's default)"
    )
    parser.add_argument("--level", type=float, default=0.9, help="interval level (default: 0.9)")
    parser.add_argument(
        "--allow-missing",
        action="store_true",
        help="impute subset items a model lacks from the bundle's IRT fit (wider interval)",
    )
    add_format(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..bundle import load_bundle
    from ..reconstruct import estimate_models
    from ..responses import ResponseMatrix

    bundle = load_bundle(args.bundle)
    responses = ResponseMatrix.read(args.responses)
    if args.model:
        responses = responses.select_models(args.model)
    records = estimate_models(
        bundle,
        responses,
        estimator=args.estimator,
        level=args.level,
        allow_missing=args.allow_missing,
    )
    if args.format == "json":
        print_json(records)
    else:
        print(
            f"bundle {bundle.name} ({bundle.benchmark}, {bundle.budget} items), "
            f"estimator {records[0]['estimator']}"
        )
        print_table(records, COLUMNS)
    return 0
