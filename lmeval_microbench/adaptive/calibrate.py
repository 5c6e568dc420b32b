"""A pool calibrated on its own source models: cross-fitted replays, and what they choose.

Every number a pool attaches to a run (its interval bands, and how far the imputation of
unasked items trusts the run's own hit rate) is fitted on adaptive runs of source models that
the score map has not seen. One replay per fold gives the order in which a model is asked the
items (max-information selection depends on the answers and the IRT, not on the score map);
the answers known at each checkpoint then give the run's estimate under any score map, so the
candidates of a choice are all scored on the same runs.

Why the imputation's strength is chosen per pool: the shifted imputation
(:func:`.estimation.impute`) moves the expectations of every unasked item by a logit shift
that matches the run's hit rate, held back by ``pseudo`` answers at the posterior's own
expectation. One pseudo answer (the default) reads the leaderboard's strongest fifth best on
MMLU and IFEval (MMLU at 10 items 4.91 points against 6.35 with 100 pseudo answers; IFEval at
50 items 8.15 against 9.48 unshifted). MuSR, whose items tell models apart weakly, is read
worst that way: 3.85 points at 50 items on random model splits against 2.05 with 100, because
the hit rate on 50 weakly discriminating items is mostly noise and the shift spreads it over
700 unasked items. So each pool scores :data:`PSEUDO_CANDIDATES` on its own cross-fitted and
directed folds, and holds the shift back only where that cuts the error clearly
(:data:`MIN_GAIN`) on every kind of fold. A small gain is not taken: on MMLU the folds
preferred 100 pseudo answers by 1.60 against 1.83 points, and the strongest fifth of the
leaderboard, which no fold contains, was then read 0.45-1.4 points worse.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .._types import ItemId
from ..build import fit_source_irt
from ..irt.params import ItemParams
from ..responses import ResponseMatrix
from .estimation import PSEUDO_ANSWERS, GridPosterior
from .scoring import ScoreMap
from .selection import MaxInfoSelector
from .simulate import replay

PSEUDO_CANDIDATES = (1.0, 3.0, 10.0, 30.0, 100.0)
"""Strengths of the shifted imputation a pool chooses among (pseudo answers; the first is
the default of pools fitted before the choice)."""
MIN_GAIN = 0.2
"""Share of the default's fold error a stronger hold must cut on every fold kind to be used."""
CHOICE_ITEMS = (10, 25, 50)
"""Run lengths the choice is scored at (those a pool has): the lengths runs are used at."""


def fold_params(
    source: ResponseMatrix, fit_on: np.ndarray, seed: int, items: Sequence[ItemId]
) -> ItemParams:
    """Item parameters fitted on the ``fit_on`` source models only (mask), in pool order."""
    kept = [m for m, k in zip(source.model_ids, fit_on, strict=True) if k]
    return fit_source_irt(source.select_models(kept), seed=seed).subset(list(items))


@dataclass(frozen=True)
class FoldRun:
    """Held-out source models replayed to the whole pool: the order each was asked the items,
    with the score map fitted without them, and the item parameters the replay used."""

    rows: np.ndarray
    answers: np.ndarray
    order: np.ndarray
    score_map: ScoreMap
    params: ItemParams
    above_edge: float | None = None
    """The ability edge above the models the map was fitted on (upward folds refitted on
    them, :func:`.pool.ability_edges`); None elsewhere."""


def fold_run(
    source: ResponseMatrix,
    truth: np.ndarray,
    values: np.ndarray,
    params: ItemParams,
    held: np.ndarray,
    estimator: str,
    fit_on: np.ndarray | None = None,
    order: np.ndarray | None = None,
    refit_seed: int | None = None,
) -> FoldRun:
    """The ``held`` models (mask) replayed, the score map fitted on ``fit_on`` (default: the
    other source models). ``order``: the asked order of an earlier replay of the same ``held``
    models (it depends on their answers and the IRT alone, not on the score map).

    ``refit_seed`` (None: replay on ``params``): replay on item parameters fitted on the
    ``fit_on`` models alone (:func:`fold_params`), as a new model meets them. Fitted on every
    source, the parameters have seen the answers of the models a fold replays, and with a few
    dozen sources that optimism narrows the bands: pools of 25 source models covered
    0.64-0.82 of the held-out models of IFEval's and Winogrande's random splits at 10-50
    items (refitted: 0.83-0.97, at 12-26 points more width), of 100 sources 0.80-0.81 on
    IFEval and MMLU at 10 items (0.88-0.89; ``bench/adaptive_sources_before_fold_irt.md``,
    ``bench/adaptive_sources_fold_irt_only.md``).
    """
    fit_on = ~held if fit_on is None else fit_on
    if refit_seed is not None:
        params = fold_params(source, fit_on, refit_seed, params.item_ids)
    kept = [m for m, k in zip(source.model_ids, fit_on, strict=True) if k]
    score_map = ScoreMap.fit(estimator, source.select_models(kept), truth[fit_on])
    answers = values[held]
    if order is None:
        order = replay(params, answers, selector=MaxInfoSelector(), max_items=source.n_items).order
    return FoldRun(np.flatnonzero(held), answers, order, score_map, params)


