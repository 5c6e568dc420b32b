"""What ``--method auto`` decided: the choice per budget, and the record a bundle keeps."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ._cv import Candidate
from ._rule import RULE


@dataclass
class BudgetChoice:
    """The rule's choice at one budget, every candidate's row, the outer (nested) result."""

    budget: int
    chosen: Candidate
    rows: list[dict]
    nested: dict[str, Any] | None = None
    widen: float = 1.0
    """Factor for the chosen recipe's interval half-widths (:func:`.widen.fold_widen`)."""

    @property
    def cv_mae(self) -> float:
        """The chosen candidate's score (mean of its random-fold and extrapolation MAE);
        NaN when nothing was measured (too few models to cross-validate)."""
        return next(
            (
                r["score"]
                for r in self.rows
                if (r["method"], r["estimator"]) == (self.chosen.method, self.chosen.estimator)
            ),
            math.nan,
        )


@dataclass
class RecipeChoice:
    """The chosen recipe, how it was chosen, and every candidate's measured error."""

    method: str
    estimator: str
    budget: int
    floor: Candidate
    per_budget: dict[int, BudgetChoice]
    protocol: dict[str, Any]
    target_mae: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def chosen(self) -> BudgetChoice:
        return self.per_budget[self.budget]

    def as_record(self) -> dict[str, Any]:
        """JSON-ready record for the bundle's ``reliability["auto"]`` (MAE in score points)."""
        return _finite(
            {
                "chosen": {
                    "method": self.method,
                    "estimator": self.estimator,
                    "budget": self.budget,
                    "cv_mae": self.chosen.cv_mae,
                    "interval_widen": self.chosen.widen,
                },
                "floor": {"method": self.floor.method, "estimator": self.floor.estimator},
                "rule": RULE,
                "units": "score points (percent of the full benchmark)",
                "target_mae": self.target_mae,
                "protocol": self.protocol,
                "candidates": [
                    row | {"chosen": choice.chosen == Candidate(row["method"], row["estimator"])}
                    for choice in self.per_budget.values()
                    for row in choice.rows
                ],
                "nested": {str(b): c.nested for b, c in self.per_budget.items()},
                "notes": self.notes,
            }
        )

    def table_lines(self) -> list[str]:
        """A small markdown table of the candidates at the chosen budget."""
        if not self.chosen.rows:
            return [f"auto: {self.method} + {self.estimator}, {self.budget} items", *self.notes]
        lines = [
            f"auto: {self.method} + {self.estimator}, {self.budget} items "
            f"(inner CV over {self.protocol['models_used']} models; MAE in points)",
            "| candidate | score | random folds | extrapolation | vs floor | chosen |",
            "|---|---:|---:|---:|---:|:---:|",
        ]
        for row in self.chosen.rows:
            label = f"{row['method']}+{row['estimator']}"
            mark = "*" if Candidate(row["method"], row["estimator"]) == self.chosen.chosen else ""
            keys = ("score", "cv_mae", "extrapolation_mae", "diff_vs_floor")
            cells = [_num(row[k]) for k in keys]
            if row["score"] is None:
                cells = ["failed", "", "", ""]
            lines.append(f"| {label} | {' | '.join(cells)} | {mark} |")
        nested = self.chosen.nested
        if nested and nested.get("auto_mae") is not None:
            lines.append(
                f"nested CV (choose, then fit): auto {nested['auto_mae']:.2f}, floor "
                f"{nested['floor_mae']:.2f} points over {nested['splits']} outer splits"
            )
        if round(self.chosen.widen, 2) > 1.0:  # a factor that prints as x1.00 says nothing
            lines.append(
                f"interval half-widths x{self.chosen.widen:.2f}: the chosen recipe's band fell "
                "short on the random folds (select, then fit)"
            )
        return lines + self.notes


def _num(value: Any) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.2f}"


def _finite(value: Any) -> Any:
    """NaN and infinities as ``None`` all the way down (bundle JSON is strict)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
