"""Identifiers and small value types shared by every layer; imports nothing of ours."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

ItemId = str
"""Stable item identifier, e.g. ``"mmlu.anatomy.12"``; never a row position."""

ModelId = str
"""Model identifier, e.g. a Hugging Face repo id or a checkpoint path."""


def duplicate_ids(ids: Iterable[str]) -> list[str]:
    """The ids that occur more than once, each once, in the order of their second occurrence.

    Ids are how every join is made, so any id seen twice is an error the caller names.
    """
    seen: set[str] = set()
    dups: dict[str, None] = {}
    for value in ids:
        if value in seen:
            dups[value] = None
        seen.add(value)
    return list(dups)


@dataclass(frozen=True)
class Estimate:
    """A full-benchmark score estimate with a central interval.

    ``value``, ``lower`` and ``upper`` are on the score scale of the target (fractions in
    [0, 1] unless the caller says otherwise); ``level`` is the nominal coverage of
    ``[lower, upper]``; ``se`` is a standard error where the method has one (else NaN).
    """

    value: float
    lower: float
    upper: float
    level: float = 0.9
    se: float = float("nan")

    def as_dict(self) -> dict[str, float]:
        return {
            "value": self.value,
            "lower": self.lower,
            "upper": self.upper,
            "level": self.level,
            "se": self.se,
        }


class MaybeEstimated:
    """Mixin of results whose ``estimate`` may be None (items missing): NaN ends then.

    Tables and lm-eval's aggregations want numbers, not None, for a run that could not be
    estimated; the mixin gives them NaN while ``estimate`` keeps the distinction.
    """

    estimate: Estimate | None

    @property
    def value(self) -> float:
        return math.nan if self.estimate is None else self.estimate.value

    @property
    def lower(self) -> float:
        return math.nan if self.estimate is None else self.estimate.lower

    @property
    def upper(self) -> float:
        return math.nan if self.estimate is None else self.estimate.upper
