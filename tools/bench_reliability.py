"""Reliability benchmark on real leaderboard data: selection methods x estimators, held-out models.

Data (``../shared/data``; the tool stops with a message when it is absent):

* ``openllm``: the six Open LLM Leaderboard v1 matrices ``openllm_v1/responses/{bm}_B.parquet``
  (58-249 informative items of each benchmark, 3,300-4,400 models). Truth: the score on the
  *whole* benchmark, ``scores/{bm}_B_scores.csv`` ``full_score_metabench`` (hellaswag: the
  ``hellaswag`` column of ``open-llm-leaderboard.csv``, joined on model name). Protocols
  ``random`` (80/20 splits) and ``extrapolation`` (targets = the best 20 % by truth).
* ``psn``: the MMLU and BBH blocks of ``psn_irt/combine.csv`` (12 unnamed models, every item
  of the benchmark; ``column_segments_inferred.csv`` gives the columns). Truth: the mean over
  the block. Protocol ``loo`` (each model in turn is the only target).

Which combinations run. A full grid (7 methods x 6+ estimators x budgets x splits) takes hours
on 2 cores, so: every selection method with ``calibrated`` and with the project's own
estimators (every registered estimator that is not a published method, see
``PUBLISHED_ESTIMATORS``; picked up from the registry at run time), plus the published methods
as their authors pair them (``PUBLISHED_COMBOS``): random + mean, Anchor Points
(anchor_points + anchor), tinyBenchmarks gp-IRT (tinybenchmarks + gpirt), metabench-like
(metabench + calibrated). ``all`` (every matrix item) runs every estimator used.

psn has 11 source models per split. The estimators then fit no calibration line (their raw
estimate is the prediction, right because the truth is the mean over the same block) and take
leave-one-out conformal residuals (``estimators/base.py``, ``MIN_CALIBRATION_MODELS``). On the
MMLU block only IRT-free selectors and estimators run: one of the 12 models answers every
MMLU item correctly, and whenever it is a source model (11 of the 12 ``loo`` splits) the 2PL
fit of 11 x 14,042 diverges (measured during development: EM stopped at its 500-iteration
limit after 95 s with slopes of 1e12; 2.7 s without that model). BBH (11 x 6,511, ~1 s per
fit) also runs the IRT estimators and selectors.

Anchors computed here, on the same data: (a) metabench's own held-out error, the ``test`` rows
of ``scores/{bm}_B_scores.csv`` (models that are not in our matrices); (b) ridge regression of
the full score on the item responses, 5-fold CV over all models with all items and with 50
random items, and on the random/extrapolation splits (``ridge_items`` rows; its 50 items are
the random selector's on that split); (c) the published combinations from the run itself.

Outputs in OUT_DIR (default ``bench/`` for the full run, a temporary folder otherwise):
``reliability.json``, ``reliability.md``, ``reliability_{dataset}_{mae,mdad,tau_dior}.png`` and
``defaults.json`` (chosen method, estimator and budget per benchmark, read by
``tools/build_openllm_v1.py``).

    python tools/bench_reliability.py                          # full run, writes bench/
    python tools/bench_reliability.py --quick                  # arc + psn_bbh, small
    python tools/bench_reliability.py --benchmarks arc gsm8k   # some datasets only
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from lmeval_microbench._io import atomic_path
from lmeval_microbench._json import strict_json
from lmeval_microbench.cli.reliability import DIOR_LABEL
from lmeval_microbench.estimators import ESTIMATORS
from lmeval_microbench.plots import metric_vs_budget_png
from lmeval_microbench.reliability import (
    ALL,
    LEVEL,
    Budget,
    blas_limit,
    complete_models,
    json_ready,
    needs_irt,
)
from lmeval_microbench.selection import SELECTORS

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the leaderboard_* siblings
from leaderboard_baselines import (
    RIDGE_SUBSET,
    metabench_own_error,
    ridge_cv,
    ridge_gcv,
    ridge_predict,
)
from leaderboard_bench import (
    DATASETS,
    OPENLLM,
    PSN_BLOCKS,
    PSN_IRT_FREE,
    SEED,
    Dataset,
    evaluate_dataset,
    load_openllm,
    load_psn_block,
    openllm_combos,
    own_estimators,
    preferred_estimators,
    psn_combos,
    role_of,
)
from leaderboard_defaults import (
    DEFAULTS_RULE,
    choose_default,
    mdad_cut,
    summary_rows,
)
from leaderboard_report import leaderboard_markdown, target_lines
from worker_pool import worker_pool

__all__ = [  # imported from here by tests/test_bench_reliability.py and other tools
    "OPENLLM",
    "Dataset",
    "choose_default",
    "evaluate_dataset",
    "load_openllm",
    "load_psn_block",
    "mdad_cut",
    "metabench_own_error",
    "needs_irt",
    "openllm_combos",
    "own_estimators",
    "preferred_estimators",
    "psn_combos",
    "ridge_cv",
    "ridge_gcv",
    "ridge_predict",
    "role_of",
    "strict_json",
    "summary_rows",
    "target_lines",
]

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = REPO / ".." / "shared" / "data"
BUDGETS: tuple[Budget, ...] = (25, 50, 100, ALL)
REPEATS = {"random": 5, "extrapolation": 3, "loo": 2}
"""Repeats per protocol. ``extrapolation`` has one fixed split (its repeats only redraw the
selection; metabench's selection is deterministic), a ``loo`` repeat is a full cycle."""


# ---------------------------------------------------------------------- run
@dataclass
class RunConfig:
    shared: Path
    datasets: list[str]
    budgets: tuple[Budget, ...]
    repeats: dict[str, int]
    seed: int
    out_dir: Path
    plots: bool
    ours: tuple[str, ...]
    psn_ours: tuple[str, ...]
    command: str
    progress: bool = True
    blas_threads: int | None = 1
    choose_defaults: bool = False
    """Rewrite ``defaults.json`` with this run's choice (else an existing one is kept)."""
    jobs: int = 1
    """Datasets evaluated at once, each in a process of its own (same records as one)."""


def build_dataset(name: str, config: RunConfig) -> Dataset:
    """Load one dataset and attach its protocols, combinations and budgets."""
    if name in OPENLLM:
        matrix, truth, note = load_openllm(config.shared / "openllm_v1", name)
        matrix, truth = complete_models(matrix, truth)
        budgets = tuple(b for b in config.budgets if b == ALL or int(b) < matrix.n_items)
        return Dataset(
            name,
            matrix,
            truth,
            note,
            ("random", "extrapolation"),
            openllm_combos(list(SELECTORS), config.ours),
            budgets,
            ridge=True,
        )
    block = PSN_BLOCKS[name]
    matrix, truth, note = load_psn_block(config.shared / "psn_irt", block)
    irt = name not in PSN_IRT_FREE
    notes = (
        "11 source models per split: estimators fit no calibration line (the raw estimate is "
        "the prediction; the truth is the mean over this block) and use leave-one-out "
        "conformal residuals.",
        "IRT-free selectors and estimators only: one model answers every MMLU item correctly, "
        "and with it among the source models (11 of the 12 splits) the 2PL fit of 11 x 14,042 "
        "diverges (measured during development: EM stopped at its 500-iteration limit after "
        "95 s, slopes ~1e12; 2.7 s without that model)."
        if not irt
        else "IRT-free selectors with every estimator, plus tinybenchmarks + gpirt and "
        "metabench + calibrated (IRT selectors).",
    )
    budgets = tuple(b for b in config.budgets if b == ALL or int(b) < matrix.n_items)
    return Dataset(
        name,
        matrix,
        truth,
        note,
        ("loo",),
        psn_combos(config.psn_ours, irt=irt),
        budgets,
        notes=notes,
    )


def machine_facts() -> dict[str, Any]:
    """Where the run happened: CPU, cores, load, Python and numpy, and the git commit."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        commit += " (with uncommitted changes)" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "commit": commit,
    }


def compute_anchors(dataset: Dataset, config: RunConfig) -> dict[str, Any]:
    """metabench's own held-out error and the ridge CV baselines of an Open LLM matrix."""
    if dataset.name not in OPENLLM:
        return {}
    scores = config.shared / "openllm_v1" / "scores" / f"{dataset.name}_B_scores.csv"
    values, truth = dataset.matrix.values, dataset.truth
    anchors: dict[str, Any] = {
        "metabench": metabench_own_error(scores),
        "ridge_cv_all": ridge_cv(values, truth, seed=config.seed),
    }
    if RIDGE_SUBSET < dataset.matrix.n_items:
        anchors["ridge_cv_50"] = ridge_cv(values, truth, n_items=RIDGE_SUBSET, seed=config.seed)
    return anchors


def run(config: RunConfig) -> dict[str, Any]:
    """Evaluate every dataset, then write the JSON, markdown, plots and defaults."""
    with blas_limit(config.blas_threads):
        return _run(config)


DatasetResult = tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]


