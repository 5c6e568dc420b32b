"""One adaptive loop for any number of models: propose items, record answers, re-estimate.

The simulator replays thousands of recorded models through it at once; a live run drives it with
one model whose answers come from lm-eval. Both therefore pick items, update abilities and stop
by the same code. All rows move in lock step (same number of items asked), so a step is a few
array operations however many models are replayed.

Randomised selection draws from a generator seeded by ``(seed, step)``: a resumed run replays
its logged answers and then picks exactly what an uninterrupted run would have picked.
"""

from __future__ import annotations

import numpy as np

from .._types import ItemId
from ..errors import InputError
from ..irt.params import ItemParams
from .estimation import GridPosterior
from .selection import Selector
from .stopping import StoppingRule


class AdaptiveSession:
    """State of ``n_models`` adaptive runs over one item pool.

    Parameters
    ----------
    params
        1-D IRT parameters of the pool items.
    selector, rule, batch
        How items are picked, when to stop, and how many items one step asks (K).
    seed
        Seed of the randomised selectors (with the step number).
    """

    def __init__(
        self,
        params: ItemParams,
        n_models: int = 1,
        *,
        selector: Selector,
        rule: StoppingRule,
        batch: int = 1,
        seed: int = 0,
        prior_mean: float = 0.0,
        prior_sd: float = 1.0,
    ) -> None:
        if batch < 1:
            raise InputError(f"batch size (items per step) must be at least 1, got {batch}")
        self.params = params
        self.selector = selector
        self.rule = rule
        self.batch = batch
        self.seed = seed
        self.posterior = GridPosterior(params, n_models, prior_mean=prior_mean, prior_sd=prior_sd)
        self.asked = np.zeros((n_models, params.n_items), dtype=bool)
        self.scores = np.full((n_models, params.n_items), np.nan)
        self.order: list[np.ndarray] = []
        self.steps = 0

    @property
    def n_asked(self) -> int:
        """Items asked so far (the same for every row)."""
        return int(self.asked[0].sum()) if len(self.asked) else 0

    @property
    def n_left(self) -> int:
        return self.params.n_items - self.n_asked

    def ability(self) -> tuple[np.ndarray, np.ndarray]:
        """Current EAP ability and its standard error per row."""
        return self.posterior.mean_se()

    def stop_reason(self, row: int = 0) -> str | None:
        """Why row ``row`` stops now, or None while it should go on."""
        _, se = self.ability()
        return self.rule.reason(self.n_asked, float(se[row]), self.n_left)

    def propose(self) -> np.ndarray:
        """The next step's items, positions of shape (m, k); k = 0 when budget or pool is spent."""
        k = self.rule.next_batch(self.n_asked, self.batch, self.n_left)
        if k == 0:
            return np.zeros((len(self.asked), 0), dtype=np.intp)
        theta, _ = self.ability()
        rng = np.random.default_rng([self.seed, self.steps])
        return self.selector.select(self.params, theta, ~self.asked, k, rng)

    def record(self, chosen: np.ndarray, scores: np.ndarray) -> None:
        """Record the answers ``scores`` (m, k) to the proposed items ``chosen`` (m, k)."""
        chosen = np.asarray(chosen, dtype=np.intp)
        scores = np.asarray(scores, dtype=np.float64)
        if chosen.shape != scores.shape or chosen.shape[0] != len(self.asked):
            raise InputError(f"answers of shape {scores.shape} for items of shape {chosen.shape}")
        if np.any(chosen < 0) or np.any(np.take_along_axis(self.asked, chosen, axis=1)):
            raise InputError("an item was recorded twice or is not in the pool")
        rows = np.repeat(np.arange(len(chosen)), chosen.shape[1])
        self.posterior.update(rows, chosen.reshape(-1), scores.reshape(-1))
        self.asked[rows, chosen.reshape(-1)] = True
        self.scores[rows, chosen.reshape(-1)] = scores.reshape(-1)
        self.order.append(chosen)
        self.steps += 1

    def record_items(self, items: list[ItemId], scores: list[float]) -> None:
        """Record one step of a single-row session by item id (a resumed run's logged step)."""
        positions = self.params.positions(items)
        self.record(positions[None, :], np.asarray(scores, dtype=np.float64)[None, :])
