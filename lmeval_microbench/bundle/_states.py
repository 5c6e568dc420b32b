"""Load-time check of the fitted estimator states a bundle stores.

A state is JSON an estimator wrote; a hand edit or a bad merge can leave, say, a vector one
entry short, which numpy reports only when estimating, as a ValueError that names neither
the bundle file nor the estimator. Rebuilding each state and estimating one probe model
finds that when the bundle is loaded, and says where.

Only states in this package's format (a registered ``estimator`` name) are checked; others
stay opaque, as the schema promises (a caller's own, or one of a newer version).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from .._text import preview as _preview
from ..errors import BundleError, MicrobenchError
from ..responses import ResponseMatrix

if TYPE_CHECKING:
    from .schema import Bundle

_STATE_ERRORS = (MicrobenchError, ValueError, TypeError, IndexError, KeyError, ArithmeticError)
"""What a malformed state raises while rebuilt or used (numpy shape errors are ValueErrors)."""


def check_estimator_states(bundle: Bundle, where: str) -> None:
    """Rebuild and try every estimator state of ``bundle``; errors name ``where`` and it."""
    # estimators sit above bundles in the layering: import them only when a bundle is loaded
    from ..estimators import ESTIMATORS, estimator_from_state

    for spec in bundle.estimators:
        name = spec.state.get("estimator")
        if name is not None and not isinstance(name, str):
            raise BundleError(
                f"{where}: estimator {spec.name!r}: state field 'estimator' must be a name, "
                f"got {name!r}"
            )
        if name not in ESTIMATORS:
            continue
        try:
            _probe(estimator_from_state(spec.state), bundle)
        except _STATE_ERRORS as exc:
            raise BundleError(
                f"{where}: estimator {spec.name!r} has an unusable state "
                f"({type(exc).__name__}: {exc})"
            ) from exc


def _probe(estimator: Any, bundle: Bundle) -> None:
    """Estimate a model that answered every other subset item right; the result must be finite."""
    items = list(estimator.item_ids_)
    outside = sorted(set(items) - set(bundle.item_ids))
    if outside:
        raise BundleError(f"fitted on items outside the subset: {_preview(outside)}")
    weights = np.asarray(getattr(estimator, "weights_", np.ones(len(items))))
    if weights.shape != (len(items),):
        raise BundleError(f"weights has shape {weights.shape}, expected ({len(items)},) items")
    row = (np.arange(len(items)) % 2).astype(np.float64)[None, :]
    probe = ResponseMatrix(row, ["probe"], items, source="probe model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value, lower, upper = estimator.estimate_matrix(probe)
    if not np.all(np.isfinite([value, lower, upper])):
        raise BundleError("its estimate of a probe model is not a finite number")
