"""Our AIPW audit reading beside ppi_py's estimators, on the same parts: bench/ppi.{md,json}.

Issue 19 asked to look at ``ppi_py`` (PyPI ``ppi_python``, Angelopoulos et al.) before
writing the statistics of the audit reading (:mod:`lmeval_microbench.outside.readings.audit`)
by hand. This checks the hand-written statistics against it and measures what ppi_py offers
beyond them. Per cell (the peer suite's splits, all source models: random and strongest fifth
held out, seeds 0-2), ``balanced`` items of which some are a random audit sample
(``select_with_audit``) and the audit reading fitted on the sources. For each held-out model
the reading's parts go to ppi_py: its own-level predictions of every item the informative
items do not cover (the "unlabeled" data, audit items included), the audit items' answers and
their predictions (the "labeled" data). ppi_py runs in a venv of its own
(``tools/ppi_worker.py``; it needs numba and statsmodels, this package does not). Compared,
each as the full score (the informative items' answers plus the estimate of the rest):

- ``ours``: the reading's value and its normal 90 % interval, ``value +- 1.645 se`` (the
  guard sizes the band it uses by its folds' errors instead; this is the reading alone);
- ``ppi``: ``ppi_mean_pointestimate`` / ``ppi_mean_ci`` with ``lam=1`` (plain AIPW);
- ``ppi_tuned``: the same with ``lam=None``, PPI++'s power tuning, its weight estimated from
  the model's own audit items;
- ``classical``: the audit items' mean alone (``classical_mean_ci``).

    python tools/bench_ppi.py                       # creates .ppi-venv when missing
    python tools/bench_ppi.py --venv /tmp/ppivenv   # an existing venv with ppi_python
    python tools/bench_ppi.py --report-only         # re-render bench/ppi.md from its JSON
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
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from cell_scoring import interval_metrics, measured_rows
from peer_cells import DATA, Cell, split_cell
from scipy.special import expit
from scipy.stats import norm
from tqdm.auto import tqdm

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.outside.readings import make_reading
from lmeval_microbench.outside.readings.audit import AuditReading
from lmeval_microbench.outside.readings.base import SourceView
from lmeval_microbench.outside.readings.own import level_posterior, shift_grid
from lmeval_microbench.selection import make_selector, select_with_audit

REPO = Path(__file__).resolve().parents[1]
PPI_VERSION = "0.2.3"
MATRICES = ("musr", "ifeval", "gsm8k", "mmlu")
PROTOCOLS = ("random", "extrapolation")
SPLITS = ((50, 15), (100, 30), (100, 50))
"""(budget, audit items) of each cell."""
ESTIMATORS = ("ours", "ppi", "ppi_tuned", "classical")
Z90 = float(norm.ppf(0.95))


def ensure_venv(venv: Path) -> Path:
    """The venv's python, with ``ppi_python`` installed when the venv is new."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, f"ppi_python=={PPI_VERSION}"], check=True)
    return python


def aipw_parts(
    reading: AuditReading, rates: np.ndarray, positions: np.ndarray, values: np.ndarray
) -> dict[str, np.ndarray]:
    """What ppi_py needs of the reading, per model (rows of ``values``: the subset's items,
    at ``positions`` among the source items, whose success rates are ``rates``).

    ``yhat``: the own-level prediction of every source item the informative items do not
    cover, in matrix order; ``audit_index``: the audit items' columns in ``yhat``;
    ``y_audit``: their answers; ``informative``: the sum of the informative answers;
    ``n_items``: the item count of the benchmark. The reading's own arithmetic (module
    :mod:`...readings.audit`), spelled out item by item."""
    audit = np.asarray(reading.audit_, dtype=bool)
    grid = shift_grid()
    logits = np.log(rates) - np.log1p(-rates)
    weights = level_posterior(values[:, ~audit], logits[positions[~audit]], grid)
    rest = np.ones(rates.size, dtype=bool)
    rest[positions[~audit]] = False
    columns = np.flatnonzero(rest)
    return {
        "yhat": weights @ expit(grid[:, None] + logits[rest][None, :]),
        "audit_index": np.searchsorted(columns, positions[audit]),
        "y_audit": values[:, audit],
        "informative": values[:, ~audit].sum(axis=1),
        "n_items": np.array(rates.size),
    }


