"""One person-fit rule for every estimate: random responders and leaderboard models through
every shipped bundle and adaptive pool.

Random responders answer each item right with the chance level the bundle's (or pool's)
``person_fit`` block gives it (1 / number of choices; IFEval and gsm8k: the weakest source
models' item rates). They go through the paths a user meets: ``reconstruct.estimate_models``
for the static micro tasks (what the lm-eval run, ``estimate`` and ``reconstruct`` report)
and, for the pools, a max-information adaptive run (``adaptive.replay``) scored after 4, 12
and 30 items by ``adaptive.pool.estimate_pool`` (what ``microbench adaptive``, ``reconstruct``
and live ``rank`` report). Measured: the share whose reported 90 % interval contains the
chance score, the mean distance of the point estimate from it (before the check: the
estimator's value; after: the reported one), and the share flagged.

False alarms: the leaderboard's own models (a random sample of ``--models`` per benchmark)
answer the same way; "ordinary" models are those more than 5 points above the chance score.
These models are the bundles' and pools' source models (in sample: the shipped files were
built on all of them), so the rates are a lower bound for new models; ``bench/personfit.md``
measures the static rule on held-out models.

    python tools/bench_random_models.py --shared ../shared/data
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from lmeval_microbench.adaptive import MaxInfoSelector, pool_state, replay
from lmeval_microbench.adaptive.pool import estimate_pool, posterior_estimate
from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
from lmeval_microbench.benchmarks import BENCHMARKS, SUITES
from lmeval_microbench.bundle import Bundle, load_bundle
from lmeval_microbench.harness import include_path
from lmeval_microbench.reconstruct import bundle_estimator, estimate_models
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.truth import align_target, read_scores

ROOT = Path(__file__).resolve().parent.parent
ADAPTIVE_ITEMS = (4, 12, 30)
ORDINARY_MARGIN = 0.05


def chance_levels(bundle: Bundle) -> tuple[np.ndarray, float]:
    """Per-item chance levels of the bundle's items and its chance score."""
    spec = bundle.person_fit
    if spec is None:
        raise SystemExit(f"bundle {bundle.name!r} has no person_fit block")
    return spec.chance_vector(list(bundle.item_ids)), spec.chance_score


def random_answers(chance: np.ndarray, n: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random((n, chance.size)) < chance).astype(np.float64)


def static_rows(bundle: Bundle, values: np.ndarray, names: list[str]) -> list[dict[str, Any]]:
    """``estimate_models`` records of the rows of ``values`` (the bundle's items, in order),
    with the default estimator's value before the person-fit check as ``raw``."""
    matrix = ResponseMatrix(values, names, list(bundle.item_ids), source=f"bench {bundle.name}")
    raw = bundle_estimator(bundle).estimate_matrix(matrix)[0]
    return [
        {
            "value": r["estimate_value"],
            "lower": r["estimate_lower"],
            "upper": r["estimate_upper"],
            "raw": float(before),
            "flagged": bool(r["person_fit"].get("flagged")),
            "guessing": bool(r["person_fit"].get("guessing")),
        }
        for r, before in zip(estimate_models(bundle, matrix), raw, strict=True)
    ]


def adaptive_rows(pool_bundle: Bundle, values: np.ndarray) -> dict[int, list[dict[str, Any]]]:
    """Every row run adaptively (max information, one item per step), estimated at each
    of :data:`ADAPTIVE_ITEMS` items by ``estimate_pool`` (person fit included)."""
    pool = pool_state(pool_bundle)
    result = replay(
        pool.params,
        values,
        selector=MaxInfoSelector(),
        max_items=max(ADAPTIVE_ITEMS),
        prior_mean=pool.state.prior_mean,
        prior_sd=pool.state.prior_sd,
    )
    ids = pool.params.item_ids
    found: dict[int, list[dict[str, Any]]] = {}
    for n in ADAPTIVE_ITEMS:
        rows = []
        for r, order in enumerate(result.order):
            scores = {ids[k]: float(values[r, k]) for k in order[:n]}
            est = estimate_pool(pool, scores)
            rows.append(
                {
                    "value": est.value,
                    "lower": est.lower,
                    "upper": est.upper,
                    "raw": posterior_estimate(pool, scores)[0].value,
                    "flagged": bool(est.person_fit.get("flagged")),
                    "guessing": bool(est.person_fit.get("guessing")),
                }
            )
        found[n] = rows
    return found


def summarise_random(rows: list[dict[str, Any]], chance: float) -> dict[str, float]:
    value = np.array([r["value"] for r in rows])
    raw = np.array([r["raw"] for r in rows])
    lower = np.array([r["lower"] for r in rows])
    upper = np.array([r["upper"] for r in rows])
    return {
        "n": len(rows),
        "contains_chance": float(np.mean((lower <= chance + 1e-12) & (chance - 1e-12 <= upper))),
        "distance_before": float(100 * np.mean(np.abs(raw - chance))),
        "distance_after": float(100 * np.mean(np.abs(value - chance))),
        "flagged": float(np.mean([r["flagged"] for r in rows])),
    }


def summarise_real(rows: list[dict[str, Any]], truth: np.ndarray, chance: float) -> dict:
    ordinary = truth > chance + ORDINARY_MARGIN
    value = np.array([r["value"] for r in rows])
    raw = np.array([r["raw"] for r in rows])
    guessing = np.array([r["guessing"] for r in rows])
    flagged = np.array([r["flagged"] for r in rows])
    return {
        "n_ordinary": int(ordinary.sum()),
        "guessing_ordinary": float(np.mean(guessing[ordinary])) if ordinary.any() else None,
        "flagged_ordinary": float(np.mean(flagged[ordinary])) if ordinary.any() else None,
        "mae_before": float(100 * np.mean(np.abs(raw - truth))),
        "mae_after": float(100 * np.mean(np.abs(value - truth))),
    }


