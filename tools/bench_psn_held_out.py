"""The 10-source default on whole benchmarks no choice of ours was made on: the other psn blocks.

With 10 source models ``microbench build`` cannot cross-validate a choice and falls back to
one recipe, stratified items read with the blend of ``guarded`` and ``similar``
(``auto.choice.FALLBACK``). That recipe was measured on the peer suite's psn MMLU and BBH
blocks and on its other matrices cut to 10 sources (``bench/small_sources.md``). The psn matrix
holds nine more whole benchmarks answered by the same 12 models (ARC-C, GPQA Diamond, GSM8K,
HellaSwag, HumanEval, MATH, MBPP, TheoremQA, Chinese SimpleQA: 164 to 10,042 items), on which
nothing was chosen or tuned: a held-out check of the fallback beside benchpred's fast methods
(run in their own venv, as ``tools/bench_peers.py`` runs them) on the peer suite's cells: 2 of
the 12 models held out at random or the strongest 2, budgets 25, 50 and 100, seeds 0-9.

Writes ``bench/psn_held_out.json`` and ``.md``; records are cached with the peer suite's.

    python tools/bench_psn_held_out.py [--venv .peers-venv] [--cache .peers-cache]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from bench_peers import FAST, Cache, collect, ensure_venv, fill_ours, fill_peer
from peer_cells import DATA, PSN, PSN_BLOCKS, REPO, V1_ALL, Cell, load_matrix
from peers_noise import level_with_the_rest
from peers_report import MARGIN, OURS, best_peer
from peers_report import cases as seed_averaged

HELD_OUT = tuple(name for name in PSN_BLOCKS if name not in PSN)
BUDGETS = (25, 50, 100)
PROTOCOLS = ("random", "extrapolation")


def cells_of(matrices: tuple[str, ...], seeds: list[int], data: Path) -> list[Cell]:
    cells = []
    for matrix in matrices:
        n_items = load_matrix(matrix, data)[0].shape[1]
        cells += [
            Cell(matrix, "all", protocol, budget, seed)
            for protocol in PROTOCOLS
            for budget in BUDGETS
            if budget < n_items
            for seed in seeds
        ]
    return cells


def failures(averaged: dict[tuple, dict[str, dict[str, Any]]]) -> dict[str, tuple[int, str]]:
    """Per method that failed somewhere: on how many cells, and its first error."""
    found: dict[str, tuple[int, str]] = {}
    for _, methods in sorted(averaged.items()):
        for method, metrics in methods.items():
            if metrics["failed"]:
                count, first = found.get(method, (0, metrics["errors"][0]))
                found[method] = (count + metrics["failed"], first)
    return found


def cases(averaged: dict[tuple, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per matrix x protocol x budget where ours ran: every method's seed-averaged MAE (of
    :func:`peers_report.cases`), the best peer, and our interval's coverage and width."""
    out = []
    for (matrix, _, protocol, budget), methods in sorted(averaged.items()):
        ours = methods.get(OURS)
        if ours is None:
            continue
        out.append({
            "matrix": matrix, "protocol": protocol, "budget": budget, "seeds": ours["runs"],
            "mae": {m: v["mae"] for m, v in methods.items() if np.isfinite(v["mae"])},
            "best_peer": best_peer(methods)[0],
            "coverage": ours["coverage"], "width": ours["width"], "recipes": ours["recipes"],
        })  # fmt: skip
    return out


def summary(
    averaged: dict[tuple, dict[str, dict[str, Any]]], peers: tuple[str, ...] | None = None
) -> list[dict[str, Any]]:
    """Per protocol: how often each method is level with the best of the others (ours with
    the best peer; :func:`peers_noise.level_with_the_rest`), and the mean errors of ``peers``
    (default: benchpred's fast methods) that ran every case."""
    found, out, peers = cases(averaged), [], peers or FAST
    for protocol in PROTOCOLS:
        mine = [c for c in found if c["protocol"] == protocol and c["best_peer"]]
        if not mine:
            continue
        rest = level_with_the_rest(averaged, keep=lambda case, p=protocol: case[2] == p)
        coverage = [c["coverage"] for c in mine]
        out.append({
            "protocol": protocol, "cases": len(mine), "level": rest[OURS][1],
            "ours": float(np.mean([c["mae"][OURS] for c in mine])),
            "best_peer": float(np.mean([c["mae"][c["best_peer"]] for c in mine])),
            "peers": {
                m: float(np.mean([c["mae"][m] for c in mine]))
                for m in peers
                if all(m in c["mae"] for c in mine)
            },
            "coverage": [min(coverage), float(np.mean(coverage)), max(coverage)],
            "level_with_the_rest": {m: n for m, (ran, n) in rest.items() if ran == len(mine)},
        })  # fmt: skip
    return out


