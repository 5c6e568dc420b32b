"""Each source model's l_z* as a new model's would be: scored by an IRT fitted without it.

The misfit check flags a model whose l_z* lies below a low quantile of the source models'
l_z*. Scored by the IRT parameters they were fitted with, the sources fit those parameters
better than any new model can, and the fewer the sources the larger the gap. With the
threshold taken from the sources' own l_z* (N(0, 1)'s 5 % quantile under 20 sources), the
check flagged 58, 33 and 15 % of ordinary held-out models on IFEval and MuSR with 12, 25 and
50 source models, and 38, 24 and 12 % on the Open LLM Leaderboard v1 matrices
(``bench/personfit_sources.md``). Scored here by an IRT fitted on the other folds, as a new
model is scored by the bundle's, the same 4 % quantile flagged 1-6 % and 4-7 % there, and
about as many as before with all sources (3.6 against 4.5 % with 278, 3.8 against 4.1 % with
1,000), where the two thresholds nearly agree. Random responders are still caught, by the
guessing test (98-100 % flagged by either check).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tqdm.auto import tqdm

from .._types import ItemId
from ..irt import fit_source_irt
from ..responses import ResponseMatrix
from .statistics import lz

FOLDS = 5
"""Folds of the sources from :data:`LEAVE_ONE_OUT_BELOW` models on (each fit on 80 %)."""
LEAVE_ONE_OUT_BELOW = 25
"""Below this many source models each one is left out alone: a fold of a fifth would fit on
too few for its IRT to resemble the bundle's, fitted on all of them."""


def held_out_lz(
    source: ResponseMatrix,
    item_ids: Sequence[ItemId],
    *,
    irt_model: str = "2pl",
    seed: int = 0,
    progress: bool = True,
) -> np.ndarray:
    """l_z* of every source model on ``item_ids`` under an IRT fitted without it, (models,).

    The IRT is fitted as the bundle's (:func:`..irt.fit_source_irt`, on every source item);
    rows with fewer than two scored items get NaN, as :func:`.statistics.lz` gives them.
    """
    ids = list(item_ids)
    n_models = source.n_models
    n_folds = n_models if n_models < LEAVE_ONE_OUT_BELOW else FOLDS
    fold_of = np.random.default_rng(seed).permutation(n_models) % n_folds
    positions = source.item_positions(ids)
    stats = np.full(n_models, np.nan)
    for fold in tqdm(range(n_folds), desc="person-fit folds", leave=False, disable=not progress):
        held = fold_of == fold
        kept = [model for model, out in zip(source.model_ids, held, strict=True) if not out]
        irt = fit_source_irt(source.select_models(kept), model=irt_model, seed=seed)
        stats[held] = lz(irt, source.values[held][:, positions], ids)
    return stats
