"""Estimates that stay right for models outside the source population.

Regressions fitted on the source models (``kridge``, ``ridge``, a calibration line) are the
best estimators for a model *like* the sources, and they are biased for a model stronger
(or weaker) than all of them: they shrink towards the sources, and items chosen to separate
the sources say little about a model beyond them. A user cannot tell which case theirs is.

This package holds the pieces of the ``guarded`` estimator
(:class:`~lmeval_microbench.estimators.guarded.GuardedEstimator`), one role per module:

``readings``  *outside readings*: estimates of a model's score that do not regress it towards
              the sources (its own level on the source item difficulties, the design-weighted
              subset mean, the de-shrunk inner estimate, the AIPW audit correction), each with
              a standard error;
``guard``     how far a reading places a model beyond the sources, and the estimate and
              interval that follow from it;
``folds``     inner extrapolation splits of the source models: which reading to trust and how
              wide its interval must be, measured where the sources themselves extrapolate;
``placement`` the same location told to the user: whether a model's answers place it above or
              below every source model, beside its estimate;
``ceiling``   the open upper end of a model that answers every item right: nothing in its
              answers bounds it above.
"""

from __future__ import annotations

from .guard import (
    REACH_Z,
    GuardBand,
    beyond_weight,
    composed_interval,
    floored,
    guarded_interval,
    reached,
    reached_below,
    spread_below,
)
from .placement import Placement, placement_of, placement_records
from .readings import READINGS, Reading, SourceView, make_reading

__all__ = [
    "REACH_Z",
    "READINGS",
    "GuardBand",
    "Placement",
    "Reading",
    "SourceView",
    "beyond_weight",
    "composed_interval",
    "floored",
    "guarded_interval",
    "make_reading",
    "placement_of",
    "placement_records",
    "reached",
    "reached_below",
    "spread_below",
]
