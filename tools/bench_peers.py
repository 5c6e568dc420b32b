"""Peer suite: benchpred's 11 methods beside ours, on the same splits of every real matrix.

benchpred 1.0.0 (PyPI; Zhang, Dorner & Hardt, "How Benchmark Prediction from Fewer Data
Misses the Mark", NeurIPS 2025) implements the published ways to predict a benchmark score
from a few items. Each runs in a venv of its own (it pins numpy 1.26): ``--venv`` (created
with ``torch==2.13.0`` and ``benchpred==1.0.0`` when missing) runs ``tools/peers_worker.py``,
which imports benchpred and calls it; none of its code is copied here.

Matrices (``../shared/data``): ``ifeval`` and ``musr`` (Open LLM Leaderboard v2, whole
benchmarks, 348 models), the six Open LLM Leaderboard v1 matrices and the psn MMLU and BBH
blocks (12 models, whole benchmarks). What "full score" means: every method is scored
against each model's mean over the matrix items. For v2 and psn that is the benchmark score;
the v1 matrices hold the 58-249 items metabench kept of 1,000-14,000, so there the suite
compares methods on that item set as if it were the benchmark (our estimators against the
true whole-benchmark score are in ``bench/reliability.md``).

Cells: matrix x source population x protocol x budget x seed. Protocols: ``random`` (20 % of
the models held out at random), ``extrapolation`` (the strongest 20 % held out),
``weak`` (the weakest 20 % held out, budget 50 only). Populations: the source models are
all the rest (``all``; at most ``--v1-all`` for v1) or a random draw of 25, 50 or 100 of
them (budget 50). Every method sees the same source and target models per cell. The psn
blocks hold out 2 of their 12 models per split, so they take more seeds (``--psn-seeds``).

Methods: ``ours`` is the default of ``microbench build`` (``--method auto``: method and
estimator chosen by cross-validation, then the bundle fitted) followed by ``microbench
estimate``, called through the same library functions. Its values are those ``estimate``
prints (built without ``--chance``, the person-fit check moves no value); its intervals are
the estimator's, before the check widens those of models flagged as guessing
(``bench/fit_effect.md`` measures that step). ``ours_audit`` the same with 30 % of
the budget as audit items (at 50 and 100 items, all source models); ``ours_inside`` the build
for models like the sources (``--new-models like-sources``: the choice validated on random
folds only, guarded estimators only; all source models, random and extrapolation protocols,
so its cost beyond the sources is measured too). benchpred's methods run
in tiers (their cost differs by 1,000x): fast ones everywhere, ``lasso`` and
``random_search_and_learn`` (10-25 s a cell) on the whole current benchmarks (v2), seeds 0-2
and the populations, ``pirt`` and ``gpirt`` (py-irt fits of 1-5 minutes each) at budget 50 on
seed 0.

Results are cached per method and matrix (``--cache``), so runs resume and several runs can
share the work (``--only``). Writes ``bench/peers.json``, ``bench/peers.md`` and plots.

    python tools/bench_peers.py --venv .peers-venv              # everything (hours)
    python tools/bench_peers.py --only ours --matrices ifeval   # one method, one matrix
    python tools/bench_peers.py --report-only --seeds 0,1,2 --psn-seeds 0-9   # the report
    python tools/bench_peers.py --only ours,ours_audit,ours_inside --seeds 0,1,2 \
        --psn-seeds 0-9 --peer-metrics bench/peers.json   # ours again, benchpred's as before
    python tools/bench_peers.py --report-only --seeds 0,1,2 --psn-seeds 0-9 \
        --peer-metrics bench/peers.json --ours-metrics bench/peers.json
        # after rerunning ours* on the matrices a change reaches, the rest as before
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from cell_scoring import audit_size
from peer_cells import (
    DATA,
    PSN,
    REPO,
    V1,
    V1_ALL,
    V2,
    Cell,
    Split,
    cell_rows,
    load_matrix,
    split_cell,
)
from peers_metrics import cell_metrics
from peers_report import kept_groups, write_report

from lmeval_microbench.auto import choose_recipe
from lmeval_microbench.build import build_bundle
from lmeval_microbench.estimators import estimator_from_state
from lmeval_microbench.responses import ResponseMatrix

MATRICES = V2 + V1 + PSN
BUDGETS = (10, 25, 50, 100)
POPULATIONS = (25, 50, 100)
POPULATION_BUDGET = 50
PROTOCOLS = ("random", "extrapolation", "weak")
SEEDS = (0, 1, 2)
FAST = (
    "random_sampling",
    "random_sampling_and_learn",
    "aipw",
    "anchor_points_weighted",
    "anchor_points_predictor",
    "double_optimize",
    "pca",
)
MEDIUM = ("lasso", "random_search_and_learn")
SLOW = ("pirt", "gpirt")
PEERS = FAST + MEDIUM + SLOW
OURS = ("ours", "ours_audit", "ours_inside")
AUDIT_SHARE = 0.3
AUDIT_BUDGETS = (50, 100)
"""Budgets ``ours_audit`` runs at (all source models, random and extrapolation)."""
PEER_TIMEOUT = 6 * 3600


def grid(
    matrices: list[str],
    seeds: list[int],
    budgets: list[int],
    n_items: dict[str, int],
    psn_seeds: list[int] | None = None,
) -> list[Cell]:
    """Every cell of the suite; budgets of at least the matrix's item count are left out
    (every method would ask every item). The psn blocks take ``psn_seeds`` where given: with
    12 models a split holds out 2, so two seeds measure 4 models per case."""
    cells = []
    for matrix in matrices:
        budgets_here = [b for b in budgets if b < n_items[matrix]]
        for seed in psn_seeds if psn_seeds and matrix in PSN else seeds:
            for protocol in ("random", "extrapolation"):
                cells += [Cell(matrix, "all", protocol, b, seed) for b in budgets_here]
                if matrix not in PSN and POPULATION_BUDGET in budgets_here:
                    cells += [
                        Cell(matrix, str(p), protocol, POPULATION_BUDGET, seed) for p in POPULATIONS
                    ]
            if POPULATION_BUDGET in budgets_here:
                cells.append(Cell(matrix, "all", "weak", POPULATION_BUDGET, seed))
    return cells


TIER_CELLS = {
    "fast": "every cell",
    "medium": "the v2 matrices, seeds 0-2, random and extrapolation",
    "slow": "budget 50, seed 0, random and extrapolation",
}
"""Where each tier of benchpred's methods runs, in words (:func:`runs_method`), for the
report: a method that ran fewer cells is compared only where it ran."""


def runs_method(method: str, cell: Cell) -> bool:
    """Which cells each method runs (the tiers of the module docstring)."""
    if method == "ours_audit":
        return cell.population == "all" and cell.budget in AUDIT_BUDGETS and cell.protocol != "weak"
    if method == "ours_inside":
        return cell.population == "all" and cell.protocol != "weak"
    if method in FAST + OURS:
        return True
    if method in MEDIUM:
        return cell.matrix in V2 and cell.seed < 3 and cell.protocol != "weak"
    return cell.seed == 0 and cell.budget == POPULATION_BUDGET and cell.protocol != "weak"


# ---------------------------------------------------------------------- cache
class Cache:
    """JSON lines per method and matrix: ``{key, pred, lower, upper, seconds, ...}``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, method: str, matrix: str) -> Path:
        return self.root / method / f"{matrix}.jsonl"

    def read(self, method: str, matrix: str) -> dict[str, dict[str, Any]]:
        path = self.path(method, matrix)
        if not path.exists():
            return {}
        out = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                out[record["key"]] = record
        return out

    def append(self, method: str, matrix: str, record: dict[str, Any]) -> None:
        path = self.path(method, matrix)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")


