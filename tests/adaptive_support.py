"""Helpers the adaptive tests share: a pool as saved before a field, the coverage of the same
runs read by two score maps, and a v1 pool fitted without the leaderboard's strongest fifth."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tools_support import tools_module

from lmeval_microbench.adaptive.calibrate import checkpoint_states
from lmeval_microbench.adaptive.pool import ADAPTIVE, fit_adaptive_state
from lmeval_microbench.adaptive.scoring import ScoreMap
from lmeval_microbench.adaptive.selection import MaxInfoSelector
from lmeval_microbench.adaptive.simulate import replay
from lmeval_microbench.bundle import Bundle


def with_state(bundle: Bundle, state: Mapping[str, Any]) -> Bundle:
    """``bundle`` with its adaptive state replaced by ``state`` (a saved dict)."""
    estimators = tuple(
        replace(spec, state=dict(state)) if spec.name == ADAPTIVE else spec
        for spec in bundle.estimators
    )
    return replace(bundle, estimators=estimators)


def saved_before(bundle: Bundle, keys: Iterable[str]) -> Bundle:
    """``bundle`` as a pool saved before the adaptive state fields ``keys`` existed."""
    dropped = set(keys)
    state = bundle.estimator_state(ADAPTIVE)
    return with_state(bundle, {k: v for k, v in state.items() if k not in dropped})


def coverage_by_map(
    params: Any,
    targets: np.ndarray,
    truth: np.ndarray,
    asked: int,
    maps: Mapping[str, ScoreMap],
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """The 90 % coverage and the estimates of the same max-information runs of ``asked`` items,
    read by each of ``maps``."""
    run = replay(params, targets, selector=MaxInfoSelector(), max_items=asked)
    _, expected, asked_mask, scores, _ = next(
        checkpoint_states(params, targets, run.order, [asked])
    )
    covered, values = {}, {}
    for name, score_map in maps.items():
        value, low, high = score_map.predict_run(expected, asked_mask, scores)
        lower, upper = score_map.interval(value, asked, 0.9, (low, high), run.ability_at(asked))
        covered[name] = float(np.mean((truth >= lower - 1e-9) & (truth <= upper + 1e-9)))
        values[name] = value
    return covered, values


def strongest_fifth(
    shared_data: Path, benchmark: str, sources: int
) -> tuple[Any, ScoreMap, np.ndarray, np.ndarray]:
    """An Open LLM Leaderboard v1 ``benchmark`` (metabench's items against the whole
    benchmark's score) with the strongest fifth of the models held out: the item parameters
    and score map of a pool fitted on ``sources`` of the rest (to keep the fit short), and the
    answers and true scores of 200 held-out models."""
    matrix, truth, _ = tools_module("bench_adaptive").load_benchmark(shared_data, benchmark)
    order = np.argsort(-truth, kind="stable")
    held = order[: round(0.2 * truth.size)]
    rest = np.random.default_rng(0).permutation(order[held.size :])[:sources]
    source = matrix.select_models([matrix.model_ids[k] for k in rest])
    params, state = fit_adaptive_state(source, truth[rest])
    targets = np.random.default_rng(1).permutation(held)[:200]
    return params, state.score_map, matrix.values[targets], truth[targets]
