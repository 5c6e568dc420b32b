"""The items a method selected and the share of the benchmark each stands for.

A leaf (numpy, ids and errors only), so that estimators, bundles, adaptive pools and the joint
estimator can name a subset without importing every selection method through
``selection/__init__``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._types import ItemId
from .errors import InputError


@dataclass(frozen=True)
class Subset:
    """Selected items with weights that sum to one.

    ``weights[k]`` is the share of the full benchmark that item ``item_ids[k]`` stands for:
    the weighted anchor sum ``sum(weights * scores)`` estimates the full score. ``info``
    holds method-specific extras (cluster sizes, strata) that are JSON-serialisable.
    """

    item_ids: tuple[ItemId, ...]
    weights: np.ndarray
    method: str
    seed: int | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ids = tuple(str(i) for i in self.item_ids)
        weights = np.asarray(self.weights, dtype=np.float64).reshape(-1)
        if len(ids) == 0:
            raise InputError(f"{self.method}: empty subset")
        if len(set(ids)) != len(ids):
            raise InputError(f"{self.method}: subset has duplicate items")
        if weights.shape != (len(ids),) or not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise InputError(
                f"{self.method}: weights must be {len(ids)} finite non-negative numbers"
            )
        total = weights.sum()
        if not np.isclose(total, 1.0, rtol=0, atol=1e-9):
            raise InputError(f"{self.method}: weights sum to {total}, not 1")
        object.__setattr__(self, "item_ids", ids)
        object.__setattr__(self, "weights", weights)

    @property
    def budget(self) -> int:
        return len(self.item_ids)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "seed": self.seed,
            "item_ids": list(self.item_ids),
            "weights": self.weights.tolist(),
            "info": self.info,
        }

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> Subset:
        return cls(
            tuple(payload["item_ids"]),
            np.asarray(payload["weights"], dtype=np.float64),
            payload["method"],
            payload.get("seed"),
            dict(payload.get("info") or {}),
        )
