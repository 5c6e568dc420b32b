"""Per split: select items on the source models, fit every estimator, estimate the targets.

Method ``adaptive`` is the exception: it selects per target model, so it is not a subset plus
estimators but a pool fitted on the split's source models through which every target is
replayed once to the largest budget and scored at each budget (its records carry estimator
``adaptive``), on the same splits and targets as the static methods.

Work is shared so that a benchmark takes minutes, not hours: IRT is fitted once per source
set (:class:`IRTCache`), items are selected once per method x budget x split and every
estimator is fitted on that same subset, and the ``all`` budget is evaluated once, not once
per method. The matrices are small (tens to thousands of models x hundreds to thousands of
items), so BLAS threads cost more than they bring: :func:`blas_limit` runs the evaluation
on one thread unless told otherwise (measured in ``bench/reliability_speed.md``).
"""

from __future__ import annotations

import contextlib
import inspect
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..adaptive.evaluate import estimate_targets
from ..build import fit_source_irt
from ..errors import ConvergenceWarning, InputError
from ..estimators import ESTIMATORS, make_estimator, needs_irt
from ..irt.params import ItemParams
from ..responses import ResponseMatrix
from ..selection import SELECTORS, make_selector
from ..selection.base import Selector, Subset
from ..truth import complete_models
from .metrics import ResultPool, summarise
from .plan import (
    ADAPTIVE,
    ALL,
    DEFAULT_BUDGETS,
    DEFAULT_REPEATS,
    Budget,
    Plan,
    budget_sort_key,
    check_plan,
    default_protocols,
    default_repeats,
)
from .splits import (
    Split,
    check_holdout,
    check_truth,
    n_splits,
    protocol_splits,
)

LEVEL = 0.9
BLAS_THREADS = 1
"""BLAS threads while evaluating (None: the library's default, one per core)."""


def all_items_subset(source: ResponseMatrix) -> Subset:
    """Every matrix item with equal weight: the ``all`` budget."""
    return Subset(source.item_ids, np.full(source.n_items, 1.0 / source.n_items), ALL)


def select_items(selector: Selector, split: Split, budget: int) -> Subset:
    """Run a selector on the split's source models only (with their truths where it takes them)."""
    if "target" in inspect.signature(selector.select).parameters:
        return selector.select(
            split.source, budget, seed=split.selection_seed, target=split.source_truth
        )
    return selector.select(split.source, budget, seed=split.selection_seed)


@dataclass
class ReliabilityResult:
    """Rows of the benchmark (one per method x estimator x budget x protocol) and run facts."""

    records: list[dict[str, Any]]
    info: dict[str, Any]


class IRTCache:
    """IRT parameters of the last source set: splits of one key arrive one after another."""

    def __init__(self, irt_model: str) -> None:
        self.irt_model = irt_model
        self.key: str | None = None
        self.params: ItemParams | None = None
        self.fits = 0
        self.unconverged = 0
        self.seconds = 0.0

    def get(self, split: Split) -> ItemParams:
        if split.key != self.key or self.params is None:
            start = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                self.params = fit_source_irt(
                    split.source, model=self.irt_model, seed=split.irt_seed
                )
            self.unconverged += sum(issubclass(w.category, ConvergenceWarning) for w in caught)
            self.key = split.key
            self.fits += 1
            self.seconds += time.perf_counter() - start
        return self.params


