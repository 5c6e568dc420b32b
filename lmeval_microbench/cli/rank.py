"""``microbench rank``: rank many models cheaply, coarse to fine (Flash-HELM tiers).

Two modes share the round engine (``lmeval_microbench.rank``): a replay over a response
matrix with known full scores (``--responses``; a simulation, as ``reliability``) and live
lm-eval runs of many models on micro tasks (``--model_args`` / ``--model-args-file``), in this
process or as each round's ``lm_eval`` commands for a scheduler (``--plan-round DIR`` /
``--resume DIR``, :mod:`.rank_cluster`).
Up to 10 models (default tiers) are ranked pairwise: Flash-HELM's tiers are for leaderboards,
and their first tier would call 2-4 models resolved after one round of a few items.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._options import (
    ESTIMATORS,
    METHODS,
    add_irt_model,
    add_out,
    add_responses,
    add_seed,
    estimator_name,
    interval_level,
    listing,
    method_name,
    positive_int,
    print_json,
    split_list,
)

EXAMPLES = """\
examples:
  microbench rank --responses mmlu_B.parquet --scores mmlu_B_scores.csv \\
      --score-column full_score_metabench --population 100 --out /tmp/rank-mmlu
  microbench rank --model hf --model-args-file models.txt --tasks microbench_mmlu \\
      --out /tmp/rank-live
  microbench rank --model-args-file models.txt --tasks microbench_mmlu --plan-round /shared/rk
  sh /shared/rk/round_0/commands.sh        # or one scheduler job per line
  microbench rank --resume /shared/rk      # plans round_1 ... until it writes the report
"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "rank",
        help="rank many models coarse to fine: more items only where the ranking needs them",
        description=(
            "Score every model on a few items, then give more items only to models whose rank "
            "interval is wider than the resolution of the finest tier it reaches (tiers "
            "1-4,5-9,10-19,20-50,51- by default), up to that tier's level cap (the top tier "
            "may reach every item, each coarser tier one level fewer); stop when all are "
            "resolved or capped, or when --max-items is spent. Small populations are ranked "
            "pairwise: with 10 models or fewer (default tiers), or tiers whose first tier "
            "holds every model at any rank, a model is resolved only when its rank interval "
            "is a single rank, and climbs until it is, or has used every item, or the budget "
            "is spent (each row's 'resolved' says which). Replay over a response matrix "
            "(--responses; its agreement with the true scores is printed and written to "
            "ranking.md) or run lm-eval live (--model_args / --model-args-file)."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_replay_options(parser.add_argument_group("replay over a response matrix"))
    _add_live_options(parser.add_argument_group("live lm-eval runs"))
    _add_round_options(parser)
    _add_cluster_options(
        parser.add_argument_group(
            "cluster rounds (live): each round as lm_eval commands that any scheduler runs"
        )
    )
    add_out(parser, "folder for ranking.json, ranking.md and rank_intervals.png")
    parser.add_argument("--no-plots", action="store_true", help="do not draw the PNG plot")
    add_seed(parser)
    parser.set_defaults(run=run)


def _add_replay_options(replay: argparse._ArgumentGroup) -> None:
    add_responses(replay, required=False)
    replay.add_argument("--scores", help="true full-benchmark scores (default: row means)")
    replay.add_argument(
        "--score-column", default="score", help="column of --scores holding the score"
    )
    replay.add_argument(
        "--score-model-column", default="model", help="column of --scores with model ids"
    )
    replay.add_argument(
        "--score-scale",
        choices=("auto", "fraction", "percent"),
        default="auto",
        help="scale of --scores: fraction, percent or auto (detected; default)",
    )
    replay.add_argument("--population", type=positive_int, default=100, help="models to rank")
    replay.add_argument("--max-sources", type=positive_int, help="cap on source models")
    replay.add_argument(
        "--method",
        type=method_name,
        default="random",
        metavar="METHOD",
        help=f"selection method: {listing(METHODS)} (default: random)",
    )
    replay.add_argument(
        "--estimator",
        type=estimator_name,
        default="ridge",
        metavar="NAME",
        help=f"estimator: {listing(ESTIMATORS)} (default: ridge)",
    )
    add_irt_model(replay)
    replay.add_argument("--levels", help="increasing item counts (default: doubling to all)")


def _add_live_options(live: argparse._ArgumentGroup) -> None:
    live.add_argument("--model", default="hf", help="lm-eval model type (default: hf)")
    live.add_argument("--model_args", action="append", default=[], help="one model (repeat)")
    live.add_argument("--model-args-file", help="file with one --model_args string per line")
    live.add_argument("--tasks", default="microbench_openllm", help="micro tasks or groups")
    live.add_argument("--include_path", help="micro task folder (default: the shipped tasks)")
    live.add_argument(
        "--fractions", default="0.25,0.5,1", help="share of each task's items per level"
    )
    live.add_argument(
        "--adaptive",
        action="store_true",
        help="the tasks are adaptive pools (default: the shipped pools); a level is a number "
        "of items asked per task (--adaptive-items)",
    )
    live.add_argument(
        "--adaptive-items", default="10,20,40", help="items per task at each level (--adaptive)"
    )
    live.add_argument(
        "--items-per-step",
        type=positive_int,
        default=4,
        help="--adaptive: K items of each task per step, all tasks in one model call "
        "(default: 4, as microbench adaptive)",
    )
    live.add_argument(
        "--keep-models",
        type=positive_int,
        default=None,
        help="models kept loaded between rounds (default: as many as the device's free memory "
        "allows; each let go is logged and loaded again when promoted)",
    )
    live.add_argument("--batch_size", default="1", help="lm-eval --batch_size (default: 1)")
    live.add_argument(
        "--device", default=None, help="lm-eval --device (default: cuda if there is one, else cpu)"
    )
    live.add_argument(
        "--devices",
        default=None,
        help="several devices, e.g. cuda:0,cuda:1: the models are spread over them (round "
        "robin, each kept on its device) and evaluated on all of them at once",
    )


def _add_round_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tiers",
        default=None,
        help="rank tiers, e.g. 1-4,5-9,10-19,20-50,51- (the default; FIRST-LAST:RES sets a "
        "resolution). Default with 10 models or fewer, or any tiers whose first tier holds "
        "every model at any rank: pairwise (resolved only at a single rank)",
    )
    parser.add_argument("--max-items", type=positive_int, help="total item budget")
    parser.add_argument(
        "--no-level-caps",
        action="store_true",
        help="let every unresolved model climb to the last level, whatever its tier",
    )
    parser.add_argument(
        "--rank-intervals",
        choices=("simulate", "overlap"),
        default="simulate",
        help="rank intervals from simulated score draws or from overlapping score intervals "
        "(default: simulate)",
    )
    parser.add_argument(
        "--rank-level",
        type=interval_level,
        default=0.9,
        help="level of the rank intervals (default: 0.9)",
    )
    parser.add_argument("--full-items", type=positive_int, help="items of the full benchmarks")


