"""Other estimates for models outside the sources, on the peer suite: bench/outside_estimates.*.

Two changes to ``guarded`` came up from the peer suite, each for models the guard already
knows to lie outside the sources:

- Above them, ``blend`` (the mean of ``guarded`` and ``similar``,
  :mod:`lmeval_microbench.estimators.blend`) erred less than ``guarded`` on whole benchmarks
  under extrapolation (IFEval, GSM8K at 25 items) and more on random splits (MuSR with all
  sources, 2.08 -> 2.79 points at 25 items, in a scratch run). The guard's outside weight
  ``w`` says which models lie outside: using the blend only there might keep the gain
  without the loss.
- Below them, the interval already reaches the own-level reading where its whole spread lies
  under the weakest source (:func:`lmeval_microbench.outside.guard.reached_below`): on
  HellaSwag's weakest fifth that reading erred 1.2 points where the estimate erred 3.1. The
  estimate itself could move there.

Measured here before anything in the library changes:

- ``guarded``: the shipped estimator, rebuilt (its MAE must match the suite's ``ours``);
- ``blend``: the mean of ``guarded`` and ``similar`` for every model;
- ``outside_only``: the blend where ``w > W_MIN``, ``guarded`` elsewhere;
- ``by_weight``: ``guarded`` moved towards the blend by ``(w - W_MIN) / (1 - W_MIN)``, the
  fraction by which the guard itself moves towards its outside reading (value and interval
  ends alike);
- ``own_below``: the own-level reading's value where its whole spread lies under the weakest
  source (where ``reached_below`` acts), ``guarded`` elsewhere; the interval stretched to hold
  the value.

Cells: every cell of ``bench/peers.json`` outside the psn blocks whose ``ours`` recipe is read
with ``guarded`` (psn cells use the blend already), rebuilt with that recipe, the suite's item
seed and its interval factor, so ``guarded`` here is ``ours`` there. The best benchpred method
of each case is read from the same file.

    python tools/bench_outside_estimates.py --jobs 2      # about 25 minutes on 2 idle cores
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from bench_guard_cost import cell_of
from bench_similar import group_of, peer_means
from cell_scoring import interval_metrics, rows_by_case
from peer_cells import DATA, PSN, V1, V2, Cell, require_data, split_cell
from tqdm.auto import tqdm
from worker_pool import worker_pool

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.build import build_bundle
from lmeval_microbench.estimators import estimator_from_state
from lmeval_microbench.estimators.guarded import GuardedEstimator
from lmeval_microbench.outside.guard import W_MIN, spread_below

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("guarded", "blend", "outside_only", "by_weight", "own_below")
TARGET_BUDGETS = (25, 50, 100)
LEVEL = 0.1
"""A case is level with the peers where its MAE is at most the best peer's + 0.1 points."""

Readout = tuple[np.ndarray, np.ndarray, np.ndarray]


def guarded_cells(peers: dict[str, dict[str, Any]], matrices: set[str]) -> list[tuple]:
    """(cell, method, interval factor) of every suite cell whose ``ours`` reads ``guarded``."""
    found = []
    for key, methods in peers.items():
        ours = methods.get("ours") or {}
        method, _, estimator = str(ours.get("recipe", "")).partition("+")
        cell = cell_of(key)
        if estimator == "guarded" and cell.matrix in matrices:
            found.append((cell, method, float(ours.get("widen", 1.0))))
    return found


def wholly_below(estimator: GuardedEstimator, values: np.ndarray) -> np.ndarray:
    """The own-level reading's value where its whole spread lies under the weakest source
    (:func:`~lmeval_microbench.outside.guard.spread_below`, where ``reached_below`` reaches);
    NaN elsewhere, and everywhere where the
    estimator has no such reading (a target that is not the matrix mean)."""
    if estimator.reach_ is None:
        return np.full(len(values), np.nan)
    inner = estimator.inner_.predict_rows(values, 0.9)[0]
    own = estimator.reach_.read(values, inner)
    return np.where(spread_below(own, estimator.bottom_), own[0], np.nan)


