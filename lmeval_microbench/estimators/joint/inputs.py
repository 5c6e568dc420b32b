"""What :meth:`.estimator.JointEstimator.fit` is given, checked and joined across benchmarks.

Why a module of its own: before anything is learned, the per-benchmark sources, subsets and
targets must agree with each other (the same benchmarks, item ids unique across them, targets
that are fractions) and be joined on model id into the rows every benchmark scored, with one
target column per benchmark plus their mean, the ``"average"`` output. None of it depends on
the estimator's settings beyond the number of folds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..._text import preview as _preview
from ...errors import InputError
from ...responses import ResponseMatrix
from ...subset import Subset
from .._fitting import MIN_SOURCE_MODELS

AVERAGE = "average"
"""Name of the output that estimates the mean of the benchmark scores (leaderboard average)."""


def check_benchmarks(
    sources: Mapping[str, ResponseMatrix],
    subsets: Mapping[str, Subset],
    targets: Mapping[str, Any],
) -> tuple[str, ...]:
    """The benchmarks (in the order of ``sources``), once all three mappings name the same
    ones and every subset item id belongs to one benchmark and is in its source."""
    benchmarks = tuple(sources)
    for label, mapping in (("subsets", subsets), ("targets", targets)):
        if set(mapping) != set(benchmarks):
            raise InputError(
                f"joint: {label} are given for {sorted(mapping)}, sources for "
                f"{sorted(benchmarks)}; every benchmark needs a source, subset and target"
            )
    if len(benchmarks) < 2:
        raise InputError(f"joint: needs at least 2 benchmarks, got {list(benchmarks)}")
    if AVERAGE in benchmarks:
        raise InputError(f"joint: {AVERAGE!r} is reserved for the average output")
    owner: dict[str, str] = {}
    for b in benchmarks:
        for item in subsets[b].item_ids:
            if item in owner:
                raise InputError(
                    f"joint: item {item!r} is in the subsets of both {owner[item]!r} and "
                    f"{b!r}; item ids must be unique across benchmarks"
                )
            owner[item] = b
        sources[b].item_positions(subsets[b].item_ids)  # names subset items it lacks
    return benchmarks


def usable_source(
    benchmark: str, source: ResponseMatrix, target: np.ndarray | pd.Series
) -> tuple[ResponseMatrix, np.ndarray]:
    """The source models of ``benchmark`` with a known target, and that target."""
    if isinstance(target, pd.Series):
        target = target.copy()
        target.index = target.index.map(str)
        if target.index.has_duplicates:
            dups = target.index[target.index.duplicated()].unique().tolist()
            raise InputError(f"joint: {benchmark}: target lists models twice: {_preview(dups)}")
        values = target.reindex(list(source.model_ids)).to_numpy(dtype=np.float64)
    else:
        values = np.asarray(target, dtype=np.float64).reshape(-1)
        if values.shape != (source.n_models,):
            raise InputError(
                f"joint: {benchmark}: target has {values.size} values, {source.source} has "
                f"{source.n_models} models (pass a Series indexed by model id to join by id)"
            )
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(np.isinf(values) | (values < 0) | (values > 1))
    if bad.size:
        models = [source.model_ids[k] for k in bad]
        raise InputError(
            f"joint: {benchmark}: targets must be fractions in [0, 1]; bad for models "
            f"{_preview(models)}"
        )
    known = np.flatnonzero(np.isfinite(values))
    if known.size < MIN_SOURCE_MODELS:
        raise InputError(
            f"joint: {benchmark}: only {known.size} source models have a target; "
            f"at least {MIN_SOURCE_MODELS} are needed"
        )
    # rows sorted by id: folds, and so every fit, do not depend on the input row order
    order = sorted(known, key=lambda k: source.model_ids[k])
    kept = source.select_models([source.model_ids[k] for k in order])
    return kept, values[order]


def joint_source(
    per_benchmark: Mapping[str, tuple[ResponseMatrix, np.ndarray]],
    benchmarks: tuple[str, ...],
    subsets: Mapping[str, Subset],
    n_folds: int,
) -> tuple[ResponseMatrix, np.ndarray]:
    """Subset columns of the models with a target on every benchmark and every subset item.

    Returns the joined matrix (rows sorted by model id) and the
    targets (m, B + 1), the last column being their mean.
    """
    first = benchmarks[0]
    common = set(per_benchmark[first][0].model_ids)
    for b in benchmarks[1:]:
        common &= set(per_benchmark[b][0].model_ids)
    model_ids = [m for m in per_benchmark[first][0].model_ids if m in common]
    columns = [
        per_benchmark[b][0].select_models(model_ids).select_items(subsets[b].item_ids)
        for b in benchmarks
    ]
    joint = ResponseMatrix.concat_items(columns).select_models(model_ids)
    complete = ~np.isnan(joint.values).any(axis=1)
    minimum = max(MIN_SOURCE_MODELS, 2 * n_folds)
    if complete.sum() < minimum:
        raise InputError(
            f"joint: only {int(complete.sum())} source models have a target and every subset "
            f"item on all of {list(benchmarks)}; at least {minimum} are needed"
        )
    joint = joint.select_models([model_ids[k] for k in np.flatnonzero(complete)])
    target = np.column_stack(
        [
            per_benchmark[b][1][per_benchmark[b][0].model_positions(joint.model_ids)]
            for b in benchmarks
        ]
    )
    return joint, np.column_stack([target, target.mean(axis=1)])
