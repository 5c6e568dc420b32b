"""Held-out evaluation of adaptive testing: the hook ``reliability`` can call per split.

Given a split's source models (answers and true scores) and its target models' answers, fit a
pool on the sources and replay the targets adaptively: the estimate and 90 % interval of every
target at each item budget, in the ``(value, lower, upper)`` form the static estimators'
``estimate_matrix`` returns, so a benchmark can put adaptive testing beside them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..responses import ResponseMatrix
from .pool import fit_adaptive_state
from .selection import MaxInfoSelector, Selector
from .simulate import replay


def estimate_targets(
    source: ResponseMatrix,
    source_truth: np.ndarray,
    target: ResponseMatrix,
    budgets: Sequence[int],
    *,
    selector: Selector | None = None,
    level: float = 0.9,
    seed: int = 0,
    floor: float = 0.0,
) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``{budget: (value, lower, upper)}`` for the target models, fractions, in row order.

    ``floor``: where a run may lie below every source, its lower edge reaches it
    (:meth:`.scoring.ScoreMap.with_floor`); 0 is what a pool built without chance levels has.
    """
    params, state = fit_adaptive_state(source, source_truth, seed=seed)
    state = replace(state, score_map=state.score_map.with_floor(floor))
    values = target.values[:, target.item_positions(params.item_ids)]
    result = replay(
        params,
        values,
        selector=selector or MaxInfoSelector(),
        max_items=max(budgets),
        score_map=state.score_map,
        checkpoints=budgets,
        seed=seed,
    )
    out = {}
    for n, value in result.predictions.items():
        ability = result.ability_at(n)
        lower, upper = state.score_map.interval(value, n, level, result.spans[n], ability)
        out[n] = (value, lower, upper)
    return out
