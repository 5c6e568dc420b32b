"""The leaderboard benchmark's data and plan: matrices, their true scores, what runs on each.

Used by ``tools/bench_reliability.py`` (and the tools that reuse its loaders): the six Open LLM
Leaderboard v1 ``{bm}_B`` matrices with the score on the whole benchmark as truth, and the
blocks of the psn matrix with the mean over the block; which selection method x estimator
pairs run on each (the full grid takes hours on 2 cores); and the engine that evaluates one
dataset on exactly those pairs, with the ridge baseline beside them.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from leaderboard_baselines import RIDGE, RIDGE_SUBSET, read_table, ridge_on_split
from tqdm import tqdm

from lmeval_microbench.benchmarks import SUITES
from lmeval_microbench.errors import InputError
from lmeval_microbench.estimators import DEFAULT_ESTIMATOR, ESTIMATORS, needs_irt
from lmeval_microbench.reliability.evaluate import IRTCache, evaluate_split, sort_records
from lmeval_microbench.reliability.metrics import ResultPool, summarise
from lmeval_microbench.reliability.plan import ALL, Budget, Plan
from lmeval_microbench.reliability.splits import (
    Split,
    extrapolation_splits,
    loo_splits,
    random_splits,
)
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import SELECTORS

OPENLLM = tuple(sorted(SUITES["openllm_v1"].benchmarks))
PSN_BLOCKS = {"psn_mmlu": "MMLU", "psn_bbh": "BBH"}
PSN_IRT_FREE = {"psn_mmlu"}
"""psn blocks where no IRT is fitted (see ``tools/bench_reliability.py``)."""
DATASETS = (*OPENLLM, *PSN_BLOCKS)
SEED = 0

PUBLISHED_ESTIMATORS = ("mean", "anchor", "irt", "pirt", "gpirt", "calibrated")
"""Estimators that reproduce published methods; every other registered one is the project's own."""
PUBLISHED_COMBOS = {
    ("random", "mean"): "random sampling",
    ("anchor_points", "anchor"): "Anchor Points",
    ("tinybenchmarks", "gpirt"): "tinyBenchmarks gp-IRT",
    ("metabench", "calibrated"): "metabench-like",
}
IRT_FREE_SELECTORS = ("random", "stratified", "anchor_points", "dpp", "greedy")


# ---------------------------------------------------------------------- data
@dataclass(frozen=True)
class Dataset:
    """A matrix, its models' true full scores (fractions) and what runs on it."""

    name: str
    matrix: ResponseMatrix
    truth: np.ndarray
    truth_note: str
    protocols: tuple[str, ...]
    combos: dict[str, tuple[str, ...]]
    budgets: tuple[Budget, ...]
    ridge: bool = False
    notes: tuple[str, ...] = ()

    @property
    def all_estimators(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e for names in self.combos.values() for e in names))


def load_openllm(data: Path, benchmark: str) -> tuple[ResponseMatrix, np.ndarray, str]:
    """A ``{bm}_B`` matrix on the models with a known full-benchmark score, and that score.

    Models without a score are dropped (the count goes into the note); the score is read in
    percent and returned as a fraction.
    """
    matrix = ResponseMatrix.read_parquet(data / "responses" / f"{benchmark}_B.parquet")
    scores_file = data / "scores" / f"{benchmark}_B_scores.csv"
    if scores_file.exists():
        table = read_table(scores_file, ("model", "full_score_metabench"))
        truth = table.set_index("model")["full_score_metabench"]
        note = f"`full_score_metabench` of scores/{benchmark}_B_scores.csv"
    else:  # hellaswag: the leaderboard's own score over all 10,042 items
        board = data / "open-llm-leaderboard.csv"
        table = read_table(board, ("name", benchmark))
        truth = table.set_index("name")[benchmark]
        note = f"`{benchmark}` column of open-llm-leaderboard.csv joined on `name`"
    twice = truth.index[truth.index.duplicated()].tolist()
    if twice:
        raise InputError(f"{benchmark}: models listed more than once: {twice[:3]}")
    truth = pd.to_numeric(truth, errors="coerce").reindex(list(matrix.model_ids))
    known = [m for m, value in truth.items() if np.isfinite(value)]
    if not known:
        raise InputError(f"{benchmark}: no model of the matrix has a full score")
    values = truth.loc[known].to_numpy(dtype=np.float64) / 100.0
    if np.any((values < 0) | (values > 1)):
        raise InputError(f"{benchmark}: full scores outside 0-100 percent")
    dropped = matrix.n_models - len(known)
    note += f" (percent; {dropped} matrix models without it left out)" if dropped else " (percent)"
    return matrix.select_models(known), values, note


