"""Person-fit flags on real leaderboard data: false alarms, random responders, weakest models.

Per shipped benchmark: one random 80/20 split of the Open LLM v1 models
(``reliability.random_splits``, seed 0); items, IRT and the default estimator are built on
the 80 % with the shipped recipe of ``bench/defaults.json`` (selection, budget, estimator);
the l_z* threshold is a low quantile (``--lz-quantile``, 4 %) over those source models.
Measured on the 20 % held-out models: the share flagged among ordinary models (more than
5 points above chance: false alarms), and among the weakest (true full score within 5
points of chance) the share flagged and whether the interval, widened by
``widen_for_fit``, contains the true full score. Simulated random responders answer each
item right with its chance probability. pythia-14m's real answers (``lm_eval_samples``)
are a tiny real model.

    python tools/bench_personfit.py --shared /work/shared/data
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_reliability import load_openllm

from lmeval_microbench import personfit as pf
from lmeval_microbench._types import Estimate
from lmeval_microbench.build import fit_source_irt
from lmeval_microbench.estimators import make_estimator
from lmeval_microbench.reliability import random_splits
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import make_selector

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")
CHANCE_SCORE = {
    "arc": 0.25,
    "hellaswag": 0.25,
    "mmlu": 0.25,
    "truthfulqa": 0.22,
    "winogrande": 0.5,
    "gsm8k": 0.0,
}
"""Full-benchmark score of a random responder (truthfulqa mc1: about the mean 1/choices)."""
PYTHIA_METRIC = {
    "arc": "acc_norm",
    "hellaswag": "acc_norm",
    "mmlu": "acc",
    "truthfulqa": "acc",
    "winogrande": "acc",
    "gsm8k": "exact_match",
}
WEAK_MARGIN = 0.05
ALPHAS = (0.05, 0.01)


def item_chance(
    data: Path, bm: str, ids: list[str], source: ResponseMatrix, truth: np.ndarray
) -> tuple[np.ndarray, str]:
    """Per-item chance level of the subset items, and how it was obtained."""
    if bm in ("hellaswag", "mmlu"):
        return np.full(len(ids), 0.25), "1/4 (four choices)"
    if bm == "winogrande":
        return np.full(len(ids), 0.5), "1/2 (two options)"
    if bm in ("arc", "truthfulqa"):
        items = pd.read_parquet(data / "items" / f"{bm}-secondary.parquet")
        if bm == "arc":
            counts = {
                f"arc.{i}": len(c["label"])
                for i, c in zip(items.metabench_idx, items.choices, strict=True)
            }
        else:
            counts = {
                f"truthfulqa.{i}": len(t["labels"])
                for i, t in zip(items.metabench_idx, items.mc1_targets, strict=True)
            }
        return np.array([1.0 / counts[i] for i in ids]), "1 / number of choices per item"
    values = source.values[:, source.item_positions(ids)]
    floor = pf.population_floor(values, truth, 0.05)
    return floor, "item rate among the weakest 5 % of source models (no choices)"


def pythia_scores(data: Path, bm: str) -> dict[str, float]:
    (path,) = glob.glob(str(data / "lm_eval_samples" / "pythia-14m" / f"*{bm}_secondary*"))
    scores: dict[str, float] = {}
    for line in open(path, encoding="utf-8"):
        record = json.loads(line)
        doc = record["doc"]
        key = f"mmlu.{doc['mb_sub_idx']}" if bm == "mmlu" else f"{bm}.{doc['metabench_idx']}"
        scores.setdefault(key, float(record[PYTHIA_METRIC[bm]]))
    return scores


def _share(mask: np.ndarray) -> float | None:
    return float(np.mean(mask)) if mask.size else None


def _covers(lower: np.ndarray, upper: np.ndarray, x: np.ndarray | float) -> np.ndarray:
    return (lower <= x) & (x <= upper)


def _widened(
    fits: list[pf.PersonFit],
    value: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    chance_score: float,
) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = lower.copy(), upper.copy()
    for k, fit in enumerate(fits):
        est, _ = pf.widen_for_fit(Estimate(value[k], lower[k], upper[k]), fit, chance_score)
        lo[k], hi[k] = est.lower, est.upper
    return lo, hi


def run_benchmark(
    data: Path, bm: str, recipe: dict[str, Any], n_sims: int, seed: int, quantile: float
) -> dict[str, Any]:
    started = time.time()
    matrix, truth, _ = load_openllm(data / "openllm_v1", bm)
    split = next(random_splits(matrix, truth, repeats=1, seed=seed))
    source, target = split.source, split.target
    subset = make_selector(recipe["method"]).select(
        source, recipe["budget"], seed=split.selection_seed, target=split.source_truth
    )
    irt = fit_source_irt(source, seed=split.irt_seed)
    estimator = make_estimator(recipe["estimator"]).fit(source, subset, split.source_truth, irt=irt)
    ids = list(subset.item_ids)
    chance, chance_note = item_chance(data / "openllm_v1", bm, ids, source, split.source_truth)
    chance_score = CHANCE_SCORE[bm]
    src_values = source.values[:, source.item_positions(ids)]
    threshold = pf.calibrate_lz_threshold(irt, src_values, ids, false_alarm=quantile)

    def evaluate(values: np.ndarray, sim_seed: int) -> dict[str, Any]:
        rows = ResponseMatrix(values, [f"m{k}" for k in range(len(values))], ids)
        value, lower, upper = estimator.estimate_matrix(rows)
        out: dict[str, Any] = {"value": value, "lower": lower, "upper": upper}
        for alpha in ALPHAS:
            fits = pf.person_fit(
                irt, values, ids, chance, lz_threshold=threshold, alpha=alpha, seed=sim_seed
            )
            out[alpha] = fits
            out[("wide", alpha)] = _widened(fits, value, lower, upper, chance_score)
        return out

    held = evaluate(target.values[:, target.item_positions(ids)], seed + 1)
    truth_t = split.target_truth
    ordinary = truth_t > chance_score + WEAK_MARGIN
    weak = ~ordinary
    rng = np.random.default_rng(seed + 2)
    random_values = (rng.random((n_sims, len(ids))) < chance).astype(np.float64)
    rand = evaluate(random_values, seed + 3)

    result: dict[str, Any] = {
        "recipe": recipe,
        "chance_score": chance_score,
        "chance_items": chance_note,
        "mean_item_chance": float(np.mean(chance)),
        "n_source": int(source.n_models),
        "n_heldout": int(target.n_models),
        "n_heldout_ordinary": int(ordinary.sum()),
        "n_heldout_weak": int(weak.sum()),
        "lz_threshold": threshold,
        "lz_quantile": quantile,
        "n_random": n_sims,
    }
    lz_held = np.array([f.lz for f in held[ALPHAS[0]]])
    result["false_alarm_lz_all"] = _share(lz_held < threshold)
    result["false_alarm_lz_ordinary"] = _share(lz_held[ordinary] < threshold)
    lz_rand = np.array([f.lz for f in rand[ALPHAS[0]]])
    result["random_lz_flagged"] = _share(lz_rand < threshold)
    base_cover_rand = _covers(rand["lower"], rand["upper"], chance_score)
    result["random_interval_contains_chance_before"] = _share(base_cover_rand)
    result["random_estimate_mean"] = float(np.mean(rand["value"]))
    result["heldout_weak_coverage_before"] = _share(
        _covers(held["lower"][weak], held["upper"][weak], truth_t[weak])
    )
    result["heldout_ordinary_coverage_before"] = _share(
        _covers(held["lower"][ordinary], held["upper"][ordinary], truth_t[ordinary])
    )
    for alpha in ALPHAS:
        key = f"alpha_{alpha}"
        fits_h, fits_r = held[alpha], rand[alpha]
        guess_h = np.array([f.guessing for f in fits_h])
        any_h = np.array([f.flagged for f in fits_h])
        guess_r = np.array([f.guessing for f in fits_r])
        any_r = np.array([f.flagged for f in fits_r])
        lo_h, hi_h = held[("wide", alpha)]
        lo_r, hi_r = rand[("wide", alpha)]
        result[key] = {
            "false_alarm_guessing_ordinary": _share(guess_h[ordinary]),
            "false_alarm_any_ordinary": _share(any_h[ordinary]),
            "false_alarm_any_all": _share(any_h),
            "ordinary_coverage_after": _share(
                _covers(lo_h[ordinary], hi_h[ordinary], truth_t[ordinary])
            ),
            "random_guessing_flagged": _share(guess_r),
            "random_any_flagged": _share(any_r),
            "random_interval_contains_chance_after": _share(_covers(lo_r, hi_r, chance_score)),
            "weak_guessing_flagged": _share(guess_h[weak]),
            "weak_any_flagged": _share(any_h[weak]),
            "weak_coverage_after": _share(_covers(lo_h[weak], hi_h[weak], truth_t[weak])),
        }

    scores = pythia_scores(data, bm)
    if all(i in scores for i in ids):
        values = np.array([[scores[i] for i in ids]])
        py = evaluate(values, seed + 4)
        fit = py[ALPHAS[0]][0]
        lo, hi = py[("wide", ALPHAS[0])]
        lo1, hi1 = py[("wide", ALPHAS[1])]
        result["pythia14m"] = {
            "subset_mean": float(values.mean()),
            "estimate": [float(py["value"][0]), float(py["lower"][0]), float(py["upper"][0])],
            "lz": fit.lz,
            "guess_p_value": fit.guess_p_value,
            "guess_posterior": fit.guess_posterior,
            "widened_0.05": [float(lo[0]), float(hi[0])],
            "widened_0.01": [float(lo1[0]), float(hi1[0])],
            "reason": fit.reason,
        }
    result["seconds"] = round(time.time() - started, 1)
    return result


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def render(results: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        "# Person fit: l_z* and the guessing test on Open LLM v1",
        "",
        f"Generated by `python tools/bench_personfit.py --shared {args.shared}"
        f" --sims {args.sims} --seed {args.seed} --lz-quantile {args.lz_quantile}`.",
        "",
        "One random 80/20 split per benchmark (`reliability.random_splits`, seed "
        f"{args.seed}). Items, 2PL IRT and the default estimator are rebuilt on the 80 % "
        "source models with the shipped recipe (`bench/defaults.json`); the l_z* threshold is "
        f"the {100 * args.lz_quantile:g} % quantile of l_z* over those source models (they "
        "shaped the IRT fit and fit a little better than new models). Everything below is "
        "measured on "
        "the 20 % held-out models (never seen by selection, IRT or estimator) and on simulated "
        "random responders (each subset item right with its chance probability). 'Ordinary' "
        f"held-out models are those more than {100 * WEAK_MARGIN:.0f} points above the "
        f"chance-level full score; 'weak' are within {100 * WEAK_MARGIN:.0f} points of it (or "
        "below). A model is flagged 'guessing' when the bootstrap p-value of the guessing "
        "test is >= alpha; its interval is then widened to contain the chance score. Coverage "
        "= share whose interval (nominal 90 %) contains the true full score (all percents).",
        "",
        "| benchmark | chance | items | held-out (ord./weak) | l_z* thr. | l_z* false alarm "
        "all / ord. | random: l_z* flag | random: interval has chance, before |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for bm, r in results.items():
        lines.append(
            f"| {bm} | {100 * r['chance_score']:.0f} | {r['recipe']['budget']} | "
            f"{r['n_heldout']} ({r['n_heldout_ordinary']}/{r['n_heldout_weak']}) | "
            f"{r['lz_threshold']:.2f} | {_pct(r['false_alarm_lz_all'])} / "
            f"{_pct(r['false_alarm_lz_ordinary'])} | {_pct(r['random_lz_flagged'])} | "
            f"{_pct(r['random_interval_contains_chance_before'])} |"
        )
    for alpha in ALPHAS:
        key = f"alpha_{alpha}"
        lines += [
            "",
            f"## Guessing test at alpha = {alpha}",
            "",
            "| benchmark | false alarm ordinary: guessing / any flag | ordinary coverage "
            "before → after | random: guessing / any flag | random: interval has chance "
            "after | weak: guessing / any flag | weak coverage before → after |",
            "|---|---|---|---|---|---|---|",
        ]
        for bm, r in results.items():
            a = r[key]
            lines.append(
                f"| {bm} | {_pct(a['false_alarm_guessing_ordinary'])} / "
                f"{_pct(a['false_alarm_any_ordinary'])} | "
                f"{_pct(r['heldout_ordinary_coverage_before'])} → "
                f"{_pct(a['ordinary_coverage_after'])} | "
                f"{_pct(a['random_guessing_flagged'])} / {_pct(a['random_any_flagged'])} | "
                f"{_pct(a['random_interval_contains_chance_after'])} | "
                f"{_pct(a['weak_guessing_flagged'])} / {_pct(a['weak_any_flagged'])} | "
                f"{_pct(r['heldout_weak_coverage_before'])} → {_pct(a['weak_coverage_after'])} |"
            )
    lines += [
        "",
        "## pythia-14m (real tiny model, lm_eval_samples), estimator rebuilt on the 80 %",
        "",
        "| benchmark | subset mean | estimate [interval] | l_z* | guessing p | P(guess) | "
        "widened (alpha 0.05) | widened (alpha 0.01) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for bm, r in results.items():
        p = r.get("pythia14m")
        if p is None:
            continue
        v, lo, hi = (100 * x for x in p["estimate"])
        w5 = "[" + ", ".join(f"{100 * x:.1f}" for x in p["widened_0.05"]) + "]"
        w1 = "[" + ", ".join(f"{100 * x:.1f}" for x in p["widened_0.01"]) + "]"
        lines.append(
            f"| {bm} | {100 * p['subset_mean']:.1f} | {v:.1f} [{lo:.1f}, {hi:.1f}] | "
            f"{p['lz']:.2f} | {p['guess_p_value']:.3f} | {p['guess_posterior']:.2f} | {w5} | "
            f"{w1} |"
        )
    lines += [
        "",
        "Chance per item: "
        + "; ".join(
            f"{bm}: {r['chance_items']} (mean {100 * r['mean_item_chance']:.1f} %)"
            for bm, r in results.items()
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "personfit")
    parser.add_argument("--sims", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--lz-quantile",
        type=float,
        default=0.04,
        help="quantile of l_z* over source models used as threshold (source models fit a "
        "little better than new ones, having shaped the IRT fit: 0.04 leaves that margin)",
    )
    parser.add_argument("--benchmarks", nargs="*", default=list(BENCHMARKS))
    args = parser.parse_args(argv)
    if not (args.shared / "openllm_v1").is_dir():
        print(f"no shared data at {args.shared}: nothing to measure", file=sys.stderr)
        return 1
    defaults = json.loads((ROOT / "bench" / "defaults.json").read_text())["benchmarks"]
    results = {}
    for bm in args.benchmarks:
        recipe = {k: defaults[bm][k] for k in ("method", "budget", "estimator")}
        results[bm] = run_benchmark(args.shared, bm, recipe, args.sims, args.seed, args.lz_quantile)
        print(bm, json.dumps(results[bm], default=str)[:400], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=2, default=float) + "\n")
    args.out.with_suffix(".md").write_text(render(results, args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