def checkpoint_states(
    params: ItemParams, answers: np.ndarray, order: np.ndarray, marks: Sequence[int]
) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]]:
    """``(n, expected, asked, scores, ability)`` after the first ``n`` items of ``order``, per
    mark (``ability``: the posterior mean and sd).

    The posterior is updated with the items in the order they were asked, as the replay did.
    """
    posterior = GridPosterior(params, len(answers))
    asked = np.zeros(answers.shape, dtype=bool)
    rows = np.arange(len(answers))
    done = 0
    for n in sorted(marks):
        for step in range(done, n):
            items = order[:, step]
            posterior.update(rows, items, answers[rows, items])
            asked[rows, items] = True
        done = n
        answered = np.where(asked, answers, np.nan)
        yield n, posterior.expected_scores(), asked.copy(), answered, posterior.mean_se()


def run_predictions(
    run: FoldRun, marks: Sequence[int], pseudo: float
) -> tuple[dict[int, np.ndarray], dict[int, tuple[np.ndarray, np.ndarray]]]:
    """A fold's estimates and spans at each mark, with imputation strength ``pseudo``.

    The spans leave out the IRT-free reading (:meth:`.scoring.ScoreMap.predict_run`): bands
    are fitted on them, and the reading only ever adds to a run's span, so a pool's intervals
    hold at least what they held without it. Fitted on spans that held it, the bands of the
    weakest fifth's folds narrowed where the reading did not reach the models further below
    (Winogrande's weakest fifth of the leaderboard: coverage 0.48 -> 0.37 at 25 items,
    ``bench/adaptive_rates_in_bands.md``).
    """
    score_map = replace(run.score_map, pseudo=pseudo, rates=None)
    predictions, spans = {}, {}
    for n, expected, asked, scores, _ in checkpoint_states(
        run.params, run.answers, run.order, marks
    ):
        value, low, high = score_map.predict_run(expected, asked, scores)
        predictions[n], spans[n] = value, (low, high)
    return predictions, spans


def merged_predictions(
    runs: Sequence[FoldRun], marks: Sequence[int], pseudo: float, n_models: int
) -> tuple[dict[int, np.ndarray], dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Estimates and spans of folds that together hold out every one of ``n_models`` once."""
    predictions = {n: np.empty(n_models) for n in marks}
    lows = {n: np.empty(n_models) for n in marks}
    highs = {n: np.empty(n_models) for n in marks}
    for run in runs:
        found, spans = run_predictions(run, marks, pseudo)
        for n in marks:
            predictions[n][run.rows] = found[n]
            lows[n][run.rows], highs[n][run.rows] = spans[n]
    return predictions, {n: (lows[n], highs[n]) for n in marks}


def choose_pseudo(
    kinds: Mapping[str, Sequence[FoldRun]],
    truth: np.ndarray,
    marks: Sequence[int],
) -> tuple[float, dict[str, dict[str, float]]]:
    """The strength to use, and each candidate's error per fold kind.

    ``kinds`` maps a fold kind (random folds, models above and below the rest) to its runs; a
    candidate's score is the mean over kinds of its MAE at :data:`CHOICE_ITEMS`, so models
    outside the sources weigh as much as the many inside. The best candidate is used only if
    it cuts the error of the default (:data:`~.estimation.PSEUDO_ANSWERS`) by
    :data:`MIN_GAIN` on every kind; otherwise the default stays (see the module).
    """
    scored = [n for n in CHOICE_ITEMS if n in marks] or [min(marks)]
    gaps: dict[float, dict[str, list[np.ndarray]]] = {p: {} for p in PSEUDO_CANDIDATES}
    for kind, runs in kinds.items():
        for run in runs:
            for _, expected, asked, scores, _ in checkpoint_states(
                run.params, run.answers, run.order, scored
            ):
                for pseudo in PSEUDO_CANDIDATES:
                    value = replace(run.score_map, pseudo=pseudo).predict_answers(
                        expected, asked, scores
                    )
                    gaps[pseudo].setdefault(kind, []).append(np.abs(value - truth[run.rows]))
    errors = {
        str(pseudo): {kind: float(np.mean(np.concatenate(g))) for kind, g in per_kind.items()}
        for pseudo, per_kind in gaps.items()
    }
    totals = [np.mean(list(errors[str(p)].values())) for p in PSEUDO_CANDIDATES]
    best = PSEUDO_CANDIDATES[int(np.argmin(totals))]
    default = errors[str(PSEUDO_ANSWERS)]
    clear = all(errors[str(best)][kind] <= (1.0 - MIN_GAIN) * default[kind] for kind in default)
    return (best if clear else PSEUDO_ANSWERS), errors
