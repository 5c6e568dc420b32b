"""Audit items: part of the budget drawn at random from the items the selection left out.

Any selection method chooses items that are informative about the source models; an audit
sample is a simple random sample of the *other* items, so the answers of a new model on it
say, without any assumption about that model, how far a prediction of its score is off
(the ``audit`` outside reading, :mod:`lmeval_microbench.outside.readings.audit`). The audit
items are listed in ``Subset.info["audit_items"]``; the informative items keep their
method's relative weights and every item weighs its share of the budget.
"""

from __future__ import annotations

import numpy as np

from .._rng import SeedLike, as_generator
from ..errors import InputError
from ..responses import ResponseMatrix
from .base import Selector, Subset

AUDIT_KEY = "audit_items"
MIN_AUDIT = 2
"""An audit of one item cannot measure its own spread."""


def select_with_audit(
    selector: Selector,
    source: ResponseMatrix,
    budget: int,
    n_audit: int,
    *,
    seed: SeedLike = None,
    target: np.ndarray | None = None,
) -> Subset:
    """``budget - n_audit`` items by ``selector`` plus ``n_audit`` random items of the rest.

    ``n_audit`` 0 is the selector alone; 1, or so many that no informative item is left or
    that the rest of the benchmark cannot supply them, is refused with the reason.
    """
    if n_audit == 0:
        return selector.select(source, budget, seed=seed, target=target)
    if not isinstance(n_audit, (int, np.integer)) or n_audit < MIN_AUDIT:
        raise InputError(
            f"audit: {n_audit!r} audit items; an audit needs at least {MIN_AUDIT} (or 0 for none)"
        )
    if n_audit >= budget:
        raise InputError(
            f"audit: {n_audit} audit items leave none of the budget of {budget} to {selector.name}"
        )
    if budget > source.n_items:
        raise InputError(
            f"audit: budget {budget} exceeds the {source.n_items} items of {source.source}"
        )
    rng = as_generator(seed)
    informative = selector.select(source, budget - n_audit, seed=rng, target=target)
    chosen = set(informative.item_ids)
    rest = [item for item in source.item_ids if item not in chosen]
    audit = sorted(rng.choice(len(rest), size=n_audit, replace=False))
    audit_ids = [rest[k] for k in audit]
    share = informative.budget / budget
    return Subset(
        (*informative.item_ids, *audit_ids),
        np.concatenate([informative.weights * share, np.full(n_audit, (1.0 - share) / n_audit)]),
        informative.method,
        informative.seed,
        {**informative.info, AUDIT_KEY: audit_ids},
    )
