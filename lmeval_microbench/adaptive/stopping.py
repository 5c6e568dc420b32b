"""When an adaptive run stops: target standard error reached, item budget spent, or pool empty.

The reason is part of the result: a run that ended because the pool ran out before the target
standard error was reached says so, instead of passing for a precise one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InputError

TARGET_SE = "target_se"
MAX_ITEMS = "max_items"
POOL_EXHAUSTED = "pool_exhausted"


@dataclass(frozen=True)
class StoppingRule:
    """Stop at ``max_items`` answered items or once the ability's se is at most ``target_se``."""

    max_items: int
    target_se: float | None = None

    def __post_init__(self) -> None:
        if self.max_items < 1:
            raise InputError(f"max_items must be at least 1, got {self.max_items}")
        if self.target_se is not None and not (
            math.isfinite(self.target_se) and self.target_se > 0
        ):
            raise InputError(f"target_se must be a positive number, got {self.target_se}")

    def reason(self, n_items: int, se: float, n_left: int) -> str | None:
        """Why a run with ``n_items`` answered, ability se ``se`` and ``n_left`` unasked stops."""
        if self.target_se is not None and se <= self.target_se:
            return TARGET_SE
        if n_items >= self.max_items:
            return MAX_ITEMS
        if n_left == 0:
            return POOL_EXHAUSTED
        return None

    def next_batch(self, n_items: int, batch: int, n_left: int) -> int:
        """Items to ask in the next step: ``batch``, cut so the budget and pool are not overrun."""
        return max(0, min(batch, self.max_items - n_items, n_left))
