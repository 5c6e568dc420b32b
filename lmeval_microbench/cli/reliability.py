"""``microbench reliability``: benchmark selection methods x estimators on held-out models.

Writes REPORT.json (one record per method x estimator x budget x protocol), REPORT.md beside
it and REPORT_mae.png, REPORT_mdad.png and REPORT_dior.png.
``--out`` names REPORT.json, or a folder that then gets ``reliability.json``, ``.md`` and the
PNGs (several files: a folder is what a user expects to name). Everything is computed before
anything is written, so a failure leaves no file behind. While it runs, a progress bar on
stderr counts splits x methods x budgets and shows the time left (``--quiet``: none).

What a run cannot measure is said, not printed as a number: without ``--scores`` the truth is
the mean over the matrix items, which the ``all`` budget reproduces by construction, so it is
left out of the default budgets; on a matrix without strata ``stratified`` is ``random``
again and is left out of the default methods; one repeat has no DIoR and a zero-width
interval no coverage (n/a in the table, with a note under it). The same warning raised by
every split is printed once, with its count.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

from ._options import (
    ADAPTIVE_METHOD,
    ESTIMATORS,
    METHODS,
    add_irt_model,
    add_out,
    add_quiet,
    add_responses,
    add_seed,
    estimator_names,
    listing,
    positive_int,
    print_json,
    refuse_existing,
    reliability_method_names,
    split_list,
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "reliability",
        help="measure how well subsets + estimators recover held-out full scores",
        description=(
            "Split the models of RESPONSES into source and target models (protocols: random "
            "80/20 splits, extrapolation to the best 20 %, a separate holdout matrix, or "
            "leave-one-model-out for small matrices), select items and fit estimators on the "
            "sources only, and score the targets: MAE, RMSE, max error, Kendall tau, MDAD and "
            "90 % interval coverage per method x estimator x budget x protocol."
        ),
        epilog=(
            "example: microbench reliability --responses mmlu_B.parquet --scores "
            "mmlu_B_scores.csv --score-column full_score_metabench --budgets 25,50,all "
            "--out mmlu-reliability/"
        ),
    )
    add_responses(parser)
    parser.add_argument(
        "--scores", help="CSV/parquet of true full-benchmark scores (default: matrix row means)"
    )
    parser.add_argument(
        "--score-column", default="score", help="column of --scores holding the score"
    )
    parser.add_argument(
        "--score-model-column", default="model", help="column of --scores with model ids"
    )
    parser.add_argument(
        "--score-scale",
        choices=("auto", "fraction", "percent"),
        default="auto",
        help="scale of --scores: fraction, percent or auto (detected; default)",
    )
    parser.add_argument(
        "--methods",
        type=reliability_method_names,
        metavar="NAMES",
        help=f"comma-separated selection methods of {listing(METHODS)} (default: all), and "
        f"{ADAPTIVE_METHOD!r}: adaptive testing (a pool fitted on the source models picks "
        "each target's items; slower: a pool fit per split). Default: all but 'stratified' "
        "on a matrix without strata (there it is 'random')",
    )
    parser.add_argument(
        "--estimators",
        type=estimator_names,
        metavar="NAMES",
        help=f"comma-separated estimators of {listing(ESTIMATORS)} (default: all)",
    )
    parser.add_argument(
        "--budgets",
        default=None,
        help="comma-separated item counts and/or 'all' (default: 10,25,50,100,all, "
        "leaving out those above the item count, and 'all' without --scores: the truth is "
        "then the mean of all items)",
    )
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=None,
        help="repeats per protocol (default: 5, or 1 when loo runs: one loo repeat is already "
        "a split per model)",
    )
    parser.add_argument(
        "--protocols",
        help="comma-separated of random, extrapolation, holdout, loo (default: random,"
        "extrapolation, or loo below 30 models; plus holdout when given)",
    )
    parser.add_argument("--holdout-responses", help="response matrix of holdout target models")
    parser.add_argument("--holdout-scores", help="true scores of the holdout models")
    add_irt_model(parser)
    parser.add_argument("--no-plots", action="store_true", help="do not draw the PNG plots")
    add_out(
        parser,
        "folder for reliability.json, .md and the PNGs, or REPORT.json (REPORT.md and "
        "REPORT_*.png go beside it)",
        required=True,
    )
    add_seed(parser)
    add_quiet(parser)
    parser.set_defaults(run=run)


DIOR_LABEL = "tau DIoR (95 % lower bound of Kendall tau)"


FOLDER_STEM = "reliability"
"""The name of the files written into an ``--out`` folder."""


def output_paths(out: str) -> dict[str, Path]:
    """REPORT.json, or a folder (``reliability.json`` in it) -> the paths of one report.

    A folder is a path ending in ``/``, an existing folder or a name without a suffix;
    another suffix (``report.txt``) is refused, as it is neither.
    """
    from ..errors import InputError

    path = Path(out)
    folder = out.endswith(("/", "\\")) or path.is_dir() or not path.suffix
    if folder:
        path = path / f"{FOLDER_STEM}.json"
    elif path.suffix.lower() != ".json":
        raise InputError(
            f"--out must name a .json file or a folder, got {out!r} (its report files are "
            "REPORT.json, REPORT.md and REPORT_*.png)"
        )
    stem = path.with_suffix("")
    return {
        "json": path,
        "md": path.with_suffix(".md"),
        "mae_png": stem.with_name(stem.name + "_mae.png"),
        "mdad_png": stem.with_name(stem.name + "_mdad.png"),
        "dior_png": stem.with_name(stem.name + "_dior.png"),
    }


def _check_holdout_args(args: argparse.Namespace) -> None:
    from ..errors import InputError

    if args.holdout_scores and not args.holdout_responses:
        raise InputError("--holdout-scores needs --holdout-responses")
    if args.holdout_responses and bool(args.scores) != bool(args.holdout_scores):
        raise InputError(
            "--holdout-responses needs --holdout-scores when --scores is given (and neither "
            "without it: then both truths are matrix row means)"
        )


def _budgets(text: str | None, n_items: int, *, with_all: bool) -> list:
    """``--budgets``, else the defaults that fit the matrix; ``all`` only when ``with_all``
    (true scores given: without them the truth is the mean of all items, trivially exact)."""
    from ..reliability import ALL, DEFAULT_BUDGETS, parse_budgets

    if text is not None:
        return list(parse_budgets(text))
    return [b for b in DEFAULT_BUDGETS if (with_all if b == ALL else int(b) <= n_items)]


def _methods(text: str | None, n_strata: int) -> list[str] | None:
    """``--methods``, else every method, less ``stratified`` where there are no strata."""
    if text is not None:
        return split_list(text)
    return None if n_strata > 1 else [m for m in METHODS if m != "stratified"]


def _left_out_notes(args: argparse.Namespace, n_strata: int) -> list[str]:
    """What the defaults left out and why, for the top of the markdown report."""
    notes = []
    if args.budgets is None and not args.scores:
        notes.append(
            "Note: budget `all` left out: without `--scores` the truth is the mean over the "
            "matrix items, which all of them give exactly (pass `--budgets ...,all` for it)."
        )
    if args.methods is None and n_strata < 2:
        notes.append(
            "Note: method `stratified` left out: the matrix has no strata (no item "
            "`stratum`), where it would select exactly what `random` selects."
        )
    return notes


def _print_once(caught: list[warnings.WarningMessage]) -> None:
    """Each distinct warning once, with how often it came: every split of a loo run warns
    alike (fewer than 20 source models ...), and hundreds of copies hide the result."""
    counts: dict[tuple[type[Warning], str], int] = {}
    for item in caught:
        key = (item.category, str(item.message))
        counts[key] = counts.get(key, 0) + 1
    for (category, text), count in counts.items():
        warnings.warn(text + (f" ({count} times)" if count > 1 else ""), category, stacklevel=2)


def run(args: argparse.Namespace) -> int:
    from ..plots import metric_vs_budget_png
    from ..reliability import json_ready, markdown_report, run_reliability
    from ..responses import ResponseMatrix
    from ..truth import align_target, read_scores

    paths = output_paths(args.out)
    refuse_existing(list(paths.values()), args.overwrite)
    _check_holdout_args(args)

    def scores_of(path: str | None):
        if not path:
            return None
        return read_scores(
            path, args.score_column, model_column=args.score_model_column, scale=args.score_scale
        )

    matrix, truth = align_target(ResponseMatrix.read(args.responses), scores_of(args.scores))
    holdout = holdout_truth = None
    if args.holdout_responses:
        holdout_matrix = ResponseMatrix.read(args.holdout_responses)
        holdout_scores = scores_of(args.holdout_scores)
        if holdout_scores is None:  # row means over the main matrix's items
            holdout_matrix = holdout_matrix.select_items(
                [i for i in matrix.item_ids if i in set(holdout_matrix.item_ids)]
            )
        holdout, holdout_truth = align_target(holdout_matrix, holdout_scores)
    n_strata = len(set(matrix.strata()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_reliability(
            matrix,
            truth,
            methods=_methods(args.methods, n_strata),
            estimators=split_list(args.estimators),
            budgets=_budgets(args.budgets, matrix.n_items, with_all=bool(args.scores)),
            protocols=split_list(args.protocols),
            repeats=args.repeats,
            seed=args.seed,
            holdout=holdout,
            holdout_truth=holdout_truth,
            irt_model=args.irt_model,
            progress=not args.quiet,
        )
    _print_once(caught)
    truth_note = (
        f"{args.score_column!r} of {args.scores}" if args.scores else "mean over the matrix items"
    )
    report = markdown_report(
        result,
        truth_note=truth_note,
        truth_is_mean=not args.scores,
        notes=_left_out_notes(args, n_strata),
    )
    payload = {
        "json": json.dumps(json_ready(result.records), indent=2, allow_nan=False) + "\n",
        "md": report + "\n",
    }
    plots: dict[str, bytes] = {}
    if not args.no_plots:
        plots["mae_png"] = metric_vs_budget_png(
            result.records, "mae", ylabel="MAE (score points)", title=matrix.source
        )
        plots["mdad_png"] = metric_vs_budget_png(
            result.records, "mdad", ylabel="MDAD (score points)", title=matrix.source
        )
        if any(not r.get("dior_status") for r in result.records):  # else all n/a
            plots["dior_png"] = metric_vs_budget_png(
                result.records, "tau_dior", ylabel=DIOR_LABEL, title=matrix.source
            )
    _write_all(paths, payload, plots)
    print_json(
        {
            "report": str(paths["json"]),
            "markdown": str(paths["md"]),
            "plots": [str(paths[k]) for k in plots],
            "rows": len(result.records),
            **{k: result.info[k] for k in ("n_models", "n_items", "protocols", "seconds")},
            "irt_fits": result.info["irt_fits"],
        }
    )
    return 0


def _write_all(paths: dict[str, Path], texts: dict[str, str], blobs: dict[str, bytes]) -> None:
    """Write every output atomically, only after all of them were computed."""
    from .._io import atomic_path

    for key, text in texts.items():
        with atomic_path(paths[key]) as tmp:
            tmp.write_text(text, encoding="utf-8")
    for key, blob in blobs.items():
        with atomic_path(paths[key]) as tmp:
            tmp.write_bytes(blob)