def variants(
    guarded: Readout, blend: Readout, weight: np.ndarray, below: np.ndarray
) -> dict[str, Readout]:
    """Each variant's value, lower and upper end from the two estimators' readouts, the
    guard's outside weight and the own reading of models wholly below the sources."""
    outside = weight > W_MIN
    move = np.clip((weight - W_MIN) / (1 - W_MIN), 0.0, 1.0)
    own = np.where(np.isnan(below), guarded[0], below)
    return {
        "guarded": guarded,
        "blend": blend,
        "outside_only": tuple(np.where(outside, b, g) for g, b in zip(guarded, blend, strict=True)),
        "by_weight": tuple(g + move * (b - g) for g, b in zip(guarded, blend, strict=True)),
        "own_below": (own, np.minimum(guarded[1], own), np.maximum(guarded[2], own)),
    }


def measure_cell(task: tuple[Path, Cell, str, float]) -> dict[str, Any]:
    """The cell's recipe rebuilt with ``guarded`` and ``blend``; every variant scored."""
    data, cell, method, widen = task
    source, target, source_truth, target_truth = split_cell(cell, data)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bundle = build_bundle(
            source,
            source_truth,
            name=cell.key,
            benchmark=cell.matrix,
            method=method,
            budget=cell.budget,
            seed=cell.seed,
            estimators=["guarded", "blend"],
            default_estimator="guarded",
            choice={  # the suite's interval factor for its chosen recipe, as --method auto's
                "chosen": {
                    "method": method,
                    "budget": cell.budget,
                    "estimator": "guarded",
                    "interval_widen": widen,
                }
            },
        )
        answers = target.select_items(bundle.item_ids)
        readouts = {}
        for name in ("guarded", "blend"):
            estimator = estimator_from_state(bundle.estimator_state(name))
            readouts[name] = tuple(np.asarray(x) for x in estimator.estimate_matrix(answers)[:3])
            if name == "guarded":
                weight = estimator.outside_weight(answers.values)
                below = wholly_below(estimator, answers.values)
    scored = variants(readouts["guarded"], readouts["blend"], weight, below)
    return {
        "key": cell.key,
        "case": [cell.matrix, cell.population, cell.protocol, cell.budget],
        "recipe": f"{method}+guarded",
        "outside_share": float(np.mean(weight > W_MIN)),
        "below_share": float(np.mean(~np.isnan(below))),
        **{name: interval_metrics(*scored[name], target_truth) for name in VARIANTS},
        "seconds": time.perf_counter() - started,
    }


