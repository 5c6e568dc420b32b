"""Informative items beside a random audit sample, on whole benchmarks: bench/audit_split.*.

Issue 19 asks how to split a budget between items a selection method chose and a random
*audit* sample that the ``audit`` reading (AIPW) reads. This runs ``build --method M --audit
A --estimator guarded`` (no choice) on the peer suite's cells of the whole benchmarks (IFEval
and MuSR, all source models, random and strongest-fifth held out, 25/50/100 items, seeds 0,
1 and 2) for a supervised selection (``lasso``: the items of benchpred's ``lasso``, which led
the published methods on MuSR's random splits; ``greedy``) and an unsupervised one
(``anchor_points``), with 0, 30 % and 50 % of the budget audited.

With ``--counts`` it measures small audits instead: the same recipes at one budget
(``--budget``, 50) with a fixed number of audit items each (``bench/audit_counts.*``), to
see from how many audit items an audit starts to help.

For an audited bundle whose guard reads the ``audit`` reading, the held-out models are also
estimated with that reading placing them by its own AIPW estimate (the bundle's state without
its ``locator``: how such bundles placed models before the reading placed them by the
de-shrunk one, :mod:`lmeval_microbench.outside.readings.audit`). Beside them, from
``bench/peers.json``: the default ``ours`` and the best benchpred method of each case.

    python tools/bench_audit_split.py --jobs 2
    python tools/bench_audit_split.py --jobs 2 --counts 0,2,5,10,15,25 --budget 50
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from bench_peers import build_recipe
from bench_similar import peer_means
from cell_scoring import audit_size, interval_metrics, measured_rows, points
from peer_cells import DATA, V2, Cell, require_data, split_cell
from tqdm.auto import tqdm
from worker_pool import worker_pool

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.estimators import estimator_from_state

REPO = Path(__file__).resolve().parents[1]
BUDGETS = (25, 50, 100)
METHODS = ("lasso", "greedy", "anchor_points")
SHARES = (0.0, 0.3, 0.5)


def placed_by_aipw(state: dict[str, Any]) -> dict[str, Any] | None:
    """The guarded state with its audit reading placing models by its own estimate (None
    where the guard reads another reading: nothing to compare)."""
    reading = state.get("reading", {})
    if reading.get("name") != "audit" or "locator" not in reading.get("state", {}):
        return None
    before = copy.deepcopy(state)
    del before["reading"]["state"]["locator"]
    return before


def audit_plans(budget: int, counts: tuple[int, ...] | None) -> list[tuple[float | None, int]]:
    """(share, audit items) per recipe of one budget: the shares of the budget, or with
    ``counts`` the fixed audit sizes (share None)."""
    if counts is None:
        return [(share, audit_size(share, budget)) for share in SHARES]
    return [(None, count) for count in counts]


def measure_cell(
    task: tuple[Path, Cell] | tuple[Path, Cell, tuple[int, ...] | None],
) -> list[dict[str, Any]]:
    """Every method x audit share (or audit count, a third task field) on one split: the
    guarded estimate's errors."""
    data, cell, counts = (*task, None)[:3]
    source, target, source_truth, target_truth = split_cell(cell, data)
    out = []
    for method in METHODS:
        for share, n_audit in audit_plans(cell.budget, counts):
            started = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                bundle = build_recipe(cell, source, source_truth, method, "guarded", n_audit)
            state = bundle.estimator_state()
            answers = target.select_items(bundle.item_ids)
            estimate = estimator_from_state(state).estimate_matrix(answers)
            row = {
                "key": cell.key,
                "case": [cell.matrix, cell.protocol, cell.budget],
                "method": method,
                "share": share,
                "audit": n_audit,
                "recipe": recipe(method, share, n_audit),
                "reading": state["reading"]["name"],
                **interval_metrics(*estimate, target_truth),
            }
            before = placed_by_aipw(state)
            if before is not None:
                placed = estimator_from_state(before).estimate_matrix(answers)
                row["aipw_placed"] = interval_metrics(*placed, target_truth)
            row["seconds"] = time.perf_counter() - started
            out.append(row)
    return out


def recipe(method: str, share: float | None, n_audit: int = 0) -> str:
    """``lasso 30 %`` for a share of the budget, ``lasso + 5 audit`` for a fixed count."""
    if share is None:
        return f"{method} + {n_audit} audit"
    return f"{method} {round(100 * share)} %"


def _recipe_of(row: dict[str, Any]) -> str:
    """The row's recipe label (rows saved before counts existed carry none)."""
    return row.get("recipe") or recipe(row["method"], row["share"])


