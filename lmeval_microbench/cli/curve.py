"""``microbench curve``: a training run's checkpoints as curves that separate the model's
changes from the subset's noise."""

from __future__ import annotations

import argparse
import sys
import warnings

from ._options import (
    add_format,
    add_out,
    add_quiet,
    add_run_estimate_options,
    add_seed,
    positive_int,
    print_json,
)

EPILOG = """\
examples:
  for step in 1000 2000 4000; do
    microbench eval --model hf --model_args pretrained=ckpt/step-$step \\
        --tasks microbench_openllm --output_path runs/step-$step
  done
  microbench curve runs/step-* --step-regex 'step-(\\d+)' --out curve/
  microbench curve runs/* --out curve/ --overwrite      # steps from revision=step... model args
  microbench curve run-a/ run-b/ run-c/ --order given --bundle my_tasks/ --out curve/
"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "curve",
        help="curves over training checkpoints: raw score, ability, estimate, noise marks",
        description=(
            "Read the lm-eval output folder of each checkpoint (one RUN each, micro tasks run "
            "with --log_samples), order them by training step, and report per benchmark and "
            "checkpoint the raw subset score, the IRT ability (with SE) and the full-score "
            "estimate with its interval. Each step is marked as a change of the model or "
            "within the noise by a paired sign-flip test on the items both checkpoints "
            "answered; each series gets its noise statistics (total variation, share of "
            "steps down, residual around a monotone fit, signal-to-noise ratio)."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="+", metavar="RUN", help="lm-eval output folder")
    parser.add_argument(
        "--step-regex",
        metavar="RE",
        help="read the step from the folder name, else the model id: the 'step' group, else "
        "the first group, else the match; k/M/B suffixes count (e.g. 'step-(\\d+k)')",
    )
    parser.add_argument(
        "--order",
        choices=("auto", "regex", "revision", "given"),
        default="auto",
        help="auto (default): --step-regex if given, else revision= in the model args if a "
        "run has one, else the order the runs are given",
    )
    add_out(parser, "folder for curve.json, curve.md and the PNG plots")
    parser.add_argument("--no-plots", action="store_true", help="JSON and markdown only")
    add_format(parser)
    add_run_estimate_options(
        parser,
        task_map_help="read a task's samples as items of a benchmark or bundle (as in reconstruct)",
        level_help="interval and test level (default 0.9)",
        missing_help="impute unscored subset items from the bundle's IRT fit (default: NaN)",
    )
    parser.add_argument(
        "--permutations",
        type=positive_int,
        default=999,
        help="swaps drawn per step test when exact enumeration is larger (default 999)",
    )
    add_seed(parser)
    add_quiet(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..curve import TraceOptions, check_output, trace_runs, write_report
    from ..runs import ReconstructionWarning, parse_task_map

    if args.out:
        check_output(args.out, overwrite=args.overwrite)  # refused before the work
    options = TraceOptions(
        estimator=args.estimator,
        level=args.level,
        allow_missing=args.allow_missing,
        permutations=args.permutations,
        seed=args.seed,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReconstructionWarning)  # kept as notes, printed below
        report = trace_runs(
            args.paths,
            step_regex=args.step_regex,
            order=args.order,
            bundles=args.bundle,
            task_map=parse_task_map(args.task_map),
            options=options,
            progress=not args.quiet,
        )
    for note in report.notes:
        print(f"warning: {note}", file=sys.stderr)
    if args.format == "json":
        print_json(report.to_dict())
    else:
        print(report.to_markdown(), end="")
    if args.out:
        written = write_report(report, args.out, overwrite=args.overwrite, plots=not args.no_plots)
        print(f"wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    return 0
