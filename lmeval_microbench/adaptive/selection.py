"""Which items to ask next: the most informative at the current ability, or a random pick
among the most informative (randomesque) so that no item is shown to every model.

Selectors only see abilities and which items are still available; they never see answers.
"""

from __future__ import annotations

import abc

import numpy as np

from ..errors import InputError
from ..irt.params import ItemParams


class Selector(abc.ABC):
    """Chooses up to ``k`` available items per model; -1 pads rows with fewer left."""

    name: str = ""

    @abc.abstractmethod
    def select(
        self,
        params: ItemParams,
        theta: np.ndarray,
        available: np.ndarray,
        k: int,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Item positions (m, k) for abilities ``theta`` (m,) and an availability mask (m, n)."""

    def _ranked(self, params: ItemParams, theta: np.ndarray, available: np.ndarray) -> np.ndarray:
        """Available items of each row by decreasing Fisher information (unavailable last)."""
        info = params.information(np.asarray(theta, dtype=np.float64))
        info = np.where(available, info, -np.inf)
        return np.argsort(-info, axis=1, kind="stable")


def _pad(order: np.ndarray, available: np.ndarray, k: int) -> np.ndarray:
    """First ``k`` columns of ``order``; entries past a row's available count become -1."""
    chosen = order[:, :k].copy()
    counts = available.sum(axis=1)
    chosen[np.arange(k)[None, :] >= counts[:, None]] = -1
    return chosen


class MaxInfoSelector(Selector):
    """The ``k`` items with the largest Fisher information at the current ability."""

    name = "maxinfo"

    def select(
        self,
        params: ItemParams,
        theta: np.ndarray,
        available: np.ndarray,
        k: int,
        rng: np.random.Generator,
    ) -> np.ndarray:
        return _pad(self._ranked(params, theta, available), available, k)


class RandomesqueSelector(Selector):
    """``k`` items drawn at random from the ``max(top, k)`` most informative available ones.

    Kingsbury and Zara's randomesque exposure control: it gives up a little information per
    item so that the pool's best items are not shown to every model (which would make them
    worth memorising, and makes every run the same).
    """

    name = "randomesque"

    def __init__(self, top: int = 5) -> None:
        if top < 1:
            raise InputError(f"randomesque: top must be at least 1, got {top}")
        self.top = top

    def select(
        self,
        params: ItemParams,
        theta: np.ndarray,
        available: np.ndarray,
        k: int,
        rng: np.random.Generator,
    ) -> np.ndarray:
        ranked = self._ranked(params, theta, available)
        width = min(max(self.top, k), ranked.shape[1])
        counts = np.minimum(available.sum(axis=1), width)
        keys = rng.random((ranked.shape[0], width))
        keys[np.arange(width)[None, :] >= counts[:, None]] = np.inf  # keep unavailable last
        shuffled = np.take_along_axis(ranked[:, :width], np.argsort(keys, axis=1), axis=1)
        return _pad(shuffled, available, k)


SELECTORS = {"maxinfo": MaxInfoSelector, "randomesque": RandomesqueSelector}


def make_selector(name: str, *, top: int = 5) -> Selector:
    """A selector by name (``maxinfo`` or ``randomesque``)."""
    if name == "maxinfo":
        return MaxInfoSelector()
    if name == "randomesque":
        return RandomesqueSelector(top)
    raise InputError(f"unknown item selector {name!r}; known: {', '.join(SELECTORS)}")
