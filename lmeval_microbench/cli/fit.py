"""``microbench fit``: fit an IRT model to a response matrix and write parameters as JSON."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from .._io import write_json_atomic
from ._options import (
    add_irt_model,
    add_out,
    add_quiet,
    add_responses,
    add_seed,
    positive_int,
    print_json,
    refuse_existing,
    require_responses,
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "fit",
        help="fit an IRT model (1PL-4PL, multidimensional 2PL) to a response matrix",
        description="Fit item parameters and abilities by marginal maximum likelihood.",
        epilog=(
            "example: microbench fit --responses mmlu_B.parquet --irt-model 3pl --out mmlu_irt.json"
        ),
    )
    add_responses(parser, required=False, help="response matrix (.parquet or .csv; required)")
    add_irt_model(parser)
    parser.add_argument(
        "--dims", type=positive_int, default=1, help="ability dimensions (2PL only; default: 1)"
    )
    parser.add_argument(
        "--max-iter", type=positive_int, default=500, help="EM iterations at most (default: 500)"
    )
    parser.add_argument(
        "--drop-constant", action="store_true", help="drop items every model scores alike"
    )
    add_out(parser, "JSON file for the item parameters and abilities", required=True)
    add_seed(parser)
    add_quiet(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..irt import IRTModel
    from ..responses import ResponseMatrix

    require_responses(args)
    refuse_existing([Path(args.out)], args.overwrite)
    matrix = ResponseMatrix.read(args.responses)
    if args.drop_constant:
        matrix = matrix.drop_items(matrix.constant_items())
    started = time.perf_counter()
    model = IRTModel(
        args.irt_model,
        args.dims,
        max_iter=args.max_iter,
        random_state=args.seed,
        progress=not args.quiet,
    ).fit(matrix)
    seconds = time.perf_counter() - started
    payload = {
        "source": str(args.responses),
        "source_fingerprint": matrix.fingerprint(),
        "converged": bool(model.converged_),
        "n_iter": int(model.n_iter_),
        "loglik": float(model.loglik_),
        "seconds": seconds,
        "params": model.params_.to_dict(),
        "abilities": {
            m: {"theta": t.tolist(), "se": s.tolist()}
            for m, t, s in zip(model.model_ids_, model.abilities_, model.ability_se_, strict=True)
        },
    }
    write_json_atomic(args.out, payload)
    print_json({k: payload[k] for k in ("source", "converged", "n_iter", "loglik", "seconds")})
    return 0
