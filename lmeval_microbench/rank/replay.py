"""Replay: rounds scored from a response matrix (true full scores known), as ``reliability``.

Sources fit everything (item selection, IRT, one estimator per level); the population is
ranked. Levels are nested prefixes of one random order of the method's items, and each level
has its own estimator fitted on exactly its items, so a replayed model at a level is
estimated as a static subset of that size would be.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import numpy as np

from .._rng import spawn
from ..build import fit_source_irt
from ..errors import InputError
from ..estimators import make_estimator, needs_irt
from ..estimators.base import ScoreEstimator
from ..irt.params import ItemParams
from ..responses import ResponseMatrix
from ..selection import make_selector
from ..subset import Subset
from ..truth import complete_models
from .rounds import LEVEL, Evaluated, Scored


def select_subset(
    method: str, source: ResponseMatrix, truth: np.ndarray, budget: int, seed: int
) -> Subset:
    """Run a selection method on the sources only (with their truths where it takes them)."""
    if budget >= source.n_items:
        return Subset(source.item_ids, np.full(source.n_items, 1.0 / source.n_items), "all")
    selector = make_selector(method)
    if "target" in inspect.signature(selector.select).parameters:
        return selector.select(source, budget, seed=seed, target=truth)
    return selector.select(source, budget, seed=seed)


def default_levels(n_items: int, first: int | None = None) -> tuple[int, ...]:
    """Doubling item counts from ``first`` (default an eighth of the items, at least 5) to all."""
    start = max(1, min(n_items, first if first is not None else max(5, n_items // 8)))
    levels = [start]
    while levels[-1] * 2 < n_items:
        levels.append(levels[-1] * 2)
    if n_items - levels[-1] < levels[-1] / 2:  # a last step this small buys little: merge it
        levels[-1] = n_items
    elif levels[-1] != n_items:
        levels.append(n_items)
    return tuple(levels)


def fit_on(
    name: str,
    source: ResponseMatrix,
    truth: np.ndarray,
    items: Sequence[str],
    irt: ItemParams | None,
) -> ScoreEstimator:
    subset = Subset(tuple(items), np.full(len(items), 1.0 / len(items)), "prefix")
    return make_estimator(name).fit(source, subset, truth, irt=irt)


class ReplayEvaluator:
    """An evaluator over a response matrix: see the module docstring."""

    def __init__(
        self,
        source: ResponseMatrix,
        source_truth: np.ndarray,
        population: ResponseMatrix,
        *,
        levels: Sequence[int],
        method: str = "random",
        estimator: str = "ridge",
        irt_model: str = "2pl",
        seed: int = 0,
    ) -> None:
        self.levels = tuple(int(n) for n in levels)
        if self.levels[-1] > source.n_items:
            raise InputError(
                f"the last level has {self.levels[-1]} items; the matrix has {source.n_items}"
            )
        order_rng, selection_seed = spawn(seed, 2)
        subset = select_subset(
            method, source, source_truth, self.levels[-1], int(selection_seed.integers(2**31))
        )
        self.order = tuple(np.asarray(subset.item_ids)[order_rng.permutation(len(subset.item_ids))])
        self.source, self.truth, self.population = source, source_truth, population
        self.estimator = estimator
        needs = needs_irt(estimator)
        self.irt = fit_source_irt(source, model=irt_model, seed=seed) if needs else None
        self._fitted: dict[int, ScoreEstimator] = {}

    def fitted(self, level: int) -> ScoreEstimator:
        if level not in self._fitted:
            items = self.order[: self.levels[level]]
            self._fitted[level] = fit_on(self.estimator, self.source, self.truth, items, self.irt)
        return self._fitted[level]

    def evaluate(self, models: Sequence[str], level: int) -> Evaluated:
        value, lower, upper = self.fitted(level).estimate_matrix(
            self.population.select_models(list(models)), level=LEVEL
        )
        return Evaluated(
            {
                m: Scored(float(v), float(lo), float(hi))
                for m, v, lo, hi in zip(models, value, lower, upper, strict=True)
            }
        )


def split_population(
    matrix: ResponseMatrix,
    truth: np.ndarray,
    n_population: int,
    *,
    seed: int,
    max_sources: int | None = None,
) -> tuple[ResponseMatrix, np.ndarray, ResponseMatrix, np.ndarray]:
    """Draw ``n_population`` models to rank; the rest (at most ``max_sources``) are sources."""
    matrix, truth = complete_models(matrix, truth)
    if matrix.n_models < 13:
        raise InputError(
            f"{matrix.source}: {matrix.n_models} models with responses and scores; a replay "
            "ranks 2 or more of them on items chosen with at least 11 others as sources: "
            "it needs 13 models or more"
        )
    if not 2 <= n_population < matrix.n_models - 10:
        raise InputError(
            f"--population {n_population}: {matrix.source} has {matrix.n_models} models, so "
            f"--population must be between 2 and {matrix.n_models - 11} (at least 11 of them "
            "are the source models the items are chosen with)"
        )
    order = np.random.default_rng(seed).permutation(matrix.n_models)
    population, rest = order[:n_population], order[n_population:]
    if max_sources is not None:
        rest = rest[:max_sources]
    ids = np.asarray(matrix.model_ids)
    return (
        matrix.select_models(list(ids[rest])),
        truth[rest],
        matrix.select_models(list(ids[population])),
        truth[population],
    )
