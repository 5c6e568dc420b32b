"""Subset selection methods behind one interface: ``make_selector(name).select(...)``."""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from .anchor_points import AnchorPointsSelector
from .base import Selector, Subset
from .random import RandomSelector, StratifiedSelector

SELECTORS: dict[str, type[Selector]] = {
    RandomSelector.name: RandomSelector,
    StratifiedSelector.name: StratifiedSelector,
    AnchorPointsSelector.name: AnchorPointsSelector,
}


def make_selector(name: str, **options: Any) -> Selector:
    """Instantiate a selection method by name; unknown names list the known ones."""
    try:
        cls = SELECTORS[name]
    except KeyError:
        raise InputError(
            f"unknown selection method {name!r}; choose from {sorted(SELECTORS)}"
        ) from None
    return cls(**options)


__all__ = [
    "SELECTORS",
    "AnchorPointsSelector",
    "RandomSelector",
    "Selector",
    "StratifiedSelector",
    "Subset",
    "make_selector",
]
