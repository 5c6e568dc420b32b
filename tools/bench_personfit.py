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

The shipped bundles (``lmeval_microbench/task_configs/openllm_v1``) are then measured as a
user meets them: random responders drawn with each bundle's own chance levels go through
``reconstruct.estimate_models`` (the path of ``microbench estimate``), and, with
``--random-gpt2 N``, N random-weights GPT-2 models (2 layers, byte-level tokenizer, built
here, nothing downloaded) run all six shipped tasks through the real lm-eval API: does the
printed interval contain the bundle's chance score, and does a person-fit warning come?

    python tools/bench_personfit.py --shared /work/shared/data --random-gpt2 3
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tiny_models
from bench_reliability import load_openllm
from tiny_models import build_random_gpt2

from lmeval_microbench import personfit as pf
from lmeval_microbench._types import Estimate
from lmeval_microbench.build import fit_source_irt
from lmeval_microbench.bundle import Bundle, load_bundle
from lmeval_microbench.estimators import make_estimator
from lmeval_microbench.harness import clear_registry, include_path
from lmeval_microbench.reconstruct import bundle_estimator, estimate_models
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
GEN_TOKENS = 32
"""gsm8k generation cap for the random GPT-2 runs (the task's own is 256): a random-weights
model writes no '#### <number>' either way, and 256 tokens take ~25 CPU minutes a model."""
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


# ---------------------------------------------------------------------------- shipped bundles
def shipped_bundle(bm: str) -> Bundle:
    bundle = load_bundle(include_path() / "openllm_v1" / bm)
    if bundle.person_fit is None:
        raise SystemExit(f"shipped {bm} bundle has no person_fit block: rebuild the suite")
    return bundle


def shipped_random(bm: str, n_sims: int, seed: int) -> dict[str, Any]:
    """Random responders (each item right with the bundle's chance) through estimate_models."""
    bundle = shipped_bundle(bm)
    spec = bundle.person_fit
    ids = list(bundle.item_ids)
    rng = np.random.default_rng(seed)
    values = (rng.random((n_sims, len(ids))) < spec.chance_vector(ids)).astype(np.float64)
    rows = ResponseMatrix(values, [f"r{k}" for k in range(n_sims)], ids)
    _, lower, upper = bundle_estimator(bundle).estimate_matrix(rows)
    records = estimate_models(bundle, rows)
    after = np.array([(r["estimate_lower"], r["estimate_upper"]) for r in records])
    return {
        "bundle": bundle.name,
        "chance_score": spec.chance_score,
        "lz_threshold": spec.lz_threshold,
        "alpha": spec.alpha,
        "chance_rule": spec.chance_rule,
        "n_random": n_sims,
        "guessing": _share(np.array([r["person_fit"]["guessing"] for r in records])),
        "flagged": _share(np.array([r["person_fit"]["flagged"] for r in records])),
        "contains_before": _share(_covers(lower, upper, spec.chance_score)),
        "contains_after": _share(_covers(after[:, 0], after[:, 1], spec.chance_score)),
    }