def load_psn_block(psn: Path, block: str) -> tuple[ResponseMatrix, np.ndarray, str]:
    """One benchmark's columns of ``combine.csv``; truth = each model's mean over the block.

    Item ids are ``psn.{block}.{k}`` with ``k`` the column of ``combine.csv`` (0-based), so an
    id names its column; models are ``psn_model_{row}``.
    """
    segments = read_table(
        psn / "column_segments_inferred.csv", ("benchmark", "start_col", "end_col_exclusive")
    )
    row = segments[segments["benchmark"] == block]
    if len(row) != 1:
        raise InputError(
            f"{psn / 'column_segments_inferred.csv'}: benchmark {block!r} listed "
            f"{len(row)} times; known: {segments['benchmark'].tolist()}"
        )
    start, stop = int(row["start_col"].iloc[0]), int(row["end_col_exclusive"].iloc[0])
    frame = pd.read_csv(psn / "combine.csv", header=None, usecols=range(start, stop))
    if frame.shape[1] != stop - start:
        raise InputError(f"{psn / 'combine.csv'}: has fewer than {stop} columns")
    ids = [f"psn.{block.lower()}.{k}" for k in range(start, stop)]
    models = [f"psn_model_{k}" for k in range(len(frame))]
    matrix = ResponseMatrix(
        frame.to_numpy(dtype=np.float64), models, ids, source=f"psn_irt/combine.csv[{block}]"
    )
    note = f"mean over the {stop - start} items of the block (columns {start}-{stop - 1})"
    return matrix, matrix.mean_scores(), note


# ---------------------------------------------------------------------- combinations
def own_estimators(registered: Sequence[str] | None = None) -> tuple[str, ...]:
    """Registered estimators that are not published methods: the project's own."""
    names = tuple(ESTIMATORS) if registered is None else tuple(registered)
    return tuple(n for n in names if n not in PUBLISHED_ESTIMATORS)


def preferred_estimators(ours: Sequence[str]) -> tuple[str, ...]:
    """Estimators the defaults rule prefers: ours, or the package default if there are none."""
    return tuple(ours) or (DEFAULT_ESTIMATOR,)