def evaluate_split(
    split: Split,
    plan: Plan,
    pools: dict[tuple[str, str, str, Budget], ResultPool],
    irt_cache: IRTCache,
    bar: Any = None,
) -> None:
    """Select once per method x budget, fit every estimator on that subset, estimate targets.

    ``bar`` (a tqdm bar, or None) advances by one per method x budget and names the one just
    done, so a long run shows where it is and how long is left.
    """
    irt = irt_cache.get(split) if any(needs_irt(e) for e in plan.estimators) else None
    if ADAPTIVE in plan.methods:
        evaluate_adaptive(split, [int(b) for b in plan.budgets if b != ALL], pools)
    for method, budget in plan.selections():
        if method == ADAPTIVE:
            if bar is not None:
                bar.update(1)
            continue
        start = time.perf_counter()
        if budget == ALL:
            subset = all_items_subset(split.source)
        else:
            subset = select_items(make_selector(method), split, int(budget))
        selection_seconds = time.perf_counter() - start
        for name in plan.estimators:
            start = time.perf_counter()
            estimator = make_estimator(name).fit(split.source, subset, split.source_truth, irt=irt)
            value, lower, upper = estimator.estimate_matrix(split.target, level=LEVEL)
            pool = pools.setdefault((split.protocol, method, name, budget), ResultPool())
            pool.add(split.repeat, split.target_truth, value, lower, upper)
            pool.seconds += time.perf_counter() - start
            pool.selection_seconds += selection_seconds
            pool.n_items = subset.budget
            pool.n_source = split.source.n_models
        if bar is not None:
            bar.set_postfix_str(f"{split.protocol} {method} {budget}", refresh=False)
            bar.update(1)


def evaluate_adaptive(
    split: Split, budgets: Sequence[int], pools: dict[tuple[str, str, str, Budget], ResultPool]
) -> None:
    """Adaptive testing on one split: one pool fit, one replay, a record pool per budget."""
    if not budgets:
        return
    start = time.perf_counter()
    results = estimate_targets(
        split.source, split.source_truth, split.target, budgets, level=LEVEL, seed=split.irt_seed
    )
    seconds = (time.perf_counter() - start) / len(results)
    for budget, (value, lower, upper) in results.items():
        pool = pools.setdefault((split.protocol, ADAPTIVE, ADAPTIVE, budget), ResultPool())
        pool.add(split.repeat, split.target_truth, value, lower, upper)
        pool.seconds += seconds
        pool.n_items = budget
        pool.n_source = split.source.n_models


def blas_limit(threads: int | None) -> contextlib.AbstractContextManager:
    """Limit the BLAS threads (threadpoolctl, an lm-eval dependency via scikit-learn).

    The matrices here are small: on 2 cores shared with other work, a 2,854 x 21 by 21 x 50
    product took 20 ms with 2 OpenBLAS threads and 0.9 ms with one, and a ridge fit on a
    100 x 3,000 matrix 0.2-0.4 s against 2-40 ms. ``None`` leaves the threads as they are.
    """
    if threads is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        warnings.warn("threadpoolctl is not installed: BLAS threads not limited", stacklevel=2)
        return contextlib.nullcontext()
    return threadpool_limits(limits=threads, user_api="blas")


def run_reliability(
    matrix: ResponseMatrix,
    truth: np.ndarray,
    *,
    methods: Sequence[str] | None = None,
    estimators: Sequence[str] | None = None,
    budgets: Sequence[Budget] = DEFAULT_BUDGETS,
    protocols: Sequence[str] | None = None,
    repeats: int | None = DEFAULT_REPEATS,
    seed: int = 0,
    holdout: ResponseMatrix | None = None,
    holdout_truth: np.ndarray | None = None,
    irt_model: str = "2pl",
    progress: bool = True,
    blas_threads: int | None = BLAS_THREADS,
) -> ReliabilityResult:
    """Evaluate every method x estimator x budget x protocol; one record per combination.

    Parameters
    ----------
    matrix, truth
        Responses of the models and their true full-benchmark scores (fractions, one per row).
    methods, estimators
        Registry names; None means every registered one.
    budgets
        Item counts and/or ``"all"`` (every matrix item; evaluated once, with method ``all``).
    protocols
        Any of :data:`PROTOCOLS`; None gives :func:`default_protocols`.
    repeats
        Repeats per protocol; None gives :func:`default_repeats` (one ``loo`` cycle).
    holdout, holdout_truth
        Target models of the ``holdout`` protocol and their true scores.
    progress
        Show a progress bar over splits x methods x budgets, with the time left.
    blas_threads
        BLAS threads while evaluating (see :func:`blas_limit`); None leaves them alone.
    """
    matrix, truth, holdout, holdout_truth = checked_inputs(matrix, truth, holdout, holdout_truth)
    n_holdout = holdout.n_models if holdout is not None else 0
    protocols = (
        tuple(protocols)
        if protocols is not None
        else default_protocols(matrix.n_models, holdout=holdout is not None)
    )
    plan = Plan(
        tuple(methods) if methods is not None else tuple(SELECTORS),
        tuple(estimators) if estimators is not None else tuple(ESTIMATORS),
        tuple(sorted(dict.fromkeys(budgets), key=budget_sort_key)),
        protocols,
        int(repeats) if repeats is not None else default_repeats(protocols),
        int(seed),
        irt_model,
    )
    check_plan(plan, matrix.n_models, matrix.n_items, matrix.source, n_holdout)
    started = time.perf_counter()
    irt_cache = IRTCache(irt_model)
    with blas_limit(blas_threads):
        pools = evaluate_plan(plan, matrix, truth, holdout, holdout_truth, irt_cache, progress)
    records = [
        {"method": method, "estimator": name, "budget": budget, "protocol": protocol}
        | summarise(pool)
        for (protocol, method, name, budget), pool in pools.items()
    ]
    sort_records(records, plan.protocols)
    info = run_info(plan, matrix, n_holdout, irt_cache) | {
        "seconds": round(time.perf_counter() - started, 2)
    }
    return ReliabilityResult(records, info)


