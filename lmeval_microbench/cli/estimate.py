"""``microbench estimate``: apply a bundle to models' subset scores.

The scores come from a response matrix, or straight from lm-eval ``--log_samples`` output:
those runs are read, checked and estimated by the same code as ``microbench reconstruct``
(:mod:`..runs`), so both commands give the same numbers for a run.
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._json import strict_json
from ..errors import InputError
from ._options import (
    ESTIMATORS,
    add_format,
    add_out,
    add_quiet,
    check_exists,
    estimator_name,
    interval_level,
    listing,
    print_json,
    table_text,
)

if TYPE_CHECKING:
    from ..bundle import Bundle
    from ..runs import BenchmarkEstimate, BundleRef

    Estimates = tuple[Bundle, list[dict[str, Any]], list[str]]
    """The bundle, one record per model and the warnings to print."""

COLUMNS = [
    "model",
    "items_scored",
    "subset_mean",
    "estimate_value",
    "estimate_lower",
    "estimate_upper",
    "fit",
    "beyond",
]

MATRIX_SUFFIXES = (".parquet", ".csv", ".tsv")

DESCRIPTION = """\
Estimate the full-benchmark score (with an interval) of every model in --responses: a
response matrix that holds the bundle's items (more items are ignored), or the output
folders of lm-eval runs with --log_samples, read as `microbench reconstruct` reads them
(runs of other bundles are skipped).
"""

EPILOG = """\
examples:
  microbench estimate bundles/mmlu-50 --responses new.parquet --model-id my/model
  microbench estimate bundles/mmlu-50 --responses out/ --out estimates.json
  microbench estimate hf://my-org/microbench-mmlu --responses ckpt-1/ --responses ckpt-2/
