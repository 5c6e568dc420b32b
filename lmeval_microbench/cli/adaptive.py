"""``microbench adaptive``: evaluate a model adaptively through lm-eval; ``adaptive build`` pools.

A run asks each task's pool, step by step, the items most informative at the model's current
ability (lm-eval's own model API and the pool task's own requests and scoring), stops at the
target standard error or the item budget, and writes lm-eval-shaped ``results_*.json`` and
``samples_*.jsonl`` that ``microbench reconstruct`` can read, plus a step log that
``--resume`` continues after a crash.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from ..outside.ceiling import ceiling_note, saturated
from ..outside.placement import legend, side_mark
from ..reconstruct import FIT_MARK
from ._options import (
    chance_level,
    load_original_task,
    positive_int,
    print_table,
    render_original_task,
)

DEFAULT_TASKS = "microbench_mmlu,microbench_truthfulqa,microbench_winogrande"

EPILOG = """\
examples:
  microbench adaptive --model hf --model_args pretrained=EleutherAI/pythia-160m \\
      --tasks microbench_mmlu,microbench_gsm8k --max-items 30 --target-se 0.25 --output_path out/
  microbench adaptive --model hf --model_args pretrained=M --output_path out/ --resume
  microbench adaptive build --responses arc_easy.parquet --task arc_easy --metric acc_norm \\
      --out my_pools/

Task names: a shipped static task (microbench_mmlu) means its pool (microbench_pool_mmlu);
--include_path points at your own pools (written by `microbench adaptive build`).
"""


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "adaptive",
        help="adaptive evaluation of a model through lm-eval (Fluid Benchmarking); "
        "`adaptive build` makes an item pool",
        description=__doc__.splitlines()[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", help="lm-eval model type (hf, vllm, ...)")
    parser.add_argument("--model_args", default="", help="lm-eval model arguments")
    parser.add_argument(
        "--device", help="lm-eval --device (default: cuda if there is one, else cpu)"
    )
    parser.add_argument("--batch_size", help="lm-eval --batch_size")
    parser.add_argument("--tasks", default=DEFAULT_TASKS, help=f"default: {DEFAULT_TASKS}")
    parser.add_argument("--include_path", help="folder of pool tasks (default: shipped pools)")
    parser.add_argument("--output_path", type=Path, help="folder for results, samples, step logs")
    parser.add_argument("--max-items", type=positive_int, default=30, help="item budget per task")
    parser.add_argument("--target-se", type=float, help="stop once the ability's se is this low")
    parser.add_argument(
        "--items-per-step",
        type=positive_int,
        default=4,
        help="K items of each benchmark per step (default: 4: a quarter of the steps of K=1 "
        "for at most 0.05 points more MAE on the v1 pools, bench/adaptive.md)",
    )
    parser.add_argument(
        "--selector",
        choices=("maxinfo", "randomesque"),
        default="maxinfo",
        help="maxinfo: the most informative items; randomesque: a random pick among the --top "
        "most informative (limits item exposure)",
    )
    parser.add_argument("--top", type=positive_int, default=5, help="randomesque: pick among top")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("--resume", action="store_true", help="continue the step logs")
    parser.set_defaults(run=run)
    sub = parser.add_subparsers(
        dest="adaptive_command", metavar="{build}", help="build: an item pool of your own task"
    )
    _add_build(sub)


def _add_build(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "build",
        help="an item pool (every matrix item) as an lm-eval task folder",
        description="Fit IRT, the score estimator and interval bands (cross-fitted adaptive "
        "replays) on every item of MATRIX, and write the pool task (a bundle + documents) "
        "rendered from lm-eval task TASK.",
    )
    parser.add_argument(
        "--responses", required=True, help="response matrix of the source models (parquet/CSV)"
    )
    parser.add_argument("--task", required=True, help="lm-eval task name or its YAML file")
    parser.add_argument("--include_path", help="folder of the task's YAML (lm-eval's option)")
    parser.add_argument("--metric", help="acc, acc_norm or exact_match (default by task type)")
    parser.add_argument("--filter", default="none", help="filter of a generative task's scores")
    parser.add_argument("--scores", help="CSV of true full scores per model (default: row mean)")
    parser.add_argument("--score-column", default="score", help="column of --scores")
    parser.add_argument(
        "--score-scale", default="auto", help="fraction, percent or auto (default: auto)"
    )
    parser.add_argument("--benchmark", help="benchmark name (default: the task's)")
    parser.add_argument("--id-field", help="document field holding the matrix's item ids")
    parser.add_argument("--id-prefix", default="", help="prefix of those ids")
    parser.add_argument("--num-fewshot", type=int, help="as the matrix's runs used")
    parser.add_argument("--fewshot-seed", type=int, default=1234, help="(default: 1234)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument(
        "--chance",
        type=chance_level,
        help="probability of a right answer by guessing, e.g. 0.25 for four choices: the "
        "person-fit check's chance level, and the interval of a run that may lie below every "
        "source reaches down to the chance score less 5 points (default: the weakest 5%% of "
        "source models stand in for the check, and that interval reaches down to 0)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="task folder to write the pool task into; refuses to replace it without --overwrite",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace a pool task of the same name"
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no stage lines and none of microbench's progress bars on stderr (lm-eval's "
        "bar while it builds the task's requests stays)",
    )
    parser.set_defaults(run=run_build)


# ---------------------------------------------------------------------------- run
def run(args: argparse.Namespace) -> int:
    from ..adaptive.interleave import refuse_engine_per_call, refuse_multi_process
    from ..adaptive.pool_task import SHIPPED_POOLS, pool_task_name
    from ..adaptive.runner import RunOptions, load_pool_task, make_lm

    if args.model is None or args.output_path is None:
        raise InputError("adaptive: --model and --output_path are required")
    if args.target_se is not None and args.target_se <= 0:
        raise InputError(f"--target-se must be positive, got {args.target_se}")
    if args.output_path.exists() and not args.output_path.is_dir():
        raise InputError(
            f"--output_path {args.output_path} is a file; give the folder for the results, "
            "samples and step logs"
        )
    include = args.include_path or str(SHIPPED_POOLS)
    options = RunOptions(
        args.selector, args.top, args.items_per_step, args.max_items, args.target_se, args.seed
    )
    names = [pool_task_name(t.strip()) for t in args.tasks.split(",") if t.strip()]
    tasks = [load_pool_task(name, include) for name in names]
    _check_target_se(args.target_se, tasks)
    refuse_multi_process()  # before the model loads
    refuse_engine_per_call(args.model, args.model_args)
    started = time.perf_counter()
    lm = make_lm(args.model, args.model_args, device=args.device, batch_size=args.batch_size)
    results = _run_all(lm, tasks, options, args)
    _write_results(args, options, results, time.perf_counter() - started)
    _print(results)
    return 0


def _check_target_se(target_se: float | None, tasks: list[Any]) -> None:
    """A target se the prior already meets would stop every run before its first item: say
    so before the model loads (the ability's se starts at the pool's prior sd)."""
    for task in tasks:
        prior_sd = task.pool.state.prior_sd
        if target_se is not None and target_se >= prior_sd:
            raise InputError(
                f"--target-se {target_se:g} is not below the prior sd {prior_sd:.2f} of pool "
                f"{task.pool.name!r}: the run would stop before asking any item; give a "
                "smaller target (e.g. 0.3) or --max-items alone"
            )


def _run_all(lm: Any, tasks: list[Any], options: Any, args: argparse.Namespace) -> list[Any]:
    """Every benchmark of the run together, one model call per request type per step
    (:func:`~lmeval_microbench.adaptive.interleave.run_tasks`); then each one's samples."""
    from ..adaptive.interleave import run_tasks
    from ..adaptive.runlog import log_path
    from ..adaptive.runner import run_identity

    args.output_path.mkdir(parents=True, exist_ok=True)
    runs = [
        (
            task,
            log_path(args.output_path, task.name),
            run_identity(args.model, args.model_args, task),
        )
        for task in tasks
    ]
    results = run_tasks(
        lm,
        runs,
        options,
        resume=args.resume,
        report=lambda line: print(line, file=sys.stderr, flush=True),
    )
    for result in results:
        _write_samples(args, result)
    return results


