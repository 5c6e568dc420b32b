"""The ``person_fit`` block of a bundle: what a person-fit check of a new model needs.

Person fit (:mod:`lmeval_microbench.personfit`) asks whether a model's subset answers look
like the source models' or like guessing. Both checks need numbers that only the source
matrix and the benchmark's format can give, so the build records them here once:

* ``lz_threshold``: l_z* below it flags a pattern unlike the source models' (a low quantile
  of l_z* over the source models, so that it flags few ordinary models);
* ``alpha``: guessing is "not rejected" when the guessing test's p-value is at least alpha;
* ``chance``: the probability of a right answer by guessing, one number for every subset item
  or one per item (1 / number of choices; for items without choices the rate of the weakest
  source models);
* ``chance_score``: the *full-benchmark* score of a random responder (fraction), the value an
  interval must reach when the answers cannot be told from guessing;
* ``chance_rule`` and ``lz_rule``: how chance and the threshold were decided, in words, for
  the reader of the bundle;
* ``chance_from``: ``"given"`` (the build was told the chance levels: a random responder's
  score is the chance score) or ``"weakest_sources"`` (the weakest source models stand in:
  their score is a floor of the sources, not a guesser's, so the check widens the interval
  to it and does not move the estimate). Schema 1.3; older bundles say it only in
  ``chance_rule``, from which it is read.

The block is optional: bundles written before schema 1.2 have none and report no person fit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._types import ItemId
from ..errors import BundleError
from .fields import _get, _no_unknown, _non_empty, _object

FIELDS = (
    "lz_threshold",
    "alpha",
    "chance",
    "chance_score",
    "chance_rule",
    "lz_rule",
    "chance_from",
)
CHANCE_FROM = ("given", "weakest_sources")
STAND_IN_RULE = "no choices known"
"""How ``chance_rule`` begins when the weakest source models stand in (bundles before 1.3)."""


@dataclass(frozen=True)
class PersonFitSpec:
    """Thresholds and chance levels of a bundle's person-fit check (see the module docstring)."""

    lz_threshold: float
    alpha: float
    chance: float | Mapping[ItemId, float]
    chance_score: float
    chance_rule: str
    lz_rule: str
    chance_from: str = ""
    """``"given"`` or ``"weakest_sources"``; empty: read from ``chance_rule`` (before 1.3)."""

    def __post_init__(self) -> None:
        where = "person_fit"
        threshold = _number(self.lz_threshold, f"{where}.lz_threshold")
        alpha = _number(self.alpha, f"{where}.alpha")
        if not 0 < alpha < 1:
            raise BundleError(f"{where}.alpha: must lie in (0, 1), got {alpha!r}")
        score = _number(self.chance_score, f"{where}.chance_score")
        if not 0 <= score <= 1:
            raise BundleError(f"{where}.chance_score: must lie in [0, 1], got {score!r}")
        for name in ("chance_rule", "lz_rule"):
            text = getattr(self, name)
            if not isinstance(text, str) or not text.strip():
                raise BundleError(f"{where}.{name}: expected a non-empty string, got {text!r}")
        object.__setattr__(self, "lz_threshold", threshold)
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "chance_score", score)
        object.__setattr__(self, "chance", _checked_chance(self.chance, f"{where}.chance"))
        if not self.chance_from:
            stand_in = self.chance_rule.startswith(STAND_IN_RULE)
            object.__setattr__(self, "chance_from", CHANCE_FROM[int(stand_in)])
        if self.chance_from not in CHANCE_FROM:
            raise BundleError(
                f"{where}.chance_from: one of {list(CHANCE_FROM)}, got {self.chance_from!r}"
            )

    @property
    def stand_in(self) -> bool:
        """Whether the weakest source models stand in for chance (no levels were given)."""
        return self.chance_from == "weakest_sources"

    def chance_vector(self, item_ids: Sequence[ItemId]) -> np.ndarray:
        """Chance level of each of ``item_ids`` (every one must be known when per item)."""
        if not isinstance(self.chance, Mapping):
            return np.full(len(item_ids), float(self.chance))
        missing = [item for item in item_ids if item not in self.chance]
        if missing:
            raise BundleError(f"person_fit.chance: no chance level for items {missing[:5]}")
        return np.array([self.chance[item] for item in item_ids], dtype=np.float64)

    def for_items(self, item_ids: Sequence[ItemId]) -> PersonFitSpec:
        """The same spec with per-item chance levels exactly ``item_ids``, in that order.

        A bundle calls this to refuse chance levels for items it does not hold (or none for
        some it does), naming them.
        """
        if not isinstance(self.chance, Mapping):
            return self
        wanted = set(item_ids)
        extra = [item for item in self.chance if item not in wanted]
        if extra:
            raise BundleError(f"person_fit.chance: items not in the subset {extra[:5]}")
        ordered = dict(zip(item_ids, self.chance_vector(item_ids).tolist(), strict=True))
        return replace(self, chance=ordered)

    def to_dict(self) -> dict[str, Any]:
        chance = dict(self.chance) if isinstance(self.chance, Mapping) else self.chance
        return {
            "lz_threshold": self.lz_threshold,
            "alpha": self.alpha,
            "chance": chance,
            "chance_score": self.chance_score,
            "chance_rule": self.chance_rule,
            "lz_rule": self.lz_rule,
            "chance_from": self.chance_from,
        }

    @classmethod
    def from_dict(cls, obj: Any, where: str = "person_fit", lenient: bool = False) -> PersonFitSpec:
        obj = _object(obj, where)
        _no_unknown(obj, FIELDS, where, lenient)
        return cls(
            lz_threshold=_get(obj, "lz_threshold", float, where),
            alpha=_get(obj, "alpha", float, where),
            chance=_get(obj, "chance", (float, dict), where),
            chance_score=_get(obj, "chance_score", float, where),
            chance_rule=_non_empty(_get(obj, "chance_rule", str, where), f"{where}.chance_rule"),
            lz_rule=_non_empty(_get(obj, "lz_rule", str, where), f"{where}.lz_rule"),
            chance_from=_get(obj, "chance_from", str, where, ""),
        )


def _number(value: Any, where: str) -> float:
    """``value`` as a finite float; booleans, strings and NaN are refused naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise BundleError(f"{where}: expected a number, got {value!r}")
    if not math.isfinite(float(value)):
        raise BundleError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def _chance_level(value: Any, where: str) -> float:
    level = _number(value, where)
    if not 0 <= level < 1:
        raise BundleError(f"{where}: a chance level must lie in [0, 1), got {level!r}")
    return level


def _checked_chance(value: Any, where: str) -> float | dict[ItemId, float]:
    """One chance level, or item id -> chance level (non-empty, string ids)."""
    if not isinstance(value, Mapping):
        return _chance_level(value, where)
    if not value:
        raise BundleError(f"{where}: the per-item chance levels are empty")
    out: dict[ItemId, float] = {}
    for item, level in value.items():
        if not isinstance(item, str) or not item:
            raise BundleError(f"{where}: item ids must be non-empty strings, got {item!r}")
        out[item] = _chance_level(level, f"{where}[{item!r}]")
    return out
