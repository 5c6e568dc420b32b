"""The base of the estimators whose fit, estimates and saved state are their own.

``guarded`` (an inner estimator moved toward a reading of the model's answers), ``similar``
(a reading) and ``blend`` (its members' mean) do not pass a model's subset scores through the
base class's feature map and calibration, so those two stages have nothing to do there. Their
state is made of other estimators or readings, and what reading it can raise becomes a
one-line refusal here (the base class reads the common header).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ..errors import InputError
from ..irt.params import ItemParams
from ..responses import ResponseMatrix
from ..subset import Subset
from .base import ScoreEstimator


class OwnStagesEstimator(ScoreEstimator):
    """A :class:`ScoreEstimator` that overrides ``fit``, the estimates and the state."""

    def _fit_features(self, source: ResponseMatrix, subset: Subset, irt: ItemParams | None) -> None:
        raise NotImplementedError(f"{self.name} fits without the feature stage")

    def _features(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError(f"{self.name} estimates without the feature stage")


@contextmanager
def state_errors(name: str) -> Iterator[None]:
    """Turn a missing field (``KeyError``) or a malformed value (``TypeError``,
    ``ValueError``) met while reading estimator ``name``'s state into an :class:`InputError`;
    an ``InputError`` raised inside passes as it is."""
    try:
        yield
    except KeyError as exc:
        raise InputError(f"{name}: estimator state lacks field {exc.args[0]!r}") from exc
    except InputError:
        raise
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name}: malformed estimator state ({exc})") from exc
