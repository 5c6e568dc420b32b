"""Full-score estimators behind one interface: ``make_estimator(name).fit(...).estimate(...)``."""

from __future__ import annotations

import difflib
from typing import Any

from ..errors import InputError
from .anchor import AnchorEstimator, AnchorSumEstimator
from .base import ScoreEstimator
from .blend import BlendEstimator
from .calibrated import CalibratedEstimator
from .guarded import GuardedEstimator
from .irt import GPIRTEstimator, IRTEstimator, PIRTEstimator
from .mean import MeanEstimator
from .ridge import KernelRidgeEstimator, RidgeEstimator
from .similar import SimilarEstimator

ESTIMATORS: dict[str, type[ScoreEstimator]] = {
    cls.name: cls
    for cls in (
        MeanEstimator,
        AnchorEstimator,
        AnchorSumEstimator,
        IRTEstimator,
        PIRTEstimator,
        GPIRTEstimator,
        CalibratedEstimator,
        RidgeEstimator,
        KernelRidgeEstimator,
        GuardedEstimator,
        SimilarEstimator,
        BlendEstimator,
    )
}
"""Estimator classes by their ``name``."""

FITTED_BY_DEFAULT = tuple(name for name in ESTIMATORS if name != BlendEstimator.name)
"""What a build fits when no list is given: every estimator but ``blend``, which would fit
``guarded`` and ``similar`` a second time (on MuSR's 348 x 756, random items, a build's
estimators took 27 s without it and 39 s with it; scratch timings, load 2-3). It is fitted
where it is the default (the 10-model fallback, :data:`..auto.FALLBACK`) or named."""

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


def needs_irt(estimator: str) -> bool:
    """Whether an estimator uses item parameters (then the shared IRT fit is passed to it).

    Beside the registry, not in ``reliability/``: ranking replays (``rank/replay.py``) ask it
    too, and ``rank/`` must not import ``reliability/``, which imports ``rank/``.
    """
    return "irt_model" in make_estimator(estimator).get_params()


__all__ = [
    "DEFAULT_ESTIMATOR",
    "ESTIMATORS",
    "FITTED_BY_DEFAULT",
    "AnchorEstimator",
    "AnchorSumEstimator",
    "BlendEstimator",
    "CalibratedEstimator",
    "GPIRTEstimator",
    "GuardedEstimator",
    "IRTEstimator",
    "KernelRidgeEstimator",
    "MeanEstimator",
    "PIRTEstimator",
    "RidgeEstimator",
    "ScoreEstimator",
    "SimilarEstimator",
    "estimator_from_state",
    "make_estimator",
    "needs_irt",
]
