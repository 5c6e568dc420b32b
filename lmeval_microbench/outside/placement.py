"""Where a model's own answers place it: above every source model, below them, or among them.

A user cannot tell whether a new model is like the source models a bundle was built on; its
answers on the subset can. The guard already locates every model it estimates by a reading
that does not regress it towards the sources (:meth:`..estimators.guarded.GuardedEstimator`),
and moves the estimate and sizes the interval by how far that reading lies beyond them. This
module turns the same location into what a user reads beside the estimate: ``above`` where
the reading puts the model's score above the strongest source's with probability at least
:data:`SIDE_P`, ``below`` under the weakest source's, nothing otherwise.

It says *why* an estimate may be less certain than the sources' cross-validation suggests,
not how good it is: the interval already is the honest measure. Measured on the peer suite's
held-out models (``tools/bench_placement.py``, ``bench/placement.md``): it named 81 % of the
strongest fifth of the whole benchmarks and of the v1 matrices and 61-94 % of the weakest
fifth, never on the wrong side, and 2-4 % of the models inside the sources on random splits
(those at the edge of their range).

An adaptive run has no fixed subset for the guard to read; it is placed by its ability
posterior against the pool's ability edges instead (:func:`..adaptive.bands.run_placement`),
into the same :class:`Placement` and the same marks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

from .readings.base import se_floor

SIDE_P = 0.5
"""A model is reported above (below) the sources when its reading lies above the strongest
(under the weakest) source's score with at least this probability: more likely outside than
inside. The guard acts from a weight of :data:`..guard.W_MIN` on, so an interval may widen
for a model this leaves unnamed."""
ABOVE, BELOW = "above", "below"
MARKS = {ABOVE: "↑", BELOW: "↓"}
"""How a table marks an estimate beside its number (person fit's is ``†``)."""


def legend(label: str = f"{MARKS[ABOVE]} ({MARKS[BELOW]})") -> str:
    """What a table's ``label`` (its marks, or a column name) says, in one sentence."""
    return (
        f"{label} the model's answers place it above (below) every source model of the "
        "bundle, more likely than not: its estimate extrapolates beyond them and its interval "
        "is sized for that (README: 'Which recipe, and how far to trust it')."
    )


@dataclass(frozen=True)
class Placement:
    """Per model, the probability that its score lies above the strongest source's
    (``above``) and under the weakest source's (``below``), from a normal reading."""

    above: np.ndarray
    below: np.ndarray

    @classmethod
    def locate(cls, value: np.ndarray, se: np.ndarray, top: float, bottom: float) -> Placement:
        """A reading ``value`` +- ``se`` against the sources' score range [bottom, top]."""
        se = se_floor(np.asarray(se, dtype=np.float64))
        value = np.asarray(value, dtype=np.float64)
        return cls(norm.sf((top - value) / se), norm.cdf((bottom - value) / se))

    @property
    def outside(self) -> np.ndarray:
        """Probability of lying beyond the sources on either side (the guard's weight)."""
        return np.clip(self.above + self.below, 0.0, 1.0)

    def sides(self) -> list[str]:
        """``above``, ``below`` or ``""`` per model (:data:`SIDE_P`)."""
        return [
            ABOVE if up >= SIDE_P else BELOW if down >= SIDE_P else ""
            for up, down in zip(self.above.tolist(), self.below.tolist(), strict=True)
        ]

    def records(self) -> list[dict[str, Any]]:
        """One JSON object per model: its side and both probabilities."""
        return [
            {"side": side, "p_above": float(up), "p_below": float(down)}
            for side, up, down in zip(
                self.sides(), self.above.tolist(), self.below.tolist(), strict=True
            )
        ]


def placement_note(model: str | None, bundle_name: str, record: Mapping[str, Any]) -> str:
    """The one-line note of a model placed beyond the sources (``model`` None: not known);
    empty for one among them."""
    side = record["side"]
    if not side:
        return ""
    who = "the evaluated model" if model is None else f"model {model!r}"
    p = record["p_above"] if side == ABOVE else record["p_below"]
    return (
        f"{who}, bundle {bundle_name!r}: its answers place it {side} every source model the "
        f"bundle was built on (probability {p:.2f}); the estimate extrapolates beyond them and "
        "its interval is sized for that (README: 'Which recipe, and how far to trust it')"
    )


def side_of(record: Mapping[str, Any] | None) -> str:
    """``above``, ``below`` or ``""`` of a placement record (:meth:`Placement.records`; None:
    nothing said)."""
    return "" if record is None else record["side"]


def side_mark(record: Mapping[str, Any] | None) -> str:
    """The table mark of a placement record (None: no mark)."""
    return MARKS.get(side_of(record), "")


def placement_of(estimator: Any, values: np.ndarray) -> Placement | None:
    """Where ``estimator`` places complete rows of subset answers, or None when it has no
    guard to say so (every estimator but ``guarded`` and the ``blend`` that holds one)."""
    for candidate in (estimator, *getattr(estimator, "members_", ())):
        place = getattr(candidate, "placement", None)
        if place is not None:
            return place(values)
    return None


def placement_records(estimator: Any, values: np.ndarray) -> list[dict[str, Any] | None]:
    """:meth:`Placement.records` per row of ``values``; None for a row with a missing answer
    (an imputed answer is no evidence of where a model lies) or where the estimator has no
    guard."""
    values = np.asarray(values, dtype=np.float64)
    out: list[dict[str, Any] | None] = [None] * len(values)
    complete = np.flatnonzero(~np.isnan(values).any(axis=1))
    if not complete.size:
        return out
    placement = placement_of(estimator, values[complete])
    if placement is None:
        return out
    for row, record in zip(complete.tolist(), placement.records(), strict=True):
        out[row] = record
    return out