# ---------------------------------------------------------------------- ours
def build_ours(method: str, cell: Cell, split: Split) -> tuple[Any, str]:
    """The bundle ``microbench build`` makes for ``method`` on the cell's source models and
    the recipe chosen (``method+estimator``)."""
    audit = audit_size(AUDIT_SHARE if method == "ours_audit" else 0.0, cell.budget)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        choice = choose_recipe(
            split.source,
            split.source_truth,
            budgets=[cell.budget],
            seed=cell.seed,
            progress=False,
            audit=audit,
            extrapolation=method != "ours_inside",
        )
    bundle = build_recipe(
        cell,
        split.source,
        split.source_truth,
        choice.method,
        choice.estimator,
        audit=audit,
        choice=choice.as_record(),
    )
    return bundle, f"{choice.method}+{choice.estimator}"


def build_recipe(
    cell: Cell,
    source: ResponseMatrix,
    source_truth: np.ndarray,
    method: str,
    estimator: str,
    audit: int = 0,
    choice: dict[str, Any] | None = None,
) -> Any:
    """The bundle ``microbench build --method M --estimator E`` makes on the cell's source
    models (``audit`` of the budget drawn as audit items); with the ``choice`` record of
    ``--method auto`` its interval factor applies, as in ``microbench build``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_bundle(
            source,
            source_truth,
            name=cell.key,
            benchmark=cell.matrix,
            method=method,
            budget=cell.budget,
            seed=cell.seed,
            estimators=[estimator],
            default_estimator=estimator,
            audit=audit,
            choice=choice,
        )


def estimate_record(
    cell: Cell, bundle: Any, target: ResponseMatrix, recipe: str, start: float
) -> dict[str, Any]:
    """The bundle's default estimator on the cell's targets, as a cache record.

    ``widen`` is the interval factor the build applied to the estimator's band: the one
    ``--method auto`` measured for its recipe, or 1 where the build cross-fitted a supervised
    selection instead (:func:`build.choice_widen`).
    """
    estimator = estimator_from_state(bundle.estimator_state())
    value, lower, upper = estimator.estimate_matrix(target.select_items(bundle.item_ids))
    return {
        "key": cell.key,
        "pred": value.tolist(),
        "lower": lower.tolist(),
        "upper": upper.tolist(),
        "items": bundle.budget,
        "recipe": recipe,
        "widen": float(estimator.band_.widen),
        "seconds": time.perf_counter() - start,
    }


def fill_ours(method: str, cells: list[Cell], data: Path, cache: Cache, v1_all: int) -> None:
    for matrix in sorted({c.matrix for c in cells}):
        done = cache.read(method, matrix)
        todo = [c for c in cells if c.matrix == matrix and c.key not in done]
        for k, cell in enumerate(todo, 1):
            split = split_cell(cell, data, v1_all)
            try:
                start = time.perf_counter()  # build, then estimate: what a user waits for
                bundle, recipe = build_ours(method, cell, split)
                record = estimate_record(cell, bundle, split.target, recipe, start)
            except Exception as exc:  # recorded as the method's failure on that cell
                record = {"key": cell.key, "error": f"{type(exc).__name__}: {exc}"[:300]}
            cache.append(method, matrix, record)
            print(
                f"{method} {cell.key} ({k}/{len(todo)}) {record.get('seconds', 0):.0f}s", flush=True
            )


# ---------------------------------------------------------------------- peers
def ensure_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, "torch==2.13.0"], check=True)
        subprocess.run([*pip, "benchpred==1.0.0"], check=True)
    return python


def fill_peer(
    method: str, cells: list[Cell], data: Path, cache: Cache, python: Path, v1_all: int
) -> None:
    for matrix in sorted({c.matrix for c in cells}):
        done = cache.read(method, matrix)
        todo = [c for c in cells if c.matrix == matrix and c.key not in done]
        if not todo:
            continue
        values, truth, _ = load_matrix(matrix, data)
        payload = []
        for cell in todo:
            source, target = cell_rows(truth, cell, v1_all)
            payload.append(
                {
                    "key": cell.key,
                    "source": source.tolist(),
                    "target": target.tolist(),
                    "budget": cell.budget,
                    "seed": cell.seed,
                }
            )
        out = cache.path(method, matrix)
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            cells_file = Path(tmp) / "cells.npz"
            np.savez(cells_file, Y=values.astype(np.int8), cells=json.dumps(payload))
            print(f"{method} {matrix}: {len(todo)} cells", flush=True)
            try:
                subprocess.run(
                    [
                        str(python),
                        str(REPO / "tools" / "peers_worker.py"),
                        str(cells_file),
                        str(out),
                        method,
                    ],
                    timeout=PEER_TIMEOUT,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                print(f"{method} {matrix}: stopped after {PEER_TIMEOUT} s", flush=True)


# ---------------------------------------------------------------------- metrics
def earlier_metrics(path: Path, methods: tuple[str, ...] = PEERS) -> dict[str, dict[str, Any]]:
    """``cell key -> {"n_targets", "methods": {method: metrics}}`` of an earlier report's JSON.

    benchpred's methods take hours (``pirt`` and ``gpirt`` most) and do not change when our
    code does, so a rerun of ``ours*`` can take their per-cell metrics from the committed
    ``bench/peers.json`` (``--peer-metrics``) instead of a cache that a fresh checkout lacks.
    Our own methods come from it only where asked (``--ours-metrics``: a change that cannot
    reach those cells, e.g. one for 10-12 source models, which only the psn blocks have), and
    the report names the matrices whose ``ours*`` came from it.
    """
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return {
        cell["key"]: {
            "n_targets": cell["n_targets"],
            "methods": {m: v for m, v in cell["methods"].items() if m in methods},
        }
        for cell in cells
    }


def collect(
    cells: list[Cell],
    methods: list[str],
    data: Path,
    cache: Cache,
    v1_all: int,
    earlier: dict[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Per cell, the metrics of every method with a cached record; a method without one
    takes its metrics from ``earlier`` (:func:`earlier_metrics`) when that report scored the
    same number of targets in the cell (``from_earlier`` lists which)."""
    rows = []
    for matrix in sorted({c.matrix for c in cells}):
        _, truth, _ = load_matrix(matrix, data)
        records = {m: cache.read(m, matrix) for m in methods}
        for cell in (c for c in cells if c.matrix == matrix):
            _, target = cell_rows(truth, cell, v1_all)
            row = {**asdict(cell), "key": cell.key, "n_targets": int(target.size), "methods": {}}
            row["from_earlier"] = []
            before = (earlier or {}).get(cell.key, {})
            reusable = before.get("methods", {}) if before.get("n_targets") == target.size else {}
            for method in methods:
                if not runs_method(method, cell):
                    continue
                record = records[method].get(cell.key)
                if record is not None:
                    row["methods"][method] = cell_metrics(record, truth[target])
                elif method in reusable:
                    row["methods"][method] = reusable[method]
                    row["from_earlier"].append(method)
            rows.append(row)
    return rows


