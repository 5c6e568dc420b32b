"""Answers with every item right: nothing in them bounds the score from above.

The items a bundle keeps were chosen to tell the source models apart, and the strongest
sources often answer all of them right. On the Open LLM Leaderboard v1 ARC subset (50 items),
260 source models did, with full scores of 71-75 %, while the strongest source (79.9 %)
missed two. A model that answers every item right may be one of those 260, or stronger than
every source by any margin: its answers cannot tell. The estimate stays what the estimator
reads (the saturated sources' score), and the upper end of the interval opens to 100 %: before
this, such a model was read 73.3 % [71.8, 74.8] on ARC and 85.1 % [83.6, 86.7] on Winogrande,
whose strongest source scored 91.5 % (``tools/bench_ceiling.py``, ``bench/ceiling.md``).

It holds for every estimator and every path that prints an estimate (static estimates through
:meth:`..estimators.base.ScoreEstimator.estimate`, the joint estimator's benchmarks and
average, adaptive runs through :func:`..adaptive.pool.estimate_pool`). Answers at the floor
are left to the floors that exist (person fit's chance score, the guard's floor below the
sources).
"""

from __future__ import annotations

import numpy as np

FULL_CREDIT = 1.0
"""An item's score at which it counts as answered right (scores are fractions in [0, 1])."""


def saturated(values: np.ndarray) -> np.ndarray:
    """Per row of answers (NaN: not scored), whether every scored answer has full credit (rows
    with nothing scored: False)."""
    values = np.asarray(values, dtype=np.float64)
    scored = ~np.isnan(values)
    return scored.any(axis=1) & np.all(~scored | (values >= FULL_CREDIT), axis=1)


def open_above(values: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """``upper`` with the rows of ``values`` that are :func:`saturated` raised to 1."""
    return np.where(saturated(values), 1.0, np.asarray(upper, dtype=np.float64))


def ceiling_note(model: str | None, items: str) -> str:
    """The one-line note of a model that answered every one of ``items`` right (words such as
    "every item of bundle 'x'"; ``model`` None: not known)."""
    who = "the evaluated model" if model is None else f"model {model!r}"
    return (
        f"{who} answered {items} right: its answers cannot tell how far above the source "
        "models it lies, so its interval is open to 100 (README: 'Which recipe, and how far "
        "to trust it')"
    )