def _write_samples(args: argparse.Namespace, result: Any) -> None:
    """The run's samples file, as lm-eval's ``--log_samples`` writes one per task."""
    from ..adaptive.runlog import write_samples

    samples = []
    for step in result.steps:
        for k, sample in enumerate(step["samples"]):
            block = {
                "step": step["step"],
                "position": len(samples) + 1,
                "theta": step["theta"],
                "se": step["se"],
                "unparsed": step["unparsed"][k],
            }
            samples.append({**sample, "adaptive": block})
    stamp = time.strftime("%Y-%m-%dT%H-%M-%S")
    write_samples(args.output_path / f"samples_{result.task}_{stamp}.jsonl", samples)


def _write_results(
    args: argparse.Namespace, options: Any, results: list[Any], seconds: float
) -> None:
    from ..adaptive.runlog import write_json

    payload = {
        "results": {},
        "adaptive": {},
        "n-samples": {},
        "config": {
            "model": args.model,
            "model_args": args.model_args,
            "device": args.device,
            "batch_size": args.batch_size,
        },
        "model_name": args.model_args.split("pretrained=")[-1].split(",")[0] or args.model,
        "total_evaluation_time_seconds": f"{seconds:.1f}",
    }
    for result in results:
        est, scores = result.estimate, [a.score for a in result.answers]
        metric = f"{result.answers[0].sample['metrics'][0]},none" if result.answers else "acc,none"
        payload["results"][result.task] = {
            "alias": result.task,
            metric: sum(scores) / max(1, len(scores)),
            "estimate,none": est.value,
            "estimate_lower,none": est.lower,
            "estimate_upper,none": est.upper,
        }
        payload["n-samples"][result.task] = {
            "original": result.pool_items,
            "effective": len(scores),
        }
        payload["adaptive"][result.task] = {
            "options": options.to_dict(),
            "stop_reason": result.stop_reason,
            "n_items": est.n_items,
            "theta": est.theta,
            "se": est.se,
            "order": [a.item for a in result.answers],
            "steps": len(result.steps),
            "resumed_items": result.resumed_items,
            "seconds": result.seconds,
            "unparsed": result.unparsed,
            "person_fit": est.person_fit,
            "placement": est.placement,
        }
    stamp = time.strftime("%Y-%m-%dT%H-%M-%S")
    write_json(args.output_path / f"results_{stamp}.json", payload)


