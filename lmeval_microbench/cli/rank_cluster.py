"""``microbench rank --plan-round DIR`` / ``--resume DIR``: the CLI side of cluster rounds.

The ranking's settings are fixed when it is planned (they decide which documents each round
asks for); a ``--resume`` that names any of them is refused, so a changed option never
passes silently. The work itself is :mod:`lmeval_microbench.rank.cluster`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ._options import print_json, split_list

FIXED = {
    "responses": "--responses",
    "model": "--model",
    "model_args": "--model_args",
    "model_args_file": "--model-args-file",
    "tasks": "--tasks",
    "include_path": "--include_path",
    "fractions": "--fractions",
    "adaptive": "--adaptive",
    "batch_size": "--batch_size",
    "device": "--device",
    "tiers": "--tiers",
    "max_items": "--max-items",
    "no_level_caps": "--no-level-caps",
    "rank_intervals": "--rank-intervals",
    "rank_level": "--rank-level",
    "full_items": "--full-items",
    "seed": "--seed",
}
"""Options a planned ranking keeps in its state.json (``dest -> option``)."""


def _defaults() -> argparse.Namespace:
    """``microbench rank``'s defaults, to tell the options a command line names."""
    from .rank import add_parser

    root = argparse.ArgumentParser()
    add_parser(root.add_subparsers())
    return root.parse_args(["rank"])


def settings_of(args: argparse.Namespace) -> Any:
    """The ranking's settings from the planning command line."""
    from ..errors import InputError
    from ..harness import include_path
    from ..rank.cluster import ClusterSettings
    from .rank import numbers, read_model_args

    if args.responses or args.adaptive:
        option = "--responses (a replay)" if args.responses else "--adaptive"
        raise InputError(
            f"--plan-round ranks live models on micro tasks; it does not take {option}"
        )
    return ClusterSettings(
        models=read_model_args(args),  # at least 2, named once each
        tasks=tuple(split_list(args.tasks) or []),
        include_path=str(Path(args.include_path or include_path()).resolve()),
        fractions=tuple(numbers(args.fractions, "--fractions", float)),
        model=args.model,
        seed=args.seed,
        batch_size=str(args.batch_size),
        device=args.device,
        tiers=args.tiers,
        max_items=args.max_items,
        level_caps=not args.no_level_caps,
        rank_intervals=args.rank_intervals,
        rank_level=args.rank_level,
        full_items=args.full_items,
    )


def _check_resume_options(args: argparse.Namespace) -> None:
    from ..errors import InputError

    if args.plan_round:
        raise InputError("give --plan-round DIR (start) or --resume DIR (go on), not both")
    defaults = _defaults()
    named = [opt for dest, opt in FIXED.items() if getattr(args, dest) != getattr(defaults, dest)]
    if named:
        raise InputError(
            f"--resume {args.resume} goes on with the settings the ranking was planned with "
            f"({Path(args.resume) / 'state.json'}); leave out {', '.join(named)}"
        )


def run_cluster(args: argparse.Namespace) -> int:
    """Plan a ranking's first round, or resume it: print the next step, or the report."""
    from ..errors import InputError
    from ..rank.cluster import PlannedRound, mark_written, plan_ranking, resume_ranking
    from ..rank.report import check_report_folder

    if args.resume:
        _check_resume_options(args)
        outcome = resume_ranking(args.resume, skip_missing=args.skip_missing)
    else:
        if args.skip_missing:
            raise InputError("--skip-missing goes with --resume DIR")
        if args.out:
            check_report_folder(args.out, overwrite=args.overwrite)
        outcome = plan_ranking(
            args.plan_round, settings_of(args), out=args.out, no_plots=args.no_plots
        )
    if isinstance(outcome, PlannedRound):
        _print_plan(outcome)
        return 0
    from .rank import report

    state = outcome.state
    out = args.out or state.report.get("out")
    stored = state.report.get("out")
    ours = bool(state.report.get("written")) and stored and Path(out).resolve() == Path(stored)
    written = report(
        outcome.ranking,
        outcome.info,
        outcome.options,
        out=out,
        overwrite=bool(args.overwrite or ours),
        full_items=state.settings.full_items,
        no_plots=bool(args.no_plots or state.report.get("no_plots")),
    )
    mark_written(Path(outcome.info["cluster_dir"]), state, written)
    return 0


def _print_plan(planned: Any) -> None:
    """What to run next: on stderr for a person, as JSON on stdout for a script."""
    then = f"microbench rank --resume {planned.folder}"
    print(
        f"round {planned.round}: {planned.runs} lm_eval commands, one per line, in "
        f"{planned.commands}; run them (in any order, on any machines that see "
        f"{planned.folder}), then: {then}",
        file=sys.stderr,
    )
    print_json(
        {
            "round": planned.round,
            "runs": planned.runs,
            "commands": str(planned.commands),
            "plan": str(planned.plan),
            "then": then,
        }
    )