def openllm_combos(methods: Sequence[str], ours: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Every method x (calibrated + ours), plus the published pairs whose method runs."""
    grid = ("calibrated", *ours)
    combos = {m: list(grid) for m in methods}
    for method, estimator in PUBLISHED_COMBOS:
        if method in combos and estimator not in combos[method]:
            combos[method].append(estimator)
    return {m: tuple(names) for m, names in combos.items()}


def psn_combos(ours: Sequence[str], *, irt: bool) -> dict[str, tuple[str, ...]]:
    """IRT-free selectors x estimators; with ``irt`` also the IRT estimators and selectors."""
    methods = [m for m in IRT_FREE_SELECTORS if m in SELECTORS]
    names = ["mean", "anchor", *(["calibrated"] if irt else []), *ours]
    if not irt:
        names = [n for n in names if not needs_irt(n)]
    combos = {m: tuple(names) for m in methods}
    if irt:
        for method, estimator in PUBLISHED_COMBOS:
            if method in SELECTORS and method not in combos:
                combos[method] = (estimator,)
    return combos


def role_of(method: str, estimator: str) -> str:
    """What a row stands for in the report: a published method, a baseline, all items, grid."""
    if estimator == RIDGE:
        return "baseline: ridge on item responses"
    if (method, estimator) in PUBLISHED_COMBOS:
        return PUBLISHED_COMBOS[(method, estimator)]
    return "all items" if method == ALL else "grid"


# ---------------------------------------------------------------------- evaluation
def dataset_splits(dataset: Dataset, repeats: dict[str, int], seed: int) -> Iterator[Split]:
    """Splits of every protocol of the dataset, protocol by protocol."""
    makers = {"random": random_splits, "extrapolation": extrapolation_splits, "loo": loo_splits}
    for protocol in dataset.protocols:
        yield from makers[protocol](
            dataset.matrix, dataset.truth, repeats=repeats[protocol], seed=seed
        )


def dataset_split_count(dataset: Dataset, repeats: dict[str, int]) -> int:
    """Splits of every protocol of ``dataset``: the length of its progress bar."""
    return sum(
        repeats[p] * (dataset.matrix.n_models if p == "loo" else 1) for p in dataset.protocols
    )


def dataset_plans(dataset: Dataset, seed: int) -> list[Plan]:
    """One plan per method (its estimators at the numeric budgets) and one for ``all``."""
    numeric = tuple(b for b in dataset.budgets if b != ALL)
    plans = []
    if numeric:
        plans = [
            Plan((method,), names, numeric, dataset.protocols, 1, seed)
            for method, names in dataset.combos.items()
        ]
    if ALL in dataset.budgets:
        plans.append(Plan((), dataset.all_estimators, (ALL,), dataset.protocols, 1, seed))
    return plans


def evaluate_dataset(
    dataset: Dataset,
    *,
    repeats: dict[str, int],
    seed: int = SEED,
    irt_model: str = "2pl",
    progress: bool = True,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Records (one per protocol x method x estimator x budget) and run facts of one dataset.

    The engine of ``reliability.run_reliability`` (same splits, same shared IRT fit per
    source set, same metrics) on a chosen set of method x estimator pairs instead of the full
    cross product: each split's subset per method x budget is selected once and every
    estimator paired with that method is fitted on it.
    """
    plans = dataset_plans(dataset, seed)
    pools: dict[tuple, ResultPool] = {}
    ridge_pools: dict[tuple, ResultPool] = {}
    irt_cache = IRTCache(irt_model)
    ridge_budgets = [b for b in (RIDGE_SUBSET, ALL) if b == ALL or b < dataset.matrix.n_items]
    started = time.perf_counter()
    with (
        warnings.catch_warnings(record=True) as caught,
        tqdm(
            total=dataset_split_count(dataset, repeats) * sum(len(p.selections()) for p in plans),
            desc=dataset.name,
            unit="subset",
            disable=not progress,
        ) as bar,
    ):
        warnings.simplefilter("always")
        for split in dataset_splits(dataset, repeats, seed):
            for plan in plans:
                evaluate_split(split, plan, pools, irt_cache, bar)
            if dataset.ridge:
                ridge_on_split(split, ridge_pools, ridge_budgets)
    records = []
    for (protocol, method, estimator, budget), pool in [*pools.items(), *ridge_pools.items()]:
        record = {
            "dataset": dataset.name,
            "protocol": protocol,
            "method": method,
            "estimator": estimator,
            "budget": budget,
            "role": role_of(method, estimator),
        } | summarise(pool)
        if estimator == RIDGE:  # no interval
            record["coverage90"] = record["width90"] = math.nan
        records.append(record)
    sort_records(records, dataset.protocols)
    info = {
        "dataset": dataset.name,
        "source": dataset.matrix.source,
        "n_models": dataset.matrix.n_models,
        "n_items": dataset.matrix.n_items,
        "truth": dataset.truth_note,
        "protocols": list(dataset.protocols),
        "repeats": {p: repeats[p] for p in dataset.protocols},
        "budgets": list(dataset.budgets),
        "combos": {m: list(e) for m, e in dataset.combos.items()},
        "irt_fits": irt_cache.fits,
        "irt_unconverged": irt_cache.unconverged,
        "irt_seconds": round(irt_cache.seconds, 1),
        "warnings": warning_counts(caught),
        "seconds": round(time.perf_counter() - started, 1),
        "seconds_by_step": time_breakdown(records),
        "notes": list(dataset.notes),
    }
    return records, info


def time_breakdown(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Seconds per estimator (fits and estimates) and per selection method, over all splits.

    A subset is shared by the estimators of its method, and each of their records carries
    the same selection time, so it is counted once per method x budget x protocol.
    """
    fits: dict[str, float] = {}
    selection: dict[tuple[str, str, Budget], float] = {}
    for r in records:
        fits[r["estimator"]] = fits.get(r["estimator"], 0.0) + r["seconds"]
        selection[(r["protocol"], r["method"], r["budget"])] = r["selection_seconds"]
    by_method: dict[str, float] = {}
    for (_, method, _), seconds in selection.items():
        by_method[method] = by_method.get(method, 0.0) + seconds
    return {
        "estimators": {k: round(v, 1) for k, v in sorted(fits.items(), key=lambda kv: -kv[1])},
        "selection": {
            k: round(v, 1) for k, v in sorted(by_method.items(), key=lambda kv: -kv[1]) if v
        },
    }


def warning_counts(caught: Sequence[warnings.WarningMessage]) -> dict[str, int]:
    """How often each kind of warning was raised: category and the first words of the text."""
    counts: dict[str, int] = {}
    for w in caught:
        words = " ".join(str(w.message).split()[:6])
        key = f"{w.category.__name__}: {words} ..."
        counts[key] = counts.get(key, 0) + 1
    return counts
