"""Does an adaptive run's ability say it lies beyond the sources? bench/adaptive_placement.*.

``microbench adaptive`` and ``reconstruct`` name the side where a run's ability posterior
places it above the pool's upper ability edge or under its lower one
(:func:`lmeval_microbench.adaptive.bands.run_placement`), as static estimates name the side
where the guard's reading places them (``bench/placement.md``). This measures that on the
splits of ``tools/bench_adaptive.py`` (the same seed, held-out models and floors): per
benchmark and protocol (random 80/20, strongest fifth, weakest fifth held out), a pool fitted
on the source models, the held-out models replayed with maximum-information selection, and
after 10, 25 and 50 items: of the models that do lie beyond every source (true score above
the strongest source's or under the weakest's), how many were named, how many named models
do not, and the error and 90 % coverage of the named and the unnamed runs.

    python tools/bench_adaptive_placement.py --jobs 2
    python tools/bench_adaptive_placement.py --benchmarks ifeval,musr
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
from bench_adaptive import PROTOCOLS, V2, first_split, load_benchmark, pool_floor, suite_of
from bench_placement import HEADER, _row, counts, tally
from cell_scoring import measured_rows
from peer_cells import require_data
from tqdm.auto import tqdm
from worker_pool import worker_pool

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.adaptive.bands import ABOVE, run_placement
from lmeval_microbench.adaptive.pool import estimate_pool, fit_adaptive_state, pool_state
from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
from lmeval_microbench.adaptive.selection import MaxInfoSelector
from lmeval_microbench.adaptive.simulate import replay
from lmeval_microbench.bundle.io import load_bundle

REPO = Path(__file__).resolve().parents[1]
BUDGETS = (10, 25, 50)
BENCHMARKS = ("ifeval", "musr", "mmlu", "truthfulqa", "arc", "hellaswag", "winogrande", "gsm8k")
GROUPS = {"OLL v2 (IFEval, MuSR)": V2, "OLL v1 (six)": BENCHMARKS[2:]}


def measure_case(task: tuple[Path, str, str, int, int]) -> list[dict[str, Any]]:
    """One benchmark x protocol: a pool on the split's sources, its held-out runs counted by
    side and truth at every budget of :data:`BUDGETS`."""
    shared, bm, protocol, seed, max_targets = task
    started = time.perf_counter()
    matrix, truth, _ = load_benchmark(shared, bm)
    split = first_split(matrix, truth, protocol, seed)
    params, state = fit_adaptive_state(split.source, split.source_truth, seed=seed)
    rows = np.random.default_rng(seed).permutation(split.target.n_models)[:max_targets]
    values, target_truth = split.target.values[rows], split.target_truth[rows]
    score_map = state.score_map.with_floor(pool_floor(bm))
    result = replay(
        params,
        values,
        selector=MaxInfoSelector(),
        max_items=max(BUDGETS),
        score_map=score_map,
        checkpoints=BUDGETS,
    )
    above = target_truth > split.source_truth.max()
    below = target_truth < split.source_truth.min()
    middle = np.median(split.source_truth)
    out = []
    for n in BUDGETS:
        ability = result.ability_at(n)
        value = result.predictions[n]
        lower, upper = score_map.interval(value, n, span=result.spans[n], ability=ability)
        placement = run_placement(score_map.sides, ability)
        sides = np.array(placement.sides() if placement else [""] * len(rows), dtype=object)
        covered = (lower <= target_truth) & (target_truth <= upper)
        far = ((sides == "above") & (target_truth < middle)) | (
            (sides == "below") & (target_truth > middle)
        )
        out.append(
            {
                "case": [bm, protocol, n],
                "n_source": int(split.source.n_models),
                "named_far": int(far.sum()),
                **counts(sides, above, below, 100 * np.abs(value - target_truth), covered),
                "mae": float(100 * np.mean(np.abs(value - target_truth))),
                "coverage": float(np.mean(covered)),
                "seconds": time.perf_counter() - started,
            }
        )
    return out


def summaries(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per benchmark group x protocol x budget, and per benchmark x protocol x budget."""
    by_group: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        bm, protocol, budget = row["case"]
        group = next(g for g, members in GROUPS.items() if bm in members)
        by_group[(group, protocol, budget)].append(row)

    def order(first: list[str], key: tuple[str, str, int]) -> tuple[int, int, int]:
        return (first.index(key[0]), PROTOCOLS.index(key[1]), key[2])

    def pooled(members: list[dict[str, Any]]) -> dict[str, Any]:
        return {**tally(members), "named_far": sum(r["named_far"] for r in members)}

    groups = [
        {"group": g, "protocol": p, "budget": b, **pooled(by_group[(g, p, b)])}
        for g, p, b in sorted(by_group, key=lambda key: order(list(GROUPS), key))
    ]
    cases = [
        {"benchmark": r["case"][0], "protocol": r["case"][1], "budget": r["case"][2], **pooled([r])}
        for r in sorted(rows, key=lambda r: order(list(BENCHMARKS), tuple(r["case"])))
    ]
    return {"groups": groups, "cases": cases}