def cases(rows: list[dict[str, Any]], peers: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per case (matrix, protocol, budget) and recipe: means over the seeds."""
    grouped: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    order = {}
    for row in rows:
        name = _recipe_of(row)
        order.setdefault(name, (row["method"], row["share"] or 0.0, row.get("audit", 0)))
        grouped[(*row["case"], name)].append(row)
    out = []
    for (matrix, protocol, budget, name), members in sorted(
        grouped.items(), key=lambda item: (*item[0][:3], order[item[0][3]])
    ):
        entry = {
            "case": [matrix, protocol, budget],
            "recipe": name,
            "seeds": len(members),
            "audit_read": sum(m["reading"] == "audit" for m in members),
        }
        for key in ("mae", "coverage", "width"):
            entry[key] = float(np.mean([m[key] for m in members]))
        placed = [m.get("aipw_placed", m) for m in members]
        entry["aipw_placed_mae"] = float(np.mean([p["mae"] for p in placed]))
        found = [peers[m["key"]] for m in members if m["key"] in peers]
        if len(found) == len(members):
            entry.update(peer_means(found))
        out.append(entry)
    return out


def summary(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per matrix x protocol x recipe: mean MAE over the budgets, coverage range, width."""
    grouped: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        grouped[(entry["case"][0], entry["case"][1], entry["recipe"])].append(entry)
    return [
        {
            "matrix": matrix,
            "protocol": protocol,
            "recipe": name,
            "mae": float(np.mean([m["mae"] for m in members])),
            "aipw_placed_mae": float(np.mean([m["aipw_placed_mae"] for m in members])),
            "coverage": [min(m["coverage"] for m in members), max(m["coverage"] for m in members)],
            "width": float(np.mean([m["width"] for m in members])),
            "audit_read": sum(m["audit_read"] for m in members),
            "runs": sum(m["seeds"] for m in members),
            "ours_mae": _mean_or_none([m.get("ours_mae") for m in members]),
            "best_peer_mae": _mean_or_none([m.get("best_peer_mae") for m in members]),
        }
        for (matrix, protocol, name), members in grouped.items()
    ]


def audit_read(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Runs whose guard read the ``audit`` reading, per protocol and all together: their MAE
    and coverage as the reading places models now (by the de-shrunk reading) and as it did
    (by its own AIPW estimate), and the least coverage now."""
    read = [r for r in rows if r["reading"] == "audit"]
    out = {}
    for protocol in ("random", "extrapolation", "all"):
        members = [r for r in read if protocol in ("all", r["case"][1])]
        if not members:
            continue
        before = [r.get("aipw_placed", r) for r in members]
        out[protocol] = {
            "runs": len(members),
            "mae": float(np.mean([r["mae"] for r in members])),
            "aipw_placed_mae": float(np.mean([r["mae"] for r in before])),
            "coverage": float(np.mean([r["coverage"] for r in members])),
            "aipw_placed_coverage": float(np.mean([r["coverage"] for r in before])),
            "least_coverage": float(min(r["coverage"] for r in members)),
        }
    return out


def _mean_or_none(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else float(np.mean(values))


def _recipes_said(info: dict) -> str:
    if info.get("counts"):
        return (
            f"`M + 5 audit`: of the budget, 5 items drawn as audit items (audit sizes "
            f"{info['counts']})."
        )
    return "`M 30 %`: 30 % of the budget drawn as audit items."


def markdown(
    entries: list[dict[str, Any]],
    groups: list[dict[str, Any]],
    info: dict,
    read: dict[str, dict[str, float]] | None = None,
) -> str:
    rendered = f"; re-rendered from its JSON by `{info['rendered']}`" if "rendered" in info else ""
    title = (
        "Small audits: a fixed number of audit items beside the chosen ones"
        if info.get("counts")
        else "Informative items beside a random audit sample"
    )
    lines = [
        f"# {title} (whole benchmarks)",
        "",
        f"Generated by `{info['command']}` ({info['minutes']:.0f} min, load average "
        f"{info['load_average'][0]:.1f} -> {info['load_average'][1]:.1f}, 2 shared cores"
        f"{rendered}). "
        "`build --method M --audit A --estimator guarded` (no choice) on the peer suite's "
        "cells of IFEval and MuSR (all source models, seeds "
        f"{info['seeds']}), the held-out models estimated. {_recipes_said(info)} MAE in "
        f"points, mean over budgets {info.get('budgets', '25/50/100')}; `audit read`: runs whose "
        "guard chose the `audit` reading, of all runs; `placed by AIPW`: those runs with the "
        "audit reading placing models by its own estimate (before it placed them by the "
        "de-shrunk reading; other runs count as they are). `ours` and the best benchpred "
        "method per case from `bench/peers.json` (the same splits).",
        "",
        "| matrix | protocol | recipe | MAE | placed by AIPW | coverage | width | audit read | "
        "ours | best peer |",
        "|---|---|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for g in groups:
        lines.append(
            f"| {g['matrix']} | {g['protocol']} | {g['recipe']} | {g['mae']:.2f} | "
            f"{g['aipw_placed_mae']:.2f} | {g['coverage'][0]:.2f}-{g['coverage'][1]:.2f} | "
            f"{g['width']:.1f} | {g['audit_read']}/{g['runs']} | {points(g['ours_mae'])} | "
            f"{points(g['best_peer_mae'])} |"
        )
    if read:
        lines += [
            "",
            "Runs whose guard read the `audit` reading, as it places models now (by the "
            "de-shrunk reading) and as it did (by its own AIPW estimate):",
            "",
            "| protocol | runs | MAE | placed by AIPW | coverage | placed by AIPW | "
            "least coverage |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for protocol, r in read.items():
            lines.append(
                f"| {protocol} | {r['runs']} | {r['mae']:.2f} | {r['aipw_placed_mae']:.2f} | "
                f"{r['coverage']:.2f} | {r['aipw_placed_coverage']:.2f} | "
                f"{r['least_coverage']:.2f} |"
            )
    lines += [
        "",
        "| matrix | protocol | budget | recipe | MAE | placed by AIPW | cov | width | ours | "
        "best peer |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for e in entries:
        matrix, protocol, budget = e["case"]
        best = f"{e['best_peer']} {e['best_peer_mae']:.2f}" if e.get("best_peer") else "-"
        lines.append(
            f"| {matrix} | {protocol} | {budget} | {e['recipe']} | {e['mae']:.2f} | "
            f"{e['aipw_placed_mae']:.2f} | {e['coverage']:.2f} | {e['width']:.1f} | "
            f"{points(e.get('ours_mae'))} | {best} |"
        )
    return "\n".join(lines) + "\n"


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every cell built and estimated (the slow part), and how the run went."""
    require_data(args.data)
    started, load_start = time.perf_counter(), os.getloadavg()[0]
    seeds = [int(s) for s in args.seeds.split(",")]
    counts = args.counts
    budgets = BUDGETS if counts is None else (args.budget,)
    tasks = [
        (args.data, Cell(matrix, "all", protocol, budget, seed), counts)
        for matrix in args.matrices.split(",")
        for protocol in ("random", "extrapolation")
        for budget in budgets
        for seed in seeds
    ]
    with worker_pool(args.jobs) as pool:
        found = list(tqdm(pool.map(measure_cell, tasks), total=len(tasks), desc="cells"))
    info = {
        "command": "python tools/bench_audit_split.py " + " ".join(args.argv),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "minutes": (time.perf_counter() - started) / 60,
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "seeds": args.seeds,
        "budgets": "/".join(str(b) for b in budgets),
    }
    if counts is not None:
        info["counts"] = ",".join(str(c) for c in counts)
    return info, [row for cell_rows_ in found for row in cell_rows_]


def _counts(text: str) -> tuple[int, ...]:
    """``--counts`` parsed once, by argparse: whole numbers separated by commas."""
    try:
        return tuple(int(c) for c in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be whole numbers separated by commas, got {text!r}"
        ) from None


def _check_counts(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--counts``: whole numbers from 0 to under ``--budget``, and ``--budget`` only with it."""
    if args.counts is None:
        if args.budget != 50:
            parser.error("--budget is the budget of --counts; give --counts too")
        return
    if any(c < 0 or c >= args.budget for c in args.counts):
        shown = ",".join(str(c) for c in args.counts)
        parser.error(f"--counts must lie in [0, {args.budget}) (the budget), got {shown}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--matrices", default=",".join(V2))
    parser.add_argument("--peers", type=Path, default=REPO / "bench" / "peers.json")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument(
        "--counts",
        type=_counts,
        help="fixed audit sizes at one budget instead of shares (writes audit_counts.*)",
    )
    parser.add_argument("--budget", type=int, default=50, help="the budget of --counts")
    parser.add_argument(
        "--report-only", action="store_true", help="re-render the report from its JSON"
    )
    args = parser.parse_args(argv)
    _check_counts(parser, args)
    name = "audit_split" if args.counts is None else "audit_counts"
    saved = args.out / f"{name}.json"
    info, rows = measured_rows(args, argv, "bench_audit_split", saved, measure)
    peers = {c["key"]: c["methods"] for c in json.loads(args.peers.read_text())["cells"]}
    entries = cases(rows, peers)
    groups = summary(entries)
    read = audit_read(rows)
    payload = {"info": info, "summary": groups, "audit_read": read, "cases": entries, "cells": rows}
    write_json_atomic(saved, payload)
    write_text_if_changed(args.out / f"{name}.md", markdown(entries, groups, info, read))
    print(f"wrote {args.out / name}.md ({len(rows)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
