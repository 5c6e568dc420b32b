"""Runs above the sources of a whole-benchmark pool: how far the estimate moves to the reading.

Beyond the strongest source the 2PL fitted on the sources and the IRT-free reading
(:func:`.estimation.impute_from_rates`) err in opposite directions on whole benchmarks: on
IFEval's strongest fifth held out, after 50 items, the estimate erred by 8.15 points, under the
truth, and the reading over it by about as much, so a point between them errs less than either.
How far between is a property of the pool, so each pool chooses it on its own upward folds (the
strongest fifth of the sources replayed with a map fitted on weaker ones) among
:data:`TOWARD_CANDIDATES` (a pool too small for them takes :data:`UNCHOSEN_TOWARD`), and
:meth:`.scoring.ScoreMap.predict_run` moves a run's estimate that far towards the reading where
the reading lies above every source, weighted by the posterior probability that the run's
ability lies above the sources' edge (the side bands' edge, :func:`.pool.ability_edges`; on a
fold, the edge of the models it was fitted on). The
weight keeps runs among the sources where they were: moved wherever the reading alone lay above
them, MuSR's noisy reading moved runs of random splits too (2.05 -> 2.27 points at 50 items,
2.62 -> 3.31 at 10; ``tools/bench_adaptive.py`` on that variant during development, not kept).
The interval does not move: it already spans both (:meth:`.scoring.ScoreMap.predict_run`).

The folds can only choose if they show what a new model meets: an ability scale fitted
without it. Item parameters fitted on every source, the held-out strongest fifth included,
read that fifth well (IFEval: 3.1-3.9 points at 10-50 items) and the reading badly, so the
folds chose no move at all, while the leaderboard's strongest fifth held out gained 3-4 points
from a move half-way. Refitted on each fold's own training models
(:func:`.calibrate.fold_params`), the four-fifths fold erred 5.3-7.3 points with no move and
3.7-7.2 at its best share, 0.2, as the held-out fifth does (``bench/adaptive_toward.md``). So
on whole-benchmark pools the upward folds that choose the move get their own IRT fit
(:func:`.pool.fit_adaptive_state`); the side bands keep the pool's.

Only where the pool's target is the source models' mean over its items (a whole benchmark,
:func:`..truth.is_matrix_mean`): there the reading of a model's own answers needs
no map to the target, as for the static guard (:mod:`..estimators.guarded`). On the v1 pools
the target is the whole benchmark's score beyond the pool's items; they keep one IRT fit and
no move.

Below the sources nothing moves. The rule mirrored (the whole way down to the reading where it
lies under every source, by the probability that the run's ability lies under the weakest
sources' edge) helped where the weakest fifth was read far too high (ARC, 25 sources, 50
items: 17.4 -> 8.2 points) but made IFEval's weakest fifth worse with 25 to 278 sources
(2.85 -> 3.19, 3.00 -> 3.55 at 50 items), and MMLU's with all sources (4.08 -> 5.60); a share
chosen on the downward folds instead (their errors are of another size than the held-out
fifth's: 9-12 points against 3-4 on IFEval) was worse on IFEval in every cell, 0.1-0.7
points. Scratch replays on the peer suite's splits, not kept; what such a pool reads now is
``bench/adaptive_sources_weak.md``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..errors import FewSourcesWarning
from ..irt.params import ItemParams
from .bands import ABOVE, beyond_edge
from .calibrate import CHOICE_ITEMS, FoldRun, checkpoint_states
from .scoring import ScoreMap

TOWARD_CANDIDATES = tuple(round(0.1 * k, 1) for k in range(11))
"""Shares of the way from the estimate to the reading a pool chooses among (0: no move)."""
UNCHOSEN_TOWARD = 1.0
"""The share of a whole-benchmark pool without upward folds (under 48 sources): the static
guard's rule, which moves an estimate the whole way to its reading by the probability that
the model lies beyond the sources (:mod:`..outside.guard`); here that probability is the
run's ability lying above the strongest sources' (:attr:`.scoring.ScoreMap.toward_edge`).
Without a move such a run stayed near the strongest source: IFEval's strongest fifth held
out, 25 sources, 50 items, 12.5 points off against the static build's 4.6
(``bench/adaptive_sources_before_unchosen_move.md``); with it 5.5
(``bench/adaptive_sources_before_smoothed_rates.md``,
random splits within 0.1 point or better). It is not always right: five strongest-fifth
cells got worse by 0.2-2.0 points (TruthfulQA at 50 items 15.7 -> 17.8, HellaSwag at 25 and
50, Winogrande at 25, ARC at 50), against gains of up to 7 points at 10-50 items.
Weighted instead by the probability that the reading itself lies above the strongest source
(its binomial spread), the move would have reached GSM8K's runs, whose abilities after 50
items sit under the whole-pool edge (10.5 -> 6.7 points), but it followed MuSR's noisy reading
on random splits too (2.1-2.3 -> 3.6-4.1 at 50 items; a scratch replay, not kept)."""


def share_errors(
    score_map: ScoreMap,
    params: ItemParams,
    answers: np.ndarray,
    order: np.ndarray,
    truth: np.ndarray,
    marks: Sequence[int],
    edge: float | None,
) -> dict[int, np.ndarray]:
    """Mean absolute error (fractions) of every share of :data:`TOWARD_CANDIDATES` after each
    of ``marks`` items of the runs' ``order``, each run's move weighted by the probability
    that its ability lies above ``edge`` (None: unweighted)."""
    shares = np.asarray(TOWARD_CANDIDATES)[:, None]
    out = {}
    for n, expected, asked, scores, ability in checkpoint_states(params, answers, order, marks):
        value = score_map.predict_answers(expected, asked, scores)
        step = score_map.above_reading(value, asked, scores) - value
        if edge is not None:
            step = step * beyond_edge(*ability, edge, ABOVE)
        out[n] = np.mean(np.abs(value + shares * step - truth), axis=1)
    return out


def choose_toward(
    runs: Sequence[FoldRun], truth: np.ndarray, marks: Sequence[int], pseudo: float
) -> tuple[float, dict[str, float]]:
    """The share with the lowest mean absolute error on the upward fold ``runs`` (each read
    with its own item parameters and imputation strength ``pseudo``) at the run lengths of
    :data:`.calibrate.CHOICE_ITEMS` the pool has, and every candidate's error (fractions).
    Each fold weighs the same; ties go to the smaller move. No runs: no move."""
    if not runs:
        return 0.0, {}
    scored = [n for n in CHOICE_ITEMS if n in marks] or [min(marks)]
    errors = np.zeros(len(TOWARD_CANDIDATES))
    for run in runs:
        score_map = replace(run.score_map, pseudo=pseudo, toward=0.0)
        found = share_errors(
            score_map, run.params, run.answers, run.order, truth[run.rows], scored, run.above_edge
        )
        errors += sum(found.values())
    errors /= len(runs) * len(scored)
    best = int(np.argmin(errors))
    return TOWARD_CANDIDATES[best], {
        str(share): float(e) for share, e in zip(TOWARD_CANDIDATES, errors, strict=True)
    }


def warn_without_upward_folds(score_map: ScoreMap, n_sources: int) -> None:
    """Warn where the pool has no upward fold (its strongest fifth held fewer than
    :data:`.pool.MIN_FOLD_MODELS` models, under 48 sources): no side band, top band or move
    chosen on models beyond the sources, only the reach of the IRT-free reading
    (:meth:`.scoring.ScoreMap.with_pool_reach`) keeps their intervals honest, and their
    estimates may stay far off (:data:`UNCHOSEN_TOWARD` moves them on whole benchmarks, not
    always far enough)."""
    if score_map.has_upward_folds:
        return
    warnings.warn(
        f"adaptive pool of {n_sources} source models: too few to replay its strongest fifth "
        "(from 48 on), so a model stronger than every source gets a wide interval and an "
        "estimate that may stay far off (25 sources, strongest fifth held out, 50 items: "
        "GSM8K 10.3 and TruthfulQA 11.7 points off, the static build 3.1 and 3.0; "
        "bench/adaptive_sources.md); for such a model use a static micro task (microbench "
        "build)",
        FewSourcesWarning,
        stacklevel=3,
    )
