"""Convergence of the 2PL fit on small and wide matrices (10-50 models, up to 42k items).

Cases (each fit on the matrix with its constant items dropped, as ``fit_with_constant_items``
does; ``loo``: the case's matrix refitted once per model with that model left out, as the
reliability benchmark's leave-one-model-out protocol does):

- ``psn_all`` / ``psn_mmlu``: ``psn_irt/combine.csv`` (12 models x 41,871 items) and its
  MMLU block (columns from ``column_segments_inferred.csv``), plus LOO on the MMLU block;
- ``openllm_{mmlu,arc}_n{15,25,50}``: random sub-populations of the Open LLM v1 B matrices
  (``--seeds`` draws each), plus LOO on one 15-model draw of each;
- ``synthetic_20x3000``: 20 x 3,000 matrices from :mod:`lmeval_microbench.synthetic`
  (``--seeds`` draws), with LOO on the first; here the error of the recovered abilities
  (RMSE of EAP - true theta) and of the response probabilities (mean |P_fit - P_true| over the
  matrix) is reported too.

Per fit: converged, EM iterations, last max parameter change, seconds. The tool writes
``bench/irt_small.json`` (results keyed by ``--label``, so a run before and after a change sit
side by side) and ``bench/irt_small.md``.

    python tools/bench_irt_small.py --label after
    python tools/bench_irt_small.py --label before --quick
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lmeval_microbench.errors import ConvergenceWarning
from lmeval_microbench.irt import IRTModel
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.synthetic import random_item_params, simulate_responses

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=REPO / ".." / "shared" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument("--label", default="current", help="key of this run in the json")
    parser.add_argument("--seeds", type=int, default=3, help="draws per random case")
    parser.add_argument("--quick", action="store_true", help="no LOO, one seed, no psn_all")
    parser.add_argument(
        "--psn-loo",
        type=int,
        default=12,
        help="leave-one-out fits on the psn MMLU block (default: all 12)",
    )
    return parser.parse_args(argv)


# ---------------------------------------------------------------------------------- fitting
def fit_once(matrix: ResponseMatrix) -> tuple[IRTModel, dict[str, Any]]:
    """One 2PL fit on ``matrix`` without its constant items; the model and its record."""
    matrix = matrix.drop_items(matrix.constant_items())
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model = IRTModel("2pl").fit(matrix)
    seconds = time.perf_counter() - start
    report = getattr(model, "fit_report_", None)
    change = report.max_change if report is not None else float("nan")
    if report is None:  # code before fit_report_: read the change from the warning text
        for w in caught:
            text = str(w.message)
            if "parameter change of" in text:
                change = float(text.split("parameter change of ")[1].split()[0])
    return model, {
        "shape": list(matrix.shape),
        "converged": bool(model.converged_),
        "n_iter": int(model.n_iter_),
        "max_change": float(change),
        "seconds": round(seconds, 3),
        "warned": sum(issubclass(w.category, ConvergenceWarning) for w in caught),
    }


def leave_one_out(matrix: ResponseMatrix, limit: int | None = None) -> list[dict[str, Any]]:
    records = []
    for model_id in matrix.model_ids[:limit]:
        keep = [m for m in matrix.model_ids if m != model_id]
        records.append(fit_once(matrix.select_models(keep))[1])
    return records


def synthetic_errors(
    model: IRTModel, truth_params: Any, theta: np.ndarray, matrix: ResponseMatrix
) -> dict[str, float]:
    kept = list(model.params_.item_ids)
    true_p = truth_params.subset(kept).probability(theta)
    fit_p = model.params_.probability(model.abilities_)
    return {
        "theta_rmse": float(np.sqrt(np.mean((model.abilities_[:, 0] - theta[:, 0]) ** 2))),
        "theta_corr": float(np.corrcoef(model.abilities_[:, 0], theta[:, 0])[0, 1]),
        "prob_mae": float(np.mean(np.abs(fit_p - true_p))),
    }


# ---------------------------------------------------------------------------------- cases
def psn_matrices(data: Path) -> dict[str, ResponseMatrix]:
    values = pd.read_csv(data / "psn_irt" / "combine.csv", header=None).to_numpy(np.float64)
    segments = pd.read_csv(data / "psn_irt" / "column_segments_inferred.csv")
    models = [f"psn{k:02d}" for k in range(values.shape[0])]
    items = [f"psn.{k}" for k in range(values.shape[1])]
    full = ResponseMatrix(values, models, items, source="psn_irt/combine.csv")
    row = segments[segments["benchmark"] == "MMLU"].iloc[0]
    cols = items[int(row["start_col"]) : int(row["end_col_exclusive"])]
    mmlu = full.select_items(cols)
    mmlu.source = "psn_irt MMLU block"
    return {"psn_all": full, "psn_mmlu": mmlu}


def openllm_matrix(data: Path, bm: str) -> ResponseMatrix:
    return ResponseMatrix.read_parquet(data / "openllm_v1" / "responses" / f"{bm}_B.parquet")


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "fits": len(records),
        "converged_share": float(np.mean([r["converged"] for r in records])),
        "n_iter_median": float(np.median([r["n_iter"] for r in records])),
        "n_iter_max": int(max(r["n_iter"] for r in records)),
        "max_change_max": max(
            (r["max_change"] for r in records),
            default=float("nan"),
            key=lambda c: -1.0 if np.isnan(c) else c,
        ),
        "seconds_total": round(float(sum(r["seconds"] for r in records)), 2),
    }
    for key in ("theta_rmse", "theta_corr", "prob_mae"):
        if key in records[0]:
            out[key] = float(np.mean([r[key] for r in records]))
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    seeds = 1 if args.quick else args.seeds
    cases: dict[str, list[dict[str, Any]]] = {}

    def add(name: str, record: dict[str, Any]) -> None:
        cases.setdefault(name, []).append(record)
        print(name, record, flush=True)

    psn = psn_matrices(args.data)
    for name, matrix in psn.items():
        if args.quick and name == "psn_all":
            continue
        add(name, fit_once(matrix)[1])
    if not args.quick:
        for record in leave_one_out(psn["psn_mmlu"], args.psn_loo):
            add("psn_mmlu_loo", record)
    for bm in ("mmlu", "arc"):
        full = openllm_matrix(args.data, bm)
        for n in (15, 25, 50):
            for seed in range(seeds):
                rng = np.random.default_rng(1000 * n + seed)
                rows = rng.choice(full.n_models, size=n, replace=False)
                sub = full.select_models([full.model_ids[k] for k in sorted(rows)])
                add(f"openllm_{bm}_n{n}", fit_once(sub)[1])
                if n == 15 and seed == 0 and not args.quick:
                    for record in leave_one_out(sub):
                        add(f"openllm_{bm}_n15_loo", record)
    for seed in range(seeds):
        params = random_item_params(3000, seed=seed)
        matrix, theta = simulate_responses(params, 20, seed=seed + 100)
        model, record = fit_once(matrix)
        record.update(synthetic_errors(model, params, theta, matrix))
        add("synthetic_20x3000", record)
        if seed == 0 and not args.quick:
            for k, model_id in enumerate(matrix.model_ids):
                keep = [m for m in matrix.model_ids if m != model_id]
                sub = matrix.select_models(keep)
                fitted, rec = fit_once(sub)
                rec.update(synthetic_errors(fitted, params, np.delete(theta, k, axis=0), sub))
                add("synthetic_20x3000_loo", rec)
    return {name: {"summary": summarise(recs), "fits": recs} for name, recs in cases.items()}


def write_markdown(results: dict[str, Any], path: Path) -> None:
    lines = [
        "# 2PL fits on small and wide matrices",
        "",
        "Written by `tools/bench_irt_small.py`. Per case: share of fits that met `tol`,",
        "median / max EM iterations, the largest last parameter change, total seconds; for",
        "synthetic data the mean RMSE of abilities and mean |P_fit - P_true|. `before`: the",
        "EM before the safeguard (`--psn-loo 2`; its max change is read from the warning, so",
        "converged fits show none). Both runs with one BLAS thread on a shared 2-core machine.",
        "",
    ]
    for label, cases in results.items():
        lines += [
            f"## {label}",
            "",
            "| case | fits | converged | iter median | iter max | max change | seconds "
            "| theta RMSE | prob MAE |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for name, case in cases.items():
            s = summarise(case["fits"])
            theta = f"{s['theta_rmse']:.3f}" if "theta_rmse" in s else ""
            prob = f"{s['prob_mae']:.4f}" if "prob_mae" in s else ""
            lines.append(
                f"| {name} | {s['fits']} | {s['converged_share']:.0%} | {s['n_iter_median']:g} "
                f"| {s['n_iter_max']} | {s['max_change_max']:.3g} | {s['seconds_total']:.1f} "
                f"| {theta} | {prob} |"
            )
        lines.append("")
    path.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    results = run(args)
    json_path = args.out / "irt_small.json"
    stored = json.loads(json_path.read_text()) if json_path.exists() else {}
    stored[args.label] = results
    json_path.write_text(json.dumps(stored, indent=1))
    write_markdown(stored, args.out / "irt_small.md")


if __name__ == "__main__":
    main()
