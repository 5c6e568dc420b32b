"""Coarse-to-fine ranking vs flat micro subsets on Open LLM Leaderboard v1 (replay).

Per benchmark and population size, ``--draws`` times: draw the population (the models to
rank) at random, the other models (at most ``--max-sources``) are sources; run
``microbench rank``'s rounds (Flash-HELM tiers and level caps, levels doubling to every
matrix item) and compare the ranking with the true full-benchmark ranking. Beside it, on the
same draw:

* ``no caps``: the same rounds without the tiers' level caps (every unresolved model climbs
  to the last level; the default before the caps);
* ``flat-equal``: one static subset of ``items spent / population`` items (same method and
  estimator) for every model: the same total items spent flat;
* ``flat-all``: every model on every matrix item (what the rounds can spend at most).

Reported per configuration: mean Kendall tau and top-10 agreement with the full ranking,
their DIoR over the draws (lower end of the 95 % interval; the decision drawn is the
population, the source models and the item order/selection), the share of models whose
true rank lies in the rank interval (``simulate`` intervals drive the rounds; ``overlap``
intervals are recomputed on the same estimates), and mean rank error per true-rank tier.

Writes ``bench/rank.json``, ``bench/rank.md`` and ``bench/rank.png`` (``--stem`` names
another report). Run::

    python tools/bench_rank.py --shared ../shared/data
    python tools/bench_rank.py --benchmarks arc --populations 3 --draws 20 --stem rank_few
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_reliability import load_openllm

from lmeval_microbench._io import write_json_atomic, write_text_if_changed
from lmeval_microbench.rank import RoundOptions, decision_impact, parse_tiers, run_rounds
from lmeval_microbench.rank.evaluation import ranking_quality
from lmeval_microbench.rank.intervals import rank_intervals
from lmeval_microbench.rank.replay import (
    ReplayEvaluator,
    default_levels,
    fit_on,
    select_subset,
    split_population,
)

BENCHMARKS = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")
ROOT = Path(__file__).resolve().parent.parent


def flat_rows(ev: ReplayEvaluator, budget: int, method: str, seed: int) -> list[dict[str, Any]]:
    """Estimates of the population from one static subset of ``budget`` items."""
    subset = select_subset(method, ev.source, ev.truth, budget, seed)
    fitted = fit_on(ev.estimator, ev.source, ev.truth, subset.item_ids, ev.irt)
    value, lower, upper = fitted.estimate_matrix(ev.population, level=0.9)
    ranks = rank_intervals(value, lower, upper, seed=seed)
    return [
        {
            "model": m,
            "estimate": float(v),
            "rank": int(r),
            "rank_low": int(lo),
            "rank_high": int(hi),
        }
        for m, v, r, lo, hi in zip(
            ev.population.model_ids, value, ranks.rank, ranks.low, ranks.high, strict=True
        )
    ]


def overlap_coverage(rows: list[dict[str, Any]], truth: dict[str, float]) -> float:
    """Rank-interval coverage of ``overlap`` intervals on the rounds' final estimates."""
    value, lower, upper = (np.array([r[k] for r in rows]) for k in ("estimate", "lower", "upper"))
    ranks = rank_intervals(value, lower, upper, method="overlap")
    recomputed = [
        {**r, "rank_low": int(lo), "rank_high": int(hi)}
        for r, lo, hi in zip(rows, ranks.low, ranks.high, strict=True)
    ]
    return ranking_quality(recomputed, truth)["rank_coverage"]


def one_draw(matrix, truth, n_pop: int, seed: int, args) -> dict[str, Any]:
    src, src_truth, pop, pop_truth = split_population(
        matrix, truth, n_pop, seed=seed, max_sources=args.max_sources
    )
    ev = ReplayEvaluator(
        src,
        src_truth,
        pop,
        levels=default_levels(matrix.n_items, args.first_items),
        method=args.method,
        estimator=args.estimator,
        seed=seed,
    )
    tiers = parse_tiers(args.tiers)
    ranking = run_rounds(ev, pop.model_ids, RoundOptions(tiers, seed=seed))
    uncapped = run_rounds(ev, pop.model_ids, RoundOptions(tiers, level_caps=False, seed=seed))
    truth_of = dict(zip(pop.model_ids, pop_truth.tolist(), strict=True))
    equal = max(1, round(ranking.items_spent / n_pop))
    configs = {
        "coarse-to-fine": ranking.models,
        "no-caps": uncapped.models,
        "flat-equal": flat_rows(ev, equal, args.method, seed),
        "flat-all": flat_rows(ev, ev.levels[-1], args.method, seed),
    }
    out: dict[str, Any] = {"items_spent": ranking.items_spent, "flat_equal_budget": equal}
    out["no_caps_items_spent"] = uncapped.items_spent
    out["levels"] = list(ev.levels)
    for name, rows in configs.items():
        out[name] = ranking_quality(rows, truth_of, tiers=tiers)
        out[name]["pairs"] = ([r["estimate"] for r in rows], [truth_of[r["model"]] for r in rows])
    out["coarse-to-fine"]["overlap_coverage"] = overlap_coverage(ranking.models, truth_of)
    return out


