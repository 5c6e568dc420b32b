"""What the person-fit check does to adaptive runs: the score map alone against what is read.

``bench/adaptive.md`` scores the max-information runs by the pool's score map alone. A user
reads what ``microbench adaptive`` prints: that estimate after the pool's person-fit check
(``adaptive.pool.estimate_pool``, the rule of static estimates): answers that cannot be told
from guessing widen the interval to the chance-level score and, where chance levels were
given, move the estimate toward it by P(guessing). This script builds the pool the way
``microbench adaptive build`` does (``adaptive.pool.build_pool``, chance levels as the
shipped pool was given them) on the same splits as ``bench/adaptive.md`` (seed 0; random
80/20, extrapolation: strongest fifth held out, weak: weakest fifth held out), replays the
max-information runs of the same held-out models, and reads each run at 10, 25 and 50 items
through the product's own functions, before (``posterior_estimate``) and after
(``estimate_pool``) the check.

Per benchmark, protocol and budget: MAE and bias (points), 90 % coverage and width, before
and after the check, and the share of held-out models flagged as guessing and as misfitting.

    python tools/bench_adaptive_fit.py                                   # every benchmark
    python tools/bench_adaptive_fit.py --benchmarks musr --protocols weak --out /tmp/check
    python tools/bench_adaptive_fit.py --merge /tmp/a/adaptive_fit.json  # into --out's report
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_adaptive import BUDGETS, PROTOCOLS, REPO, first_split, load_benchmark
from bench_fit_effect import given_chance, summarise

from lmeval_microbench._io import write_text_if_changed
from lmeval_microbench.adaptive.pool import (
    build_pool,
    estimate_pool,
    pool_state,
    posterior_estimate,
)
from lmeval_microbench.adaptive.selection import MaxInfoSelector
from lmeval_microbench.adaptive.simulate import replay

BENCHMARKS = ("mmlu", "truthfulqa", "arc", "ifeval", "gsm8k", "hellaswag", "winogrande", "musr")


def read_runs(pool: Any, values: np.ndarray, order: np.ndarray, n: int) -> dict[str, Any]:
    """Each run's first ``n`` answers read before and after the person-fit check (fractions)."""
    ids = pool.item_ids
    raw, checked, guessing, misfit = [], [], [], []
    for answers, asked in zip(values, order[:, :n], strict=True):
        scores = {ids[j]: float(answers[j]) for j in asked}
        before, _, _ = posterior_estimate(pool, scores)
        after = estimate_pool(pool, scores)
        raw.append((before.value, before.lower, before.upper))
        checked.append((after.value, after.lower, after.upper))
        guessing.append(bool(after.person_fit.get("guessing")))
        misfit.append(bool(after.person_fit.get("misfit")))
    return {
        "raw": tuple(np.array(column) for column in zip(*raw, strict=True)),
        "checked": tuple(np.array(column) for column in zip(*checked, strict=True)),
        "guessing": np.array(guessing),
        "misfit": np.array(misfit),
        "recipe": "adaptive",
    }


def replayed_runs(
    bm: str, matrix: Any, truth: np.ndarray, protocol: str, args: Any, budgets: tuple[int, ...]
) -> tuple[Any, np.ndarray, Any, np.ndarray, bool, Any]:
    """The pool built on the split's sources as ``microbench adaptive build`` builds it, the
    answers of at most ``args.max_targets`` held-out models, their max-information runs
    (read at ``budgets``), their true scores, whether chance levels were given, and the
    sources (the matrix the pool was fitted on)."""
    split = first_split(matrix, truth, protocol, args.seed)
    chance = given_chance(bm, list(split.source.item_ids))  # as the shipped pool got them
    bundle = build_pool(
        split.source, split.source_truth, name=f"{bm}-{protocol}", benchmark=bm,
        seed=args.seed, chance=chance,
    )  # fmt: skip
    pool = pool_state(bundle)
    rows = np.random.default_rng(args.seed).permutation(split.target.n_models)[: args.max_targets]
    values = split.target.values[rows][:, split.target.item_positions(list(pool.item_ids))]
    result = max_info_runs(pool, values, budgets)
    return pool, values, result, split.target_truth[rows], chance is not None, split.source


def max_info_runs(pool: Any, values: np.ndarray, budgets: tuple[int, ...]) -> Any:
    """The max-information runs of the answer rows ``values`` (models x pool items), read
    at ``budgets``."""
    return replay(
        pool.params,
        values,
        selector=MaxInfoSelector(),
        max_items=max(budgets),
        score_map=pool.state.score_map,
        checkpoints=budgets,
        prior_mean=pool.state.prior_mean,  # as the product's runs (adaptive.interleave)
        prior_sd=pool.state.prior_sd,
    )


def run_protocol(bm: str, matrix: Any, truth: np.ndarray, protocol: str, args: Any) -> list[dict]:
    """Rows (one per budget) of one benchmark x protocol: the pool built on the split's
    sources, its max-information runs on at most ``args.max_targets`` held-out models."""
    pool, values, result, target_truth, given, _ = replayed_runs(
        bm, matrix, truth, protocol, args, BUDGETS
    )
    out = []
    for n in BUDGETS:
        part = read_runs(pool, values, result.order, n)
        replayed = np.asarray(result.predictions[n])
        part["truth"] = target_truth
        summary = summarise([part])
        summary["replay_gap"] = float(100 * np.max(np.abs(part["raw"][0] - replayed)))
        chance_from = "given" if given else "stand-in"
        out.append({"benchmark": bm, "protocol": protocol, "items": n, "chance": chance_from})
        out[-1].update({k: v for k, v in summary.items() if k != "recipes"})
    return out