def shipped_pools() -> list[dict[str, Any]]:
    """Per shipped pool: its items with a negative discrimination (a right answer lowers the
    ability), and the ability and placement of a run that answers every pool item right
    against the pool's upper ability edge."""
    out = []
    for bm in BENCHMARKS:
        pool = pool_state(load_bundle(SHIPPED_POOLS / suite_of(bm) / bm))
        edge = next(s for s in pool.state.score_map.sides if s.side == ABOVE).ability_edge
        perfect = estimate_pool(pool, dict.fromkeys(pool.item_ids, 1.0))
        out.append(
            {
                "benchmark": bm,
                "items": len(pool.item_ids),
                "negative": int((pool.params.a[:, 0] < 0).sum()),
                "upper_edge": float(edge),
                "all_right_theta": perfect.theta,
                "all_right_side": perfect.placement["side"] if perfect.placement else None,
            }
        )
    return out


def pool_lines(pools: list[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        "## Why some pools seldom name a run above",
        "",
        "The shipped pools (`lmeval_microbench/adaptive/pools`), read by this report: items "
        "whose 2PL discrimination is negative (the stronger source models answered them right "
        "less often, so a right answer lowers the ability), and a run that answers every pool "
        "item right: its ability against the pool's upper edge, and its side.",
        "",
        "| pool | items | negative discrimination | upper edge | every item right: ability "
        "| side |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for p in pools:
        lines.append(
            f"| {p['benchmark']} | {p['items']} | {p['negative']} | {p['upper_edge']:.2f} | "
            f"{p['all_right_theta']:.2f} | {p['all_right_side'] or 'none'} |"
        )
    return lines


def reproduction(rows: list[dict[str, Any]], adaptive: Path) -> dict[str, Any]:
    """How far each row's MAE and coverage lie from ``bench/adaptive.json``'s
    maximum-information runs of the same split and budget (rows it lacks: not compared)."""
    saved = json.loads(adaptive.read_text())["results"] if adaptive.exists() else {}
    gaps = []
    for row in rows:
        bm, protocol, budget = row["case"]
        found = saved.get(bm, {}).get(protocol, {}).get("maxinfo", {}).get(str(budget))
        if found is not None:
            gaps.append(
                (abs(row["mae"] - found["mae"]), abs(row["coverage"] - found["coverage90"]))
            )
    return {
        "rows": len(rows),
        "compared": len(gaps),
        "max_mae_gap": max((g[0] for g in gaps), default=None),
        "max_coverage_gap": max((g[1] for g in gaps), default=None),
    }


def _reproduced(check: dict[str, Any]) -> str:
    if not check["compared"]:
        return "no row has a counterpart in `bench/adaptive.json`"
    return (
        f"{check['compared']} of {check['rows']} rows have a counterpart in "
        "`bench/adaptive.json` (the same split, budget and selection): MAE within "
        f"{check['max_mae_gap']:.1e} points, coverage within {check['max_coverage_gap']:.3f}"
    )


def markdown(
    found: dict[str, list[dict[str, Any]]],
    info: dict[str, Any],
    check: dict[str, Any],
    pools: list[dict[str, Any]],
) -> str:
    rendered = f"; re-rendered from its JSON by `{info['rendered']}`" if "rendered" in info else ""
    lines = [
        "# Where an adaptive run's ability places it: above or below every source model",
        "",
        f"Generated by `{info['command']}`; {info['minutes']:.0f} min, load average "
        f"{info['load_average'][0]:.1f} -> {info['load_average'][1]:.1f} (2 shared cores"
        f"{rendered}). The splits of `tools/bench_adaptive.py` (seed {info['seed']}, at most "
        f"{info['max_targets']} held-out models each): a pool fitted on the source models, the "
        f"held-out models replayed with maximum-information selection; {_reproduced(check)}. "
        "A run is *named* above "
        "(below) when its ability posterior lies above the pool's upper ability edge (under "
        "the lower one) with probability at least 0.5 (`outside.placement.SIDE_P`); the edges "
        "are the abilities of the strongest and the weakest 1 % of the source models "
        "(`adaptive.pool.EDGE_SHARE`). It *is* beyond when its true score lies strictly above "
        "(under) every source model's. Named but not beyond: on the wrong side, or among the "
        "sources' edge. MAE in points and 90 % coverage of the named and the unnamed runs. "
        f"Named on the far side (above with a true score under the sources' median, or below "
        f"with one over it): {sum(e['named_far'] for e in found['cases'])} of "
        f"{sum(e['named'] for e in found['cases'])} named runs.",
        "",
        "## By benchmark group",
        "",
        f"| benchmarks | protocol | items | {HEADER} |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for entry in found["groups"]:
        lines.append(_row([entry["group"], entry["protocol"], str(entry["budget"])], entry))
    lines += [
        "",
        "## Every case",
        "",
        f"| benchmark | protocol | items | {HEADER} |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for entry in found["cases"]:
        label = [entry["benchmark"], entry["protocol"], str(entry["budget"])]
        lines.append(_row(label, entry))
    return "\n".join(lines + pool_lines(pools)) + "\n"


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every benchmark x protocol measured (a pool fit each: the slow part)."""
    require_data(args.shared)
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    tasks = [
        (args.shared, bm, protocol, args.seed, args.max_targets)
        for bm in args.benchmarks
        for protocol in PROTOCOLS
    ]
    with worker_pool(args.jobs) as pool:
        found = list(tqdm(pool.map(measure_case, tasks), total=len(tasks), desc="pools"))
    info = {
        "command": "python tools/bench_adaptive_placement.py " + " ".join(args.argv),
        "minutes": (time.perf_counter() - started) / 60,
        "load_average": [load_start, os.getloadavg()[0]],
        "seed": args.seed,
        "max_targets": args.max_targets,
    }
    return info, [row for rows in found for row in rows]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO / ".." / "shared" / "data")
    parser.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    parser.add_argument("--max-targets", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument("--adaptive", type=Path, default=REPO / "bench" / "adaptive.json")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="re-render --out/adaptive_placement.md from its JSON",
    )
    args = parser.parse_args(argv)
    args.benchmarks = args.benchmarks.split(",")
    saved = args.out / "adaptive_placement.json"
    info, rows = measured_rows(args, argv, "bench_adaptive_placement", saved, measure)
    found = summaries(rows)
    check, pools = reproduction(rows, args.adaptive), shipped_pools()
    payload = {"info": info, "reproduction": check, "shipped_pools": pools, **found, "cells": rows}
    write_json_atomic(saved, payload)
    write_text_if_changed(args.out / "adaptive_placement.md", markdown(found, info, check, pools))
    print(f"wrote {args.out / 'adaptive_placement.md'} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
