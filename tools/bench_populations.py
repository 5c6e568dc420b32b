"""Small populations: error and conditional coverage of micro-benchmarks fitted on few models.

Issue 12: does the 90 % interval hold where the user's model is, when the micro-benchmark is
built from 15, 25 or 50 source models instead of the leaderboard's thousands? Populations:

``random N``   N models drawn at random from an Open LLM Leaderboard v1 matrix; targets: 200
               other random models of that matrix (drawn like the sources).
``family N``   N models of one architecture family (the leaderboard's ``arch`` column: Llama,
               Mistral, Mixtral, Qwen2, Phi, Gemma, GPT-2, ...; families with at least
               N + ``MIN_FAMILY_TARGETS`` models); targets: the other models of that family.
``all``        the whole matrix, 80/20 random splits (the shipped bundles' situation).
``psn loo``    the psn whole-benchmark MMLU and BBH blocks (12 models): leave-one-model-out.

Truth: the whole-benchmark score (``tools/bench_reliability.py``'s loaders), except for
N = 15: below ``MIN_CALIBRATION_MODELS`` (20) source models the estimators fit no calibration
line, which is only right when the truth is the mean over the matrix items; the leaderboard
matrices hold a hand-picked part of each benchmark, so with 15 models the matrix is treated
as the whole benchmark (truth = mean over its items), as it is for psn.

Recipes (``RECIPES``, a data list: add one line for another recipe): selection method,
estimator and budgets; ``shipped`` is each benchmark's default from ``bench/defaults.json``
at its own budget. Every fit is scored twice: with the default conditional band and with
the one-quantile band of earlier versions (``fit_band(..., conditional=False)`` on the same
cross-fitted residuals), so the two differ only in the interval.

    python tools/bench_populations.py            # full run (about 15 min on 2 cores)
    python tools/bench_populations.py --quick    # arc + psn_bbh, few repeats
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from lmeval_microbench._io import atomic_path
from lmeval_microbench._rng import spawn
from lmeval_microbench.estimators import make_estimator
from lmeval_microbench.reliability import (
    ALL,
    LEVEL,
    MIN_PER_THIRD,
    IRTCache,
    ResultPool,
    Split,
    all_items_subset,
    json_ready,
    loo_splits,
    needs_irt,
    random_splits,
    select_items,
    summarise,
)
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import make_selector

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_reliability import load_openllm, load_psn_block

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = REPO / ".." / "shared" / "data"
OPENLLM = ("arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande")
PSN_BLOCKS = {"psn_mmlu": "MMLU", "psn_bbh": "BBH"}
SIZES = (15, 25, 50)
MATRIX_MEAN_BELOW = 20
"""Populations smaller than this use the matrix mean as truth (see the module docstring)."""
N_TARGETS = 200
MIN_FAMILY_TARGETS = 20
REPEATS = {"random": 10, "family": 3, "all": 2, "loo": 2}
"""Repeats per population kind (family: per family)."""
SEED = 0
TARGET_COVERAGE = (0.85, 0.95)
TARGET_THIRD = 0.8


@dataclass(frozen=True)
class Recipe:
    """A selection method and estimator at some budgets (``all``: every matrix item)."""

    label: str
    method: str
    estimator: str
    budgets: tuple[int | str, ...]
    psn_budgets: tuple[int | str, ...] = ()
    on_all: bool = False
    """Whether it also runs on the whole matrix (slow for selectors that fit thousands)."""


RECIPES = [
    Recipe("random+mean", "random", "mean", (25, 50), (50, 100), on_all=True),
    Recipe("shipped", "", "", (), on_all=True),
    Recipe("anchor_points+kridge", "anchor_points", "kridge", (25, 50), (50, 100)),
    Recipe("dpp+irt", "dpp", "irt", (25,), (50,)),
]
"""What runs; ``shipped`` is resolved per benchmark (:func:`resolve_recipes`), not on psn."""
IRT_FREE_PSN = {"psn_mmlu"}
"""psn blocks without IRT (its 2PL fit diverges, see ``tools/bench_reliability.py``)."""


# ---------------------------------------------------------------------- populations
@dataclass(frozen=True)
class Population:
    """One benchmark's matrix and truths, and how to cut it into source and target models."""

    dataset: str
    kind: str
    size: int
    matrix: ResponseMatrix
    truth: np.ndarray
    groups: tuple[tuple[str, np.ndarray], ...] = ()
    """(family, rows) for ``family`` populations."""

    @property
    def label(self) -> str:
        return f"{self.kind} {self.size}" if self.kind in ("random", "family") else self.kind


