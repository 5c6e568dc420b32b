"""Reliability benchmark on real leaderboard data: selection methods x estimators, held-out models.

Data (``../shared/data``; the tool stops with a message when it is absent):

* ``openllm``: the six Open LLM Leaderboard v1 matrices ``openllm_v1/responses/{bm}_B.parquet``
  (58-249 informative items of each benchmark, 3,300-4,400 models). Truth: the score on the
  *whole* benchmark, ``scores/{bm}_B_scores.csv`` ``full_score_metabench`` (hellaswag: the
  ``hellaswag`` column of ``open-llm-leaderboard.csv``, joined on model name). Protocols
  ``random`` (80/20 splits) and ``extrapolation`` (targets = the best 20 % by truth).
* ``psn``: the MMLU and BBH blocks of ``psn_irt/combine.csv`` (12 unnamed models, every item
  of the benchmark; ``column_segments_inferred.csv`` gives the columns). Truth: the mean over
  the block. Protocol ``loo`` (each model in turn is the only target).

Which combinations run. A full grid (7 methods x 6+ estimators x budgets x splits) takes hours
on 2 cores, so: every selection method with ``calibrated`` and with the project's own
estimators (every registered estimator that is not a published method, see
``PUBLISHED_ESTIMATORS``; picked up from the registry at run time), plus the published methods
as their authors pair them (``PUBLISHED_COMBOS``): random + mean, Anchor Points
(anchor_points + anchor), tinyBenchmarks gp-IRT (tinybenchmarks + gpirt), metabench-like
(metabench + calibrated). ``all`` (every matrix item) runs every estimator used.

psn has 11 source models per split. The estimators then fit no calibration line (their raw
estimate is the prediction, right because the truth is the mean over the same block) and take
leave-one-out conformal residuals (``estimators/base.py``, ``MIN_CALIBRATION_MODELS``). On the
MMLU block only IRT-free selectors and estimators run: one of the 12 models answers every
MMLU item correctly, and whenever it is a source model (11 of the 12 ``loo`` splits) the 2PL
fit of 11 x 14,042 diverges (measured during development: EM stopped at its 500-iteration
limit after 95 s with slopes of 1e12; 2.7 s without that model). BBH (11 x 6,511, ~1 s per
fit) also runs the IRT estimators and selectors.

Anchors computed here, on the same data: (a) metabench's own held-out error, the ``test`` rows
of ``scores/{bm}_B_scores.csv`` (models that are not in our matrices); (b) ridge regression of
the full score on the item responses, 5-fold CV over all models with all items and with 50
random items, and on the random/extrapolation splits (``ridge_items`` rows; its 50 items are
the random selector's on that split); (c) the published combinations from the run itself.

Outputs in OUT_DIR (default ``bench/`` for the full run, a temporary folder otherwise):
``reliability.json``, ``reliability.md``, ``reliability_{dataset}_{mae,mdad}.png`` and
``defaults.json`` (chosen method, estimator and budget per benchmark, read by
``tools/build_openllm_v1.py``).

    python tools/bench_reliability.py                          # full run, writes bench/
    python tools/bench_reliability.py --quick                  # arc + psn_bbh, small
    python tools/bench_reliability.py --benchmarks arc gsm8k   # some datasets only
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from lmeval_microbench._io import atomic_path
from lmeval_microbench._rng import spawn
from lmeval_microbench.errors import InputError
from lmeval_microbench.estimators import DEFAULT_ESTIMATOR, ESTIMATORS
from lmeval_microbench.plots import matplotlib_available, metric_vs_budget_png
from lmeval_microbench.reliability import (
    ALL,
    LEVEL,
    Budget,
    IRTCache,
    Plan,
    ResultPool,
    Split,
    budget_sort_key,
    complete_models,
    evaluate_split,
    extrapolation_splits,
    json_ready,
    loo_splits,
    markdown_table,
    needs_irt,
    random_splits,
    sort_records,
    summarise,
)
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import SELECTORS, make_selector

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = REPO / ".." / "shared" / "data"
OPENLLM = ("arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande")
PSN_BLOCKS = {"psn_mmlu": "MMLU", "psn_bbh": "BBH"}
PSN_IRT_FREE = {"psn_mmlu"}
"""psn blocks where no IRT is fitted (see the module docstring)."""
DATASETS = (*OPENLLM, *PSN_BLOCKS)

BUDGETS: tuple[Budget, ...] = (25, 50, 100, ALL)
REPEATS = {"random": 5, "extrapolation": 3, "loo": 2}
"""Repeats per protocol. ``extrapolation`` has one fixed split (its repeats only redraw the
selection; metabench's selection is deterministic), a ``loo`` repeat is a full cycle."""
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
RIDGE = "ridge_items"
"""Estimator label of the ridge baseline rows (not a registered estimator)."""
RIDGE_SUBSET = 50
RIDGE_ALPHAS = np.logspace(-3, 6, 37)
RIDGE_FOLDS = 5

TARGET_MAE_ALL = 1.0
TARGET_MAE_50 = 1.5
TARGET_BUDGET = 50
TARGET_MDAD_CUT = 0.30
MDAD_BASELINE = ("random", "mean")
"""Random sampling: uniformly drawn items scored by their mean (calibrated by a line)."""
DEFAULT_MAE = 1.5
DEFAULT_SLACK = {"random": 1.1, "extrapolation": 1.25}
PREFER_WITHIN = 0.1
DEFAULTS_RULE = (
    "per benchmark, a method x estimator x budget is eligible when its MAE is at most "
    f"max({DEFAULT_MAE}, {DEFAULT_SLACK['random']} x the lowest MAE at any budget) under the "
    f"random protocol and at most max({DEFAULT_MAE}, {DEFAULT_SLACK['extrapolation']} x the "
    "lowest) under extrapolation; the default is the smallest budget with an eligible "
    "combination and, at that budget, the eligible one with the lowest extrapolation MAE, "
    "except that one with our estimators wins if its extrapolation MAE is within "
    f"{PREFER_WITHIN} points of it. If nothing is eligible: the lowest sum of the two MAEs. "
    "'all' = every matrix item (method 'random', budget = the item count). The ridge "
    "baseline is not a candidate."
)


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
        table = _read_table(scores_file, ("model", "full_score_metabench"))
        truth = table.set_index("model")["full_score_metabench"]
        note = f"`full_score_metabench` of scores/{benchmark}_B_scores.csv"
    else:  # hellaswag: the leaderboard's own score over all 10,042 items
        board = data / "open-llm-leaderboard.csv"
        table = _read_table(board, ("name", benchmark))
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


def _read_table(path: Path, columns: Sequence[str]) -> pd.DataFrame:
    table = pd.read_csv(path)
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InputError(f"{path}: no column {missing[0]!r}; columns are {list(table.columns)}")
    return table


def load_psn_block(psn: Path, block: str) -> tuple[ResponseMatrix, np.ndarray, str]:
    """One benchmark's columns of ``combine.csv``; truth = each model's mean over the block.

    Item ids are ``psn.{block}.{k}`` with ``k`` the column of ``combine.csv`` (0-based), so an
    id names its column; models are ``psn_model_{row}``.
    """
    segments = _read_table(
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


# ---------------------------------------------------------------------- anchors
def ridge_gcv(
    x: np.ndarray, y: np.ndarray, alphas: np.ndarray = RIDGE_ALPHAS
) -> tuple[float, np.ndarray, float]:
    """Ridge regression of ``y`` on the columns of ``x``; GCV over ``alphas`` picks the penalty.

    The intercept is not penalised (columns and ``y`` are centred). One eigendecomposition of
    the small Gram matrix ``x_c^T x_c = V diag(s2) V^T`` serves every penalty: with
    ``z = V^T x_c^T y`` the coefficients are ``V z / (s2 + alpha)``, the residual sum of
    squares ``y^T y - sum(z^2 (s2 + 2 alpha) / (s2 + alpha)^2)`` and the degrees of freedom
    ``sum(s2 / (s2 + alpha))``. Returns (intercept, coefficients, alpha).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = y.size
    x_mean, y_mean = x.mean(axis=0), float(y.mean())
    xc, yc = x - x_mean, y - y_mean
    s2, v = np.linalg.eigh(xc.T @ xc)
    s2 = np.clip(s2, 0.0, None)
    z = v.T @ (xc.T @ yc)
    denominator = s2 + alphas[:, None]
    explained = np.sum(z**2 * (s2 + 2.0 * alphas[:, None]) / denominator**2, axis=1)
    rss = np.clip(float(yc @ yc) - explained, 0.0, None)
    dof = np.sum(s2 / denominator, axis=1) + 1.0
    with np.errstate(divide="ignore"):
        gcv = np.where(dof < n, n * rss / (n - dof) ** 2, np.inf)
    best = int(np.argmin(gcv))
    coef = v @ (z / denominator[best])
    return y_mean - float(x_mean @ coef), coef, float(alphas[best])


def ridge_predict(intercept: float, coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Ridge predictions clipped to the score range [0, 1]."""
    return np.clip(intercept + np.asarray(x, dtype=np.float64) @ coef, 0.0, 1.0)


def ridge_cv(
    values: np.ndarray,
    truth: np.ndarray,
    *,
    n_items: int | None = None,
    n_folds: int = RIDGE_FOLDS,
    seed: int = SEED,
) -> dict[str, float]:
    """K-fold CV error (points) of ridge on every item, or on ``n_items`` random ones per fold.

    Every model is predicted once, by the fit on the other folds; a fold's random items are
    drawn anew, so the error averages over item draws too.
    """
    values = np.asarray(values, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    if np.isnan(values).any():
        raise InputError("ridge baseline needs a complete matrix (no missing responses)")
    fold_rng, item_rng = spawn(seed, 2)
    labels = (np.arange(truth.size) % n_folds)[fold_rng.permutation(truth.size)]
    prediction = np.empty_like(truth)
    for fold in range(n_folds):
        held = labels == fold
        columns = (
            np.arange(values.shape[1])
            if n_items is None
            else np.sort(item_rng.choice(values.shape[1], n_items, replace=False))
        )
        intercept, coef, _ = ridge_gcv(values[~held][:, columns], truth[~held])
        prediction[held] = ridge_predict(intercept, coef, values[held][:, columns])
    error = (prediction - truth) * 100.0
    return {
        "mae": float(np.mean(np.abs(error))),
        "rmse": float(np.sqrt(np.mean(error**2))),
        "items": int(values.shape[1] if n_items is None else n_items),
        "models": int(truth.size),
        "folds": n_folds,
    }


def metabench_own_error(scores_file: Path) -> dict[str, float] | None:
    """metabench's held-out error: |pred_from_subset_irt - full_score_metabench| on ``test`` rows.

    None when the file does not exist (hellaswag has none). These test models are not in our
    matrices, so the number is a reference on other models, not on our splits.
    """
    if not scores_file.exists():
        return None
    table = _read_table(scores_file, ("split", "full_score_metabench", "pred_from_subset_irt"))
    test = table[table["split"] == "test"]
    if test.empty:
        raise InputError(f"{scores_file}: no rows with split == 'test'")
    error = (test["pred_from_subset_irt"] - test["full_score_metabench"]).to_numpy(dtype=float)
    if not np.all(np.isfinite(error)):
        raise InputError(f"{scores_file}: missing scores or predictions on test rows")
    return {
        "mae": float(np.mean(np.abs(error))),
        "rmse": float(np.sqrt(np.mean(error**2))),
        "n": len(test),
    }


def ridge_on_split(split: Split, pools: dict[tuple, ResultPool], budgets: Sequence[Budget]) -> None:
    """Ridge baseline on one split: all items, and the random selector's items at each budget."""
    for budget in budgets:
        start = time.perf_counter()
        if budget == ALL:
            method, items = ALL, list(split.source.item_ids)
        else:
            method = "random"
            items = list(
                make_selector("random")
                .select(split.source, int(budget), seed=split.selection_seed)
                .item_ids
            )
        source = split.source.values[:, split.source.item_positions(items)]
        target = split.target.values[:, split.target.item_positions(items)]
        intercept, coef, _ = ridge_gcv(source, split.source_truth)
        value = ridge_predict(intercept, coef, target)
        nan = np.full_like(value, np.nan)
        pool = pools.setdefault((split.protocol, method, RIDGE, budget), ResultPool())
        pool.add(split.repeat, split.target_truth, value, nan, nan)
        pool.seconds += time.perf_counter() - start
        pool.n_items = len(items)
        pool.n_source = split.source.n_models


# ---------------------------------------------------------------------- evaluation
def dataset_splits(dataset: Dataset, repeats: dict[str, int], seed: int) -> Iterator[Split]:
    """Splits of every protocol of the dataset, protocol by protocol."""
    makers = {"random": random_splits, "extrapolation": extrapolation_splits, "loo": loo_splits}
    for protocol in dataset.protocols:
        yield from makers[protocol](
            dataset.matrix, dataset.truth, repeats=repeats[protocol], seed=seed
        )


def n_splits(dataset: Dataset, repeats: dict[str, int]) -> int:
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
            total=n_splits(dataset, repeats) * sum(len(p.selections()) for p in plans),
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


# ---------------------------------------------------------------------- summary and targets
def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def pick(
    records: Sequence[dict[str, Any]], dataset: str, protocol: str, budget: Budget, **match: str
) -> list[dict[str, Any]]:
    """Records of one dataset x protocol x budget (ridge rows left out unless matched)."""
    return [
        r
        for r in records
        if r["dataset"] == dataset
        and r["protocol"] == protocol
        and r["budget"] == budget
        and (r["estimator"] != RIDGE or match.get("estimator") == RIDGE)
        and all(r[k] == v for k, v in match.items())
    ]


def best_by_mae(
    records: Sequence[dict[str, Any]], dataset: str, protocol: str, budget: Budget
) -> dict[str, Any] | None:
    """The method x estimator with the lowest MAE (ridge baseline excluded); None if none ran."""
    rows = [r for r in pick(records, dataset, protocol, budget) if _finite(r["mae"])]
    # ties (equal weights make anchor = mean) go to a published pairing over a grid row
    return min(rows, key=lambda r: (r["mae"], r["role"] == "grid")) if rows else None


def mdad_cut(best: float | None, baseline: float | None) -> float | None:
    """Relative MDAD reduction ``1 - best / baseline``; None when it cannot be formed.

    An infinite baseline (random never orders pairs reliably) against a finite best counts
    as a full cut (1.0); an infinite best gives None (the target is then missed).
    """
    if best is None or baseline is None or math.isinf(best):
        return None
    if math.isinf(baseline):
        return 1.0
    return 1.0 - best / baseline if baseline > 0 else None


def verdict(met: bool | None) -> str:
    return "n/a" if met is None else ("met" if met else "missed")


def summary_rows(records: Sequence[dict[str, Any]], datasets: Sequence[str]) -> list[dict]:
    """Per dataset x protocol: the best combination at 50 items and at all items, and targets."""
    rows = []
    for name in datasets:
        protocols = list(dict.fromkeys(r["protocol"] for r in records if r["dataset"] == name))
        for protocol in protocols:
            at50 = best_by_mae(records, name, protocol, TARGET_BUDGET)
            full = best_by_mae(records, name, protocol, ALL)
            base = pick(
                records,
                name,
                protocol,
                TARGET_BUDGET,
                method=MDAD_BASELINE[0],
                estimator=MDAD_BASELINE[1],
            )
            rcal = pick(
                records, name, protocol, TARGET_BUDGET, method="random", estimator="calibrated"
            )
            base_mdad = _mdad_value(base[0]) if base else None
            best_mdad = _mdad_value(at50) if at50 else None
            cut = mdad_cut(best_mdad, base_mdad)
            rows.append(
                {
                    "dataset": name,
                    "protocol": protocol,
                    "best50": _brief(at50),
                    "mae50": at50["mae"] if at50 else None,
                    "target_mae50": verdict(None if at50 is None else at50["mae"] <= TARGET_MAE_50),
                    "best_all": _brief(full),
                    "mae_all": full["mae"] if full else None,
                    "target_mae_all": verdict(
                        None if full is None else full["mae"] <= TARGET_MAE_ALL
                    ),
                    "mdad50": best_mdad,
                    "mdad50_random_mean": base_mdad,
                    "mdad50_random_calibrated": _mdad_value(rcal[0]) if rcal else None,
                    "mdad_cut": cut,
                    "target_mdad": verdict(
                        None
                        if base_mdad is None or best_mdad is None
                        else (cut is not None and cut >= TARGET_MDAD_CUT)
                    ),
                }
            )
    return rows


def _mdad_value(record: dict[str, Any]) -> float | None:
    """A record's MDAD: a number, ``inf`` (never ordered reliably) or None (too few pairs)."""
    value = record["mdad"]
    return None if value is None or math.isnan(value) else float(value)


def _brief(record: dict[str, Any] | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {k: record[k] for k in ("method", "estimator", "budget", "items", "mae", "mdad")}


# ---------------------------------------------------------------------- defaults
def choose_default(
    records: Sequence[dict[str, Any]], dataset: str, preferred: Sequence[str]
) -> dict[str, Any] | None:
    """Method, estimator and budget of one benchmark by ``DEFAULTS_RULE``; None without data.

    A default must be good where it is used (new models like the source ones: ``random``)
    and not fall apart on stronger models (``extrapolation``); among the good enough ones
    the smallest subset is the point of a micro-benchmark.
    """
    rows = {
        protocol: {
            (r["method"], r["estimator"], r["budget"]): r
            for r in records
            if r["dataset"] == dataset and r["protocol"] == protocol and r["estimator"] != RIDGE
        }
        for protocol in DEFAULT_SLACK
    }
    keys = [
        k
        for k in rows["random"]
        if k in rows["extrapolation"] and all(_finite(rows[p][k]["mae"]) for p in DEFAULT_SLACK)
    ]
    if not keys:
        return None
    thresholds = {
        p: max(DEFAULT_MAE, slack * min(rows[p][k]["mae"] for k in keys))
        for p, slack in DEFAULT_SLACK.items()
    }
    eligible = [k for k in keys if all(rows[p][k]["mae"] <= thresholds[p] for p in thresholds)]
    if eligible:
        smallest = min((k[2] for k in eligible), key=budget_sort_key)
        at_budget = [k for k in eligible if k[2] == smallest]
        best = min(rows["extrapolation"][k]["mae"] for k in at_budget)
        ours = [
            k
            for k in at_budget
            if k[1] in preferred and rows["extrapolation"][k]["mae"] <= best + PREFER_WITHIN
        ]
        chosen = min(
            ours or at_budget, key=lambda k: (rows["extrapolation"][k]["mae"], _registry_rank(k))
        )
    else:
        chosen = min(
            keys, key=lambda k: (sum(rows[p][k]["mae"] for p in DEFAULT_SLACK), _registry_rank(k))
        )
    row = rows["random"][chosen]
    return {
        "method": "random" if chosen[0] == ALL else chosen[0],
        "estimator": chosen[1],
        "budget": int(row["items"]),
        "all_items": chosen[0] == ALL,
        "eligible": bool(eligible),
        "random_mae": round(row["mae"], 3),
        "extrapolation_mae": round(rows["extrapolation"][chosen]["mae"], 3),
        "random_mdad": row["mdad"],
        "thresholds_mae": {p: round(t, 3) for p, t in thresholds.items()},
    }


def _registry_rank(key: tuple[str, str, Budget]) -> int:
    """Tie-break of equal errors (equal weights make anchor = mean): the registry order."""
    names = list(ESTIMATORS)
    return names.index(key[1]) if key[1] in names else len(names)


# ---------------------------------------------------------------------- report
def _num(value: Any, fmt: str = ".2f") -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "never"
    if isinstance(value, float) and math.isnan(value):
        return "-"
    return format(value, fmt)


def _combo(brief: dict[str, Any] | None) -> str:
    if brief is None:
        return "-"
    if brief["method"] == ALL:
        return f"all ({brief['items']}) + {brief['estimator']}"
    return f"{brief['method']} + {brief['estimator']}"


def _mark(text: str, value: str) -> str:
    return f"{value} {text}" if text == "met" else f"{value} **{text}**"


def summary_table(rows: Sequence[dict]) -> list[str]:
    lines = [
        "| benchmark | protocol | best at 50 items | MAE@50 (<= 1.5) | best at all items "
        "| MAE@all (<= 1.0) | MDAD@50 best / random+mean / random+calibrated | MDAD cut "
        "(>= 30 %) |",
        "|---|---|---|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        cut = "-" if r["mdad_cut"] is None else f"{100 * r['mdad_cut']:.0f} %"
        lines.append(
            f"| {r['dataset']} | {r['protocol']} | {_combo(r['best50'])} | "
            f"{_mark(r['target_mae50'], _num(r['mae50']))} | {_combo(r['best_all'])} | "
            f"{_mark(r['target_mae_all'], _num(r['mae_all']))} | "
            f"{_num(r['mdad50'], '.1f')} / {_num(r['mdad50_random_mean'], '.1f')} / "
            f"{_num(r['mdad50_random_calibrated'], '.1f')} | {_mark(r['target_mdad'], cut)} |"
        )
    return lines


def target_lines(rows: Sequence[dict]) -> list[str]:
    """One line per target: met everywhere, or where it is missed and by how much."""
    targets = [
        ("target_mae_all", "mae_all", f"MAE <= {TARGET_MAE_ALL} with all B items", ".2f"),
        ("target_mae50", "mae50", f"MAE <= {TARGET_MAE_50} with {TARGET_BUDGET} items", ".2f"),
        ("target_mdad", "mdad_cut", "MDAD at 50 items >= 30 % below random + mean", ".0%"),
    ]
    lines = []
    for key, value_key, text, fmt in targets:
        judged = [r for r in rows if r[key] != "n/a"]
        missed = [r for r in judged if r[key] == "missed"]
        if not judged:
            lines.append(f"- {text}: not measured in this run.")
        elif not missed:
            lines.append(f"- {text}, every benchmark and protocol: **met**.")
        else:
            where = ", ".join(
                f"{r['dataset']} {r['protocol']} ({_num(r[value_key], fmt)})" for r in missed
            )
            lines.append(f"- {text}: **missed** on {len(missed)} of {len(judged)}: {where}.")
    return lines


def anchors_table(
    records: Sequence[dict[str, Any]], anchors: dict[str, dict], datasets: Sequence[str]
) -> list[str]:
    """Reference numbers per benchmark: metabench's own, ridge CV, ridge and published on splits."""
    columns = [
        (
            "metabench own (test models, all B items)",
            lambda d, a: _num(_get(a, "metabench", "mae")),
        ),
        ("ridge 5-fold CV, all items", lambda d, a: _num(_get(a, "ridge_cv_all", "mae"))),
        ("ridge 5-fold CV, 50 random", lambda d, a: _num(_get(a, "ridge_cv_50", "mae"))),
    ]
    for protocol in ("random", "extrapolation"):
        for label, method, estimator, budget in (
            ("ridge all", ALL, RIDGE, ALL),
            ("ridge 50 random", "random", RIDGE, TARGET_BUDGET),
            ("random + mean @50", "random", "mean", TARGET_BUDGET),
            ("Anchor Points @50", "anchor_points", "anchor", TARGET_BUDGET),
            ("tinyBenchmarks gp-IRT @50", "tinybenchmarks", "gpirt", TARGET_BUDGET),
            ("metabench-like @50", "metabench", "calibrated", TARGET_BUDGET),
        ):
            columns.append(
                (
                    f"{protocol}: {label}",
                    lambda d, a, p=protocol, m=method, e=estimator, b=budget: _num(
                        _first_mae(records, d, p, b, m, e)
                    ),
                )
            )
    lines = [
        "| anchor (MAE, points) | " + " | ".join(datasets) + " |",
        "|---|" + "---:|" * len(datasets),
    ]
    for title, getter in columns:
        cells = [getter(d, anchors.get(d, {})) for d in datasets]
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return lines


def _get(anchor: dict, key: str, field_name: str) -> float | None:
    entry = anchor.get(key)
    return None if entry is None else entry.get(field_name)


def _first_mae(records, dataset, protocol, budget, method, estimator) -> float | None:
    rows = pick(records, dataset, protocol, budget, method=method, estimator=estimator)
    return rows[0]["mae"] if rows else None


def defaults_table(defaults: dict[str, dict | None]) -> list[str]:
    lines = [
        "| benchmark | method | estimator | budget | random MAE | extrapolation MAE |",
        "|---|---|---|---:|---:|---:|",
    ]
    for name, d in defaults.items():
        if d is None:
            lines.append(f"| {name} | - | - | - | - | - |")
            continue
        budget = f"{d['budget']} (all)" if d["all_items"] else str(d["budget"])
        lines.append(
            f"| {name} | {d['method']} | {d['estimator']} | {budget} | {d['random_mae']:.2f} | "
            f"{d['extrapolation_mae']:.2f} |"
        )
    return lines


def dataset_section(
    name: str, records: Sequence[dict[str, Any]], info: dict[str, Any], plots: dict[str, str]
) -> list[str]:
    lines = [
        f"## {name}: {info['n_models']} models x {info['n_items']} items",
        "",
        f"Truth: {info['truth']}. Repeats: "
        + ", ".join(f"{p} {n}" for p, n in info["repeats"].items())
        + f". {info['irt_fits']} 2PL fits shared by the IRT estimators "
        f"({info['irt_unconverged']} hit the iteration limit, {info['irt_seconds']:.0f} s); "
        f"{info['seconds']:.0f} s in all. Seconds of estimator fits: "
        + ", ".join(f"{k} {v:.0f}" for k, v in info["seconds_by_step"]["estimators"].items())
        + "; of selection: "
        + ", ".join(f"{k} {v:.0f}" for k, v in info["seconds_by_step"]["selection"].items())
        + ".",
        "",
    ]
    lines += [f"{note}" for note in info["notes"]] + ([""] if info["notes"] else [])
    if info["warnings"]:
        lines += [
            "Warnings raised during the run: "
            + "; ".join(f"{k} x{v}" for k, v in sorted(info["warnings"].items()))
            + ".",
            "",
        ]
    if plots:
        lines += [" ".join(f"![{k}]({v})" for k, v in plots.items()), ""]
    for protocol in info["protocols"]:
        rows = [r for r in records if r["dataset"] == name and r["protocol"] == protocol]
        if rows:
            lines += [
                f"### {name}, {protocol}: {rows[0]['n_sources']} source models per split, "
                f"{rows[0]['n_targets']} target models per repeat",
                "",
                *markdown_table(rows),
                "",
            ]
    return lines


# ---------------------------------------------------------------------- run
@dataclass
class RunConfig:
    shared: Path
    datasets: list[str]
    budgets: tuple[Budget, ...]
    repeats: dict[str, int]
    seed: int
    out_dir: Path
    plots: bool
    ours: tuple[str, ...]
    psn_ours: tuple[str, ...]
    command: str
    progress: bool = True
    blas_threads: int | None = 1


def build_dataset(name: str, config: RunConfig) -> Dataset:
    """Load one dataset and attach its protocols, combinations and budgets."""
    if name in OPENLLM:
        matrix, truth, note = load_openllm(config.shared / "openllm_v1", name)
        matrix, truth = complete_models(matrix, truth)
        budgets = tuple(b for b in config.budgets if b == ALL or int(b) < matrix.n_items)
        return Dataset(
            name,
            matrix,
            truth,
            note,
            ("random", "extrapolation"),
            openllm_combos(list(SELECTORS), config.ours),
            budgets,
            ridge=True,
        )
    block = PSN_BLOCKS[name]
    matrix, truth, note = load_psn_block(config.shared / "psn_irt", block)
    irt = name not in PSN_IRT_FREE
    notes = (
        "11 source models per split: estimators fit no calibration line (the raw estimate is "
        "the prediction; the truth is the mean over this block) and use leave-one-out "
        "conformal residuals.",
        "IRT-free selectors and estimators only: one model answers every MMLU item correctly, "
        "and with it among the source models (11 of the 12 splits) the 2PL fit of 11 x 14,042 "
        "diverges (measured during development: EM stopped at its 500-iteration limit after "
        "95 s, slopes ~1e12; 2.7 s without that model)."
        if not irt
        else "IRT-free selectors with every estimator, plus tinybenchmarks + gpirt and "
        "metabench + calibrated (IRT selectors).",
    )
    budgets = tuple(b for b in config.budgets if b == ALL or int(b) < matrix.n_items)
    return Dataset(
        name,
        matrix,
        truth,
        note,
        ("loo",),
        psn_combos(config.psn_ours, irt=irt),
        budgets,
        notes=notes,
    )


def machine_facts() -> dict[str, Any]:
    """Where the run happened: CPU, cores, load, Python and numpy, and the git commit."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        commit += " (with uncommitted changes)" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "commit": commit,
    }


def strict_json(value: Any) -> Any:
    """NaN and infinities as None, recursively (strict JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def compute_anchors(dataset: Dataset, config: RunConfig) -> dict[str, Any]:
    """metabench's own held-out error and the ridge CV baselines of an Open LLM matrix."""
    if dataset.name not in OPENLLM:
        return {}
    scores = config.shared / "openllm_v1" / "scores" / f"{dataset.name}_B_scores.csv"
    values, truth = dataset.matrix.values, dataset.truth
    anchors: dict[str, Any] = {
        "metabench": metabench_own_error(scores),
        "ridge_cv_all": ridge_cv(values, truth, seed=config.seed),
    }
    if RIDGE_SUBSET < dataset.matrix.n_items:
        anchors["ridge_cv_50"] = ridge_cv(values, truth, n_items=RIDGE_SUBSET, seed=config.seed)
    return anchors


def blas_limit(threads: int | None) -> contextlib.AbstractContextManager:
    """Limit the BLAS threads (threadpoolctl, an lm-eval dependency via scikit-learn).

    The matrices here are small (100 x 3,000): on 2 cores shared with other work, a ridge fit
    took 0.2-0.4 s with 2 OpenBLAS threads and 2-40 ms with one, so one is the default.
    """
    if threads is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        warnings.warn("threadpoolctl is not installed: BLAS threads not limited", stacklevel=2)
        return contextlib.nullcontext()
    return threadpool_limits(limits=threads, user_api="blas")


def run(config: RunConfig) -> dict[str, Any]:
    """Evaluate every dataset, then write the JSON, markdown, plots and defaults."""
    with blas_limit(config.blas_threads):
        return _run(config)


def _run(config: RunConfig) -> dict[str, Any]:
    started = time.perf_counter()
    cpu_started = time.process_time()
    facts = machine_facts()
    records: list[dict[str, Any]] = []
    infos: dict[str, dict[str, Any]] = {}
    anchors: dict[str, dict[str, Any]] = {}
    for name in tqdm(config.datasets, desc="datasets", disable=not config.progress):
        dataset = build_dataset(name, config)
        anchors[name] = compute_anchors(dataset, config)
        rows, info = evaluate_dataset(
            dataset, repeats=config.repeats, seed=config.seed, progress=config.progress
        )
        records += rows
        infos[name] = info
    minutes = (time.perf_counter() - started) / 60.0
    cpu_minutes = (time.process_time() - cpu_started) / 60.0
    openllm = [d for d in config.datasets if d in OPENLLM]
    psn = [d for d in config.datasets if d in PSN_BLOCKS]
    summary = summary_rows(records, openllm)
    psn_summary = summary_rows(records, psn)
    preferred = preferred_estimators(config.ours)
    defaults = {name: choose_default(records, name, preferred) for name in openllm}
    plots = draw_plots(records, config) if config.plots else {}
    run_info = {
        "command": config.command,
        "finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "minutes": round(minutes, 1),
        "cpu_minutes": round(cpu_minutes, 1),
        "blas_threads": config.blas_threads,
        "machine": facts,
        "seed": config.seed,
        "repeats": config.repeats,
        "budgets": list(config.budgets),
        "our_estimators": list(config.ours),
        "psn_our_estimators": list(config.psn_ours),
        "registered_estimators": list(ESTIMATORS),
        "selectors": list(SELECTORS),
        "level": LEVEL,
    }
    payload = {
        "info": run_info,
        "datasets": infos,
        "anchors": anchors,
        "summary": summary,
        "psn_summary": psn_summary,
        "defaults": defaults,
        "defaults_rule": DEFAULTS_RULE,
        "records": json_ready(records),
    }
    texts = {
        "reliability.json": json.dumps(strict_json(payload), indent=1, allow_nan=False) + "\n",
        "reliability.md": markdown(
            run_info, infos, records, anchors, summary, psn_summary, defaults, plots
        )
        + "\n",
        "defaults.json": json.dumps(
            strict_json(
                {
                    "generated_by": config.command,
                    "finished": run_info["finished"],
                    "rule": DEFAULTS_RULE,
                    "benchmarks": {k: v for k, v in defaults.items() if v is not None},
                }
            ),
            indent=2,
            allow_nan=False,
        )
        + "\n",
    }
    write_outputs(config.out_dir, texts, plots)
    return payload


def draw_plots(records: Sequence[dict[str, Any]], config: RunConfig) -> dict[str, bytes]:
    """MAE and MDAD against budget per dataset (file name -> PNG bytes)."""
    if not matplotlib_available():
        warnings.warn("matplotlib is not installed: no plots", stacklevel=2)
        return {}
    plots = {}
    for name in config.datasets:
        rows = [r for r in records if r["dataset"] == name]
        for metric, label in (("mae", "MAE (score points)"), ("mdad", "MDAD (score points)")):
            plots[f"reliability_{name}_{metric}.png"] = metric_vs_budget_png(
                rows, metric, ylabel=label, title=f"{name}: {label.split(' ')[0]} vs budget"
            )
    return plots


def write_outputs(out_dir: Path, texts: dict[str, str], blobs: dict[str, bytes]) -> None:
    """Write everything atomically, after all of it was computed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        with atomic_path(out_dir / name) as tmp:
            tmp.write_text(text, encoding="utf-8")
    for name, blob in blobs.items():
        with atomic_path(out_dir / name) as tmp:
            tmp.write_bytes(blob)


def markdown(
    run_info: dict[str, Any],
    infos: dict[str, dict[str, Any]],
    records: Sequence[dict[str, Any]],
    anchors: dict[str, dict[str, Any]],
    summary: Sequence[dict],
    psn_summary: Sequence[dict],
    defaults: dict[str, dict | None],
    plots: dict[str, bytes],
) -> str:
    machine = run_info["machine"]
    openllm = [d for d in infos if d in OPENLLM]
    lines = [
        "# Reliability of micro-benchmarks on real leaderboard data",
        "",
        "Generated by `tools/bench_reliability.py`; do not edit by hand. Command:",
        "",
        f"    {run_info['command']}",
        "",
        f"Run time {run_info['minutes']:.1f} min wall clock, {run_info['cpu_minutes']:.1f} min "
        f"of CPU (this process; BLAS threads: {run_info['blas_threads'] or 'default'}), "
        f"finished {run_info['finished']}, on {machine['cpu']} ({machine['cores']} cores, "
        f"load average {machine['load_average_at_start'][0]} at the start: other work shared "
        f"the machine), Python {machine['python']}, numpy {machine['numpy']}, commit "
        f"{machine['commit']}. Seed {run_info['seed']}.",
        "",
        "Each split divides the models into source models (item selection, IRT fit and "
        "estimator fits see only them) and target models, whose full-benchmark score is "
        "estimated from their answers to the selected items. `random`: "
        f"{run_info['repeats'].get('random')} random 80/20 splits; `extrapolation`: the best "
        f"20 % of models by truth are the targets ({run_info['repeats'].get('extrapolation')} "
        "repeats of the same split, redrawing the selection); `loo`: each model in turn. "
        "Errors in score points (percent of the whole benchmark). MDAD: the smallest true gap "
        "between two target models from which the estimates order at least 80 % of pairs "
        "correctly (bins of 0.5 points; `never`: not even the largest gaps).",
        "",
        "Combinations: every selection method with `calibrated` and with our own estimators "
        f"({', '.join(run_info['our_estimators']) or 'none in this run'}; on psn: "
        f"{', '.join(run_info['psn_our_estimators']) or 'none'}; registered: "
        f"{', '.join(run_info['registered_estimators'])}); the "
        "published methods as their authors pair them (random + mean, Anchor Points = "
        "anchor_points + anchor, tinyBenchmarks gp-IRT = tinybenchmarks + gpirt, "
        "metabench-like = metabench + calibrated); `all` = every matrix item, with every "
        "estimator used. `ridge_items` rows are the ridge baseline (not a micro-benchmark "
        "estimator of the package); they are never the 'best'.",
        "",
        "## Summary: Open LLM Leaderboard v1",
        "",
        "Best method x estimator by MAE at 50 items and at all items (58-249, the matrix), per "
        f"protocol. MDAD cut: 1 - MDAD(best at 50) / MDAD({' + '.join(MDAD_BASELINE)} at 50) "
        "(random sampling scored by its subset mean, calibrated by a line); random + "
        "calibrated is shown for comparison.",
        "",
        *summary_table(summary),
        "",
        *target_lines(summary),
        "",
    ]
    if psn_summary:
        lines += [
            "## Summary: whole benchmarks, 12 models (psn_irt), leave-one-model-out",
            "",
            "Targets are stated for the Open LLM matrices; shown here for reference.",
            "",
            *summary_table(psn_summary),
            "",
        ]
    if openllm:
        lines += [
            "## Anchors",
            "",
            "(a) metabench's own reconstruction error with all B items: its `test` models "
            "(not in our matrices), |pred_from_subset_irt - full_score_metabench|. (b) Ridge "
            "regression of the full score on the item responses, penalty by GCV: 5-fold CV "
            "over all models of our matrices (50 random items: redrawn per fold), and fitted "
            "on the source models of each split (50 items: the random selector's). (c) "
            "Published methods from this run.",
            "",
            *anchors_table(records, anchors, openllm),
            "",
            "## Defaults per benchmark (`bench/defaults.json`)",
            "",
            f"Rule: {DEFAULTS_RULE}",
            "",
            *defaults_table(defaults),
            "",
        ]
    for name, info in infos.items():
        files = {
            metric: f"reliability_{name}_{metric}.png"
            for metric in ("mae", "mdad")
            if f"reliability_{name}_{metric}.png" in plots
        }
        lines += dataset_section(name, records, info, files)
    return "\n".join(lines)


# ---------------------------------------------------------------------- command line
def parse_budgets(text: str) -> tuple[Budget, ...]:
    budgets: list[Budget] = []
    for part in text.split(","):
        part = part.strip().lower()
        if part == ALL:
            budgets.append(ALL)
        elif part.isdigit() and int(part) > 0:
            budgets.append(int(part))
        else:
            raise argparse.ArgumentTypeError(
                f"budget {part!r} is neither a positive integer nor 'all'"
            )
    return tuple(dict.fromkeys(budgets))


def estimator_list(parser: argparse.ArgumentParser, option: str, text: str) -> tuple[str, ...]:
    """Comma-separated registered estimator names ('' for none); unknown names stop the run."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in ESTIMATORS]
    if unknown:
        parser.error(f"{option}: unknown estimators {unknown}; registered: {list(ESTIMATORS)}")
    return names


def parse_args(argv: list[str] | None) -> RunConfig:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="../shared/data")
    parser.add_argument(
        "--benchmarks",
        nargs="+",
        choices=DATASETS,
        default=list(DATASETS),
        help="datasets to run (default: all eight)",
    )
    parser.add_argument(
        "--budgets",
        type=parse_budgets,
        default=BUDGETS,
        help="comma-separated item counts and 'all' (default 25,50,100,all)",
    )
    parser.add_argument(
        "--repeats", type=int, default=REPEATS["random"], help="random 80/20 splits (default 5)"
    )
    parser.add_argument("--extrapolation-repeats", type=int, default=REPEATS["extrapolation"])
    parser.add_argument("--loo-repeats", type=int, default=REPEATS["loo"])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--ours",
        help="comma-separated estimators to treat as our own "
        "(default: every registered estimator that is not a published method)",
    )
    parser.add_argument(
        "--psn-ours",
        help="those of our estimators to run on the psn blocks (default: as --ours; 11 models "
        "x 6,511-14,042 items: leave out one whose fit grows with items^3)",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        help="output folder (default: bench/ for the full default run, else a temporary folder)",
    )
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--no-progress", action="store_true", help="no tqdm progress bars")
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="BLAS threads (default 1; 0 leaves the library default)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="arc and psn_bbh, 2 random splits, 1 extrapolation repeat, budgets 25,all",
    )
    args = parser.parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    full_run = not given
    if args.quick:
        args.benchmarks, args.budgets = ["arc", "psn_bbh"], (25, ALL)
        args.repeats, args.extrapolation_repeats, args.loo_repeats = 2, 1, 1
    if min(args.repeats, args.extrapolation_repeats, args.loo_repeats) < 1:
        parser.error("repeats must be positive")
    if args.blas_threads < 0:
        parser.error("--blas-threads must be 0 (library default) or positive")
    if not (args.shared / "openllm_v1").is_dir() or not (args.shared / "psn_irt").is_dir():
        parser.error(f"{args.shared}: no openllm_v1/ or psn_irt/ (the shared data is missing)")
    ours = own_estimators() if args.ours is None else estimator_list(parser, "--ours", args.ours)
    psn_ours = (
        ours if args.psn_ours is None else estimator_list(parser, "--psn-ours", args.psn_ours)
    )
    out_dir = args.out_dir or (
        REPO / "bench" if full_run else Path(tempfile.gettempdir()) / "microbench-reliability"
    )
    return RunConfig(
        shared=args.shared,
        datasets=list(dict.fromkeys(args.benchmarks)),
        budgets=args.budgets,
        repeats={
            "random": args.repeats,
            "extrapolation": args.extrapolation_repeats,
            "loo": args.loo_repeats,
        },
        seed=args.seed,
        out_dir=out_dir,
        plots=not args.no_plots,
        ours=ours,
        psn_ours=psn_ours,
        command=shlex.join(["python", "tools/bench_reliability.py", *given]),
        progress=not args.no_progress,
        blas_threads=args.blas_threads or None,
    )


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    payload = run(config)
    print(
        f"wrote {config.out_dir}/reliability.{{json,md}}, defaults.json and plots in "
        f"{payload['info']['minutes']:.1f} min"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
