"""``microbench fit``: fit an IRT model to a response matrix and write parameters as JSON."""

from __future__ import annotations

import argparse
import time

from .._io import write_json_atomic
from ._options import add_seed, print_json


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "fit",
        help="fit an IRT model (1PL-4PL, multidimensional 2PL) to a response matrix",
        description="Fit item parameters and abilities by marginal maximum likelihood.",
        epilog="example: microbench fit mmlu_B.parquet --model 3pl --out mmlu_irt.json",
    )
    parser.add_argument("matrix", help="response matrix (.parquet or .csv)")
    parser.add_argument("--model", choices=("1pl", "2pl", "3pl", "4pl"), default="2pl")
    parser.add_argument("--dims", type=int, default=1, help="ability dimensions (2PL only)")
    parser.add_argument("--max-iter", type=int, default=500)
    parser.add_argument(
        "--drop-constant", action="store_true", help="drop items every model scores alike"
    )
    parser.add_argument("--out", required=True, help="output JSON file")
    add_seed(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..irt import IRTModel
    from ..responses import ResponseMatrix

    matrix = ResponseMatrix.read(args.matrix)
    if args.drop_constant:
        matrix = matrix.drop_items(matrix.constant_items())
    started = time.perf_counter()
    model = IRTModel(
        args.model, args.dims, max_iter=args.max_iter, random_state=args.seed, progress=True
    ).fit(matrix)
    seconds = time.perf_counter() - started
    payload = {
        "source": str(args.matrix),
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
