"""metabench's information filter: the most informative items at quantiles of ability.

Kipnis et al. (2024, "metabench") fit a 1-D IRT model to thousands of leaderboard models and
keep, for each point of a grid over the ability of those models, the item with the most
Fisher information there: a model's ability is then measured precisely wherever real models
lie, and a regression of the full score on the ability (and subset score) recovers the score.
The estimator that goes with this selector is therefore ``calibrated`` (spline regression on
ability, subset mean and p-IRT), not the weighted sum: the weights here are uniform.

Procedure: fit a 1-D IRT model on the source; take ``n_quantiles`` quantiles of the source
models' EAP abilities at levels (k + 1/2) / n_quantiles (default: one per item of the budget);
visit the grid points in turn (lowest ability first, round-robin when the budget exceeds the
grid) and give each the not-yet-picked item with the most information at that point. Items
that every source model answers alike carry no information and come last. Nothing is random,
so the seed only labels the subset.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._rng import SeedLike
from ..errors import InputError
from ..irt import MODEL_TYPES, IRTModel
from ..responses import ResponseMatrix
from .base import Selector, Subset
from .random import _seed_value


def ability_quantiles(abilities: np.ndarray, n_points: int) -> np.ndarray:
    """The (k + 1/2) / n_points quantiles of ``abilities``, k = 0..n_points-1 (ascending)."""
    return np.quantile(abilities, (np.arange(n_points) + 0.5) / n_points)


def round_robin_max_information(information: np.ndarray, budget: int) -> np.ndarray:
    """Item indices picked by visiting grid rows in turn, each taking its best unpicked item.

    ``information`` has shape (n_points, n_items); ties go to the lowest item index.
    """
    n_points, n_items = information.shape
    available = np.ones(n_items, dtype=bool)
    picked: list[int] = []
    while len(picked) < budget:
        row = information[len(picked) % n_points]
        k = int(np.argmax(np.where(available, row, -np.inf)))
        picked.append(k)
        available[k] = False
    return np.asarray(picked, dtype=np.intp)


class MetabenchSelector(Selector):
    """Round-robin maximum Fisher information at quantiles of the source models' ability.

    Parameters
    ----------
    irt_model
        ``"2pl"`` (default), ``"3pl"`` or ``"4pl"`` (metabench picks per benchmark); 1-D.
    n_quantiles
        Grid size; ``None`` uses one grid point per item of the budget.
    irt_options
        Extra keyword arguments of :class:`~lmeval_microbench.irt.IRTModel`.
    """

    name = "metabench"

    def __init__(
        self,
        *,
        irt_model: str = "2pl",
        n_quantiles: int | None = None,
        irt_options: dict[str, Any] | None = None,
    ) -> None:
        self.irt_model = irt_model
        self.n_quantiles = n_quantiles
        self.irt_options = irt_options

    def _check_options(self) -> None:
        if self.irt_model not in MODEL_TYPES:
            raise InputError(
                f"{self.name}: irt_model must be one of {MODEL_TYPES}, got {self.irt_model!r}"
            )
        if self.n_quantiles is not None and (
            not isinstance(self.n_quantiles, (int, np.integer)) or self.n_quantiles < 1
        ):
            raise InputError(
                f"{self.name}: n_quantiles must be a positive integer or None, "
                f"got {self.n_quantiles!r}"
            )

    def _select(self, source: ResponseMatrix, budget: int, seed: SeedLike) -> Subset:
        self._check_options()
        constant = set(source.constant_items())
        fittable = [i for i in source.item_ids if i not in constant]
        if len(fittable) < 2:
            raise InputError(
                f"{self.name}: {source.source} has {len(fittable)} items that some but not all "
                "models answer correctly; an IRT fit needs at least 2"
            )
        fit = IRTModel(self.irt_model, 1, **dict(self.irt_options or {})).fit(
            source.select_items(fittable)
        )
        grid = ability_quantiles(fit.abilities_[:, 0], self.n_quantiles or budget)
        information = np.full((grid.size, source.n_items), -1.0)  # constant items last
        information[:, source.item_positions(fittable)] = fit.params_.information(grid)
        picked = round_robin_max_information(information, budget)
        order = np.argsort(picked)
        return Subset(
            tuple(source.item_ids[k] for k in picked[order]),
            np.full(budget, 1.0 / budget),
            self.name,
            _seed_value(seed),
            {
                "ability_grid": grid.tolist(),
                "pick_order": [source.item_ids[k] for k in picked],
                "irt_model": self.irt_model,
            },
        )