def load_families(data: Path, matrix: ResponseMatrix, size: int) -> tuple[tuple[str, Any], ...]:
    """Rows of each architecture family with at least ``size + MIN_FAMILY_TARGETS`` models."""
    board = pd.read_csv(data / "open-llm-leaderboard.csv").drop_duplicates("name")
    arch = board.set_index("name")["arch"].reindex(list(matrix.model_ids))
    families = []
    for name, rows in arch.groupby(arch).indices.items():
        if name != "error" and len(rows) >= size + MIN_FAMILY_TARGETS:
            families.append((str(name).removesuffix("ForCausalLM"), np.sort(rows)))
    return tuple(sorted(families))


def split_of(
    pop: Population, rows: tuple[np.ndarray, np.ndarray], repeat: int, key: str, seed: int
) -> Split:
    """A :class:`Split` with the given (source, target) rows of the population's matrix."""
    ids = pop.matrix.model_ids
    source, target = rows
    return Split(
        pop.label,
        repeat,
        key,
        pop.matrix.select_models([ids[k] for k in source]),
        pop.truth[source],
        pop.matrix.select_models([ids[k] for k in target]),
        pop.truth[target],
        seed,
        seed,
    )


def population_splits(pop: Population, repeats: dict[str, int]) -> Iterator[Split]:
    """Source/target splits of a population, repeat by repeat."""
    if pop.kind == "all":
        yield from random_splits(pop.matrix, pop.truth, repeats=repeats["all"], seed=SEED)
    elif pop.kind == "loo":
        yield from loo_splits(pop.matrix, pop.truth, repeats=repeats["loo"], seed=SEED)
    elif pop.kind == "random":
        for repeat, rng in enumerate(spawn((SEED, pop.size), repeats["random"])):
            rows = rng.permutation(pop.matrix.n_models)
            cut = (rows[: pop.size], rows[pop.size : pop.size + N_TARGETS])
            seed = int(rng.integers(2**31))
            yield split_of(pop, cut, repeat, f"random{pop.size}/{repeat}", seed)
    else:
        for k, (family, rows) in enumerate(pop.groups):
            for repeat, rng in enumerate(spawn((SEED, pop.size, k), repeats["family"])):
                shuffled = rng.permutation(rows)
                cut = (shuffled[: pop.size], shuffled[pop.size :][:N_TARGETS])
                seed = int(rng.integers(2**31))
                yield split_of(pop, cut, repeat, f"{family}{pop.size}/{repeat}", seed)


def n_splits(pop: Population, repeats: dict[str, int]) -> int:
    if pop.kind == "loo":
        return repeats["loo"] * pop.matrix.n_models
    if pop.kind == "family":
        return repeats["family"] * len(pop.groups)
    return repeats[pop.kind]


# ---------------------------------------------------------------------- recipes
def resolve_recipes(pop: Population, defaults: dict[str, Any]) -> list[tuple[str, str, str, Any]]:
    """(label, method, estimator, budget) rows of ``RECIPES`` for one population."""
    dataset, psn = pop.dataset, pop.dataset in PSN_BLOCKS
    rows = []
    for recipe in RECIPES:
        if pop.kind == "all" and not recipe.on_all:
            continue
        if recipe.label == "shipped":
            chosen = defaults.get(dataset)
            if not psn and chosen:
                budget = ALL if chosen["all_items"] else chosen["budget"]
                label = f"shipped ({chosen['method']}+{chosen['estimator']})"
                rows.append((label, chosen["method"], chosen["estimator"], budget))
            continue
        if psn and dataset in IRT_FREE_PSN and needs_irt(recipe.estimator):
            continue
        for budget in recipe.psn_budgets if psn else recipe.budgets:
            rows.append((recipe.label, recipe.method, recipe.estimator, budget))
    return rows


def fit_and_score(
    split: Split, recipe: tuple, irt_cache: IRTCache, pools: dict, population: str
) -> None:
    """Select, fit, and estimate the targets with the conditional and the one-quantile band."""
    label, method, name, budget = recipe
    if budget == ALL:
        subset = all_items_subset(split.source)
    else:
        subset = select_items(make_selector(method), split, int(budget))
    irt = irt_cache.get(split) if needs_irt(name) else None
    start = time.perf_counter()
    estimator = make_estimator(name).fit(split.source, subset, split.source_truth, irt=irt)
    conditional = estimator.band_
    for band_name, band in (("conditional", conditional), ("one quantile", None)):
        estimator.band_ = band if band is not None else conditional.refit(conditional=False)
        value, lower, upper = estimator.estimate_matrix(split.target, level=LEVEL)
        pool = pools.setdefault((population, label, budget, band_name), ResultPool())
        pool.add(split.repeat, split.target_truth, value, lower, upper)
        pool.n_items, pool.n_source = subset.budget, split.source.n_models
    pool.seconds += time.perf_counter() - start


