"""Refreshing a saved pool: what later releases added to the score map, refitting nothing.

A pool saved before a part of the score map existed (the IRT-free reading's inputs, the
floor, the upper reach, the top band, the side bands' ability edges) gets that part from the
matrix and scores it was built from; every refresh only ever widens an interval, so an older
pool's calibration stays on the safe side. ``tools/build_pools.py`` applies them to the
shipped pools.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..bundle import Bundle, EstimatorSpec
from ..errors import InputError
from ..outside.folds import UP
from ..personfit import lowest_score
from ..responses import ResponseMatrix
from ..truth import is_matrix_mean
from .calibrate import run_predictions
from .pool import (
    ADAPTIVE,
    AdaptiveState,
    Pool,
    ability_edges,
    complete_answers,
    directed_runs,
    pool_state,
    top_band,
)
from .scoring import checkpoints_for


def with_source_rates(bundle: Bundle, source: ResponseMatrix, truth: np.ndarray) -> Bundle:
    """The pool ``bundle`` with the IRT-free reading's inputs (the sources' smoothed success
    rate on every pool item and their range of true scores) from ``source`` and ``truth``, the
    matrix and scores it was built from, refitting nothing: for pools saved before the reading.
    Their bands were fitted on spans without it, and the reading only ever widens a span (where
    it lies beyond the sources), so such a pool's intervals can only grow. A pool that has
    rates is refused: its bands and move were chosen on them (the shipped pools hold raw
    means, saved before the smoothing), and new ones would change what they were chosen on."""
    pool, _ = _pool_and_answers(bundle, source)
    if pool.state.score_map.rates is not None:
        raise InputError(
            f"pool {bundle.name!r} already has its source rates; rebuild it to change them"
        )
    score_map = pool.state.score_map.with_sources(source, truth)
    return _with_state(bundle, replace(pool.state, score_map=score_map))


def with_floor(bundle: Bundle) -> Bundle:
    """The pool ``bundle`` with the floor of its runs below the sources
    (:meth:`.scoring.ScoreMap.with_floor`) from its own person-fit block, refitting nothing:
    for pools saved before the floor. The floor only ever lowers an interval's lower edge."""
    if bundle.person_fit is None:
        raise InputError(f"pool {bundle.name!r} has no person-fit block to take a floor from")
    pool = pool_state(bundle)
    score_map = pool.state.score_map.with_floor(lowest_score(bundle.person_fit))
    return _with_state(bundle, replace(pool.state, score_map=score_map))


def with_upper_reach(bundle: Bundle, source: ResponseMatrix, truth: np.ndarray) -> Bundle:
    """The pool ``bundle`` with the upper reach :meth:`.scoring.ScoreMap.with_pool_reach` gives
    (``source`` and ``truth``: what it was built from), refitting nothing: for pools
    saved before the reach. Its bands were fitted on spans without it, and it only ever
    widens a span."""
    pool, values = _pool_and_answers(bundle, source)
    whole = is_matrix_mean(values, truth)
    score_map = pool.state.score_map.with_pool_reach(whole)
    return _with_state(bundle, replace(pool.state, score_map=score_map))


def _pool_and_answers(bundle: Bundle, source: ResponseMatrix) -> tuple[Pool, np.ndarray]:
    """The pool of ``bundle`` and the answers of ``source``, the matrix it was built from, in
    pool order: what the refreshes that refit nothing read (another matrix is refused, and so
    is one with missing answers)."""
    if source.fingerprint() != bundle.provenance.source_sha256:
        raise InputError(f"pool {bundle.name!r} was built from another source matrix")
    pool = pool_state(bundle)
    return pool, complete_answers(source)[:, source.item_positions(pool.item_ids)]


def _with_state(bundle: Bundle, state: AdaptiveState) -> Bundle:
    """``bundle`` with its adaptive state replaced by ``state``."""
    estimators = tuple(
        EstimatorSpec(ADAPTIVE, state.to_dict()) if spec.name == ADAPTIVE else spec
        for spec in bundle.estimators
    )
    return replace(bundle, estimators=estimators)


def with_top_band(bundle: Bundle, source: ResponseMatrix, truth: np.ndarray) -> Bundle:
    """The pool ``bundle`` with its top band (:func:`top_band`) from ``source`` and ``truth``,
    what it was built from, replaying only its upward folds (one replay, refitting nothing of
    the pool): for pools saved before the band. The band only ever raises an upper edge."""
    pool, values = _pool_and_answers(bundle, source)
    source = source.select_items(list(pool.item_ids))  # the order of the pool's answers
    truth = np.asarray(truth, dtype=np.float64)
    state = pool.state
    runs = directed_runs(source, truth, values, pool.params, state.estimator, (UP,)).get(UP)
    if not runs:
        return bundle
    marks = checkpoints_for(len(pool.item_ids))
    found = [run_predictions(run, marks, state.score_map.pseudo) for run in runs]
    score_map = state.score_map.with_top(top_band(runs, found, truth))
    return _with_state(bundle, replace(state, score_map=score_map))


def with_ability_edges(bundle: Bundle, source: ResponseMatrix) -> Bundle:
    """The pool ``bundle`` with its side bands' ability edges (:func:`ability_edges`) from
    ``source``, the matrix it was built from, refitting nothing: for pools saved before the
    edges, which apply their side bands by the estimate."""
    pool, values = _pool_and_answers(bundle, source)
    edges = ability_edges(pool.params, values, pool.state.prior_mean, pool.state.prior_sd)
    score_map = pool.state.score_map
    sides = tuple(replace(side, ability_edge=edges[side.side]) for side in score_map.sides)
    return _with_state(bundle, replace(pool.state, score_map=replace(score_map, sides=sides)))