def cases(rows: list[dict[str, Any]], peers: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per case, the means over its seeds of every variant and of the best benchpred method."""
    out = []
    for case, members in sorted(rows_by_case(rows).items()):
        entry: dict[str, Any] = {"case": list(case), "seeds": len(members)}
        for share in ("outside_share", "below_share"):
            entry[share] = float(np.mean([m[share] for m in members]))
        for name in VARIANTS:
            for key in ("mae", "coverage", "width"):
                entry[f"{name}_{key}"] = float(np.mean([m[name][key] for m in members]))
        best = peer_means([peers[m["key"]] for m in members])
        entry["best_peer"], entry["best_peer_mae"] = best["best_peer"], best["best_peer_mae"]
        out.append(entry)
    return out


def summary(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per family x protocol x population, over the target budgets' cases with a peer: each
    variant's mean MAE, cases level with the best peer, and coverage range."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        if entry["best_peer_mae"] is not None and entry["case"][3] in TARGET_BUDGETS:
            grouped[group_of(entry["case"])].append(entry)
    out = []
    for name, members in sorted(grouped.items()):
        group: dict[str, Any] = {"group": name, "cases": len(members)}
        group["best_peer_mae"] = float(np.mean([m["best_peer_mae"] for m in members]))
        for variant in VARIANTS:
            maes = [m[f"{variant}_mae"] for m in members]
            coverage = [m[f"{variant}_coverage"] for m in members]
            group[f"{variant}_mae"] = float(np.mean(maes))
            group[f"{variant}_level"] = sum(
                mae <= m["best_peer_mae"] + LEVEL for mae, m in zip(maes, members, strict=True)
            )
            group[f"{variant}_coverage"] = [min(coverage), max(coverage)]
        out.append(group)
    return out


def reproduced(rows: list[dict[str, Any]], peers: dict[str, dict[str, Any]]) -> float:
    """The largest gap, in points, between rebuilt ``guarded`` and the suite's ``ours`` MAE."""
    return max(abs(r["guarded"]["mae"] - peers[r["key"]]["ours"]["mae"]) for r in rows)


def markdown(entries: list[dict[str, Any]], groups: list[dict[str, Any]], info: dict) -> str:
    names = " | ".join(f"{v} MAE | level | cov" for v in VARIANTS)
    lines = [
        "# Other estimates for models outside the sources",
        "",
        f"Generated by `{info['command']}` ({info['minutes']:.0f} min, load average "
        f"{info['load_average'][0]:.1f} -> {info['load_average'][1]:.1f}, 2 shared cores). "
        f"{info['cells']} cells of `bench/peers.json` whose default build reads `guarded` (psn "
        "blocks left out: their default is the blend), each rebuilt with its recipe, seed and "
        "interval factor. `guarded` is the shipped estimator (rebuilt, its MAE differs from "
        f"the suite's `ours` by at most {info['reproduced']:.1e} points on a cell); `blend` the "
        "mean of `guarded` and `similar`; `outside_only` the blend where the guard's outside "
        "weight `w` exceeds `W_MIN` (0.05); `by_weight` `guarded` moved towards the blend by "
        "`(w - W_MIN) / (1 - W_MIN)`; `own_below` the own-level reading where its whole spread "
        "lies under the weakest source. outside / below: the share of held-out models the guard "
        "places outside / the own reading wholly below. MAE in points, means over seeds; level: "
        "at most the best benchpred method's MAE + 0.1; cov: the range of the cases' 90 % "
        "coverage. Summary over 25, 50 and 100 items.",
        "",
        f"| cases | n | best peer MAE | {names} |",
        "|---|---:|---:|" + "---:|---:|---|" * len(VARIANTS),
    ]
    for g in groups:
        cells = " | ".join(
            f"{g[f'{v}_mae']:.2f} | {g[f'{v}_level']} | "
            f"{g[f'{v}_coverage'][0]:.2f}-{g[f'{v}_coverage'][1]:.2f}"
            for v in VARIANTS
        )
        lines.append(f"| {g['group']} | {g['cases']} | {g['best_peer_mae']:.2f} | {cells} |")
    lines += [
        "",
        "| matrix | sources | protocol | budget | seeds | outside | below | "
        + " | ".join(f"{v} | cov | width" for v in VARIANTS)
        + " | best peer |",
        "|---|---|---|---:|---:|---:|---:|" + "---:|---:|---:|" * len(VARIANTS) + "---|",
    ]
    for e in entries:
        matrix, population, protocol, budget = e["case"]
        cells = " | ".join(
            f"{e[f'{v}_mae']:.2f} | {e[f'{v}_coverage']:.2f} | {e[f'{v}_width']:.1f}"
            for v in VARIANTS
        )
        best = f"{e['best_peer']} {e['best_peer_mae']:.2f}" if e["best_peer"] else "-"
        lines.append(
            f"| {matrix} | {population} | {protocol} | {budget} | {e['seeds']} | "
            f"{e['outside_share']:.2f} | {e['below_share']:.2f} | {cells} | {best} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--matrices", default=",".join(V2 + V1))
    parser.add_argument("--peers", type=Path, default=REPO / "bench" / "peers.json")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    args = parser.parse_args(argv)
    require_data(args.data)
    matrices = set(args.matrices.split(",")) - set(PSN)
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    peers = {c["key"]: c["methods"] for c in json.loads(args.peers.read_text())["cells"]}
    tasks = [(args.data, *found) for found in guarded_cells(peers, matrices)]
    if not tasks:
        sys.exit(f"no cell of {args.peers} reads guarded on {args.matrices}")
    with worker_pool(args.jobs) as pool:
        rows = list(tqdm(pool.map(measure_cell, tasks), total=len(tasks), desc="cells"))
    entries = cases(rows, peers)
    groups = summary(entries)
    info = {
        "command": "python tools/bench_outside_estimates.py " + " ".join(argv or sys.argv[1:]),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "minutes": (time.perf_counter() - started) / 60,
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "cells": len(rows),
        "reproduced": reproduced(rows, peers),
    }
    payload = {"info": info, "summary": groups, "cases": entries, "cells": rows}
    write_json_atomic(args.out / "outside_estimates.json", payload)
    write_text_if_changed(args.out / "outside_estimates.md", markdown(entries, groups, info))
    print(f"wrote {args.out / 'outside_estimates.md'} ({len(rows)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
