"""The selection contract: a method picks item ids and weights from source models only."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._rng import SeedLike
from .._types import ItemId
from ..errors import InputError
from ..responses import ResponseMatrix


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


class Selector(ABC):
    """Chooses ``budget`` items of a source matrix. Subclasses implement :meth:`_select`.

    Selectors see only the source models they are given; the seed makes them reproducible.
    Supervised selectors (``uses_target = True``) also see ``target``, the true full score
    of each source model, and override :meth:`_select_for_target`; the others ignore it.
    """

    name: str = "base"
    uses_target: bool = False
    """Whether the selection depends on ``target`` (the full score of the source models)."""

    def select(
        self,
        source: ResponseMatrix,
        budget: int,
        *,
        seed: SeedLike = None,
        target: np.ndarray | None = None,
    ) -> Subset:
        """Pick ``budget`` items of ``source``.

        Parameters
        ----------
        source
            Responses of the source models (models x items, NaN = not evaluated).
        budget
            Number of items to keep, 1 to ``source.n_items``.
        seed
            Makes randomised methods reproducible.
        target
            True full-benchmark score of each source model as a fraction, aligned with
            ``source.model_ids``; only supervised selectors use it. Default: each model's
            mean over the source items (the matrix is then taken to be the whole benchmark).
        """
        if not isinstance(budget, (int, np.integer)) or budget < 1:
            raise InputError(f"{self.name}: budget must be a positive integer, got {budget!r}")
        if budget > source.n_items:
            raise InputError(
                f"{self.name}: budget {budget} exceeds the {source.n_items} items "
                f"of {source.source}"
            )
        if target is None and not self.uses_target:
            return self._select(source, int(budget), seed)
        checked = self._checked_target(source, target)
        return self._select_for_target(source, int(budget), seed, checked)

    def _checked_target(self, source: ResponseMatrix, target: np.ndarray | None) -> np.ndarray:
        """``target`` as a float vector of one finite score per source model (row means if None)."""
        if target is None:
            values = source.mean_scores()
        else:
            try:
                values = np.asarray(target, dtype=np.float64).reshape(-1)
            except (TypeError, ValueError) as exc:
                raise InputError(f"{self.name}: target is not numeric ({exc})") from exc
        if values.shape != (source.n_models,):
            raise InputError(
                f"{self.name}: target has {values.size} values, {source.source} has "
                f"{source.n_models} models"
            )
        with np.errstate(invalid="ignore"):
            bad = np.flatnonzero(~np.isfinite(values) | (values < 0) | (values > 1))
        if bad.size:
            models = [source.model_ids[k] for k in bad[:5]]
            raise InputError(
                f"{self.name}: target must be finite fractions in [0, 1] (percent divided by "
                f"100), one per source model; bad for models {models} ({bad.size} in all)"
            )
        return values

    def _select_for_target(
        self, source: ResponseMatrix, budget: int, seed: SeedLike, target: np.ndarray
    ) -> Subset:
        """Supervised hook; unsupervised selectors ignore ``target`` and call :meth:`_select`."""
        return self._select(source, budget, seed)

    @abstractmethod
    def _select(self, source: ResponseMatrix, budget: int, seed: SeedLike) -> Subset:
        """Return a :class:`Subset` of exactly ``budget`` items of ``source``."""