def report_header(title: str, info: dict[str, Any], doc: str | None) -> list[str]:
    """A report's title, the command that made it with its time and load average, and the
    tool's description (the second paragraph of ``doc``)."""
    merged = "runs side by side, the longest; " if " (+ " in info["command"] else ""
    return [
        f"# {title}",
        "",
        f"Generated by `{info['command']}` in {info['seconds']:.0f} s ({merged}load average at "
        f"the end {info['load_average']}, 2 cores).",
        "",
        (doc or "").split("\n\n")[1].replace("\n", " "),
        "",
    ]


def write_report(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_text_if_changed(out / "adaptive_fit.json", json.dumps(results, indent=1) + "\n")
    info = results["info"]
    lines = report_header("What the person-fit check does to adaptive runs", info, __doc__)
    lines += [
        f"At most {info['max_targets']} held-out models per protocol, seed {info['seed']}. MAE "
        "and bias in points; cov: share of 90 % intervals that contain the true score; guess / "
        "misfit: share of held-out runs flagged (only the former changes an estimate). "
        "'replay gap': largest difference in points between the replay's estimate and the "
        "product's reading of the same answers (0: the same estimate).",
        "",
        "| benchmark | protocol | chance | items | targets | MAE raw → checked "
        "| bias raw → checked | cov raw → checked | width raw → checked | guess | misfit "
        "| replay gap |",
        "|---|---|---|---:|---:|---|---|---|---|---:|---:|---:|",
    ]
    for row in results["rows"]:
        raw, checked = row["raw"], row["checked"]
        lines.append(
            f"| {row['benchmark']} | {row['protocol']} | {row['chance']} | {row['items']} "
            f"| {row['targets']} | {raw['mae']:.2f} → {checked['mae']:.2f} "
            f"| {raw['bias']:+.2f} → {checked['bias']:+.2f} "
            f"| {raw['coverage']:.2f} → {checked['coverage']:.2f} "
            f"| {raw['width']:.1f} → {checked['width']:.1f} | {100 * row['guessing']:.0f} % "
            f"| {100 * row['misfit']:.0f} % | {row['replay_gap']:.2g} |"
        )
    write_text_if_changed(out / "adaptive_fit.md", "\n".join(lines) + "\n")


def merge(
    out: Path,
    others: list[Path],
    name: str = "adaptive_fit",
    write: Callable[[dict[str, Any], Path], None] = write_report,
) -> None:
    """Rows of ``others`` (runs of other benchmarks or protocols, side by side) replace those
    of ``out``'s report ``name`` on the same benchmark x protocol; the commands are listed
    together and the time is the longest run's. ``write`` writes the merged report."""
    saved = json.loads((out / f"{name}.json").read_text())
    for path in others:
        other = json.loads(path.read_text())
        done = {(r["benchmark"], r["protocol"]) for r in other["rows"]}
        kept = [r for r in saved["rows"] if (r["benchmark"], r["protocol"]) not in done]
        saved["rows"] = kept + other["rows"]
        added = " (+ " + other["info"]["command"].split("py ", 1)[1] + ")"
        if added not in saved["info"]["command"]:  # merging the same run twice names it once
            saved["info"]["command"] += added
        saved["info"]["seconds"] = max(saved["info"]["seconds"], other["info"]["seconds"])
    order = {bm: k for k, bm in enumerate(BENCHMARKS)}
    saved["rows"].sort(
        key=lambda r: (order[r["benchmark"]], PROTOCOLS.index(r["protocol"]), r["items"])
    )
    write(saved, out)


def parse_args(argv: list[str] | None = None, doc: str | None = __doc__) -> argparse.Namespace:
    """The options of this tool, and of tools that replay the same runs (``doc``: the
    calling tool's docstring, whose first line ``--help`` shows)."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO / ".." / "shared" / "data")
    parser.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--max-targets", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument("--merge", type=Path, nargs="+", default=[])
    return parser.parse_args(argv)


def run_info(
    args: argparse.Namespace, argv: list[str] | None, start: float, tool: str = "bench_adaptive_fit"
) -> dict[str, Any]:
    """The command, time so far and load average the report states."""
    return {
        "command": f"python tools/{tool}.py " + " ".join(argv or sys.argv[1:]),
        "seconds": time.perf_counter() - start,
        "load_average": ", ".join(f"{x:.2f}" for x in os.getloadavg()),
        "max_targets": args.max_targets,
        "seed": args.seed,
    }


def run_cells(
    args: argparse.Namespace,
    argv: list[str] | None,
    run: Callable[..., list[dict]],
    write: Callable[[dict[str, Any], Path], None],
    tool: str = "bench_adaptive_fit",
) -> None:
    """Every benchmark x protocol of ``args`` through ``run``, with the report written by
    ``write`` after each cell, so that a long run that dies keeps the cells it finished."""
    start = time.perf_counter()
    plan = [(b, p) for b in args.benchmarks.split(",") for p in args.protocols.split(",")]
    results: dict[str, Any] = {"info": {}, "rows": []}
    with tqdm(total=len(plan), desc="benchmark x protocol") as bar:
        for bm in args.benchmarks.split(","):
            matrix, truth, _ = load_benchmark(args.shared, bm)
            for protocol in args.protocols.split(","):
                results["rows"].extend(run(bm, matrix, truth, protocol, args))
                results["info"] = run_info(args, argv, start, tool)
                write(results, args.out)
                bar.update()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.merge:
        merge(args.out, args.merge)
        return
    run_cells(args, argv, run_protocol, write_report)


if __name__ == "__main__":
    main()