def _print(results: list[Any]) -> None:
    rows = []
    for result in results:
        est = result.estimate
        rows.append(
            {
                "task": result.task,
                "estimate": f"{100 * est.value:.1f}{FIT_MARK if est.flagged else ''}"
                f"{side_mark(est.placement)}",
                "90% interval": f"[{100 * est.lower:.1f}, {100 * est.upper:.1f}]",
                "items": est.n_items,
                "ability (se)": f"{est.theta:.2f} ({est.se:.2f})",
                "stopped": result.stop_reason,
                "time": f"{result.seconds:.1f} s",
            }
        )
    print_table(rows, list(rows[0]) if rows else [])
    if any(side_mark(result.estimate.placement) for result in results):
        print(legend())
    for result in results:
        if result.estimate.note:
            print(f"{FIT_MARK} {result.task}: person fit: {result.estimate.note}", file=sys.stderr)
        if saturated(np.array([[a.score for a in result.answers]], dtype=np.float64))[0]:
            items = f"every item {result.task} asked"
            print(f"{result.task}: {ceiling_note(None, items)}", file=sys.stderr)
        if result.stop_reason == "pool_exhausted":
            print(f"{result.task}: the pool ran out before the target se was reached")
        if result.unparsed:
            print(
                f"{result.task}: {len(result.unparsed)} generations had no parsable answer "
                f"(scored 0): {', '.join(result.unparsed[:10])}",
                file=sys.stderr,
            )


# ---------------------------------------------------------------------------- build
def _stages(quiet: bool = False) -> Callable[[str], None]:
    """A function printing ``[elapsed] stage`` lines on stderr (no bar: stages vary widely);
    with ``quiet`` one printing nothing."""
    started = time.perf_counter()

    def stage(text: str) -> None:
        if not quiet:
            print(f"[{time.perf_counter() - started:5.0f} s] {text}", file=sys.stderr, flush=True)

    return stage


def run_build(args: argparse.Namespace) -> int:
    """Build a pool task, saying each stage on stderr: a large matrix takes minutes."""
    from ..adaptive import build_pool, pool_task_spec
    from ..adaptive.pool_task import POOL_TASK_PREFIX
    from ..bundle import MetricSpec
    from ..harness.export import write_task
    from ..harness.render import finish_docs, with_document_hashes
    from ..responses import ResponseMatrix
    from ..truth import align_target, read_scores

    stage = _stages(args.quiet)
    stage(f"reading {args.responses}")
    matrix = ResponseMatrix.read(args.responses)
    scores = (
        read_scores(args.scores, args.score_column, scale=args.score_scale) if args.scores else None
    )
    source, truth = align_target(matrix, scores)
    stage(f"loading task {args.task} through lm-eval")
    task_obj, benchmark, metric = load_original_task(args)
    task_name = f"{POOL_TASK_PREFIX}{benchmark}"
    if (args.out / f"{task_name}.yaml").exists() and not args.overwrite:  # before the work
        raise InputError(f"{args.out} already holds task {task_name!r}; pass --overwrite")
    stage(f"rendering the prompts of {source.n_items} items")
    rendered = render_original_task(args, task_obj, benchmark, metric)
    label = f"{benchmark}-pool"
    source = with_document_hashes(source, rendered, label)
    stage(
        f"fitting the pool on {source.n_models} models x {source.n_items} items (IRT, score "
        "map, person fit: minutes on large matrices)"
    )
    bundle = build_pool(
        source,
        truth,
        name=label,
        benchmark=benchmark,
        metric=MetricSpec(name=metric, filter=args.filter),
        seed=args.seed,
        chance=args.chance,
        progress=not args.quiet,
    )
    spec = pool_task_spec(rendered.spec(f"microbench_{benchmark}", metric), benchmark)
    stage(f"writing {args.out}")
    path = write_task(args.out, spec, bundle, finish_docs(rendered, bundle.item_ids, label))
    print(f"wrote pool task {spec.task} ({bundle.budget} items) to {path}")
    return 0
