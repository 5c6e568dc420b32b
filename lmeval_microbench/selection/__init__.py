"""Subset selection methods behind one interface: ``make_selector(name).select(...)``."""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from .anchor_points import AnchorPointsSelector
from .audit import select_with_audit
from .base import Selector, Subset
from .dpp import DPPSelector
from .greedy import GreedySelector
from .lasso import LassoSelector
from .metabench import MetabenchSelector
from .random import BalancedSelector, RandomSelector, StratifiedSelector
from .tinybenchmarks import TinyBenchmarksSelector

SELECTORS: dict[str, type[Selector]] = {
    cls.name: cls
    for cls in (
        RandomSelector,
        StratifiedSelector,
        BalancedSelector,
        AnchorPointsSelector,
        TinyBenchmarksSelector,
        MetabenchSelector,
        DPPSelector,
        GreedySelector,
        LassoSelector,
    )
}
"""Selection methods by name. ``greedy`` and ``lasso`` are supervised: pass ``target`` to
``select``."""


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
    "BalancedSelector",
    "DPPSelector",
    "GreedySelector",
    "LassoSelector",
    "MetabenchSelector",
    "RandomSelector",
    "Selector",
    "StratifiedSelector",
    "Subset",
    "TinyBenchmarksSelector",
    "make_selector",
    "select_with_audit",
]
