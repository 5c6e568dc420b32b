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
from bench_peers import (
    DATA,
    FAST,
    PSN,
    PSN_BLOCKS,
    REPO,
    V1_ALL,
    Cache,
    Cell,
    collect,
    ensure_venv,
    fill_ours,
    fill_peer,
    load_matrix,
)

HELD_OUT = tuple(name for name in PSN_BLOCKS if name not in PSN)
BUDGETS = (25, 50, 100)
PROTOCOLS = ("random", "extrapolation")
CLOSE = 0.1
"""Points above the best peer that still count as level with it (the peer suite's rule)."""


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


def failures(rows: list[dict[str, Any]]) -> dict[str, tuple[int, str]]:
    """Per method that failed somewhere: on how many cells, and its first error."""
    found: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        for method, metrics in row["methods"].items():
            if "error" in metrics:
                found[method].append(metrics["error"])
    return {method: (len(errors), errors[0]) for method, errors in found.items()}


def cases(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per matrix x protocol x budget, each method's metrics averaged over the seeds."""
    grouped: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[row["matrix"], row["protocol"], row["budget"]].append(row)
    out = []
    for (matrix, protocol, budget), group in sorted(grouped.items()):
        mae = {
            method: float(np.mean([r["methods"][method]["mae"] for r in group]))
            for method in ("ours", *FAST)
            if all("mae" in r["methods"].get(method, {}) for r in group)
        }
        peers = {m: v for m, v in mae.items() if m != "ours"}
        best = min(peers, key=peers.__getitem__) if peers else None
        ours = [r["methods"]["ours"] for r in group]
        out.append({
            "matrix": matrix, "protocol": protocol, "budget": budget, "seeds": len(group),
            "mae": mae, "best_peer": best,
            "coverage": float(np.mean([o["coverage"] for o in ours])),
            "width": float(np.mean([o["width"] for o in ours])),
            "recipes": sorted({o["recipe"] for o in ours}),
        })  # fmt: skip
    return out


def summary(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per protocol: how often ours is level with the best peer, and the mean errors."""
    out = []
    for protocol in PROTOCOLS:
        mine = [
            c for c in found if c["protocol"] == protocol and c["best_peer"] and "ours" in c["mae"]
        ]
        level = sum(c["mae"]["ours"] <= c["mae"][c["best_peer"]] + CLOSE for c in mine)
        coverage = [c["coverage"] for c in mine]
        everyone = [m for m in ("ours", *FAST) if all(m in c["mae"] for c in mine)]
        level_of = {m: _level(mine, m, [o for o in everyone if o != m]) for m in everyone}
        out.append({
            "protocol": protocol, "cases": len(mine), "level": level,
            "ours": float(np.mean([c["mae"]["ours"] for c in mine])),
            "best_peer": float(np.mean([c["mae"][c["best_peer"]] for c in mine])),
            "peers": {
                m: float(np.mean([c["mae"][m] for c in mine]))
                for m in FAST
                if all(m in c["mae"] for c in mine)
            },
            "coverage": [min(coverage), float(np.mean(coverage)), max(coverage)],
            "level_with_the_rest": level_of,
        })  # fmt: skip
    return out


def _level(found: list[dict[str, Any]], method: str, others: list[str]) -> int:
    """Cases where ``method`` is at most ``CLOSE`` above the best of ``others``."""
    return sum(c["mae"][method] <= min(c["mae"][o] for o in others) + CLOSE for c in found)


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


def markdown(report: dict[str, Any]) -> str:
    info = report["info"]
    lines = [
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
        f"interval's coverage; level: ours at most {CLOSE} above the best peer of the case.",
        "",
        "| protocol | cases | ours level with the best peer | mean MAE ours | mean MAE best "
        "peer | " + " | ".join(FAST) + " | our coverage (min, mean, max) |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(FAST) + "---|",
    ]
    for row in report["summary"]:
        peers = " | ".join(f"{row['peers'][m]:.2f}" if m in row["peers"] else "-" for m in FAST)
        low, mean, high = row["coverage"]
        lines.append(
            f"| {row['protocol']} | {row['cases']} | {row['level']} | {row['ours']:.2f} | "
            f"{row['best_peer']:.2f} | {peers} | {low:.2f}, {mean:.2f}, {high:.2f} |"
        )
    for method, (count, error) in sorted(report.get("failures", {}).items()):
        lines += ["", f"{method} failed on {count} cells (first error: `{error}`)."]
    lines += [
        "",
        "How often each method is level with the best of all the others (ours included) on "
        "a case: with 20 held-out estimates a case, the best of seven others is often lower "
        "by luck, whichever method is asked about.",
        "",
        "| protocol | " + " | ".join(("ours", *FAST)) + " |",
        "|---|" + "---:|" * (len(FAST) + 1),
    ]
    for row in report["summary"]:
        counts = row["level_with_the_rest"]
        cells = " | ".join(f"{counts.get(m, '-')}/{row['cases']}" for m in ("ours", *FAST))
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
        mark = "" if mae["ours"] <= mae[best] + CLOSE else " ✗"
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
    fill_ours("ours", cells, args.data, cache, V1_ALL)
    python = ensure_venv(args.venv)
    for method in FAST:
        fill_peer(method, cells, args.data, cache, python, V1_ALL)
    rows = collect(cells, ["ours", *FAST], args.data, cache, V1_ALL)
    found = cases(rows)
    report = {
        "info": {
            "command": " ".join(["python tools/bench_psn_held_out.py", *(argv or sys.argv[1:])]),
            "seconds": time.perf_counter() - started,
            "method_seconds": method_seconds(rows),
            "load_average": [load_start, _load()],
            "seeds": seeds,
            "benchpred": "1.0.0",
        },
        "summary": summary(found),
        "failures": failures(rows),
        "cases": found,
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
