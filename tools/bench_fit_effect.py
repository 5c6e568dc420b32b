"""What the person-fit check does to the default build's estimates, on the peer suite's splits.

The peer suite (``tools/bench_peers.py``) scores the estimator's own output. A user reads
what ``microbench estimate`` prints: that output after the bundle's person-fit check
(``reconstruct.estimate_models``). When the answers cannot be told from guessing, the check
widens the interval to the chance-level score and, where chance levels were given, moves the
estimate toward it by P(guessing). This script builds the default bundle (``--method auto``)
on the same cells as the peer suite, random, extrapolation (strongest fifth held out) and
weak (weakest fifth held out), and compares the estimate before and after the check against
the true score, with chance as a build without ``--chance`` gets it (``stand-in``: the
weakest 5 % of source models) and, where the benchmark's choices are known (v1 but gsm8k,
MuSR), as given (``given``: the shipped pool's per-item 1 / number of choices).

Per matrix, protocol and chance: MAE and bias (points), 90 % coverage and width, before and
after the check, and the share of held-out models flagged as guessing and as misfitting. How
far to move is then scored as ``tools/bench_guess_weight.py`` scores it for adaptive runs:
the same flagged estimates moved by other weights than P(guessing) at the product's prior
odds 1:4 (``guess_rules.RULES``: no move, even odds (the rule before), the odds beyond even,
prior odds 1:9; ``guess_rules.ABILITY_SD``: the posterior against an ordinary model with
another ability prior than the product's N(0, 3²), sd 1 the rule before), so that a change
of the one rule rests on static numbers too (the interval is the same under every weight).

    python tools/bench_fit_effect.py                        # budget 50, seeds 0-1 (psn 0-4)
    python tools/bench_fit_effect.py --matrices arc --protocols weak --out /tmp/check
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_peers import MATRICES, build_ours
from guess_rules import PRODUCT, PRODUCT_ODDS, RULES, wide_posteriors
from peer_cells import DATA, PSN, REPO, Cell, cell_rows, load_matrix, split_rows

from lmeval_microbench._io import write_text_if_changed
from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
from lmeval_microbench.bundle import load_bundle
from lmeval_microbench.estimators import estimator_from_state
from lmeval_microbench.personfit import build_spec
from lmeval_microbench.reconstruct import estimate_models

PROTOCOLS = ("random", "extrapolation", "weak")


def given_chance(matrix: str, ids: list[str]) -> dict[str, float] | None:
    """Per-item chance levels the shipped pool was given, for every matrix item; None where
    the benchmark has no choices (the pool's weakest sources stand in) or no pool."""
    suite = "openllm_v2" if matrix in ("ifeval", "musr") else "openllm_v1"
    if matrix in PSN or not (SHIPPED_POOLS / suite / matrix).is_dir():
        return None
    spec = load_bundle(SHIPPED_POOLS / suite / matrix).person_fit
    if spec is None or spec.stand_in:
        return None
    return dict(zip(ids, spec.chance_vector(ids).tolist(), strict=True))


def checked_part(bundle: Any, target: Any, truth: np.ndarray, raw: Any, recipe: str) -> dict:
    """Raw and checked estimates (fractions) and flags of a cell's targets under ``bundle``."""
    records = estimate_models(bundle, target)
    checked = [
        np.array([r[f"estimate_{key}"] for r in records]) for key in ("value", "lower", "upper")
    ]
    fits = [r["person_fit"] for r in records]
    ids = list(bundle.item_ids)
    values = target.values[:, target.item_positions(ids)]
    wide = wide_posteriors(bundle.irt, values, ids, bundle.person_fit.chance_vector(ids))
    return {
        "truth": truth,
        "raw": raw,
        "checked": checked,
        "rules": reweighted(raw[0], checked[0], fits, wide),
        "guessing": np.array([bool(f.get("guessing")) for f in fits]),
        "misfit": np.array([bool(f.get("misfit")) for f in fits]),
        "recipe": recipe,
    }


def reweighted(
    raw: np.ndarray, checked: np.ndarray, fits: list[dict], wide: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The checked values under each weight of ``RULES`` and each posterior of ``wide`` (the
    ``ABILITY_SD`` rules): the move toward chance is linear in the weight
    (``widen_for_fit``), so a flagged value moved by P(guessing) = p moves by ``w / p`` as
    far under a rule of weight ``w``; unflagged and unmoved values stay put."""
    moved = checked - raw
    posterior = np.array(
        [1.0 if f.get("guess_posterior") is None else f["guess_posterior"] for f in fits]
    )
    weights = {name: np.array([rule(p) for p in posterior]) for name, rule in RULES.items()}
    weights.update(wide)
    out = {}
    for name, weight in weights.items():
        scale = np.divide(weight, posterior, out=np.zeros_like(posterior), where=posterior > 0)
        out[name] = raw + moved * scale
    return out


def run_cell(
    values: np.ndarray,
    truth: np.ndarray,
    ids: list[str],
    cell: Cell,
    v1_all: int,
    chance: dict[str, float] | None,
) -> dict[str, dict[str, Any]]:
    """The cell's targets under the default bundle, by chance mode (``stand-in``, ``given``)."""
    split = split_rows(values, truth, ids, cell_rows(truth, cell, v1_all))
    bundle, recipe = build_ours("ours", cell, split)
    subset = split.target.select_items(bundle.item_ids)
    raw = estimator_from_state(bundle.estimator_state()).estimate_matrix(subset)
    parts = {"stand-in": checked_part(bundle, split.target, split.target_truth, raw, recipe)}
    if chance is not None:
        spec = build_spec(split.source, bundle.item_ids, split.source_truth, chance, seed=cell.seed)
        given = replace(bundle, person_fit=spec)
        parts["given"] = checked_part(given, split.target, split.target_truth, raw, recipe)
    return parts


def summarise(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Pooled metrics over the seeds of one matrix x protocol."""
    truth = np.concatenate([p["truth"] for p in parts])
    out: dict[str, Any] = {"targets": int(truth.size)}
    for name in ("raw", "checked"):
        value, lower, upper = (np.concatenate([p[name][k] for p in parts]) for k in range(3))
        out[name] = {
            "mae": float(100 * np.mean(np.abs(value - truth))),
            "bias": float(100 * np.mean(value - truth)),
            "coverage": float(np.mean((lower <= truth + 1e-12) & (truth - 1e-12 <= upper))),
            "width": float(100 * np.mean(upper - lower)),
        }
    out["guessing"] = float(np.mean(np.concatenate([p["guessing"] for p in parts])))
    out["misfit"] = float(np.mean(np.concatenate([p["misfit"] for p in parts])))
    out["recipes"] = sorted({p["recipe"] for p in parts})
    return out


def rules_mae(parts: list[dict[str, Any]]) -> dict[str, float]:
    """MAE (points) over the seeds of one matrix x protocol under each weight of ``RULES``
    (apart from :func:`summarise`, which ``bench_adaptive_fit`` shares without them)."""
    truth = np.concatenate([p["truth"] for p in parts])
    return {
        name: float(
            100 * np.mean(np.abs(np.concatenate([p["rules"][name] for p in parts]) - truth))
        )
        for name in parts[0]["rules"]
    }


def write_report(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_text_if_changed(out / "fit_effect.json", json.dumps(results, indent=1) + "\n")
    info = results["info"]
    lines = [
        "# What the person-fit check does to the default build's estimates",
        "",
        f"Generated by `{info['command']}` in {info['seconds']:.0f} s (load average at the end "
        f"{info['load_average']}, 2 cores).",
        "",
        (__doc__ or "").split("\n\n")[1].replace("\n", " "),
        "",
        f"Budget {info['budget']} items, all source models (v1: at most {info['v1_all']}); seeds "
        f"{info['seeds']} (psn: {info['psn_seeds']}), pooled. MAE and bias in points; cov: "
        "share of 90 % intervals that contain the true score; guess / misfit: share of held-out "
        "models flagged (only the former changes an estimate).",
        "",
        "| matrix | protocol | chance | targets | MAE raw → checked | bias raw → checked "
        "| cov raw → checked | width raw → checked | guess | misfit | recipes |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        raw, checked = row["raw"], row["checked"]
        lines.append(
            f"| {row['matrix']} | {row['protocol']} | {row['chance']} | {row['targets']} "
            f"| {raw['mae']:.2f} → {checked['mae']:.2f} | {raw['bias']:+.2f} → "
            f"{checked['bias']:+.2f} | {raw['coverage']:.2f} → {checked['coverage']:.2f} "
            f"| {raw['width']:.1f} → {checked['width']:.1f} | {100 * row['guessing']:.0f} % "
            f"| {100 * row['misfit']:.0f} % | {', '.join(row['recipes'])} |"
        )
    lines += weights_table(results["rows"])
    write_text_if_changed(out / "fit_effect.md", "\n".join(lines) + "\n")


def weights_table(rows: list[dict[str, Any]]) -> list[str]:
    """MAE after the check under each weight of ``RULES``, for the rows with chance given
    (without it nothing moves), and per protocol the sum over matrices."""
    given = [row for row in rows if row["chance"] == "given"]
    if not given:
        return []
    names = list(given[0]["rules_mae"])
    lines = [
        "",
        "How far a flagged estimate should move (chance given; the same estimates as above, "
        f"moved by other weights than {PRODUCT} at prior odds {PRODUCT_ODDS}, as "
        "``bench/guess_weight.md`` does for adaptive runs; the interval is the same under "
        "every weight). MAE in points; bold: the least of the row.",
        "",
        "| matrix | protocol | targets | guess | " + " | ".join(names) + " |",
        "|---|---|---:|---:|" + "---:|" * len(names),
    ]
    sums: dict[str, dict[str, float]] = {}
    for row in given:
        maes = row["rules_mae"]
        best = min(maes.values())
        cells = [f"**{maes[k]:.2f}**" if maes[k] == best else f"{maes[k]:.2f}" for k in names]
        lines.append(
            f"| {row['matrix']} | {row['protocol']} | {row['targets']} "
            f"| {100 * row['guessing']:.0f} % | " + " | ".join(cells) + " |"
        )
        for name in names:
            sums.setdefault(row["protocol"], dict.fromkeys(names, 0.0))[name] += maes[name]
    lines += ["", "| protocol: MAE summed over the matrices | " + " | ".join(names) + " |"]
    lines.append("|---|" + "---:|" * len(names))
    for protocol, by_rule in sums.items():
        lines.append(f"| {protocol} | " + " | ".join(f"{by_rule[k]:.2f}" for k in names) + " |")
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--matrices", default=",".join(MATRICES))
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--psn-seeds", default="0,1,2,3,4")
    parser.add_argument("--v1-all", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    start = time.perf_counter()
    seeds = [int(s) for s in args.seeds.split(",")]
    psn_seeds = [int(s) for s in args.psn_seeds.split(",")]
    rows = []
    plan = [(m, p) for m in args.matrices.split(",") for p in args.protocols.split(",")]
    with tqdm(total=len(plan), desc="matrix x protocol") as bar:
        for matrix in args.matrices.split(","):
            values, truth, ids = load_matrix(matrix, args.data)
            chance = given_chance(matrix, ids)
            for protocol in args.protocols.split(","):
                cells = [
                    Cell(matrix, "all", protocol, args.budget, seed)
                    for seed in (psn_seeds if matrix in PSN else seeds)
                ]
                runs = [run_cell(values, truth, ids, c, args.v1_all, chance) for c in cells]
                for mode in runs[0]:
                    parts = [run[mode] for run in runs]
                    row = {"matrix": matrix, "protocol": protocol, "chance": mode}
                    row.update(summarise(parts), rules_mae=rules_mae(parts))
                    rows.append(row)
                bar.update()
    results = {
        "info": {
            "command": "python tools/bench_fit_effect.py " + " ".join(sys.argv[1:]),
            "seconds": time.perf_counter() - start,
            "load_average": ", ".join(f"{x:.2f}" for x in os.getloadavg()),
            "budget": args.budget,
            "seeds": seeds,
            "psn_seeds": psn_seeds,
            "v1_all": args.v1_all,
        },
        "rows": rows,
    }
    write_report(results, args.out)


if __name__ == "__main__":
    main()
