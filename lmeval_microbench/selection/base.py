"""The selection contract: a method picks item ids and weights from source models only."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from .._rng import SeedLike
from ..errors import InputError
from ..responses import ResponseMatrix
from ..subset import Subset


class Selector(ABC):
    """Chooses ``budget`` items of a source matrix. Subclasses implement :meth:`_select`.

    Selectors see only the source models they are given; the seed makes them reproducible.
    Supervised selectors (``uses_target = True``) also see ``target``, the true full score
    of each source model, and override :meth:`_select_for_target`; the others ignore it.
    """

    name: str = "base"
    uses_target: bool = False
    """Whether the selection depends on ``target`` (the full score of the source models)."""
    uses_responses: bool = True
    """Whether the selection depends on the source models' answers (all but a uniform or
    stratified draw): then a build on few sources calibrates its intervals on folds that
    re-select the items (:func:`lmeval_microbench.crossfit.needs_cross_fit`)."""

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
