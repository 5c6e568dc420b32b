"""Full-benchmark estimates from a bundle and the subset scores of one or many models."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._types import Estimate
from .bundle import Bundle
from .errors import ItemMismatchError
from .estimators import estimator_from_state
from .estimators.base import ScoreEstimator
from .responses import ResponseMatrix


def bundle_estimator(bundle: Bundle, name: str | None = None) -> ScoreEstimator:
    """The fitted estimator ``name`` (the bundle's default when None) stored in ``bundle``."""
    return estimator_from_state(bundle.estimator_state(name))


def estimate_models(
    bundle: Bundle,
    responses: ResponseMatrix,
    *,
    estimator: str | None = None,
    level: float = 0.9,
    allow_missing: bool = False,
) -> list[dict[str, Any]]:
    """One record per model of ``responses``: subset mean and the full-score estimate.

    Rows join the bundle's items by id; a model lacking subset items raises
    :class:`~lmeval_microbench.errors.ItemMismatchError` naming them unless ``allow_missing``
    (IRT-based estimators only).
    """
    fitted = bundle_estimator(bundle, estimator)
    ids = bundle.subset.item_ids
    if not set(ids) & set(responses.item_ids):
        raise ItemMismatchError(
            f"{responses.source}: none of the {len(ids)} items of bundle {bundle.name!r} "
            f"(benchmark {bundle.benchmark!r}) is in these responses: wrong benchmark?"
        )
    subset = responses.reindex_items(ids) if allow_missing else responses.select_items(ids)
    value, lower, upper, se = fitted.estimate_matrix(
        subset, level=level, allow_missing=allow_missing, return_se=True
    )
    observed = subset.observed.sum(axis=1)
    records = []
    for k, model in enumerate(responses.model_ids):
        estimate = Estimate(float(value[k]), float(lower[k]), float(upper[k]), level, float(se[k]))
        records.append(
            {
                "model": model,
                "benchmark": bundle.benchmark,
                "bundle": bundle.name,
                "estimator": fitted.name,
                "items_scored": int(observed[k]),
                "subset_mean": float(np.nanmean(subset.values[k])),
                **{f"estimate_{key}": val for key, val in estimate.as_dict().items()},
            }
        )
    return records
