"""Item parameters keyed by item id, in the slope-intercept form mirt and metabench use.

P(correct | theta) = g + (u - g) / (1 + exp(-(a . theta + d))), with theta of dimension D.
1PL/2PL have g = 0, u = 1 (1PL: one shared slope); 3PL frees g; 4PL frees g and u.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._types import ItemId
from ..errors import InputError, ItemMismatchError
from . import _math

MODEL_TYPES = ("1pl", "2pl", "3pl", "4pl")


@dataclass(frozen=True)
class ItemParams:
    """Fitted parameters of ``n`` items in ``D`` ability dimensions.

    Attributes
    ----------
    item_ids : tuple of str, length n
    a : (n, D) slopes;  d : (n,) intercepts;  g : (n,) lower asymptotes;  u : (n,) upper.
    model : one of ``MODEL_TYPES``.
    """

    item_ids: tuple[ItemId, ...]
    a: np.ndarray
    d: np.ndarray
    g: np.ndarray
    u: np.ndarray
    model: str = "2pl"
    _pos: dict[ItemId, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ids = tuple(str(i) for i in self.item_ids)
        n = len(ids)
        a = np.asarray(self.a, dtype=np.float64)
        if a.ndim == 1:
            a = a[:, None]
        arrays = {
            "d": np.asarray(self.d, dtype=np.float64).reshape(-1),
            "g": np.asarray(self.g, dtype=np.float64).reshape(-1),
            "u": np.asarray(self.u, dtype=np.float64).reshape(-1),
        }
        if a.shape[0] != n or any(v.shape != (n,) for v in arrays.values()):
            raise InputError(f"ItemParams: parameter arrays do not all have {n} items")
        if self.model not in MODEL_TYPES:
            raise InputError(
                f"ItemParams: unknown model {self.model!r}; expected one of {MODEL_TYPES}"
            )
        if len(set(ids)) != n:
            raise InputError("ItemParams: duplicate item ids")
        if not (np.all(np.isfinite(a)) and all(np.all(np.isfinite(v)) for v in arrays.values())):
            bad = [
                ids[k]
                for k in range(n)
                if not np.all(np.isfinite(a[k]))
                or not all(np.isfinite(v[k]) for v in arrays.values())
            ]
            raise InputError(f"ItemParams: non-finite parameters for items {bad[:5]}")
        for name, value in (("item_ids", ids), ("a", a), *arrays.items()):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_pos", {item: k for k, item in enumerate(ids)})

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def n_dims(self) -> int:
        return int(self.a.shape[1])

    def positions(self, item_ids: Iterable[ItemId]) -> np.ndarray:
        item_ids = list(item_ids)
        missing = [i for i in item_ids if i not in self._pos]
        if missing:
            raise ItemMismatchError(
                f"no IRT parameters for items {missing[:5]} ({len(missing)} in all)"
            )
        return np.array([self._pos[i] for i in item_ids], dtype=np.intp)

    def subset(self, item_ids: Sequence[ItemId]) -> ItemParams:
        """Parameters of ``item_ids`` only, in that order."""
        k = self.positions(item_ids)
        ids = tuple(self.item_ids[j] for j in k)
        return ItemParams(ids, self.a[k], self.d[k], self.g[k], self.u[k], self.model)

    def probability(self, theta: np.ndarray) -> np.ndarray:
        """P(correct) for abilities ``theta`` of shape (m, D) or (m,) when D = 1 -> (m, n)."""
        return _math.probability(self._as_theta(theta), self.a, self.d, self.g, self.u)

    def information(self, theta: np.ndarray) -> np.ndarray:
        """Fisher information of each item at each ability -> (m, n)."""
        return _math.fisher_information(self._as_theta(theta), self.a, self.d, self.g, self.u)

    def _as_theta(self, theta: np.ndarray) -> np.ndarray:
        theta = np.atleast_1d(np.asarray(theta, dtype=np.float64))
        if theta.ndim == 1:
            theta = theta[:, None] if self.n_dims == 1 else theta[None, :]
        if theta.shape[1] != self.n_dims:
            raise InputError(
                f"theta has {theta.shape[1]} dimensions, parameters have {self.n_dims}"
            )
        return theta

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (used inside bundles)."""
        return {
            "model": self.model,
            "n_dims": self.n_dims,
            "item_ids": list(self.item_ids),
            "a": self.a.tolist(),
            "d": self.d.tolist(),
            "g": self.g.tolist(),
            "u": self.u.tolist(),
        }

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> ItemParams:
        try:
            return cls(
                tuple(payload["item_ids"]),
                np.asarray(payload["a"], dtype=np.float64).reshape(len(payload["item_ids"]), -1),
                np.asarray(payload["d"]),
                np.asarray(payload["g"]),
                np.asarray(payload["u"]),
                payload["model"],
            )
        except KeyError as exc:
            raise InputError(f"IRT parameters lack field {exc.args[0]!r}") from exc