def as_score(parts: dict[str, np.ndarray], rest_mean: np.ndarray) -> np.ndarray:
    """The full score from the mean over the non-informative items."""
    n_out = parts["yhat"].shape[1]
    return (parts["informative"] + n_out * rest_mean) / float(parts["n_items"])


def cell_parts(cell: Cell, n_audit: int, data: Path) -> tuple[dict, dict]:
    """The cell's parts for ppi_py and our reading's own values, intervals and the truth."""
    source, target, source_truth, target_truth = split_cell(cell, data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        subset = select_with_audit(
            make_selector("balanced"), source, cell.budget, n_audit, seed=cell.seed
        )
        view = SourceView.build(source, subset, source_truth, source_truth)
        reading = make_reading("audit").fit(view)
    positions = source.item_positions(subset.item_ids)
    answers = target.values[:, positions]
    value, se = reading.read(answers, np.full(target.n_models, 0.5))
    parts = aipw_parts(reading, view.rates, positions, answers)
    ours = {"value": value, "lower": value - Z90 * se, "upper": value + Z90 * se}
    return parts, {"ours": ours, "truth": target_truth}


def measure(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Every cell: parts here, ppi_py's estimates in its venv, metrics of all four."""
    python = ensure_venv(args.venv)
    start, load_start = time.time(), os.getloadavg()[0]
    cells = [
        (Cell(m, "all", p, budget, seed), n_audit)
        for m in args.matrices.split(",")
        for p in PROTOCOLS
        for seed in (int(s) for s in args.seeds.split(","))
        for budget, n_audit in SPLITS
    ]
    parts, ours = {}, {}
    for cell, n_audit in tqdm(cells, desc="audit readings"):
        key = f"{cell.key}/{n_audit}"
        parts[key], ours[key] = cell_parts(cell, n_audit, args.data)
    with tempfile.TemporaryDirectory() as tmp:
        parts_file, out_file = Path(tmp) / "parts.npz", Path(tmp) / "ppi.json"
        sent = ("yhat", "audit_index", "y_audit")
        np.savez(parts_file, **{f"{k}/{n}": p[n] for k, p in parts.items() for n in sent})
        worker = [str(python), str(REPO / "tools" / "ppi_worker.py"), str(parts_file)]
        subprocess.run([*worker, str(out_file)], check=True, stdout=subprocess.DEVNULL)
        found = json.loads(out_file.read_text())
    rows = [cell_row(key, parts[key], ours[key], found[key]) for key in parts]
    info = {
        "command": "python tools/bench_ppi.py " + " ".join(args.argv),
        "ppi_python": PPI_VERSION,
        "seconds": round(time.time() - start),
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
    }
    return info, rows


def cell_row(key: str, parts: dict, ours: dict, found: list[dict[str, list]]) -> dict[str, Any]:
    """One cell's metrics; ``agreement``: the largest gap between our estimate and ppi_py's
    ``lam=1`` one, as full scores."""
    truth = ours["truth"]
    row: dict[str, Any] = {"key": key, "n_targets": int(truth.size)}
    for name in ESTIMATORS[1:]:
        value, lower, upper = (
            as_score(parts, np.array([m[name][k] for m in found])) for k in range(3)
        )
        row[name] = interval_metrics(value, lower, upper, truth)
        if name == "ppi":
            row["agreement"] = float(np.max(np.abs(value - ours["ours"]["value"])))
    own = ours["ours"]
    row["ours"] = interval_metrics(own["value"], own["lower"], own["upper"], truth)
    return row


def grouped(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Seed means per matrix, protocol, budget and audit size."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in rows:
        matrix, _, protocol, budget, _, n_audit = row["key"].split("/")
        groups[(matrix, protocol, int(budget), int(n_audit))].append(row)
    out = []
    for (matrix, protocol, budget, n_audit), found in groups.items():
        entry: dict[str, Any] = {
            "matrix": matrix,
            "protocol": protocol,
            "budget": budget,
            "audit": n_audit,
        }
        for name in ESTIMATORS:
            entry[name] = {k: float(np.mean([r[name][k] for r in found])) for k in found[0][name]}
        out.append(entry)
    return out


def summary_lines(groups: list[dict]) -> list[str]:
    """One line per estimator: its means over the cases, and where it beat ours."""
    lines = []
    for name in ESTIMATORS:
        mae, cov, width = (
            np.array([g[name][k] for g in groups]) for k in ("mae", "coverage", "width")
        )
        ours = np.array([g["ours"]["mae"] for g in groups])
        lower, higher = int(np.sum(mae < ours - 0.05)), int(np.sum(mae > ours + 0.05))
        lines.append(
            f"| {name} | {mae.mean():.2f} | {cov.mean():.2f} | {cov.min():.2f} | "
            f"{width.mean():.1f} | {lower} / {higher} of {len(groups)} |"
        )
    return lines


def markdown(info: dict[str, Any], rows: list[dict[str, Any]], groups: list[dict]) -> str:
    agreement = max(r["agreement"] for r in rows)
    lines = [
        "## The audit reading (AIPW) beside ppi_py",
        "",
        f"Generated by `tools/bench_ppi.py`; command: `{info['command']}` "
        f"({info['seconds']} s, load average {info['load_average'][0]} -> "
        f"{info['load_average'][1]} on 2 shared cores; "
        f"ppi_python {info['ppi_python']} in its own venv"
        + (f"; re-rendered by `{info['rendered']}`" if "rendered" in info else "")
        + "). The peer suite's splits with all source models (random: a fifth held out at "
        "random; extrapolation: the strongest fifth), seeds 0-2; `balanced` items of which "
        "`audit` are a random sample of the rest, the audit reading fitted on the sources; "
        "each held-out model read by our reading and by ppi_py on the same parts. MAE and "
        "width in points of the matrix mean (v1: the items metabench kept), coverage of the "
        "90 % interval, means over seeds.",
        "",
        f"Point estimates: ours and ppi_py's `lam=1` differ by at most {agreement:.1e} "
        f"over {sum(r['n_targets'] for r in rows)} model readings.",
        "",
        "| estimator | mean MAE | mean coverage | least coverage | mean width "
        "| cases with a lower MAE than ours (by 0.05+) / higher |",
        "|---|---:|---:|---:|---:|---|",
        *summary_lines(groups),
        "",
        "| matrix | protocol | budget | audit | "
        + " | ".join(f"{n} MAE / cov / width" for n in ESTIMATORS)
        + " |",
        "|---|---|---:|---:|" + "---|" * len(ESTIMATORS),
    ]
    for g in groups:
        cells = " | ".join(
            f"{g[n]['mae']:.2f} / {g[n]['coverage']:.2f} / {g[n]['width']:.1f}" for n in ESTIMATORS
        )
        head = f"| {g['matrix']} | {g['protocol']} | {g['budget']} | {g['audit']} |"
        lines.append(f"{head} {cells} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--venv", type=Path, default=REPO / ".ppi-venv")
    parser.add_argument("--matrices", default=",".join(MATRICES))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument("--report-only", action="store_true", help="re-render from the JSON")
    args = parser.parse_args(argv)
    info, rows = measured_rows(args, argv, "bench_ppi", args.out / "ppi.json", measure)
    groups = grouped(rows)
    write_json_atomic(args.out / "ppi.json", {"info": info, "groups": groups, "cells": rows})
    write_text_if_changed(args.out / "ppi.md", markdown(info, rows, groups))
    print(f"wrote {args.out / 'ppi.md'} ({len(rows)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