"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "estimate",
        help="estimate full-benchmark scores from subset scores with a bundle",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("bundle", help="bundle folder, bundle.json, or hf://owner/name[@revision]")
    parser.add_argument(
        "--responses",
        action="append",
        required=True,
        metavar="PATH",
        help="response matrix (.parquet or .csv), or lm-eval output folders / samples_*.jsonl "
        "files (repeatable)",
    )
    parser.add_argument(
        "--model-id", action="append", metavar="ID", help="only this model (repeatable)"
    )
    parser.add_argument(
        "--estimator",
        type=estimator_name,
        metavar="NAME",
        help=f"estimator stored in the bundle: {listing(ESTIMATORS)} (default: the bundle's "
        "default, or as the lm-eval run was given)",
    )
    parser.add_argument(
        "--level",
        type=interval_level,
        help="interval level (default: 0.9, or as the lm-eval run was given)",
    )
    parser.add_argument(
        "--allow-missing",
        action="store_true",
        default=None,
        help="impute subset items a model lacks from the bundle's IRT fit (wider interval)",
    )
    add_out(parser, "JSON file for the estimates, with their markdown table beside it as .md")
    add_format(parser)
    add_quiet(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..runs import reconstruction_files

    paths = [check_exists(path, "--responses") for path in args.responses]
    is_matrix = _is_matrix(paths)
    if args.out:
        reconstruction_files(args.out, overwrite=args.overwrite)  # refused before the work
    bundle, records, notes = _from_matrix(paths[0], args) if is_matrix else _from_runs(paths, args)
    for text in notes:
        print(f"warning: {text}", file=sys.stderr)
    title = (
        f"bundle {bundle.name} ({bundle.benchmark}, {bundle.budget} items), "
        f"estimator {records[0]['estimator']}"
    )
    table = _table(title, records)
    if args.format == "json":
        print_json(records)
    else:
        print(table, end="")
    if args.out:
        _write(args.out, records, table, args.overwrite)
    return 0


def _is_matrix(paths: Sequence[Path]) -> bool:
    """One matrix file, or lm-eval output only: the two kinds do not mix."""
    matrices = [p for p in paths if p.is_file() and p.suffix.lower() in MATRIX_SUFFIXES]
    if not matrices:
        return False
    if len(paths) > 1:
        raise InputError(
            f"--responses: give one response matrix ({matrices[0]}) or lm-eval output "
            "folders, not several matrices or both"
        )
    return True


# ---------------------------------------------------------------------------- a matrix
def _from_matrix(path: Path, args: argparse.Namespace) -> Estimates:
    """Records of the matrix's models, with a person-fit note per flagged model."""
    from ..bundle import load_bundle
    from ..personfit import fit_warning
    from ..reconstruct import estimate_models
    from ..responses import ResponseMatrix

    bundle = load_bundle(args.bundle)
    responses = ResponseMatrix.read(path)
    if args.model_id:
        responses = responses.select_models(args.model_id)
    records = estimate_models(
        bundle,
        responses,
        estimator=args.estimator,
        level=0.9 if args.level is None else args.level,
        allow_missing=bool(args.allow_missing),
    )
    notes = [
        fit_warning(r["model"], r["bundle"], r["person_fit"]["note"])
        for r in records
        if _flagged(r)
    ]
    return bundle, records, notes


# ---------------------------------------------------------------------------- lm-eval runs
def _from_runs(paths: Sequence[Path], args: argparse.Namespace) -> Estimates:
    """Records of every run of the bundle under ``paths``, estimated as reconstruct does.

    The warnings of reading and estimating (folder-named models, missing items, person fit)
    come back as notes.
    """
    from ..bundle import resolve_location
    from ..runs import ReconstructOptions, estimate_task_scores, load_bundle_ref

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ref = load_bundle_ref(resolve_location(args.bundle))
        scored = _bundle_runs(ref, paths, args.model_id, progress=not args.quiet)
        options = ReconstructOptions(args.estimator, args.level, args.allow_missing)
        found = estimate_task_scores(scored, options)
    notes = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    return ref.bundle, [_record(estimate) for estimate in found], notes


def _bundle_runs(
    ref: BundleRef, paths: Sequence[Path], model_ids: list[str] | None, *, progress: bool
) -> list[Any]:
    """The checked scores of each model's newest run of ``bundle`` (other runs skipped)."""

    from ..collect import SamplesRun, find_samples_files, folder_model_notes, newest_runs
    from ..runs import BundleIndex, score_runs

    files = find_samples_files(paths)
    if not files:
        raise InputError(
            f"--responses: no samples_*.jsonl under {', '.join(map(str, paths))}: run lm-eval "
            "with --log_samples --output_path DIR"
        )
    runs = newest_runs([(run.model_id, run) for run in map(SamplesRun, files)], "newest")
    runs = [(model, run) for model, run in runs if not model_ids or model in model_ids]
    for text in folder_model_notes(run for _, run in runs):
        warnings.warn(text, stacklevel=2)
    bundle, index = ref.bundle, BundleIndex([ref])
    scored, _ = score_runs(
        runs, index, {}, progress=progress, skip=lambda logged: _other_bundle(logged, bundle.name)
    )
    _check_runs(ref, scored, model_ids, paths)
    return scored


def _other_bundle(logged: Any, name: str) -> bool:
    """A run of one of our own tasks (its documents name their bundle) of another bundle."""
    from ..runs import OWN_FIELDS

    doc = logged.first_doc
    return all(isinstance(doc.get(f), str) for f in OWN_FIELDS) and doc["bundle"] != name


def _check_runs(
    ref: BundleRef, scored: Sequence[Any], model_ids: list[str] | None, paths: Sequence[Path]
) -> None:
    """A run per model, and one for every model asked for.

    Finding none with a bundle built without ``--task`` is what a user following the
    bundle-then-lm-eval recipe meets: such a bundle has no task whose runs name it, so the
    error says why and what works instead, rather than only that nothing matched.
    """
    bundle = ref.bundle
    models = [run.model for run in scored]
    twice = sorted({m for m in models if models.count(m) > 1})
    if twice:
        raise InputError(f"model {twice[0]!r} has two runs of bundle {bundle.name!r}")
    lacking = sorted(set(model_ids or []) - set(models))
    if lacking or not scored:
        who = f"model {lacking[0]!r}" if lacking else "any model"
        where = ", ".join(map(str, paths))
        why = "" if ref.docs is not None else _no_task_hint(bundle, paths)
        raise InputError(
            f"no run of bundle {bundle.name!r} ({bundle.benchmark}) for {who} under {where}{why}"
        )


def _no_task_hint(bundle: Bundle, paths: Sequence[Path]) -> str:
    """Why no lm-eval run matches a bundle built without ``--task``, and what to do."""
    return (
        ": it was built without --task, so no lm-eval task runs it and only runs of a task "
        f"whose documents carry all {bundle.budget} of its item ids (e.g. "
        f"{bundle.item_ids[0]!r}) match; estimate from a response matrix instead (microbench "
        f"collect {paths[0]} --id-field FIELD --out matrix.parquet, then --responses "
        "matrix.parquet), or build with --task and run that task"
    )


def _record(found: BenchmarkEstimate) -> dict[str, Any]:
    """A reconstructed estimate in the shape of :func:`..reconstruct.estimate_models`'s."""
    estimate = found.estimate
    values = {
        "value": found.value,
        "lower": found.lower,
        "upper": found.upper,
        "level": None if estimate is None else estimate.level,
        "se": None if estimate is None else estimate.se,
    }
    return {
        "model": found.model,
        "benchmark": found.benchmark,
        "bundle": found.bundle,
        "estimator": found.estimator,
        "items_scored": found.items_scored,
        "subset_mean": _finite(found.subset_mean),
        **{f"estimate_{key}": _finite(value) for key, value in values.items()},
        "person_fit": dict(found.person_fit or {}),
        "placement": None if found.placement is None else dict(found.placement),
        "samples": found.samples,
    }


def _finite(value: float | None) -> float | None:
    """JSON has no NaN: an estimate that could not be made is null."""
    return None if value is None or not math.isfinite(value) else float(value)


# ---------------------------------------------------------------------------- output
def _table(title: str, records: list[dict[str, Any]]) -> str:
    from ..outside.placement import legend, side_of

    text = f"{title}\n" + table_text([_with_marks(record) for record in records], COLUMNS)
    if any(_flagged(record) for record in records):
        text += f"\n{_legend()}\n"
    if any(side_of(record.get("placement")) for record in records):
        text += f"\n{legend('beyond:')}\n"
    return text


def _write(out: str, records: list[dict[str, Any]], table: str, overwrite: bool) -> None:
    """The JSON records and the markdown table beside them, as a checkable pair."""
    import json

    from ..pairs import write_pair
    from ..runs import reconstruction_files

    path, markdown = reconstruction_files(out, overwrite=overwrite)
    text = json.dumps(strict_json(records), indent=2, allow_nan=False) + "\n"
    write_pair(path, markdown, text.encode("utf-8"), table, "Estimates")
    print(f"wrote {path} and {markdown}", file=sys.stderr)


def _flagged(record: dict[str, Any]) -> bool:
    return bool(record["person_fit"].get("flagged"))


def _with_marks(record: dict[str, Any]) -> dict[str, Any]:
    from ..outside.placement import side_of
    from ..reconstruct import FIT_MARK

    beyond = side_of(record.get("placement"))
    return {**record, "fit": FIT_MARK if _flagged(record) else "", "beyond": beyond}


def _legend() -> str:
    from ..reconstruct import FIT_MARK

    return (
        f"{FIT_MARK} the answers do not fit the bundle's IRT model (person fit; see the "
        "warnings); where they cannot be told from guessing the interval is widened to "
        "include the chance-level score."
    )
