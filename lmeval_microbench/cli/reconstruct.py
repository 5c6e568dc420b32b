"""``microbench reconstruct``: full-benchmark estimates from lm-eval output folders."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from ._options import (
    add_format,
    add_out,
    add_quiet,
    add_run_estimate_options,
    print_json,
)

EPILOG = """\
examples:
  lm-eval run --model hf --model_args pretrained=MODEL --tasks microbench_openllm \\
      --include_path "$(microbench tasks-dir)" --log_samples --output_path out/
  microbench reconstruct out/ --out estimates.json
  microbench reconstruct ckpt-*/ --format json
  microbench reconstruct metabench-run/ --task-map metabench_arc_secondary=arc

the table, in percent (lm-eval's own table shows the same estimates as fractions):
  BENCHMARK (%)        the estimated full-benchmark score [90% interval], recomputed from
                       the logged answers (lm-eval's estimate unless --estimator or --level
                       ask for another); not the share of subset items right: the items are
                       chosen to be informative, not typical, and the estimator maps which
                       of them were right to the full score
  average (%)          mean of the row's estimates; interval from Bonferroni intervals
  average (joint) (%)  the joint estimator's average (all six benchmarks run in full)
  †                    the answers do not fit the bundle's IRT model (see its warning)
A path that is missing or holds no samples_*.jsonl is named in a warning and skipped.
"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "reconstruct",
        help="estimates from the --log_samples output of lm-eval runs (many models at once)",
        description=(
            "Read the results_*.json and samples_*.jsonl that lm-eval wrote under each "
            "OUTPUT_PATH (one or many models or checkpoints), join the logged documents of "
            "every micro-benchmark task to its bundle by item id, check their content, and "
            "recompute the full-benchmark estimates with intervals and their average. Runs "
            "of other tasks over the same items (e.g. metabench's *_secondary tasks) are "
            "matched by item ids or with --task-map."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="+", metavar="OUTPUT_PATH", help="lm-eval output folder")
    add_out(parser, "JSON file for the estimates, with their markdown table beside it as .md")
    parser.add_argument(
        "--model-id",
        metavar="ID",
        help="model id for samples of one folder whose results_*.json does not name it "
        "(default: from the run's results json, else the folder name)",
    )
    add_format(parser)
    add_run_estimate_options(
        parser,
        task_map_help="read a task's samples as items of a benchmark or bundle, e.g. "
        "metabench_arc_secondary=arc (comma-separated, repeatable)",
        level_help="interval level (default: as in the run, else 0.9)",
        missing_help="impute missing subset items from the bundle's IRT fit, with a wider "
        "interval (default: NaN, as in the run)",
    )
    parser.add_argument(
        "--joint",
        metavar="FILE",
        help="fitted joint estimator state (JSON) for a joint average (default: joint.json of "
        "the bundles' suite, when there is one)",
    )
    add_quiet(parser)
    parser.set_defaults(run=run)


def print_notes(notes: list[str]) -> None:
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from ..runs import (
        ReconstructionWarning,
        parse_task_map,
        reconstruct_runs,
        reconstruction_files,
        write_reconstruction,
    )

    if args.out:
        reconstruction_files(args.out, overwrite=args.overwrite)  # refused before the work
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReconstructionWarning)  # printed below, once each
        result = reconstruct_runs(
            args.paths,
            bundles=args.bundle,
            task_map=parse_task_map(args.task_map),
            estimator=args.estimator,
            level=args.level,
            allow_missing=args.allow_missing,
            joint=args.joint,
            model_id=args.model_id,
            progress=not args.quiet,
        )
    print_notes(result.notes)
    if args.format == "json":
        print_json(result.to_dict())
    else:
        print(result.to_markdown(), end="")
        report_skipped(result.skipped)
    if args.out:
        path = write_reconstruction(result, args.out, overwrite=args.overwrite)
        print(f"wrote {path} and {path.with_suffix('.md')}", file=sys.stderr)
    return 0


def report_skipped(skipped: list[Any]) -> None:
    if skipped:
        print(
            f"\n{len(skipped)} samples files of other tasks were skipped: "
            + ", ".join(str(s) for s in skipped[:5])
            + (" ..." if len(skipped) > 5 else "")
        )