def checked_inputs(
    matrix: ResponseMatrix,
    truth: np.ndarray,
    holdout: ResponseMatrix | None,
    holdout_truth: np.ndarray | None,
) -> tuple[ResponseMatrix, np.ndarray, ResponseMatrix | None, np.ndarray | None]:
    """Truths checked, holdout items aligned, models with missing responses left out."""
    truth = check_truth(truth, matrix, "truth")
    matrix, truth = complete_models(matrix, truth)
    if (holdout is None) != (holdout_truth is None):
        raise InputError("a holdout matrix needs holdout truths, and the other way round")
    if holdout is not None:
        holdout_truth = check_truth(holdout_truth, holdout, "holdout truth")
        holdout = check_holdout(matrix, holdout)
        holdout, holdout_truth = complete_models(holdout, holdout_truth)
    return matrix, truth, holdout, holdout_truth


def evaluate_plan(
    plan: Plan,
    matrix: ResponseMatrix,
    truth: np.ndarray,
    holdout: ResponseMatrix | None,
    holdout_truth: np.ndarray | None,
    irt_cache: IRTCache,
    progress: bool,
) -> dict[tuple[str, str, str, Budget], ResultPool]:
    """Every split of every protocol through :func:`evaluate_split`, under one progress bar."""
    pools: dict[tuple[str, str, str, Budget], ResultPool] = {}
    total = sum(n_splits(p, matrix.n_models, plan.repeats) for p in plan.protocols)
    with tqdm(
        total=total * len(plan.selections()),
        desc="reliability",
        unit="subset",
        disable=not progress,
    ) as bar:
        for protocol in plan.protocols:
            for split in protocol_splits(protocol, matrix, truth, plan, holdout, holdout_truth):
                evaluate_split(split, plan, pools, irt_cache, bar)
    return pools


def run_info(
    plan: Plan, matrix: ResponseMatrix, n_holdout: int, irt_cache: IRTCache
) -> dict[str, Any]:
    """What was run (the plan, the matrix) and what the shared IRT fits cost."""
    return {
        "source": matrix.source,
        "n_models": matrix.n_models,
        "n_items": matrix.n_items,
        "n_holdout": n_holdout,
        "n_strata": len(set(matrix.strata())),
        "protocols": list(plan.protocols),
        "methods": list(plan.methods),
        "estimators": list(plan.estimators),
        "budgets": list(plan.budgets),
        "repeats": plan.repeats,
        "seed": plan.seed,
        "irt_model": plan.irt_model,
        "irt_fits": irt_cache.fits,
        "irt_unconverged": irt_cache.unconverged,
        "irt_seconds": round(irt_cache.seconds, 2),
    }


def sort_records(records: list[dict[str, Any]], protocols: Sequence[str]) -> None:
    """Order records in place: by protocol (as listed), budget, method, estimator."""
    order = {p: k for k, p in enumerate(protocols)}
    records.sort(
        key=lambda r: (
            order[r["protocol"]],
            budget_sort_key(r["budget"]),
            r["method"],
            r["estimator"],
        )
    )
