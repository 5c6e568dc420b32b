"""``--method auto``: choose the recipe (method, estimator, budget) for the user's own matrix.

See :mod:`.choice` for the protocol and :mod:`._rule` for the rule: the lowest
cross-validated score among candidates whose intervals held, ties to balanced random items
with the guarded estimator.
"""

from __future__ import annotations

from ._cv import Candidate
from .choice import (
    AUTO,
    BUDGET_GRID,
    DEFAULT_ESTIMATORS,
    DEFAULT_METHODS,
    FALLBACK,
    FALLBACK_CALIBRATED,
    FLOOR,
    RecipeChoice,
    check_target_mae,
    choose_recipe,
)

__all__ = [
    "AUTO",
    "BUDGET_GRID",
    "DEFAULT_ESTIMATORS",
    "DEFAULT_METHODS",
    "FALLBACK",
    "FALLBACK_CALIBRATED",
    "FLOOR",
    "Candidate",
    "RecipeChoice",
    "check_target_mae",
    "choose_recipe",
]
