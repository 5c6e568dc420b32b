"""Full-score estimators behind one interface: ``make_estimator(name).fit(...).estimate(...)``."""

from __future__ import annotations

import difflib
from typing import Any

from ..errors import InputError
from .anchor import AnchorEstimator
from .base import ScoreEstimator
from .calibrated import CalibratedEstimator
from .guarded import GuardedEstimator
from .irt import GPIRTEstimator, IRTEstimator, PIRTEstimator
from .mean import MeanEstimator
from .ridge import KernelRidgeEstimator, RidgeEstimator

ESTIMATORS: dict[str, type[ScoreEstimator]] = {
    cls.name: cls
    for cls in (
        MeanEstimator,
        AnchorEstimator,
        IRTEstimator,
        PIRTEstimator,
        GPIRTEstimator,
        CalibratedEstimator,
        RidgeEstimator,
        KernelRidgeEstimator,
        GuardedEstimator,
    )
}
"""Estimator classes by their ``name``."""

DEFAULT_ESTIMATOR = "calibrated"
"""Most accurate on held-out Open LLM Leaderboard models (bench/estimators.md)."""


def make_estimator(name: str, **kwargs: Any) -> ScoreEstimator:
    """A new estimator by name; unknown names list the known ones (with a suggestion)."""
    if name not in ESTIMATORS:
        close = difflib.get_close_matches(name, list(ESTIMATORS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InputError(
            f"unknown estimator {name!r}{hint}; known: {', '.join(sorted(ESTIMATORS))}"
        )
    return ESTIMATORS[name](**kwargs)


def estimator_from_state(state: dict[str, Any]) -> ScoreEstimator:
    """Rebuild any fitted estimator from its :meth:`ScoreEstimator.state_dict`."""
    return ScoreEstimator.from_state(state)


__all__ = [
    "DEFAULT_ESTIMATOR",
    "ESTIMATORS",
    "AnchorEstimator",
    "CalibratedEstimator",
    "GPIRTEstimator",
    "GuardedEstimator",
    "IRTEstimator",
    "KernelRidgeEstimator",
    "MeanEstimator",
    "PIRTEstimator",
    "RidgeEstimator",
    "ScoreEstimator",
    "estimator_from_state",
    "make_estimator",
]