def real_models(bm: str, shared: Path, n: int, seed: int) -> tuple[ResponseMatrix, np.ndarray]:
    """A random sample of ``n`` leaderboard models of ``bm`` with their true full scores."""
    found = BENCHMARKS[bm]
    if found.suite == "openllm_v1":
        data = shared / "openllm_v1"
        matrix = ResponseMatrix.read(data / "responses" / f"{bm}_B.parquet")
        if bm == "hellaswag":
            truth = read_scores(data / "open-llm-leaderboard.csv", "hellaswag", model_column="name")
        else:
            truth = read_scores(data / "scores" / f"{bm}_B_scores.csv", "full_score_metabench")
        matrix, target = align_target(matrix, truth)
    else:
        matrix = ResponseMatrix.read(shared / found.data)
        target = matrix.mean_scores()
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(matrix.n_models, size=min(n, matrix.n_models), replace=False))
    picked = matrix.select_models([matrix.model_ids[k] for k in rows])
    return picked, np.asarray(target)[rows]


def measure(bm: str, suite: str, args: argparse.Namespace) -> dict[str, Any]:
    bundle = load_bundle(include_path() / suite / bm)
    pool = load_bundle(SHIPPED_POOLS / suite / bm)
    chance, chance_score = chance_levels(bundle)
    pool_chance, pool_chance_score = chance_levels(pool)
    names = [f"random{k}" for k in range(args.random)]
    static_random = static_rows(bundle, random_answers(chance, args.random, args.seed), names)
    adaptive_random = adaptive_rows(pool, random_answers(pool_chance, args.random, args.seed))
    out: dict[str, Any] = {
        "chance_score": chance_score,
        "pool_chance_score": pool_chance_score,
        "static": {"random": summarise_random(static_random, chance_score)},
        "adaptive": {
            str(n): {"random": summarise_random(rows, pool_chance_score)}
            for n, rows in adaptive_random.items()
        },
    }
    if args.shared is not None:
        matrix, truth = real_models(bm, args.shared, args.models, args.seed)
        subset = matrix.reindex_items(list(bundle.item_ids)).values
        real = static_rows(bundle, subset, list(matrix.model_ids))
        out["static"]["leaderboard"] = summarise_real(real, truth, chance_score)
        full = matrix.reindex_items(list(pool.item_ids)).values
        complete = ~np.isnan(full).any(axis=1)
        for n, rows in adaptive_rows(pool, full[complete]).items():
            out["adaptive"][str(n)]["leaderboard"] = summarise_real(
                rows, truth[complete], pool_chance_score
            )
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def render(results: dict[str, Any], args: argparse.Namespace, seconds: float) -> str:
    lines = [
        "# One person-fit rule: random responders and leaderboard models, static and adaptive",
        "",
        f"Generated by `python tools/bench_random_models.py --random {args.random} --models "
        f"{args.models} --seed {args.seed}` in {seconds:.0f} s.",
        "",
        __doc__.split("\n\n")[1].replace("\n", " "),
        "",
        "Random responders (each item right with its chance level): the share whose reported "
        "90 % interval contains the chance score, the mean distance (points) of the point "
        "estimate from the chance score before the check (the estimator's value) and after "
        "(the reported value: P(guessing)-weighted mixture with the chance score), and the "
        "share flagged.",
        "",
        "| benchmark | run | chance score | contains chance | distance before → after | flagged |",
        "|---|---|---|---|---|---|",
    ]
    for bm, found in results.items():
        runs = [("static", found["static"]["random"], found["chance_score"])]
        runs += [
            (f"adaptive, {n} items", found["adaptive"][n]["random"], found["pool_chance_score"])
            for n in found["adaptive"]
        ]
        for label, row, chance in runs:
            lines.append(
                f"| {bm} | {label} | {100 * chance:.1f} | {_pct(row['contains_chance'])} | "
                f"{row['distance_before']:.1f} → {row['distance_after']:.1f} | "
                f"{_pct(row['flagged'])} |"
            )
    if args.shared is None:
        return "\n".join(lines) + "\n"
    lines += [
        "",
        "Leaderboard models (in sample; ordinary = more than 5 points above the chance score): "
        "the share of ordinary models flagged as guessing and flagged at all (false alarms), "
        "and the mean absolute error (points) against the true full score before and after "
        "the check.",
        "",
        "| benchmark | run | ordinary models | guessing / any flag | MAE before → after |",
        "|---|---|---|---|---|",
    ]
    for bm, found in results.items():
        runs = [("static", found["static"]["leaderboard"])]
        runs += [
            (f"adaptive, {n} items", found["adaptive"][n]["leaderboard"]) for n in found["adaptive"]
        ]
        for label, row in runs:
            lines.append(
                f"| {bm} | {label} | {row['n_ordinary']} | {_pct(row['guessing_ordinary'])} / "
                f"{_pct(row['flagged_ordinary'])} | {row['mae_before']:.2f} → "
                f"{row['mae_after']:.2f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--random", type=int, default=200, help="random responders per run")
    parser.add_argument("--models", type=int, default=300, help="leaderboard models per benchmark")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench")
    args = parser.parse_args(argv)
    if not args.shared.is_dir():
        args.shared = None
    started = time.perf_counter()
    pairs = [
        (bm, suite) for suite in ("openllm_v1", "openllm_v2") for bm in SUITES[suite].benchmarks
    ]
    results = {}
    for bm, suite in tqdm(pairs, desc="benchmarks"):
        results[bm] = measure(bm, suite, args)
    seconds = time.perf_counter() - started
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "random_models.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "random_models.md").write_text(render(results, args, seconds))
    print((args.out / "random_models.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