def _add_cluster_options(cluster: argparse._ArgumentGroup) -> None:
    cluster.add_argument(
        "--plan-round",
        metavar="DIR",
        help="do not run the models: write the first round's lm_eval commands, one line per "
        "model (DIR/round_0/commands.sh; DIR/round_0/plan.json for programs) and the ranking's "
        "state (DIR/state.json; DIR must be new or empty); run the lines anywhere that sees "
        "DIR, then --resume DIR",
    )
    cluster.add_argument(
        "--resume",
        metavar="DIR",
        help="read the outputs of DIR's last round, then write the next round's commands "
        "(DIR/round_K/commands.sh) or, when the ranking is done, the report (--out given "
        "when planning, else DIR/report). The settings are the plan's: give no models, "
        "tasks or round options",
    )
    cluster.add_argument(
        "--skip-missing",
        action="store_true",
        help="with --resume: rank without the models whose output is missing or wrong "
        "(reported as failed, as a model whose in-process run fails) instead of stopping",
    )


def model_name(model_args: str) -> str:
    """A model's name: its ``pretrained=`` value, else the whole ``--model_args`` string."""
    from ..adaptive.runner import model_arg

    return model_arg(model_args, "pretrained") or model_args.strip()


def read_model_args_file(path: str) -> list[tuple[int, str]]:
    """``(line number, --model_args string)`` of each model line of ``path`` (UTF-8, a BOM
    allowed; blank lines and lines starting with ``#``, indented or not, skipped)."""
    from ..errors import InputError

    try:
        data = Path(path).read_bytes()
    except OSError as exc:  # missing, a folder, unreadable
        why = exc.strerror or type(exc).__name__
        raise InputError(f"--model-args-file {path}: not readable ({why})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"--model-args-file {path}: line {line} is not UTF-8 text") from None
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [
        (k, ln.strip())
        for k, ln in enumerate(lines, 1)
        if ln.strip() and not ln.strip().startswith("#")
    ]


def read_model_args(args: argparse.Namespace) -> dict[str, str]:
    """``name -> model_args`` from the repeated option, then the file; an error about the
    file's models names the file and the lines at fault."""
    from ..errors import InputError
    from ..rank.rounds import check_models

    entries = [("--model_args", line) for line in args.model_args]
    if args.model_args_file:
        entries += [(f"line {k}", ln) for k, ln in read_model_args_file(args.model_args_file)]
    names = [model_name(line) for _, line in entries]
    try:
        names = check_models(names)
    except InputError as exc:
        if not args.model_args_file:
            raise
        twice = [where for (where, _), name in zip(entries, names, strict=True)
                 if names.count(name) > 1]  # fmt: skip
        at = f" ({', '.join(twice[:6])})" if twice else ""
        raise InputError(f"--model-args-file {args.model_args_file}: {exc}{at}") from None
    return dict(zip(names, [line for _, line in entries], strict=True))


def numbers(text: str | None, option: str, kind: type[int] | type[float]) -> list[Any]:
    """``"1,2,4"`` as numbers; anything else is a one-line error naming the option."""
    from ..errors import InputError

    try:
        return [kind(x) for x in split_list(text) or []]
    except ValueError:
        raise InputError(f"{option} takes numbers separated by commas, got {text!r}") from None


def _options(args: argparse.Namespace):
    from ..rank import RoundOptions, parse_tiers

    return RoundOptions(
        parse_tiers(args.tiers) if args.tiers is not None else None,
        max_items=args.max_items,
        level_caps=not args.no_level_caps,
        interval_method=args.rank_intervals,
        rank_level=args.rank_level,
        seed=args.seed,
    )


def _replay(args: argparse.Namespace) -> tuple[Any, list[str], dict[str, Any]]:
    from ..rank.replay import ReplayEvaluator, default_levels, split_population
    from ..responses import ResponseMatrix
    from ..truth import align_target, read_scores

    scores = None
    if args.scores:
        scores = read_scores(
            args.scores,
            args.score_column,
            model_column=args.score_model_column,
            scale=args.score_scale,
        )
    matrix, truth = align_target(ResponseMatrix.read(args.responses), scores)
    source, source_truth, population, population_truth = split_population(
        matrix, truth, args.population, seed=args.seed, max_sources=args.max_sources
    )
    levels = (
        numbers(args.levels, "--levels", int) if args.levels else default_levels(matrix.n_items)
    )
    evaluator = ReplayEvaluator(
        source,
        source_truth,
        population,
        levels=levels,
        method=args.method,
        estimator=args.estimator,
        irt_model=args.irt_model,
        seed=args.seed,
    )
    info = {
        "mode": "replay",
        "source": matrix.source,
        "method": args.method,
        "estimator": args.estimator,
        "n_sources": source.n_models,
        "truth": dict(zip(population.model_ids, population_truth.tolist(), strict=True)),
    }
    return evaluator, list(population.model_ids), info


def devices(args: argparse.Namespace, models: dict[str, str]) -> list[str | None]:
    """``--devices`` as a list, else ``[--device]`` (None: lm-eval's model chooses)."""
    from ..adaptive.runner import model_arg
    from ..errors import InputError

    if args.device is not None and args.devices is not None:
        raise InputError("give --device or --devices, not both")
    named = [name for name, text in models.items() if model_arg(text, "device") is not None]
    option = "--device" if args.device is not None else "--devices"
    if named and (args.device or args.devices) is not None:
        raise InputError(
            f"{option} is given, and --model_args of {named[0]!r} names a device too: lm-eval "
            "takes one; drop device= from the model arguments or the option"
        )
    if args.devices is None:
        return [args.device]
    listed = split_list(args.devices) or []
    if not listed or len(set(listed)) != len(listed):
        raise InputError(
            f"--devices takes distinct devices such as cuda:0,cuda:1, got {args.devices!r}"
        )
    return list(listed)


def _live(args: argparse.Namespace) -> tuple[Any, list[str], dict[str, Any]]:
    from ..harness import include_path
    from ..rank.live import LiveEvaluator

    models = read_model_args(args)
    if args.adaptive:
        return _adaptive(args, models)
    evaluator = LiveEvaluator(
        models,
        split_list(args.tasks) or [],
        args.include_path or include_path(),
        fractions=numbers(args.fractions, "--fractions", float),
        model=args.model,
        seed=args.seed,
        devices=devices(args, models),
        batch_size=args.batch_size,
        keep_models=args.keep_models,
    )
    info = {"mode": "live", "model": args.model, "tasks": sorted(evaluator.tasks)}
    return evaluator, list(models), info


def _adaptive(
    args: argparse.Namespace, models: dict[str, str]
) -> tuple[Any, list[str], dict[str, Any]]:
    from ..adaptive.pool_task import SHIPPED_POOLS, shipped_pool_tasks
    from ..errors import InputError
    from ..rank.adaptive_live import AdaptiveLiveEvaluator

    try:
        counts = [int(x) for x in split_list(args.adaptive_items) or []]
    except ValueError:
        raise InputError(
            f"--adaptive-items takes item counts such as 10,20,40, got {args.adaptive_items!r}"
        ) from None
    tasks = split_list(args.tasks) or []
    if tasks == ["microbench_openllm"]:  # the static group's default: every shipped pool
        tasks = shipped_pool_tasks("openllm_v1")
    evaluator = AdaptiveLiveEvaluator(
        models,
        tasks,
        args.include_path or SHIPPED_POOLS,
        counts=counts,
        model=args.model,
        seed=args.seed,
        devices=devices(args, models),
        batch_size=args.batch_size,
        items_per_step=args.items_per_step,
        keep_models=args.keep_models,
    )
    info = {"mode": "live-adaptive", "model": args.model, "tasks": sorted(evaluator.tasks)}
    return evaluator, list(models), info


def replay_check(ranking: Any, truth: dict[str, float], tiers: Any) -> dict[str, Any]:
    """How the replayed ranking compares with the true full-benchmark ranking."""
    from ..rank.evaluation import ranking_quality

    return ranking_quality(ranking.models, truth, tiers=tiers)


def run(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from ..rank import run_rounds
    from ..rank.report import check_report_folder

    if args.plan_round or args.resume:
        from .rank_cluster import run_cluster

        return run_cluster(args)
    if args.skip_missing:
        raise InputError("--skip-missing goes with --resume DIR (cluster rounds)")
    live = bool(args.model_args or args.model_args_file)
    if live == bool(args.responses):
        raise InputError("give either --responses (replay) or --model_args/--model-args-file")
    if args.out:
        check_report_folder(args.out, overwrite=args.overwrite)
    evaluator, models, info = (_live if live else _replay)(args)
    truth = info.pop("truth", None)
    options = _options(args)
    ranking = run_rounds(evaluator, models, options)
    if hasattr(evaluator, "models"):  # live: how often each model was loaded, and why again
        info["model_loads"] = evaluator.models.summary()
    report(
        ranking,
        info,
        options,
        out=args.out,
        overwrite=args.overwrite,
        full_items=args.full_items,
        no_plots=args.no_plots,
        truth=truth,
    )
    return 0


def report(
    ranking: Any,
    info: dict[str, Any],
    options: Any,
    *,
    out: str | None,
    overwrite: bool,
    full_items: int | None,
    no_plots: bool,
    truth: dict[str, float] | None = None,
) -> dict[str, str]:
    """Write the report files into ``out`` (when given) and print the summary: one place for
    the in-process ranking and the last ``--resume`` of a cluster one, so both report alike."""
    from ..rank.report import payload, write_report

    document = payload(ranking, {**info, "level_caps": options.level_caps}, full_items)
    if truth is not None:
        document["replay_check"] = replay_check(ranking, truth, ranking.tiers)
    written: dict[str, str] = {}
    if out:
        png = _png(argparse.Namespace(no_plots=no_plots), document)
        written = write_report(out, document, png, overwrite=overwrite)
    printed = {
        "cost": document["cost"],
        "tier_rule": ranking.tier_rule,
        "stop_reason": ranking.stop_reason,
        "written": written,
        "failures": ranking.failures,
    }
    if "replay_check" in document:  # a replay says how far it agrees with the truth
        printed["replay_check"] = document["replay_check"]
    print_json(printed)
    return written


def _png(args: argparse.Namespace, document: dict[str, Any]) -> bytes | None:
    from ..rank.report import rank_interval_png

    if args.no_plots:
        return None
    return rank_interval_png(document["ranking"], "rank intervals")  # it appends the count