def evaluate_one(name: str, config: RunConfig, progress: bool) -> DatasetResult:
    """One dataset's records, info and anchors. Every split and selection is seeded from
    ``config.seed`` within the dataset, so the result does not depend on what ran before."""
    with blas_limit(config.blas_threads):
        dataset = build_dataset(name, config)
        anchors = compute_anchors(dataset, config)
        rows, info = evaluate_dataset(
            dataset, repeats=config.repeats, seed=config.seed, progress=progress
        )
    return rows, info, anchors


def workers(config: RunConfig) -> int:
    """Worker processes the run uses: 1 (none, all in this process) unless ``--jobs`` and
    the datasets allow more."""
    return max(1, min(config.jobs, len(config.datasets)))


def evaluate_all(config: RunConfig) -> dict[str, DatasetResult]:
    """Every dataset's result, in ``config.datasets`` order; :func:`workers` at a time."""
    names = config.datasets
    if workers(config) == 1:
        bar = tqdm(names, desc="datasets", disable=not config.progress)
        return {name: evaluate_one(name, config, config.progress) for name in bar}
    with worker_pool(workers(config)) as pool:
        futures = {pool.submit(evaluate_one, name, config, False): name for name in names}
        done = {}
        with tqdm(total=len(names), desc="datasets", disable=not config.progress) as bar:
            for future in as_completed(futures):
                done[futures[future]] = future.result()
                bar.set_postfix_str(futures[future])
                bar.update(1)
    return {name: done[name] for name in names}