# ---------------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--matrices", default=",".join(MATRICES))
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    parser.add_argument(
        "--psn-seeds",
        help="seeds of the psn blocks (default: --seeds), e.g. 0-9: their splits hold out 2 models",
    )
    parser.add_argument("--only", help="comma-separated methods to run (default: all)")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS), help="protocols to run")
    parser.add_argument("--venv", type=Path, default=REPO / ".peers-venv")
    parser.add_argument("--cache", type=Path, default=REPO / ".peers-cache")
    parser.add_argument(
        "--v1-all",
        type=int,
        default=V1_ALL,
        help=f"most source models of a v1 'all' population (default {V1_ALL})",
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument(
        "--peer-metrics",
        type=Path,
        help="an earlier report's JSON (e.g. bench/peers.json): benchpred's per-cell metrics "
        "for cells the cache lacks, so that only our methods need rerunning",
    )
    parser.add_argument(
        "--ours-metrics",
        type=Path,
        help="an earlier report's JSON: our methods' per-cell metrics for cells the cache "
        "lacks; only for a change that cannot reach those cells (the report says which)",
    )
    args = parser.parse_args(argv)
    if unknown := set(args.protocols.split(",")) - set(PROTOCOLS):
        parser.error(f"--protocols: unknown {sorted(unknown)}; known {', '.join(PROTOCOLS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.data.is_dir():
        sys.exit(f"no real data at {args.data}: the peer suite needs ../shared/data")
    matrices = args.matrices.split(",")
    n_items = {m: load_matrix(m, args.data)[0].shape[1] for m in matrices}
    cells = grid(
        matrices,
        [int(s) for s in args.seeds.split(",")],
        [int(b) for b in args.budgets.split(",")],
        n_items,
        seed_range(args.psn_seeds) if args.psn_seeds else None,
    )
    methods = args.only.split(",") if args.only else [*OURS, *PEERS]
    cache = Cache(args.cache)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load_start = [round(v, 2) for v in os.getloadavg()]
    protocols = args.protocols.split(",")
    if not args.report_only:
        for method in methods:
            mine = [c for c in cells if runs_method(method, c) and c.protocol in protocols]
            if method in OURS:
                fill_ours(method, mine, args.data, cache, args.v1_all)
            else:
                fill_peer(method, mine, args.data, cache, ensure_venv(args.venv), args.v1_all)
    earlier = earlier_metrics(args.peer_metrics) if args.peer_metrics else {}
    if args.ours_metrics:
        for key, cell in earlier_metrics(args.ours_metrics, OURS).items():
            merged = earlier.setdefault(key, {"n_targets": cell["n_targets"], "methods": {}})
            if merged["n_targets"] == cell["n_targets"]:
                merged["methods"].update(cell["methods"])
    rows = collect(cells, [*OURS, *PEERS], args.data, cache, args.v1_all, earlier)
    info = {
        "command": "python tools/bench_peers.py " + " ".join(argv or sys.argv[1:]),
        "started": started,
        "load_average": {"start": load_start, "end": [round(v, 2) for v in os.getloadavg()]},
        "benchpred": "1.0.0",
        "v1_all": args.v1_all,
        "peers": {"fast": FAST, "medium": MEDIUM, "slow": SLOW},
        "tier_cells": TIER_CELLS,
    }
    if args.peer_metrics:
        info["peer_metrics_from"] = str(args.peer_metrics)
    if args.ours_metrics:
        info["ours_metrics_from"] = str(args.ours_metrics)
        info["ours_kept_for"] = {
            method: kept_groups(rows, method)
            for method in OURS
            if any(method in r["from_earlier"] for r in rows)
        }
    write_report(rows, info, args.out)


def seed_range(text: str) -> list[int]:
    """``0-9`` or ``0,1,2`` as a list of seeds."""
    if "-" in text:
        first, last = (int(v) for v in text.split("-"))
        return list(range(first, last + 1))
    return [int(v) for v in text.split(",")]


if __name__ == "__main__":
    main()
