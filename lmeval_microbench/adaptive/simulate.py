"""Replay recorded answers through the adaptive loop: the simulator behind pools and benchmarks.

A response matrix holds every pool item's answer for every model, so an adaptive run of a
recorded model needs no model at all: each asked item's answer is looked up. Replaying the
source models (cross-fitted) calibrates a pool's intervals; replaying held-out models measures
its error (``tools/bench_adaptive.py``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..irt.params import ItemParams
from .engine import AdaptiveSession
from .scoring import ScoreMap
from .selection import Selector
from .stopping import StoppingRule


@dataclass
class ReplayResult:
    """What replaying ``m`` models gave.

    ``order`` (m, n_asked): item positions in the order asked. ``counts``: items asked after
    each step; ``theta``/``se`` (m, steps): ability after each step. ``predictions``: full-score
    estimates per checkpoint (item count), when a score map was given, and ``spans`` their
    ``(low, high)`` spans that the interval widens (:meth:`.ScoreMap.predict_run`).
    ``seconds``: wall time of the loop (selection + update), ``steps``: number of steps.
    """

    order: np.ndarray
    counts: list[int]
    theta: np.ndarray
    se: np.ndarray
    predictions: dict[int, np.ndarray] = field(default_factory=dict)
    spans: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def steps(self) -> int:
        return len(self.counts)

    def ability_at(self, n_items: int) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and sd of every model's ability once ``n_items`` were asked."""
        if n_items not in self.counts:
            raise InputError(f"no step of this replay ended at {n_items} items")
        step = self.counts.index(n_items)
        return self.theta[:, step], self.se[:, step]


def replay(
    params: ItemParams,
    responses: np.ndarray,
    *,
    selector: Selector,
    max_items: int,
    batch: int = 1,
    seed: int = 0,
    score_map: ScoreMap | None = None,
    checkpoints: Sequence[int] = (),
    prior_mean: float = 0.0,
    prior_sd: float = 1.0,
) -> ReplayResult:
    """Run every row of ``responses`` (m, n: columns = ``params`` items, no NaN) adaptively.

    Steps ask ``batch`` items, cut short so that each checkpoint is hit exactly; the score map
    (when given) scores every row at each checkpoint.
    """
    responses = np.asarray(responses, dtype=np.float64)
    if responses.ndim != 2 or responses.shape[1] != params.n_items:
        raise InputError(f"responses of shape {responses.shape} for {params.n_items} pool items")
    if np.isnan(responses).any():
        raise InputError("replay needs every answer of every model (no NaN)")
    max_items = min(max_items, params.n_items)
    marks = sorted({c for c in checkpoints if c <= max_items})
    session = AdaptiveSession(
        params,
        len(responses),
        selector=selector,
        rule=StoppingRule(max_items),
        batch=batch,
        seed=seed,
        prior_mean=prior_mean,
        prior_sd=prior_sd,
    )
    counts, thetas, ses, predictions, spans = [], [], [], {}, {}
    start, spent = time.perf_counter(), 0.0
    while session.n_asked < max_items:
        upcoming = [c for c in marks if c > session.n_asked]
        limit = upcoming[0] - session.n_asked if upcoming else batch
        session.batch = max(1, min(batch, limit))
        chosen = session.propose()
        session.record(chosen, np.take_along_axis(responses, chosen, axis=1))
        theta, se = session.ability()
        counts.append(session.n_asked)
        thetas.append(theta)
        ses.append(se)
        if score_map is not None and session.n_asked in marks:
            mark = time.perf_counter()
            value, low, high = score_map.predict_run(
                session.posterior.expected_scores(), session.asked, session.scores, (theta, se)
            )
            predictions[session.n_asked], spans[session.n_asked] = value, (low, high)
            spent += time.perf_counter() - mark
    order = (
        np.concatenate(session.order, axis=1)
        if session.order
        else np.zeros((len(responses), 0), int)
    )
    return ReplayResult(
        order,
        counts,
        np.column_stack(thetas),
        np.column_stack(ses),
        predictions,
        spans,
        time.perf_counter() - start - spent,
    )


def exposure(order: np.ndarray, n_items: int) -> np.ndarray:
    """Share of replayed models that were asked each item (order: (m, n_asked) positions)."""
    counts = np.bincount(order.reshape(-1), minlength=n_items)
    return counts / max(1, order.shape[0])
