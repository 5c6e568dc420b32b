"""How far a run that cannot be told from guessing should move toward chance: rules compared.

When an adaptive run's answers cannot be told from guessing, the product widens its interval
to the chance-level score and moves the estimate toward it by P(guessing), the posterior at
prior odds 1:4 (``personfit.DEFAULT_PRIOR_GUESS``, ``personfit.widen_for_fit``). At even
prior odds, the rule before, the move halved the error of the weakest fifth after 10 items on
MMLU and Winogrande but raised it on random splits (``bench/adaptive_fit.md``). This script
scores other weights on the same runs, so that a rule change rests on numbers: the interval
is the same under every weight (it spans the estimate, its move and chance), so only the
point estimate differs.

Each rule is applied through the product's own ``widen_for_fit``, with the run's P(guessing)
replaced by the rule's weight (``guess_rules.RULES``):

- ``P(guessing)``: the product's rule (what ``estimate_pool`` prints);
- ``widen only``: no move;
- ``even odds``: P(guessing) at prior odds 1:1, the rule before;
- ``odds beyond even``: max(0, 2 P - 1) of that posterior, the move only as far as the
  answers themselves favour guessing;
- ``prior 0.1``: P(guessing) at prior odds 1:9;
- ``ability sd 2`` / ``ability sd 3``: P(guessing) at the product's prior odds against an
  ordinary model whose ability prior is N(0, 2²) / N(0, 3²) instead of the sources' N(0, 1):
  a model beyond the sources then needs no guessing to explain it (the weakest fifth is).

    python tools/bench_guess_weight.py                    # every pool with chance, 10 and 25 items
    python tools/bench_guess_weight.py --benchmarks musr --protocols weak --out /tmp/check
    python tools/bench_guess_weight.py --merge /tmp/a/guess_weight.json  # into --out's report
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_adaptive import REPO
from bench_adaptive_fit import merge, replayed_runs, report_header, run_cells
from guess_rules import PRODUCT, RULES

from lmeval_microbench._io import write_text_if_changed
from lmeval_microbench.adaptive.pool import posterior_estimate
from lmeval_microbench.personfit import check_estimate, guessing_test, widen_for_fit

BENCHMARKS = ("mmlu", "truthfulqa", "arc", "hellaswag", "winogrande", "musr")  # chance given


ABILITY_SD = {"ability sd 2": 2.0, "ability sd 3": 3.0}  # rules that refit the posterior
NAMES = (*RULES, *ABILITY_SD)


def wide_posteriors(bundle: Any, scores: dict[Any, float]) -> dict[str, float]:
    """P(guessing) of one run under each ``ABILITY_SD`` rule: the product's test on the same
    answers with a wider ability prior (the posterior needs no simulated responders)."""
    ids = list(bundle.item_ids)
    values = np.array([[scores.get(item, np.nan) for item in ids]])
    chance = bundle.person_fit.chance_vector(ids)
    tests = {
        name: guessing_test(bundle.irt, values, ids, chance, n_simulations=1, prior_sd=sd)
        for name, sd in ABILITY_SD.items()
    }
    return {name: float(test.posterior[0]) for name, test in tests.items()}


def read_rules(pool: Any, values: np.ndarray, order: np.ndarray, n: int) -> dict[str, Any]:
    """Each run's first ``n`` answers read under every rule (fractions), with its flag and
    its P(guessing)."""
    ids, spec = pool.item_ids, pool.bundle.person_fit
    read: dict[str, list[tuple[float, float, float]]] = {name: [] for name in NAMES}
    guessing, posterior = [], []
    for answers, asked in zip(values, order[:, :n], strict=True):
        scores = {ids[j]: float(answers[j]) for j in asked}
        raw, _, _ = posterior_estimate(pool, scores)
        _, fit, _ = check_estimate(pool.bundle, scores, raw)  # the fit estimate_pool checks
        p = fit.guess_posterior if np.isfinite(fit.guess_posterior) else 1.0
        reported = dict.fromkeys(NAMES, raw)  # an unflagged run is never moved
        if fit.guessing:
            weights = {name: rule(p) for name, rule in RULES.items()}
            weights.update(wide_posteriors(pool.bundle, scores))
            for name, weight in weights.items():
                weighted = replace(fit, guess_posterior=weight)
                moved = widen_for_fit(raw, weighted, spec.chance_score, stand_in=spec.stand_in)
                reported[name] = moved[0]
        for name, estimate in reported.items():
            read[name].append((estimate.value, estimate.lower, estimate.upper))
        guessing.append(fit.guessing)
        posterior.append(p)
    return {
        "rules": {name: np.array(rows).T for name, rows in read.items()},
        "guessing": np.array(guessing),
        "posterior": np.array(posterior),
    }


def score_rules(part: dict[str, Any], truth: np.ndarray) -> dict[str, Any]:
    """MAE and bias (points) per rule; coverage and width, the same under every rule."""
    intervals = [(rows[1], rows[2]) for rows in part["rules"].values()]
    lower, upper = intervals[0]
    same = all(np.allclose(lo, lower) and np.allclose(hi, upper) for lo, hi in intervals)
    flagged = part["posterior"][part["guessing"]]
    return {
        "targets": int(truth.size),
        "mae": {k: float(100 * np.mean(np.abs(v[0] - truth))) for k, v in part["rules"].items()},
        "bias": {k: float(100 * np.mean(v[0] - truth)) for k, v in part["rules"].items()},
        "coverage": float(np.mean((lower <= truth + 1e-12) & (truth - 1e-12 <= upper))),
        "width": float(100 * np.mean(upper - lower)),
        "same_interval": bool(same),
        "guessing": float(np.mean(part["guessing"])),
        "median_posterior": float(np.median(flagged)) if flagged.size else None,
    }


def run_protocol(bm: str, matrix: Any, truth: np.ndarray, protocol: str, args: Any) -> list[dict]:
    budgets = tuple(args.items)
    pool, values, result, target_truth, _ = replayed_runs(
        bm, matrix, truth, protocol, args, budgets
    )
    rows = []
    for n in budgets:
        part = read_rules(pool, values, result.order, n)
        rows.append({"benchmark": bm, "protocol": protocol, "items": n})
        rows[-1].update(score_rules(part, target_truth))
    return rows


def totals(rows: list[dict]) -> dict[str, dict[str, dict[str, float]]]:
    """Per protocol x items and rule: MAE summed over benchmarks, the number of benchmarks
    where the rule is within 0.1 points of the best rule, and those where it is more than 0.1
    points better / worse than the product's rule."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for row in rows:
        key = f"{row['protocol']} {row['items']}"
        best, product = min(row["mae"].values()), row["mae"][PRODUCT]
        for name, mae in row["mae"].items():
            entry = out.setdefault(key, {}).setdefault(
                name, {"sum": 0.0, "near_best": 0, "better": 0, "worse": 0}
            )
            entry["sum"] += mae
            entry["near_best"] += int(mae <= best + 0.1)
            entry["better"] += int(mae < product - 0.1)
            entry["worse"] += int(mae > product + 0.1)
    return out