def cpu_seconds() -> float:
    """CPU time of this process and of the workers it has waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _run(config: RunConfig) -> dict[str, Any]:
    started = time.perf_counter()
    cpu_started = cpu_seconds()
    facts = machine_facts()
    records: list[dict[str, Any]] = []
    infos: dict[str, dict[str, Any]] = {}
    anchors: dict[str, dict[str, Any]] = {}
    for name, (rows, info, anchor) in evaluate_all(config).items():
        records += rows
        infos[name] = info
        anchors[name] = anchor
    minutes = (time.perf_counter() - started) / 60.0
    cpu_minutes = (cpu_seconds() - cpu_started) / 60.0
    openllm = [d for d in config.datasets if d in OPENLLM]
    psn = [d for d in config.datasets if d in PSN_BLOCKS]
    summary = summary_rows(records, openllm)
    psn_summary = summary_rows(records, psn)
    preferred = preferred_estimators(config.ours)
    defaults = {name: choose_default(records, name, preferred) for name in openllm}
    shipped = kept_defaults(config)
    plots = draw_plots(records, config) if config.plots else {}
    run_info = {
        "command": config.command,
        "finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "minutes": round(minutes, 1),
        "cpu_minutes": round(cpu_minutes, 1),
        "blas_threads": config.blas_threads,
        "jobs": workers(config),
        "machine": facts,
        "seed": config.seed,
        "repeats": config.repeats,
        "budgets": list(config.budgets),
        "our_estimators": list(config.ours),
        "psn_our_estimators": list(config.psn_ours),
        "registered_estimators": list(ESTIMATORS),
        "selectors": list(SELECTORS),
        "level": LEVEL,
    }
    payload = {
        "info": run_info,
        "datasets": infos,
        "anchors": anchors,
        "summary": summary,
        "psn_summary": psn_summary,
        "defaults": defaults,
        "defaults_rule": DEFAULTS_RULE,
        "records": json_ready(records),
    }
    texts = {
        "reliability.json": json.dumps(strict_json(payload), indent=1, allow_nan=False) + "\n",
        "reliability.md": leaderboard_markdown(
            run_info, infos, records, anchors, summary, psn_summary, defaults, plots, shipped
        )
        + "\n",
        "defaults.json": json.dumps(
            strict_json(
                {
                    "generated_by": config.command,
                    "finished": run_info["finished"],
                    "rule": DEFAULTS_RULE,
                    "benchmarks": {k: v for k, v in defaults.items() if v is not None},
                }
            ),
            indent=2,
            allow_nan=False,
        )
        + "\n",
    }
    if shipped is not None:
        del texts["defaults.json"]
    write_outputs(config.out_dir, texts, plots)
    return payload


def kept_defaults(config: RunConfig) -> dict[str, dict] | None:
    """The recipes of the existing ``defaults.json``, unless ``--choose-defaults``.

    The defaults are a decision the shipped tasks were built from: a rerun (new code, new
    numbers) reports where its rule would now choose otherwise, and rewrites them only when
    asked, so that ``defaults.json`` and the shipped bundles never disagree silently.
    """
    path = config.out_dir / "defaults.json"
    if config.choose_defaults or not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))["benchmarks"]


def draw_plots(records: Sequence[dict[str, Any]], config: RunConfig) -> dict[str, bytes]:
    """MAE and MDAD against budget per dataset (file name -> PNG bytes)."""
    plots = {}
    for name in config.datasets:
        rows = [r for r in records if r["dataset"] == name]
        for metric, label in (
            ("mae", "MAE (score points)"),
            ("mdad", "MDAD (score points)"),
            ("tau_dior", DIOR_LABEL),
        ):
            plots[f"reliability_{name}_{metric}.png"] = metric_vs_budget_png(
                rows, metric, ylabel=label, title=f"{name}: {label.split(' (')[0]} vs budget"
            )
    return plots


def write_outputs(out_dir: Path, texts: dict[str, str], blobs: dict[str, bytes]) -> None:
    """Write everything atomically, after all of it was computed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        with atomic_path(out_dir / name) as tmp:
            tmp.write_text(text, encoding="utf-8")
    for name, blob in blobs.items():
        with atomic_path(out_dir / name) as tmp:
            tmp.write_bytes(blob)