# ---------------------------------------------------------------------- run
def build_populations(shared: Path, datasets: Sequence[str], sizes: Sequence[int]):
    """Every population of every dataset (loading each matrix once)."""
    data = shared / "openllm_v1"
    for dataset in datasets:
        if dataset in PSN_BLOCKS:
            matrix, truth, _ = load_psn_block(shared / "psn_irt", PSN_BLOCKS[dataset])
            yield Population(dataset, "loo", matrix.n_models - 1, matrix, truth)
            continue
        matrix, truth, _ = load_openllm(data, dataset)
        matrix_mean = matrix.mean_scores()
        for size in sizes:
            size_truth = matrix_mean if size < MATRIX_MEAN_BELOW else truth
            yield Population(dataset, "random", size, matrix, size_truth)
            families = load_families(data, matrix, size)
            if families:
                yield Population(dataset, "family", size, matrix, size_truth, families)
        yield Population(dataset, "all", matrix.n_models, matrix, truth)


def evaluate(pop: Population, defaults: dict, repeats: dict, bar: Any) -> list[dict[str, Any]]:
    """Records of one population: one per recipe x budget x band."""
    pools: dict[tuple, ResultPool] = {}
    irt_cache = IRTCache("2pl")
    recipes = resolve_recipes(pop, defaults)
    for split in population_splits(pop, repeats):
        for recipe in recipes:
            fit_and_score(split, recipe, irt_cache, pools, pop.label)
        bar.update(1)
    records = []
    for (population, label, budget, band), pool in pools.items():
        records.append(
            {
                "dataset": pop.dataset,
                "population": population,
                "kind": pop.kind,
                "size": pop.size,
                "truth": "matrix mean" if pop.size < MATRIX_MEAN_BELOW else "full score",
                "recipe": label,
                "budget": budget,
                "band": band,
                "families": [f for f, _ in pop.groups],
            }
            | summarise(pool)
        )
    return records


def meets(record: dict[str, Any]) -> bool:
    """The issue's target: 0.85 <= cov90 <= 0.95 and every third (by truth) at least 0.8.

    Thirds with too few targets to measure (psn: 12 models) are skipped, not failed.
    """
    low, high = TARGET_COVERAGE
    worst = record["cov90_min_third_truth"]
    return low <= record["coverage90"] <= high and (math.isnan(worst) or worst >= TARGET_THIRD)


# ---------------------------------------------------------------------- report
def summary_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per population x recipe x budget x band, averaged over the datasets."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in records:
        recipe = "shipped" if r["recipe"].startswith("shipped") else r["recipe"]
        key = (r["population"], recipe, "own" if recipe == "shipped" else r["budget"], r["band"])
        groups.setdefault(key, []).append(r)
    rows = []
    for (population, recipe, budget, band), members in groups.items():
        mean = {
            k: _nanmean([m[k] for m in members])
            for k in ("mae", "coverage90", "width90", "cov90_low", "cov90_mid", "cov90_high")
        }
        rows.append(
            {"population": population, "recipe": recipe, "budget": budget, "band": band}
            | mean
            | {
                "worst_cov90": min(m["coverage90"] for m in members),
                "worst_third_truth": _nanmean([m["cov90_min_third_truth"] for m in members]),
                "met": f"{sum(meets(m) for m in members)}/{len(members)}",
            }
        )
    return rows


def _nanmean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return float(np.mean(finite)) if finite else math.nan


COLUMNS = (
    ("population", "population", None),
    ("recipe", "recipe", None),
    ("budget", "budget", None),
    ("band", "band", None),
    ("MAE", "mae", ".2f"),
    ("cov90", "coverage90", ".3f"),
    ("worst cov90", "worst_cov90", ".2f"),
    ("cov low", "cov90_low", ".2f"),
    ("cov mid", "cov90_mid", ".2f"),
    ("cov high", "cov90_high", ".2f"),
    ("worst third (truth), mean", "worst_third_truth", ".2f"),
    ("width90", "width90", ".1f"),
    ("target met", "met", None),
)
DETAIL_COLUMNS = (
    ("dataset", "dataset", None),
    ("population", "population", None),
    ("recipe", "recipe", None),
    ("budget", "budget", None),
    ("MAE", "mae", ".2f"),
    ("cov90", "coverage90", ".3f"),
    ("cov low", "cov90_low", ".2f"),
    ("cov mid", "cov90_mid", ".2f"),
    ("cov high", "cov90_high", ".2f"),
    ("worst third (truth)", "cov90_min_third_truth", ".2f"),
    ("width90", "width90", ".1f"),
    ("targets", "n_targets", None),
)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple]) -> list[str]:
    def cell(value: Any, fmt: str | None) -> str:
        if isinstance(value, float):
            return "-" if math.isnan(value) else format(value, fmt or ".4g")
        return str(value)

    lines = [
        "| " + " | ".join(c[0] for c in columns) + " |",
        "|" + "|".join("---" if c[2] is None else "---:" for c in columns) + "|",
    ]
    lines += ["| " + " | ".join(cell(r[c[1]], c[2]) for c in columns) + " |" for r in rows]
    return lines