def method_seconds(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds each method spent over all cells (build and estimate, as recorded)."""
    total: dict[str, float] = defaultdict(float)
    for row in rows:
        for method, metrics in row["methods"].items():
            seconds = metrics.get("seconds")
            if seconds is not None and np.isfinite(seconds):
                total[method] += float(seconds)
    return dict(total)


def _minutes(seconds: dict[str, float]) -> str:
    parts = ", ".join(f"{m} {v / 60:.1f}" for m, v in sorted(seconds.items()))
    return f"{sum(seconds.values()) / 60:.0f} min ({parts})"


def psn_intro(info: dict[str, Any]) -> list[str]:
    """The psn report's title and how it was made."""
    return [
        "# The 10-source default on held-out whole benchmarks (psn blocks)",
        "",
        f"Generated by `{info['command']}`; compute {_minutes(info['method_seconds'])} "
        "(the cells' own seconds; cached records are not recomputed); load average "
        f"{info['load_average'][0]:.2f} -> {info['load_average'][1]:.2f} (2 shared cores). "
        "The psn matrix's other nine whole benchmarks, answered by the same 12 models; nothing "
        "of ours was chosen or tuned on them. Each cell holds 2 models out (at random, or the "
        "strongest 2) and builds from the other 10, as the peer suite does; `ours` is "
        "`microbench build` with its defaults, which with 10 sources falls back to stratified "
        "items read with the blend of `guarded` and `similar`. benchpred 1.0.0's fast methods "
        "run on the same cells. MAE in points, mean of seeds "
        f"{info['seeds'][0]}-{info['seeds'][-1]} (2 held-out models each); `cov`: our 90 % "
        f"interval's coverage; level: ours at most {MARGIN} above the best peer of the case.",
    ]


PSN_LUCK = (
    "with 20 held-out estimates a case, the best of seven others is often lower by luck, "
    "whichever method is asked about."
)


def markdown(
    report: dict[str, Any],
    intro: list[str] | None = None,
    luck: str = PSN_LUCK,
    peers: tuple[str, ...] | None = None,
) -> str:
    """The report: ``intro`` (default :func:`psn_intro`), the summary with ``peers``' mean
    errors (default: benchpred's fast methods), how often each method is level with the rest
    (``luck``: why few are), and the cases."""
    peers = peers or FAST
    lines = [
        *(intro if intro is not None else psn_intro(report["info"])),
        "",
        "| protocol | cases | ours level with the best peer | mean MAE ours | mean MAE best "
        "peer | " + " | ".join(peers) + " | our coverage (min, mean, max) |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(peers) + "---|",
    ]
    for row in report["summary"]:
        means = " | ".join(f"{row['peers'][m]:.2f}" if m in row["peers"] else "-" for m in peers)
        low, mean, high = row["coverage"]
        lines.append(
            f"| {row['protocol']} | {row['cases']} | {row['level']} | {row['ours']:.2f} | "
            f"{row['best_peer']:.2f} | {means} | {low:.2f}, {mean:.2f}, {high:.2f} |"
        )
    for method, (count, error) in sorted(report.get("failures", {}).items()):
        lines += ["", f"{method} failed on {count} cells (first error: `{error}`)."]
    ranked = [
        m for m in ("ours", *peers) if any(m in r["level_with_the_rest"] for r in report["summary"])
    ]  # our other builds are not held to the bar (peers_noise.level_with_the_rest)
    lines += [
        "",
        "How often each method is level with the best of all the others (ours included) on "
        f"a case: {luck}",
        "",
        "| protocol | " + " | ".join(ranked) + " |",
        "|---|" + "---:|" * len(ranked),
    ]
    for row in report["summary"]:
        counts = row["level_with_the_rest"]
        cells = " | ".join(f"{counts.get(m, '-')}/{row['cases']}" for m in ranked)
        lines.append(f"| {row['protocol']} | {cells} |")
    lines += [
        "",
        "| matrix | protocol | budget | ours | cov | width | best peer | its MAE | "
        "random_sampling | aipw | ours' recipe |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|---:|---|",
    ]
    for case in report["cases"]:
        mae, best = case["mae"], case["best_peer"]
        if "ours" not in mae or best is None:
            continue
        mark = "" if mae["ours"] <= mae[best] + MARGIN else " ✗"
        lines.append(
            f"| {case['matrix']} | {case['protocol']} | {case['budget']} | "
            f"{mae['ours']:.2f}{mark} | {case['coverage']:.2f} | {case['width']:.1f} | {best} | "
            f"{mae[best]:.2f} | {mae.get('random_sampling', float('nan')):.2f} | "
            f"{mae.get('aipw', float('nan')):.2f} | {', '.join(case['recipes'])} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1")
    parser.add_argument("--venv", type=Path, default=REPO / ".peers-venv")
    parser.add_argument("--cache", type=Path, default=REPO / ".peers-cache")
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        sys.exit(f"no real data at {args.data}: this check needs ../shared/data")
    started, load_start = time.perf_counter(), _load()
    seeds = list(range(args.seeds))
    cells = cells_of(HELD_OUT, seeds, args.data)
    cache = Cache(args.cache)
    fill_ours(OURS, cells, args.data, cache, V1_ALL)
    python = ensure_venv(args.venv)
    for method in FAST:
        fill_peer(method, cells, args.data, cache, python, V1_ALL)
    rows = collect(cells, [OURS, *FAST], args.data, cache, V1_ALL)
    averaged = seed_averaged(rows)
    report = {
        "info": {
            "command": " ".join(["python tools/bench_psn_held_out.py", *(argv or sys.argv[1:])]),
            "seconds": time.perf_counter() - started,
            "method_seconds": method_seconds(rows),
            "load_average": [load_start, _load()],
            "seeds": seeds,
            "benchpred": "1.0.0",
        },
        "summary": summary(averaged),
        "failures": failures(averaged),
        "cases": cases(averaged),
        "cells": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "psn_held_out.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out / "psn_held_out.md").write_text(markdown(report))
    print(markdown(report))
    return 0


def _load() -> float:
    return round(os.getloadavg()[0], 2)


if __name__ == "__main__":
    raise SystemExit(main())
