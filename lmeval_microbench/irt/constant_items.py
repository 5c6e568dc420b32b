"""IRT parameters for every item of a matrix, items that all models scored alike included.

One rule, shared by bundles and the tinyBenchmarks selector, for items an IRT fit cannot place.
:func:`fit_source_irt` is that rule with the bundles' fixed intercept; it sits here, below
``build.py`` and ``estimators/``, because both fit source IRT with it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError
from ..responses import ResponseMatrix
from .fit import IRTModel
from .params import ItemParams


def fit_with_constant_items(
    source: ResponseMatrix,
    model: str = "2pl",
    n_dims: int = 1,
    *,
    constant_intercept: float | None = None,
    random_state: Any = 0,
    **options: Any,
) -> ItemParams:
    """Parameters of every item of ``source``, including items all models scored alike.

    Such items carry no information and cannot be fitted (their intercept runs off to
    infinity), yet estimators and selectors still need a parameter for them: they are fitted
    without and placed at slope 0 with an intercept of ``constant_intercept`` (default: the
    largest fitted |d|), signed by their score. The result lists the items in source order.
    """
    constant = source.constant_items()
    if source.n_items - len(constant) < 2:
        raise InputError(
            f"{source.source} has {source.n_items - len(constant)} items that some but not all "
            "models answer correctly; an IRT fit needs at least 2"
        )
    fitted = (
        IRTModel(model, n_dims, random_state=random_state, **options)
        .fit(source.drop_items(constant))
        .params_
    )
    if not constant:
        return fitted
    extreme = float(np.max(np.abs(fitted.d))) if constant_intercept is None else constant_intercept
    level = np.nanmean(source.select_items(constant).values, axis=0)
    n_const = len(constant)
    params = ItemParams(
        fitted.item_ids + tuple(constant),
        np.vstack([fitted.a, np.zeros((n_const, fitted.n_dims))]),
        np.concatenate([fitted.d, np.where(level >= 0.5, extreme, -extreme)]),
        np.concatenate([fitted.g, np.zeros(n_const)]),
        np.concatenate([fitted.u, np.ones(n_const)]),
        fitted.model,
    )
    return params.subset(list(source.item_ids))


CONSTANT_ITEM_LOGIT = 6.0
"""Intercept given to items every source model scored alike (P = 0.998 or 0.002)."""


def fit_source_irt(
    source: ResponseMatrix, *, model: str = "2pl", seed: int | None = 0
) -> ItemParams:
    """IRT parameters for every source item, constant items included.

    Items every source model got right (or wrong) carry no information and cannot be fitted;
    they get slope 0 and an intercept of +-``CONSTANT_ITEM_LOGIT`` so that IRT estimators still
    count them in the full score.
    """
    return fit_with_constant_items(
        source, model, constant_intercept=CONSTANT_ITEM_LOGIT, random_state=seed
    )