def markdown(records: list[dict], info: dict[str, Any]) -> str:
    summary = summary_rows(records)
    conditional = [r for r in records if r["band"] == "conditional"]
    return "\n".join(
        [
            "# Small populations: error and conditional coverage (issue 12)",
            "",
            f"`{info['command']}`: {info['seconds']:.0f} s on 2 cores. Datasets: "
            f"{', '.join(info['datasets'])}. Repeats: {info['repeats']}; targets per split: "
            f"up to {N_TARGETS}. Families (leaderboard `arch`, at least N + "
            f"{MIN_FAMILY_TARGETS} models): {info['families']}.",
            "",
            "Populations: `random N` = N random leaderboard models as sources, 200 other random "
            "models as targets; `family N` = N models of one architecture family, the rest of "
            "the family as targets; `all` = the whole matrix, 80/20 splits (the shipped "
            "bundles' case); `loo` = psn whole-benchmark blocks, 11 sources, leave-one-out. "
            f"Truth: the whole-benchmark score, except N < {MATRIX_MEAN_BELOW} (and psn): the "
            "mean over the matrix items (no calibration line below 20 models). `shipped`: each "
            "benchmark's default recipe (bench/defaults.json) at its own budget.",
            "",
            "`band`: `conditional` = the default band (per-region quantiles with 100+ source "
            "models, distance-widened with fewer; `_conformal.py`); `one quantile` "
            "= the band of earlier versions, refitted on the same residuals. `cov low/mid/high`"
            ": coverage among targets whose estimate is in the lower/middle/upper third of the "
            "targets' true score range (equal widths); `worst third (truth)`: the lowest "
            "third-coverage when targets are grouped by true score (thirds with fewer than "
            f"{MIN_PER_THIRD} targets are `-`). Summary rows average over the datasets (MAE, "
            "cov90, thirds, width) or give the worst dataset; `target met`: "
            f"datasets with {TARGET_COVERAGE[0]} <= cov90 <= {TARGET_COVERAGE[1]} and every third "
            f"(by truth, where measurable) >= {TARGET_THIRD}.",
            "",
            "## Summary over datasets",
            "",
            *table(summary, COLUMNS),
            "",
            "## Per dataset (conditional band)",
            "",
            "<details><summary>every dataset x population x recipe</summary>",
            "",
            *table(conditional, DETAIL_COLUMNS),
            "",
            "</details>",
        ]
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    parser.add_argument("--out", type=Path, default=REPO / "bench")
    parser.add_argument("--datasets", nargs="+", default=[*OPENLLM, *PSN_BLOCKS])
    parser.add_argument("--quick", action="store_true", help="arc + psn_bbh, few repeats")
    parser.add_argument("--no-progress", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not (args.shared / "openllm_v1").is_dir():
        print(f"no data at {args.shared} (see its README.md); nothing to do")
        return 1
    repeats = dict(REPEATS)
    datasets = args.datasets
    if args.quick:
        datasets, repeats = ["arc", "psn_bbh"], {"random": 3, "family": 1, "all": 1, "loo": 1}
    defaults = json.loads((REPO / "bench" / "defaults.json").read_text())["benchmarks"]
    started = time.perf_counter()
    populations = list(build_populations(args.shared, datasets, SIZES))
    records: list[dict[str, Any]] = []
    with (
        warnings.catch_warnings(),
        tqdm(
            total=sum(n_splits(p, repeats) for p in populations),
            unit="split",
            disable=args.no_progress,
        ) as bar,
    ):
        warnings.simplefilter("ignore")  # few-model fits warn about the dropped calibration line
        for pop in populations:
            bar.set_description(f"{pop.dataset} {pop.label}")
            records += evaluate(pop, defaults, repeats, bar)
    families = sorted({f for r in records for f in r["families"]})
    info = {
        "command": "python tools/bench_populations.py" + (" --quick" if args.quick else ""),
        "datasets": datasets,
        "repeats": repeats,
        "families": ", ".join(families) or "-",
        "seconds": time.perf_counter() - started,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {"info": info, "records": json_ready(records)}
    with atomic_path(args.out / "populations.json") as tmp:
        tmp.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    with atomic_path(args.out / "populations.md") as tmp:
        tmp.write_text(markdown(records, info) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'populations.md'} ({info['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