def summarise(draws: list[dict[str, Any]], n_pop: int, n_items: int) -> dict[str, Any]:
    spent = float(np.mean([d["items_spent"] for d in draws]))
    summary: dict[str, Any] = {
        "population": n_pop,
        "draws": len(draws),
        "items_spent": spent,
        "flat_all_items": n_pop * n_items,
        "share_of_flat_all": spent / (n_pop * n_items),
        "no_caps_share_of_flat_all": float(np.mean([d["no_caps_items_spent"] for d in draws]))
        / (n_pop * n_items),
        "flat_equal_budget": float(np.mean([d["flat_equal_budget"] for d in draws])),
    }
    for name in ("coarse-to-fine", "no-caps", "flat-equal", "flat-all"):
        parts = [d[name] for d in draws]
        impact = decision_impact([tuple(map(np.asarray, p["pairs"])) for p in parts], k=10)
        summary[name] = {
            "kendall_tau": impact.tau_mean,
            "tau_dior": impact.tau_dior,
            "top10": impact.top_k_mean,
            "top10_dior": impact.top_k_dior,
            "rank_coverage": float(np.mean([p["rank_coverage"] for p in parts])),
            "rank_coverage_min": float(np.min([p["rank_coverage"] for p in parts])),
            "rank_width": float(np.mean([p["rank_width"] for p in parts])),
            "rank_error": {
                tier: float(np.mean([p["rank_error"].get(tier, np.nan) for p in parts]))
                for tier in parts[0]["rank_error"]
            },
        }
    summary["coarse-to-fine"]["overlap_coverage"] = float(
        np.mean([d["coarse-to-fine"]["overlap_coverage"] for d in draws])
    )
    c2f, equal, full = (summary[k] for k in ("coarse-to-fine", "flat-equal", "flat-all"))
    summary["targets"] = {
        "equal_items_top10_and_tau": bool(
            c2f["top10"] >= equal["top10"] and c2f["kendall_tau"] >= equal["kendall_tau"]
        ),
        "flat_all_top10_for_half_items": bool(
            c2f["top10"] >= full["top10"] and summary["share_of_flat_all"] <= 0.5
        ),
        "rank_coverage_90": bool(c2f["rank_coverage"] >= 0.9),
    }
    return summary


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "## Ranking many models: coarse-to-fine (Flash-HELM tiers) vs flat subsets",
        "",
        f"`{report['command']}` ({report['seconds']:.0f} s). Method `{report['method']}`, "
        f"estimator `{report['estimator']}`, tiers `{report['tiers']}`, "
        f"{report['draws']} draws of population, sources and item order per row. "
        "tau / top10: mean Kendall tau and top-10 agreement with the true full-benchmark "
        "ranking; DIoR: lower end of their 95 % interval over the draws; cover: share of models "
        "whose true rank is in the rank interval (simulate; overlap in brackets); items: share "
        "of flat-all (every model on every matrix item). flat-equal spends the same total "
        "items as coarse-to-fine, as one static subset per model. no caps: the same rounds "
        "without the tiers' level caps (items, tau, top10).",
        "",
        "| benchmark | models | items | c2f tau (DIoR) | c2f top10 (DIoR) | cover | "
        "no caps | flat-equal k | flat-equal tau (DIoR) | flat-equal top10 (DIoR) | "
        "flat-all tau | flat-all top10 | rank error 1-4 / 5-9 / 10-19 (c2f) | targets met |",
        "|---|---:|---:|---|---|---|---|---:|---|---|---:|---:|---|---|",
    ]
    for row in report["rows"]:
        c2f, eq, full = row["coarse-to-fine"], row["flat-equal"], row["flat-all"]
        free = row["no-caps"]
        err = c2f["rank_error"]
        met = [k for k, ok in row["targets"].items() if ok]
        lines.append(
            f"| {row['benchmark']} | {row['population']} | {row['share_of_flat_all']:.0%} | "
            f"{c2f['kendall_tau']:.3f} ({c2f['tau_dior']:.3f}) | "
            f"{c2f['top10']:.2f} ({c2f['top10_dior']:.2f}) | "
            f"{c2f['rank_coverage']:.2f} ({c2f['overlap_coverage']:.2f}) | "
            f"{row['no_caps_share_of_flat_all']:.0%}, {free['kendall_tau']:.3f}, "
            f"{free['top10']:.2f} | {row['flat_equal_budget']:.0f} | "
            f"{eq['kendall_tau']:.3f} ({eq['tau_dior']:.3f}) | "
            f"{eq['top10']:.2f} ({eq['top10_dior']:.2f}) | {full['kendall_tau']:.3f} | "
            f"{full['top10']:.2f} | "
            + " / ".join(f"{err.get(t, float('nan')):.1f}" for t in ("1-4", "5-9", "10-19"))
            + f" | {', '.join(met) or 'none'} |"
        )
    lines += ["", *verdict(report["rows"])]
    return "\n".join(lines) + "\n"