def shipped_source(data: Path, bm: str) -> dict[str, Any]:
    """Share of the leaderboard models flagged by the shipped bundle (they are its source
    models: in-sample, so a floor for the false-alarm rate, not a measure of it)."""
    bundle = shipped_bundle(bm)
    matrix, truth, _ = load_openllm(data / "openllm_v1", bm)
    records = estimate_models(bundle, matrix)
    flagged = np.array([r["person_fit"]["flagged"] for r in records])
    ordinary = truth > bundle.person_fit.chance_score + WEAK_MARGIN
    return {"n_models": int(matrix.n_models), "ordinary_flagged": _share(flagged[ordinary])}


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def random_gpt2_run(seed: int, benchmarks: list[str]) -> dict[str, Any]:
    """One random-weights GPT-2 through lm-eval on the shipped tasks: printed interval,
    chance score, person fit and whether the run warned, per benchmark."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    tasks = [f"microbench_{bm}" for bm in benchmarks]
    handler = _Collect()
    logger = logging.getLogger("lmeval_microbench.harness")
    logger.addHandler(handler)
    started = time.time()
    try:
        with tempfile.TemporaryDirectory(prefix="random-gpt2-") as tmp:
            folder = build_random_gpt2(Path(tmp), seed)
            results = lm_eval.simple_evaluate(
                model="hf",
                model_args=f"pretrained={folder},dtype=float32,device=cpu",
                tasks=tasks,
                task_manager=TaskManager(include_path=str(include_path()), include_defaults=False),
                log_samples=True,
                batch_size=16,
                gen_kwargs=f"max_gen_toks={GEN_TOKENS}",
            )
    finally:
        logger.removeHandler(handler)
        clear_registry()
    out: dict[str, Any] = {"seconds": round(time.time() - started, 1)}
    for bm, task in zip(benchmarks, tasks, strict=True):
        bundle = shipped_bundle(bm)
        found = results["results"][task]
        metric = bundle.metric.name
        scores = {s["doc"]["item_id"]: float(s[metric]) for s in results["samples"][task]}
        raw = bundle_estimator(bundle).estimate(scores)
        _, fit, _ = pf.check_estimate(bundle, scores, raw)
        lower, upper = found["estimate_lower,none"], found["estimate_upper,none"]
        out[bm] = {
            "subset_mean": float(np.mean(list(scores.values()))),
            "estimate": [found["estimate,none"], lower, upper],
            "raw_interval": [raw.lower, raw.upper],
            "chance_score": bundle.person_fit.chance_score,
            "contains_chance": bool(lower <= bundle.person_fit.chance_score <= upper),
            "warned": any(f"bundle {bundle.name!r}: person fit" in m for m in handler.messages),
            "lz": fit.lz,
            "guess_p_value": fit.guess_p_value,
            "guessing": fit.guessing,
            "misfit": fit.misfit,
        }
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def render(results: dict[str, Any], shipped: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        "# Person fit: l_z* and the guessing test on Open LLM v1",
        "",
        f"Generated by `python tools/bench_personfit.py --shared {args.shared}"
        f" --sims {args.sims} --seed {args.seed} --lz-quantile {args.lz_quantile}"
        f" --random-gpt2 {args.random_gpt2}`.",
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
        "test and the two-sided p-value of its count of right answers are both >= alpha; its "
        "interval is then widened to contain the chance score, and an estimate above that "
        "score moves toward it by P(guessing) (`personfit.widen_for_fit`). Coverage "
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
        *render_shipped(shipped),
    ]
    return "\n".join(lines)


def render_shipped(shipped: dict[str, Any]) -> list[str]:
    """The section on the shipped bundles: random responders, source models, random GPT-2."""
    lines = [
        "## The shipped bundles (`lmeval_microbench/task_configs/openllm_v1`)",
        "",
        "Each shipped bundle carries its own person-fit block (threshold, alpha, chance per "
        "item, chance score). Random responders answer each subset item right with the "
        "bundle's chance level and go through `reconstruct.estimate_models` (what "
        "`microbench estimate` and `microbench reconstruct` print); 'leaderboard flagged' is "
        "the share of the ordinary leaderboard models flagged, all of them the bundle's source "
        "models (in-sample: the held-out false-alarm rates are the 80/20 tables above).",
        "",
        "| benchmark | chance score | l_z* thr. | alpha | random: guessing / any flag | random: "
        "interval has chance, before → after | leaderboard ordinary flagged |",
        "|---|---|---|---|---|---|---|",
    ]
    for bm, r in shipped["random"].items():
        src = shipped["source"][bm]
        lines.append(
            f"| {bm} | {100 * r['chance_score']:.1f} | {r['lz_threshold']:.2f} | {r['alpha']} | "
            f"{_pct(r['guessing'])} / {_pct(r['flagged'])} | {_pct(r['contains_before'])} → "
            f"{_pct(r['contains_after'])} | {_pct(src['ordinary_flagged'])} |"
        )
    runs = shipped.get("random_gpt2", [])
    if not runs:
        return [*lines, ""]
    lines += [
        "",
        f"### {len(runs)} random-weights GPT-2 models through lm-eval",
        "",
        "A 2-layer GPT-2 (32 dimensions, byte-level tokenizer) with random weights, one per "
        "seed, runs the six shipped tasks through `lm_eval.simple_evaluate` (CPU; gsm8k "
        f"generations capped at {GEN_TOKENS} tokens for time). 'printed' is "
        "the interval lm-eval's table shows (after person fit); 'raw' the estimator's own; "
        "'warned' whether the run logged the person-fit warning for that bundle.",
        "",
        "| seed | benchmark | subset mean | estimate [printed interval] | raw interval | chance "
        "| has chance | warned | l_z* | guessing p |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        for bm, r in run["benchmarks"].items():
            v, lo, hi = (100 * x for x in r["estimate"])
            rlo, rhi = (100 * x for x in r["raw_interval"])
            lines.append(
                f"| {run['seed']} | {bm} | {100 * r['subset_mean']:.1f} | {v:.1f} [{lo:.1f}, "
                f"{hi:.1f}] | [{rlo:.1f}, {rhi:.1f}] | {100 * r['chance_score']:.1f} | "
                f"{'yes' if r['contains_chance'] else 'NO'} | {'yes' if r['warned'] else 'no'} | "
                f"{r['lz']:.2f} | {r['guess_p_value']:.3f} |"
            )
    hits = [r["contains_chance"] for run in runs for r in run["benchmarks"].values()]
    warned = [r["warned"] for run in runs for r in run["benchmarks"].values()]
    lines += [
        "",
        f"Interval contains chance: {sum(hits)} of {len(hits)} runs of a benchmark; warned: "
        f"{sum(warned)} of {len(warned)}. Wall time per model (all six tasks, CPU): "
        + ", ".join(f"{run['seconds']:.0f} s" for run in runs)
        + ".",
        "",
    ]
    return lines


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
    parser.add_argument(
        "--random-gpt2",
        type=int,
        default=0,
        metavar="N",
        help="also run N random-weights GPT-2 models (seeds 0..N-1) through lm-eval on the "
        "shipped tasks (CPU; minutes each)",
    )
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
    shipped: dict[str, Any] = {
        "random": {bm: shipped_random(bm, args.sims, args.seed + 5) for bm in args.benchmarks},
        "source": {bm: shipped_source(args.shared, bm) for bm in args.benchmarks},
        "random_gpt2": [],
    }
    for seed in range(args.random_gpt2):
        run = random_gpt2_run(seed, args.benchmarks)
        seconds = run.pop("seconds")
        shipped["random_gpt2"].append({"seed": seed, "seconds": seconds, "benchmarks": run})
        print("random gpt2", seed, json.dumps(run, default=str)[:400], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {**results, "shipped": shipped}
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2, default=float) + "\n")
    args.out.with_suffix(".md").write_text(render(results, shipped, args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
