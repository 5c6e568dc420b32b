"""Out-of-fold estimates of "select, then fit": what an interval must be calibrated on.

An estimator's own cross-fit keeps the subset fixed and refits only its head. When the
subset was chosen *for* these very source models (``greedy`` picks the items that predict
their scores best), that is optimistic: held-out models were not held out of the selection.
On 278 whole-benchmark models (IFEval, MuSR) it left greedy + kridge's 90 % intervals
covering 0.70 of new models. Here every fold selects its own items from its training models
and estimates the held-out ones, so each source model gets an estimate from a procedure that
never saw it; :meth:`ScoreEstimator.fit` then calibrates the interval on those.

Selections that look at the sources' answers without their scores (balanced strata of source
difficulty, anchor-point clusters, tinyBenchmarks' IRT) are optimistic the same way, less so:
with 25-100 source models the default build's intervals held for fewer than 0.85 of new
models in 12 of 48 random-split cells of the peer suite with the fixed-subset band, and in 5
with these folds (``bench/peers_crossfit.md``). Only a uniform or stratified draw
(:attr:`.selection.Selector.uses_responses` false) keeps the fixed-subset band.

The IRT parameters passed to IRT estimators are the ones fitted on all source models (one
fit instead of one per fold): they describe items, never the full scores.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from .estimators import make_estimator
from .estimators._fitting import FOLD_FAILURES, MIN_SOURCE_MODELS, fold_labels
from .irt.params import ItemParams
from .responses import ResponseMatrix
from .selection import Selector, make_selector, select_with_audit

CROSS_FIT_FOLDS = 5
CROSS_FIT_MAX_MODELS = 1000
"""From this many source models on the selection's optimism is small (greedy + kridge on
3,000-4,400 leaderboard models covered 0.88-0.91 with the fixed-subset band, on 278 models
0.70-0.83) and five more selections are not worth their time: the estimator's own band."""


def needs_cross_fit(selector: Selector, source: ResponseMatrix) -> bool:
    """Whether intervals need out-of-fold estimates that re-select the items: a selection
    that looks at the sources' answers (supervised or not) on fewer than
    :data:`CROSS_FIT_MAX_MODELS` of them."""
    return selector.uses_responses and source.n_models < CROSS_FIT_MAX_MODELS


def selection_cross_fit(
    source: ResponseMatrix,
    target: np.ndarray,
    method: str,
    budget: int,
    estimators: Sequence[str],
    *,
    seed: int = 0,
    irt: ItemParams | None = None,
    n_folds: int = CROSS_FIT_FOLDS,
    n_audit: int = 0,
) -> dict[str, np.ndarray]:
    """Out-of-fold estimates of every source model by every estimator, items re-selected.

    Returns one array per estimator aligned with ``source.model_ids``; NaN where a fold
    could not estimate a model (a missing score on the fold's items, a fit that failed on
    the fold's models): the estimator's own cross-fit fills those.
    """
    target = np.asarray(target, dtype=np.float64)
    n_folds = cross_fit_folds(source.n_models, n_folds)
    out = {name: np.full(source.n_models, np.nan) for name in estimators}
    if n_folds == 0:
        return out
    labels = fold_labels(source.n_models, n_folds, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fold in range(n_folds):
            train, test = np.flatnonzero(labels != fold), np.flatnonzero(labels == fold)
            fold = (train, test)
            _estimate_fold(source, target, fold, method, budget, n_audit, seed, irt, out)
    return out


def cross_fit_folds(n_models: int, n_folds: int = CROSS_FIT_FOLDS) -> int:
    """``n_folds``, or one model per fold where fewer folds would fit on fewer than
    :data:`MIN_SOURCE_MODELS` models, or 0 where even that would (10 sources: no fold can
    re-select, and none is run).

    With 11 or 12 sources, five folds train on 8-10 models; no estimator fits on fewer than
    10, so those folds failed and their models kept the optimistic fixed-subset estimate.
    Leaving one model out trains on 10 or 11. (With 10 sources the default build draws
    random items instead, ``auto.FALLBACK``.)
    """
    if n_models - 1 < MIN_SOURCE_MODELS:
        return 0
    k = min(n_folds, n_models)
    if n_models - math.ceil(n_models / k) < MIN_SOURCE_MODELS:
        return n_models
    return k


def _estimate_fold(
    source: ResponseMatrix,
    target: np.ndarray,
    fold: tuple[np.ndarray, np.ndarray],
    method: str,
    budget: int,
    n_audit: int,
    seed: int,
    irt: ItemParams | None,
    out: dict[str, np.ndarray],
) -> None:
    train, test = fold
    ids = np.asarray(source.model_ids)
    matrix = source.select_models(ids[train])
    try:
        subset = select_with_audit(
            make_selector(method), matrix, budget, n_audit, seed=seed, target=target[train]
        )
    except FOLD_FAILURES:
        return
    values = source.values[test][:, source.item_positions(subset.item_ids)]
    rows = test[~np.isnan(values).any(axis=1)]
    if rows.size == 0:
        return
    held_out = source.select_models(ids[rows])
    for name in out:
        try:
            fitted = make_estimator(name).fit(matrix, subset, target[train], irt=irt)
            out[name][rows] = fitted.estimate_matrix(held_out)[0]
        except FOLD_FAILURES:
            continue