def verdict(rows: list[dict[str, Any]]) -> list[str]:
    count = {k: sum(r["targets"][k] for r in rows) for k in rows[0]["targets"]}
    top_only = sum(r["coarse-to-fine"]["top10"] >= r["flat-equal"]["top10"] for r in rows)
    uncapped = sum(
        r["no-caps"]["top10"] >= r["flat-all"]["top10"] and r["no_caps_share_of_flat_all"] <= 0.5
        for r in rows
    )
    return [
        f"Top-10 agreement at least flat-equal's at equal items: {top_only} of {len(rows)} rows "
        "(the rounds spend the items on the top, so tau over all models is usually lower).",
        "",
        f"Targets, rows meeting each of {len(rows)}: top-10 and tau at least flat-equal's at "
        f"equal items: {count['equal_items_top10_and_tau']}; flat-all's top-10 for at most "
        f"half its items: {count['flat_all_top10_for_half_items']}; rank intervals hold for "
        f">= 90 % of models: {count['rank_coverage_90']}. Without the level caps, flat-all's "
        f"top-10 for at most half its items: {uncapped}.",
    ]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--benchmarks", default=",".join(BENCHMARKS))
    parser.add_argument("--populations", default="100,200")
    parser.add_argument("--draws", type=int, default=8)
    parser.add_argument("--max-sources", type=int, default=800)
    parser.add_argument("--method", default="random")
    parser.add_argument("--estimator", default="ridge")
    parser.add_argument("--first-items", type=int, default=None)
    parser.add_argument("--tiers", default="1-4,5-9,10-19,20-50,51-")
    parser.add_argument("--out", type=Path, default=ROOT / "bench")
    parser.add_argument(
        "--stem", default="rank", help="file names of the report: STEM.json, STEM.md, STEM.png"
    )
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    data = args.shared / "openllm_v1"
    if not data.is_dir():
        sys.exit(f"no Open LLM Leaderboard data at {data}; pass --shared")
    warnings.simplefilter("ignore")
    started = time.perf_counter()
    rows = []
    for benchmark in args.benchmarks.split(","):
        matrix, truth, _ = load_openllm(data, benchmark)
        for n_pop in (int(p) for p in args.populations.split(",")):
            draws = [one_draw(matrix, truth, n_pop, seed, args) for seed in range(args.draws)]
            row = {"benchmark": benchmark, **summarise(draws, n_pop, matrix.n_items)}
            row["levels"] = draws[0]["levels"]
            rows.append(row)
            print(benchmark, n_pop, json.dumps(row["targets"]), flush=True)
    report = {
        "command": "python tools/bench_rank.py " + " ".join(sys.argv[1:]),
        "seconds": time.perf_counter() - started,
        "method": args.method,
        "estimator": args.estimator,
        "tiers": args.tiers,
        "draws": args.draws,
        "max_sources": args.max_sources,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(args.out / f"{args.stem}.json", report)
    write_text_if_changed(args.out / f"{args.stem}.md", markdown(report))
    plot(rows, args.out / f"{args.stem}.png")


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Top-10 agreement against the share of flat-all items, per benchmark and population."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4))
    ax = figure.add_subplot()
    for row in rows:
        label = f"{row['benchmark']} {row['population']}"
        x = [row["flat_equal_budget"] * row["population"] / row["flat_all_items"], 1.0]
        ax.plot(x, [row["flat-equal"]["top10"], row["flat-all"]["top10"]], "--", color="grey")
        (dot,) = ax.plot(row["share_of_flat_all"], row["coarse-to-fine"]["top10"], "o", label=label)
        ax.plot(
            row["no_caps_share_of_flat_all"], row["no-caps"]["top10"], "x", color=dot.get_color()
        )
    ax.set_xlabel("items spent / flat-all items")
    ax.set_ylabel("top-10 agreement with full ranking")
    ax.set_title("coarse-to-fine (dots; x: no level caps) vs flat subsets (dashed)", fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
