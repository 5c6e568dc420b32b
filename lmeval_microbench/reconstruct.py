"""Full-benchmark estimates from a bundle and the subset scores of one or many models.

:func:`estimate_models` applies a bundle to a response matrix; :func:`bundle_estimator` is
the fitted estimator a bundle stores, as every estimate of this package uses it (the
reconstruction of lm-eval runs, :mod:`.runs`, reports its results with :mod:`.runs.report`).

It checks every estimate for person fit (:mod:`.personfit`) when the bundle carries a
``person_fit`` block: each record gets a ``person_fit`` object, a table marks a flagged
estimate with :data:`FIT_MARK`, and an estimate whose answers cannot be told from guessing
has its interval widened to include the bundle's chance-level score. Each record also says
where the bundle's guard places the model: above or below every source model, or among them
(:mod:`.outside.placement`).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ._text import preview
from ._types import Estimate
from .bundle import Bundle
from .errors import ItemMismatchError
from .estimators import estimator_from_state
from .estimators.base import ScoreEstimator
from .outside.placement import placement_records
from .personfit import bundle_person_fit, fit_record, fitted_estimate
from .responses import ResponseMatrix

FIT_MARK = "†"
"""Marks an estimate whose answers do not fit the bundle's IRT model (person fit)."""


def bundle_estimator(bundle: Bundle, name: str | None = None) -> ScoreEstimator:
    """The fitted estimator ``name`` (the bundle's default when None) stored in ``bundle``,
    able to impute unscored items from the bundle's IRT parameters (``allow_missing``)."""
    return estimator_from_state(bundle.estimator_state(name)).with_imputation(bundle.irt)


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
    (then they are imputed from the bundle's IRT parameters, see ``estimators.missing``, and a
    model that scored none of them, which nothing can estimate, is left out with a warning
    naming it, so the other models' estimates are not lost).
    Each record has a ``person_fit`` object (:func:`.personfit.fit_record`); a flagged
    model's interval is widened as :func:`.personfit.widen_for_fit` says and the record's
    ``person_fit.note`` says why (the CLI prints it as a warning). ``placement`` says where
    the bundle's guard places a model with every subset answer scored (above or below every
    source model, :mod:`.outside.placement`); None without a guard or with an item missing.
    """
    fitted = bundle_estimator(bundle, estimator)
    ids = bundle.subset.item_ids
    if not set(ids) & set(responses.item_ids):
        raise ItemMismatchError(
            f"{responses.source}: none of the {len(ids)} items of bundle {bundle.name!r} "
            f"(benchmark {bundle.benchmark!r}) is in these responses: wrong benchmark?"
        )
    subset = responses.reindex_items(ids) if allow_missing else responses.select_items(ids)
    if allow_missing:
        responses, subset = _scored_models(responses, subset, bundle.name)
    value, lower, upper, se = fitted.estimate_matrix(
        subset, level=level, allow_missing=allow_missing, return_se=True
    )
    observed = subset.observed.sum(axis=1)
    fits = bundle_person_fit(bundle, subset.values)
    placements = placement_records(fitted, subset.values)
    records = []
    for k, model in enumerate(responses.model_ids):
        raw = Estimate(float(value[k]), float(lower[k]), float(upper[k]), level, float(se[k]))
        fit = None if fits is None else fits[k]
        estimate, note = fitted_estimate(raw, fit, bundle.person_fit)
        records.append(
            {
                "model": model,
                "benchmark": bundle.benchmark,
                "bundle": bundle.name,
                "estimator": fitted.name,
                "items_scored": int(observed[k]),
                "subset_mean": float(np.nanmean(subset.values[k])),
                **{f"estimate_{key}": val for key, val in estimate.as_dict().items()},
                "person_fit": fit_record(fit, bundle.person_fit, note, estimate is not raw),
                "placement": placements[k],
            }
        )
    return records


def _scored_models(
    responses: ResponseMatrix, subset: ResponseMatrix, bundle_name: str
) -> tuple[ResponseMatrix, ResponseMatrix]:
    """The models that scored at least one subset item (both matrices), with a warning that
    names the others; refused when no model did."""
    scored = subset.observed.any(axis=1)
    if scored.all():
        return responses, subset
    if not scored.any():
        raise ItemMismatchError(
            f"{responses.source}: no model scored any item of bundle {bundle_name!r}"
        )
    models = np.asarray(responses.model_ids)
    warnings.warn(
        f"{responses.source}: {int((~scored).sum())} of {responses.n_models} models scored no "
        f"item of bundle {bundle_name!r} and are left out: {preview(models[~scored].tolist())}",
        stacklevel=3,
    )
    keep = models[scored].tolist()
    return responses.select_models(keep), subset.select_models(keep)