def write_report(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    results["totals"] = totals(results["rows"])
    write_text_if_changed(out / "guess_weight.json", json.dumps(results, indent=1) + "\n")
    info = results["info"]
    names = list(NAMES)
    title = "How far a run that cannot be told from guessing should move toward chance"
    lines = report_header(title, info, __doc__)
    lines += [
        f"Splits and runs as in ``bench/adaptive_fit.md`` (seed {info['seed']}, at most "
        f"{info['max_targets']} held-out models per protocol). MAE in points per rule; cov and "
        "width: the 90 % interval, the same under every rule ('same' says so); guess: share "
        "of runs flagged as guessing (only those move); P med: their median P(guessing).",
        "",
        "| benchmark | protocol | items | targets | guess | P med | "
        + " | ".join(names)
        + " | cov | width | same |",
        "|---|---|---:|---:|---:|---:|" + "---:|" * len(names) + "---:|---:|---|",
    ]
    for row in results["rows"]:
        p_med = "-" if row["median_posterior"] is None else f"{row['median_posterior']:.2f}"
        best = min(row["mae"].values())
        maes = [
            f"**{row['mae'][k]:.2f}**" if row["mae"][k] == best else f"{row['mae'][k]:.2f}"
            for k in names
        ]
        lines.append(
            f"| {row['benchmark']} | {row['protocol']} | {row['items']} | {row['targets']} "
            f"| {100 * row['guessing']:.0f} % | {p_med} | "
            + " | ".join(maes)
            + f" | {row['coverage']:.2f} | {row['width']:.1f} | "
            f"{'yes' if row['same_interval'] else 'NO'} |"
        )
    lines += [
        "",
        "Per protocol and items: MAE summed over the benchmarks above, and in brackets the "
        "number of benchmarks where the rule is within 0.1 points of the best one, and where "
        f"it is more than 0.1 points better / worse than the product's rule ({PRODUCT}).",
        "",
        "| protocol, items | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for key, by_rule in results["totals"].items():
        cells = [
            f"{r['sum']:.2f} ({r['near_best']}; {r['better']}/{r['worse']})"
            for r in (by_rule[k] for k in names)
        ]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    write_text_if_changed(out / "guess_weight.md", "\n".join(lines) + "\n")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO / ".." / "shared" / "data")
    parser.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    parser.add_argument("--protocols", default="random,weak,extrapolation")
    parser.add_argument("--items", type=int, nargs="+", default=[10, 25])
    parser.add_argument("--max-targets", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument("--merge", type=Path, nargs="+", default=[])
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.merge:
        merge(args.out, args.merge, name="guess_weight", write=write_report)
        return
    run_cells(args, argv, run_protocol, write_report, tool="bench_guess_weight")


if __name__ == "__main__":
    main()
