"""How far a run that cannot be told from guessing should move toward chance: rules compared.

When an adaptive run's answers cannot be told from guessing, the product widens its interval
to the chance-level score and moves the estimate toward it by P(guessing), the posterior at
prior odds 1:4 (``personfit.DEFAULT_PRIOR_GUESS``, ``personfit.widen_for_fit``) against an
ordinary model with the ability prior N(0, 3²) (``personfit.POSTERIOR_ABILITY_SD``). At even
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
- ``ability sd 1 (before)`` / ``ability sd 2``: P(guessing) at the product's prior odds
  against an ordinary model whose ability prior is the sources' N(0, 1) (the product's rule
  until sd 3 replaced it, ``bench/guess_weight_before_sd3.md``) / N(0, 2²) instead of
  N(0, 3²): the narrower the prior, the more a model beyond the sources needs guessing to
  explain it (the weakest fifth does);
- ``sources' base rate``: P(guessing) at the prior the split's own sources give, the share
  of guessers among them that best explains their answers on the whole pool
  (``guess_rules.sources_base_rate``): one prior per pool instead of one for all.

Every rule is also read on random responders (``--guessers`` per pool and protocol, each
pool item right with its chance level, the same max-information runs): a weight that spares
leaderboard models a wrong move leaves true guessers further from chance, and a user cannot
tell which kind of model they hold, so both sides are measured on the same pools.

    python tools/bench_guess_weight.py                    # every pool with chance, 10 and 25 items
    python tools/bench_guess_weight.py --benchmarks musr --protocols weak --out /tmp/check
    python tools/bench_guess_weight.py --merge /tmp/a/guess_weight.json  # into --out's report
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_adaptive import REPO
from bench_adaptive_fit import (
    max_info_runs,
    merge,
    replayed_runs,
    report_header,
    run_cells,
)
from bench_random_models import random_answers
from guess_rules import (
    ABILITY_SD,
    PRODUCT,
    RULES,
    at_prior,
    sources_base_rate,
    wide_posteriors,
)

from lmeval_microbench._io import write_text_if_changed
from lmeval_microbench.adaptive.pool import posterior_estimate
from lmeval_microbench.personfit import (
    DEFAULT_PRIOR_GUESS,
    POSTERIOR_ABILITY_SD,
    check_estimate,
    guessing_test,
    widen_for_fit,
)

BENCHMARKS = ("mmlu", "truthfulqa", "arc", "hellaswag", "winogrande", "musr")  # chance given


BASE_RATE = "sources' base rate"  # the rule whose prior the pool's sources give
NAMES = (*RULES, *ABILITY_SD, BASE_RATE)


def run_wide_posteriors(bundle: Any, scores: dict[Any, float]) -> dict[str, float]:
    """P(guessing) of one run under each ``ABILITY_SD`` rule."""
    ids = list(bundle.item_ids)
    values = np.array([[scores.get(item, np.nan) for item in ids]])
    chance = bundle.person_fit.chance_vector(ids)
    wide = wide_posteriors(bundle.irt, values, ids, chance)
    return {name: float(posterior[0]) for name, posterior in wide.items()}


def pool_base_rate(pool: Any, sources: Any) -> float:
    """The share of guessers among the pool's ``sources`` (the matrix its IRT was fitted on),
    from their answers on every pool item."""
    ids = list(pool.item_ids)
    values = sources.values[:, sources.item_positions(ids)]
    chance = pool.bundle.person_fit.chance_vector(ids)
    test = guessing_test(  # the likelihood ratio of the product's posterior
        pool.bundle.irt, values, ids, chance, n_simulations=1, prior_sd=POSTERIOR_ABILITY_SD
    )
    return sources_base_rate(test.log_ratio)


def read_rules(
    pool: Any,
    values: np.ndarray,
    order: np.ndarray,
    n: int,
    *,
    base_rate: float = DEFAULT_PRIOR_GUESS,
) -> dict[str, Any]:
    """Each run's first ``n`` answers read under every rule (fractions), with its flag and
    its P(guessing); ``base_rate``: the prior of the ``BASE_RATE`` rule."""
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
            weights.update(run_wide_posteriors(pool.bundle, scores))
            weights[BASE_RATE] = at_prior(base_rate)(p)
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


def covered(lower: np.ndarray, upper: np.ndarray, value: Any) -> float:
    """Share of intervals ``[lower, upper]`` holding ``value`` (one per interval, or one for
    all), ends included up to rounding."""
    return float(np.mean((lower <= value + 1e-12) & (value - 1e-12 <= upper)))


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
        "coverage": covered(lower, upper, truth),
        "width": float(100 * np.mean(upper - lower)),
        "same_interval": bool(same),
        "guessing": float(np.mean(part["guessing"])),
        "median_posterior": float(np.median(flagged)) if flagged.size else None,
    }


def score_guessers(part: dict[str, Any], chance_score: float) -> dict[str, Any]:
    """Random responders under each rule: the mean distance (points) of the estimate from
    the chance score, the share of intervals holding it (one interval for every rule) and
    the share flagged."""
    lower, upper = part["rules"][PRODUCT][1:]
    return {
        "responders": int(lower.size),
        "distance": {
            k: float(100 * np.mean(np.abs(v[0] - chance_score))) for k, v in part["rules"].items()
        },
        "coverage": covered(lower, upper, chance_score),
        "guessing": float(np.mean(part["guessing"])),
    }


def run_protocol(bm: str, matrix: Any, truth: np.ndarray, protocol: str, args: Any) -> list[dict]:
    """Rows (one per budget) of one benchmark x protocol: the held-out models' runs and the
    runs of ``args.guessers`` random responders on the same pool, read under every rule."""
    budgets = tuple(args.items)
    pool, values, result, target_truth, _, sources = replayed_runs(
        bm, matrix, truth, protocol, args, budgets
    )
    base_rate = pool_base_rate(pool, sources)
    spec = pool.bundle.person_fit
    guessers = random_answers(spec.chance_vector(list(pool.item_ids)), args.guessers, args.seed)
    guessed = max_info_runs(pool, guessers, budgets)
    rows = []
    for n in budgets:
        part = read_rules(pool, values, result.order, n, base_rate=base_rate)
        rows.append({"benchmark": bm, "protocol": protocol, "items": n, "base_rate": base_rate})
        rows[-1].update(score_rules(part, target_truth))
        by_guessers = read_rules(pool, guessers, guessed.order, n, base_rate=base_rate)
        rows[-1]["guessers"] = score_guessers(by_guessers, spec.chance_score)
    return rows


def leaderboard_mae(row: dict[str, Any]) -> dict[str, float]:
    """A row's held-out leaderboard models' MAE per rule."""
    return row["mae"]


def guesser_distance(row: dict[str, Any]) -> dict[str, float]:
    """A row's random responders' distance from chance per rule."""
    return row["guessers"]["distance"]


def totals(
    rows: list[dict], errors: Callable[[dict], dict[str, float]] = leaderboard_mae
) -> dict[str, dict[str, dict[str, float]]]:
    """Per protocol x items and rule: the ``errors`` of each row (MAE, or another error per
    rule) summed over benchmarks, the number of benchmarks where the rule is within 0.1
    points of the best rule, and those where it is more than 0.1 points better / worse than
    the product's rule."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for row in rows:
        key = f"{row['protocol']} {row['items']}"
        by_rule = errors(row)
        best, product = min(by_rule.values()), by_rule[PRODUCT]
        for name, mae in by_rule.items():
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
    results["guesser_totals"] = totals(results["rows"], guesser_distance)
    write_text_if_changed(out / "guess_weight.json", json.dumps(results, indent=1) + "\n")
    info = results["info"]
    names = list(NAMES)
    title = "How far a run that cannot be told from guessing should move toward chance"
    lines = report_header(title, info, __doc__)
    lines += [
        f"Splits and runs as in ``bench/adaptive_fit.md`` (seed {info['seed']}, at most "
        f"{info['max_targets']} held-out models per protocol). MAE in points per rule; cov and "
        "width: the 90 % interval, the same under every rule ('same' says so); guess: share "
        "of runs flagged as guessing (only those move); P med: their median P(guessing); "
        f"rate: the prior of the {BASE_RATE!r} rule, the share of guessers among the split's "
        "sources that best explains their answers on the whole pool.",
        "",
        "| benchmark | protocol | items | targets | guess | P med | rate | "
        + " | ".join(names)
        + " | cov | width | same |",
        "|---|---|---:|---:|---:|---:|---:|" + "---:|" * len(names) + "---:|---:|---|",
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
            f"| {100 * row['guessing']:.0f} % | {p_med} | {100 * row['base_rate']:.1f} % | "
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
    lines += totals_lines(results["totals"], names)
    lines += guesser_lines(results, names)
    write_text_if_changed(out / "guess_weight.md", "\n".join(lines) + "\n")


def totals_lines(summed: dict[str, Any], names: list[str]) -> list[str]:
    """Rows of a totals table, one per protocol x items."""
    return [
        f"| {key} | "
        + " | ".join(
            f"{r['sum']:.2f} ({r['near_best']}; {r['better']}/{r['worse']})"
            for r in (by_rule[k] for k in names)
        )
        + " |"
        for key, by_rule in summed.items()
    ]


def guesser_lines(results: dict[str, Any], names: list[str]) -> list[str]:
    """The random responders' tables: per row, then summed."""
    count = results["rows"][0]["guessers"]["responders"]
    lines = [
        "",
        f"Random responders on the same pools ({count} per pool and protocol, each pool item "
        "right with its chance level; the same max-information runs): the mean distance in "
        "points of the estimate from the chance score under each rule (lower: the move "
        "reaches chance); cov: share of their intervals that hold the chance score (the same "
        "under every rule); guess: share flagged as guessing.",
        "",
        "| benchmark | protocol | items | guess | cov | " + " | ".join(names) + " |",
        "|---|---|---:|---:|---:|" + "---:|" * len(names),
    ]
    for row in results["rows"]:
        g = row["guessers"]
        lines.append(
            f"| {row['benchmark']} | {row['protocol']} | {row['items']} "
            f"| {100 * g['guessing']:.0f} % | {g['coverage']:.2f} | "
            + " | ".join(f"{g['distance'][k]:.2f}" for k in names)
            + " |"
        )
    lines += [
        "",
        "Their distances summed over the benchmarks, as the MAE above (in brackets: within "
        f"0.1 points of the best rule; more than 0.1 points better / worse than {PRODUCT}).",
        "",
        "| protocol, items | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    return lines + totals_lines(results["guesser_totals"], names)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO / ".." / "shared" / "data")
    parser.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    parser.add_argument("--protocols", default="random,weak,extrapolation")
    parser.add_argument("--items", type=int, nargs="+", default=[10, 25])
    parser.add_argument("--max-targets", type=int, default=50)
    parser.add_argument("--guessers", type=int, default=50, help="random responders per pool")
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
