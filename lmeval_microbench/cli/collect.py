"""``microbench collect``: lm-eval samples, leaderboard details or matrix files -> one matrix."""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError
from ._options import add_out, add_quiet, print_json, split_list

if TYPE_CHECKING:
    from ..responses import ResponseMatrix

# Options by the input they apply to (argparse dest names); a flag given for an input it
# does not apply to is rejected rather than silently ignored.
_READ_OPTIONS = ("metric", "filter", "id_field", "id_prefix", "benchmark", "stratum_field")
_SAMPLES_ONLY = ("tasks", "on_duplicate")
_DETAILS_ONLY = ("split", "text_field", "id_map", "cache_dir")

DESCRIPTION = """\
Build one model x item response matrix and write it to --out (.parquet keeps item
metadata, .csv holds the scores only). Each PATH is a matrix file (.parquet/.csv) or an
lm-eval --log_samples file or folder (searched for samples_*.jsonl; a folder per model).
Matrix files come first in the order given, then the collected samples. With --details,
every PATH is an Open LLM Leaderboard details source instead. Items are joined by id, never
by position. Prints a JSON summary (models, items, missing entries, output path).
"""

EPILOG = """\
examples:
  # lm-eval --log_samples folders (one per model) -> a matrix, ids "arc.<metabench_idx>"
  microbench collect results/ --metric acc_norm --tasks metabench_arc_secondary \\
      --id-field metabench_idx --id-prefix arc. --out arc.parquet

  # add the new models to an existing matrix (stacked by model, items joined by id)
  microbench collect arc_B.parquet results/ --metric acc_norm --id-prefix arc. --out arc_all.parquet

  # join matrices of the same models on different benchmarks side by side
  microbench collect arc.parquet mmlu.parquet --combine items --out both.parquet

  # Open LLM Leaderboard v1 details, ids mapped from prompt texts to matrix ids
  microbench collect open-llm-leaderboard/details_org__model --details harness_arc_challenge_25 \\
      --metric acc_norm --id-map items-arc-B.csv --out arc_details.parquet
"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "collect",
        help="build a response matrix from lm-eval samples, leaderboard details or matrix files",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="inputs (see above)")
    add_out(parser, "response matrix file to write (.parquet or .csv)", required=True)
    parser.add_argument(
        "--no-check-content",
        dest="check_content",
        action="store_false",
        help="keep the first of two differing docs under one item id instead of failing",
    )
    parser.add_argument(
        "--model-id",
        action="append",
        metavar="ID",
        help="model id: one for samples from one folder, or one per PATH with --details "
        "(repeatable; default: from the run's results_<timestamp>.json, else the folder name "
        "with a warning, or the repo name)",
    )

    reading = parser.add_argument_group("lm-eval samples and leaderboard details")
    reading.add_argument("--metric", help="per-item metric, e.g. acc, acc_norm, exact_match")
    reading.add_argument(
        "--filter", help="filter name (strict-match) or position (0, 1...) for several filters"
    )
    reading.add_argument(
        "--id-field",
        help="doc field that identifies the item, a dotted path, doc_hash or content_hash "
        "(default: the first of item_id, mb_sub_idx, metabench_idx, ... present)",
    )
    reading.add_argument(
        "--id-prefix", help="text put before each id, e.g. 'arc.' or '{task}.' (default: none)"
    )
    reading.add_argument("--benchmark", help="benchmark name of the items (default: task name)")
    reading.add_argument("--stratum-field", help="doc field giving the stratum, e.g. subject")

    samples = parser.add_argument_group("lm-eval samples only")
    samples.add_argument("--tasks", help="comma-separated tasks to keep (each must be found)")
    samples.add_argument(
        "--on-duplicate",
        choices=("newest", "error"),
        help="several runs of a task for one model: use the newest with a warning (default) "
        "or fail",
    )

    matrices = parser.add_argument_group("matrix files")
    matrices.add_argument(
        "--combine",
        choices=("auto", "rows", "items"),
        default="auto",
        help="rows: stack models (items joined by id); items: put benchmarks side by side "
        "(models joined by id); auto (default): rows unless a model is in two inputs",
    )

    details = parser.add_argument_group("Open LLM Leaderboard details")
    details.add_argument(
        "--details",
        action="append",
        metavar="CONFIG",
        help="read PATHs as details datasets (Hub ids or local copies) of this config, e.g. "
        "harness_arc_challenge_25 or leaderboard_mmlu_pro (repeatable, or comma-separated)",
    )
    details.add_argument("--split", help="dataset split (default: latest)")
    details.add_argument("--text-field", help="v1 row field whose text identifies the item")
    details.add_argument(
        "--id-map",
        metavar="CSV",
        help="CSV with columns item,prompt: maps v1 prompt texts to item ids (other rows dropped)",
    )
    details.add_argument("--cache-dir", help="datasets cache folder for Hub sources")
    add_quiet(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..collect import MATRIX_SUFFIXES, write_matrix

    out = Path(args.out)
    if out.suffix.lower() not in MATRIX_SUFFIXES:
        raise InputError(f"--out {out}: unknown matrix file type (use .parquet or .csv)")
    if out.exists() and not args.overwrite:
        raise InputError(f"--out {out} exists; pass --overwrite to replace it")
    progress = sys.stderr.isatty() and not args.quiet
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        try:
            if args.details:
                matrix = _collect_details(args, progress)
            else:
                matrix = _collect_files(args, MATRIX_SUFFIXES, progress)
        finally:
            for warning in caught:
                print(f"warning: {warning.message}", file=sys.stderr)
    write_matrix(matrix, out)
    benchmarks = matrix.items["benchmark"].dropna().unique().tolist()
    print_json(
        {
            "out": str(out),
            "models": matrix.n_models,
            "items": matrix.n_items,
            "missing_entries": int((~matrix.observed).sum()),
            "benchmarks": sorted(str(b) for b in benchmarks),
        }
    )
    return 0


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _reject(args: argparse.Namespace, dests: tuple[str, ...], reason: str) -> None:
    """Fail on flags that do not apply to the inputs given, naming them."""
    given = [_flag(d) for d in dests if getattr(args, d) is not None]
    if given:
        raise InputError(f"{', '.join(given)}: {reason}")


def _read_options(args: argparse.Namespace) -> dict[str, object]:
    """Keyword arguments shared by collect_samples and collect_leaderboard_details."""
    if args.metric is None:
        raise InputError("--metric is required to read samples or details (e.g. --metric acc)")
    return {
        "metric": args.metric,
        "filter": args.filter,
        "id_field": args.id_field,
        "id_prefix": args.id_prefix or "",
        "benchmark": args.benchmark,
        "stratum_field": args.stratum_field,
        "check_content": args.check_content,
    }


def _collect_details(args: argparse.Namespace, progress: bool) -> ResponseMatrix:
    from ..collect import collect_leaderboard_details, prompt_id_map

    _reject(args, _SAMPLES_ONLY, "for lm-eval samples folders only, not with --details")
    if args.combine != "auto":
        raise InputError("--combine applies to matrix files, not to --details")
    if args.model_id is not None and len(args.model_id) != len(args.paths):
        raise InputError(
            f"--model-id is given {len(args.model_id)} times for {len(args.paths)} details "
            "sources: give one per PATH, in the same order"
        )
    configs = [c for entry in args.details for c in (split_list(entry) or [])]
    return collect_leaderboard_details(
        args.paths,
        configs,
        split=args.split or "latest",
        cache_dir=args.cache_dir,
        text_field=args.text_field,
        id_map=prompt_id_map(args.id_map) if args.id_map else None,
        model_ids=args.model_id,
        progress=progress,
        **_read_options(args),
    )


def _collect_files(
    args: argparse.Namespace, matrix_suffixes: tuple[str, ...], progress: bool
) -> ResponseMatrix:
    from ..collect import collect_samples
    from ..responses import ResponseMatrix

    _reject(args, _DETAILS_ONLY, "for leaderboard details only (add --details CONFIG)")
    matrix_paths = [p for p in args.paths if Path(p).suffix.lower() in matrix_suffixes]
    sample_paths = [p for p in args.paths if p not in matrix_paths]
    if not sample_paths:
        reason = "for lm-eval samples or details only; every PATH here is a matrix file"
        _reject(args, (*_READ_OPTIONS, *_SAMPLES_ONLY, "model_id"), reason)
    elif args.model_id is not None and len(args.model_id) > 1:
        raise InputError(
            f"--model-id is given {len(args.model_id)} times: samples take one "
            "(for samples of one folder); leave it out to read ids from results_*.json"
        )
    read_options = _read_options(args) if sample_paths else {}
    matrices = [ResponseMatrix.read(p) for p in matrix_paths]
    if sample_paths:
        _check_benchmarks(args, sample_paths)
        matrices.append(
            collect_samples(
                sample_paths,
                tasks=split_list(args.tasks),
                model_id=args.model_id[0] if args.model_id else None,
                on_duplicate=args.on_duplicate or "newest",
                progress=progress,
                **read_options,
            )
        )
    if len(matrices) == 1:
        return matrices[0]
    return _combine(matrices, args.combine, check_content=args.check_content)


def _claims(args: argparse.Namespace, task: str, known: set[str]) -> dict[str, set[str]]:
    """Which known benchmarks the task name, --id-prefix and --benchmark say a file holds."""
    from ..runs.match import tokens

    sources = {"the task name": task, "--id-prefix": args.id_prefix, "--benchmark": args.benchmark}
    said = {label: tokens(text) & known for label, text in sources.items() if text}
    return {label: names for label, names in said.items() if names}


def _check_benchmarks(args: argparse.Namespace, paths: list[str]) -> None:
    """Refuse a samples file whose documents are, by content, the items of a shipped bundle
    of another benchmark than its name and the id options say (hellaswag's documents in an
    arc-named file would otherwise become arc items)."""
    from ..collect import SamplesRun, find_samples_files, preview
    from ..runs import BundleIndex, LoggedSamples, identify

    index = BundleIndex.discover(shipped=True)
    known = {ref.bundle.benchmark for ref in index.by_name.values()}
    tasks = split_list(args.tasks)
    for path in find_samples_files(paths):
        run = SamplesRun(path)
        claims = _claims(args, run.task, known) if tasks is None or run.task in tasks else {}
        claimed = set().union(*claims.values())
        if not claimed:
            continue
        found = identify(LoggedSamples(run), index)
        if found and not claimed & {match.ref.bundle.benchmark for match, _ in found}:
            match, check = found[0]
            raise InputError(
                f"{path}: its documents are {match.ref.bundle.benchmark} items "
                f"({len(check.verified)} checked against the shipped bundle "
                f"{match.ref.bundle.name}, e.g. {preview(check.verified, 3)}), but "
                f"{' and '.join(claims)} say {', '.join(sorted(claimed))}: is the file misnamed?"
            )


def _combine(matrices: list[ResponseMatrix], how: str, *, check_content: bool) -> ResponseMatrix:
    """Stack by model (rows) or join side by side (items); auto picks by shared models."""
    from ..collect import combine_models
    from ..responses import ResponseMatrix

    if how == "auto":
        shared_models = _shared([m.model_ids for m in matrices])
        if shared_models and _shared([m.item_ids for m in matrices]):
            raise InputError(
                f"inputs share models ({_few(shared_models)}) and items: no way to combine "
                "them without one score overwriting another; drop or split an input"
            )
        how = "items" if shared_models else "rows"
    if how == "rows":
        return combine_models(matrices, check_content=check_content)
    return ResponseMatrix.concat_items(matrices)


def _shared(id_lists: list[tuple[str, ...]]) -> set[str]:
    """Ids found in more than one of the lists."""
    seen: set[str] = set()
    shared: set[str] = set()
    for ids in id_lists:
        unique = set(ids)
        shared |= seen & unique
        seen |= unique
    return shared


def _few(ids: set[str], limit: int = 3) -> str:
    shown = sorted(ids)
    return ", ".join(repr(i) for i in shown[:limit]) + (
        f", ... ({len(shown)} in all)" if len(shown) > limit else ""
    )