# ---------------------------------------------------------------------- command line
def parse_budgets(text: str) -> tuple[Budget, ...]:
    budgets: list[Budget] = []
    for part in text.split(","):
        part = part.strip().lower()
        if part == ALL:
            budgets.append(ALL)
        elif part.isdigit() and int(part) > 0:
            budgets.append(int(part))
        else:
            raise argparse.ArgumentTypeError(
                f"budget {part!r} is neither a positive integer nor 'all'"
            )
    return tuple(dict.fromkeys(budgets))


def estimator_list(parser: argparse.ArgumentParser, option: str, text: str) -> tuple[str, ...]:
    """Comma-separated registered estimator names ('' for none); unknown names stop the run."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in ESTIMATORS]
    if unknown:
        parser.error(f"{option}: unknown estimators {unknown}; registered: {list(ESTIMATORS)}")
    return names


def changes_numbers(given: Sequence[str]) -> list[str]:
    """The options in ``given`` that change what the report measures: all but
    ``--choose-defaults`` and ``--jobs N`` (``--jobs=N``), which change only how it runs."""
    left, skip = [], False
    for arg in given:
        if skip:
            skip = False
        elif arg == "--jobs":
            skip = True
        elif arg != "--choose-defaults" and not arg.startswith("--jobs="):
            left.append(arg)
    return left


def parse_args(argv: list[str] | None) -> RunConfig:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="../shared/data")
    parser.add_argument(
        "--benchmarks",
        nargs="+",
        choices=DATASETS,
        default=list(DATASETS),
        help="datasets to run (default: all eight)",
    )
    parser.add_argument(
        "--budgets",
        type=parse_budgets,
        default=BUDGETS,
        help="comma-separated item counts and 'all' (default 25,50,100,all)",
    )
    parser.add_argument(
        "--repeats", type=int, default=REPEATS["random"], help="random 80/20 splits (default 5)"
    )
    parser.add_argument("--extrapolation-repeats", type=int, default=REPEATS["extrapolation"])
    parser.add_argument("--loo-repeats", type=int, default=REPEATS["loo"])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--ours",
        help="comma-separated estimators to treat as our own "
        "(default: every registered estimator that is not a published method)",
    )
    parser.add_argument(
        "--psn-ours",
        help="those of our estimators to run on the psn blocks (default: as --ours; 11 models "
        "x 6,511-14,042 items: leave out one whose fit grows with items^3)",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        help="output folder (default: bench/ for the full default run, else a temporary folder)",
    )
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--no-progress", action="store_true", help="no tqdm progress bars")
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="BLAS threads (default 1; 0 leaves the library default)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="datasets evaluated at once, one process each (default 1; the records are the same)",
    )
    parser.add_argument(
        "--choose-defaults",
        action="store_true",
        help="rewrite defaults.json with this run's choice (default: keep an existing one and "
        "name the benchmarks where the rule now chooses otherwise)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="arc and psn_bbh, 2 random splits, 1 extrapolation repeat, budgets 25,all",
    )
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    full_run = not changes_numbers(given)
    if args.quick:
        args.benchmarks, args.budgets = ["arc", "psn_bbh"], (25, ALL)
        args.repeats, args.extrapolation_repeats, args.loo_repeats = 2, 1, 1
    if min(args.repeats, args.extrapolation_repeats, args.loo_repeats) < 1:
        parser.error("repeats must be positive")
    if args.jobs < 1:
        parser.error("--jobs must be positive")
    if args.blas_threads < 0:
        parser.error("--blas-threads must be 0 (library default) or positive")
    if not (args.shared / "openllm_v1").is_dir() or not (args.shared / "psn_irt").is_dir():
        parser.error(f"{args.shared}: no openllm_v1/ or psn_irt/ (the shared data is missing)")
    ours = own_estimators() if args.ours is None else estimator_list(parser, "--ours", args.ours)
    psn_ours = (
        ours if args.psn_ours is None else estimator_list(parser, "--psn-ours", args.psn_ours)
    )
    out_dir = args.out_dir or (
        REPO / "bench" if full_run else Path(tempfile.gettempdir()) / "microbench-reliability"
    )
    return RunConfig(
        shared=args.shared,
        datasets=list(dict.fromkeys(args.benchmarks)),
        budgets=args.budgets,
        repeats={
            "random": args.repeats,
            "extrapolation": args.extrapolation_repeats,
            "loo": args.loo_repeats,
        },
        seed=args.seed,
        out_dir=out_dir,
        plots=not args.no_plots,
        ours=ours,
        psn_ours=psn_ours,
        command=shlex.join(["python", "tools/bench_reliability.py", *given]),
        progress=not args.no_progress,
        blas_threads=args.blas_threads or None,
        choose_defaults=args.choose_defaults,
        jobs=args.jobs,
    )


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    kept = not config.choose_defaults and (config.out_dir / "defaults.json").exists()
    payload = run(config)
    print(
        f"wrote {config.out_dir}/reliability.{{json,md}} and plots in "
        f"{payload['info']['minutes']:.1f} min; defaults.json "
        + ("kept (see reliability.md)" if kept else "written")
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
