"""Live rounds on adaptive pools: each promotion asks a model more of the items that measure it.

A level is a number of items asked per pool task (``counts``). A model's adaptive run per task
is kept between rounds as its :class:`~lmeval_microbench.adaptive.engine.AdaptiveSession`; a
promotion raises the session's item budget to the new count and asks on, so the next pick is
the one an uninterrupted run would make. Items are asked through lm-eval's model API exactly
as ``microbench adaptive`` asks them (:func:`~lmeval_microbench.adaptive.runner.ask`), and a
task's estimate is the pool's (:func:`~lmeval_microbench.adaptive.pool.estimate_pool`).
Several tasks are averaged as in :mod:`.live`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from .._types import ItemId
from ..errors import InputError
from .live import combine, score_models
from .rounds import LEVEL, Evaluated, Scored


def check_counts(counts: Sequence[int], pool_sizes: Mapping[str, int]) -> tuple[int, ...]:
    """Increasing positive item counts per task, none above the smallest pool."""
    counts = tuple(int(c) for c in counts)
    if not counts or counts[0] < 1 or any(b <= a for a, b in pairwise(counts)):
        raise InputError(f"adaptive item counts must increase from 1, got {list(counts)}")
    task, smallest = min(pool_sizes.items(), key=lambda kv: kv[1])
    if counts[-1] > smallest:
        raise InputError(
            f"adaptive item count {counts[-1]} exceeds the {smallest} items of pool task {task!r}"
        )
    return counts


class AdaptiveLiveEvaluator:
    """Scores models with adaptive runs through lm-eval: see the module docstring."""

    def __init__(
        self,
        model_args: Mapping[str, str],
        tasks: Sequence[str],
        include_path: str | os.PathLike[str],
        *,
        counts: Sequence[int],
        model: str = "hf",
        seed: int = 0,
        device: str | None = None,
        batch_size: str | None = None,
    ) -> None:
        from ..adaptive.pool_task import pool_task_name
        from ..adaptive.runner import load_pool_task

        if not tasks:
            raise InputError("no pool tasks given (--tasks)")
        self.model_args, self.model = dict(model_args), model
        self.device, self.batch_size, self.seed = device, batch_size, seed
        self.tasks = {
            name: load_pool_task(name, include_path) for name in map(pool_task_name, tasks)
        }
        sizes = {name: len(task.pool.item_ids) for name, task in self.tasks.items()}
        self.counts = check_counts(counts, sizes)
        self.levels = tuple(c * len(self.tasks) for c in self.counts)
        self.sessions: dict[tuple[str, str], Any] = {}

    def _session(self, name: str, task: str) -> Any:
        """The adaptive run of ``name`` on ``task``: kept between rounds, new on the first."""
        from ..adaptive.engine import AdaptiveSession
        from ..adaptive.selection import make_selector
        from ..adaptive.stopping import StoppingRule

        if (name, task) not in self.sessions:
            pool = self.tasks[task].pool
            self.sessions[name, task] = AdaptiveSession(
                pool.params,
                selector=make_selector("maxinfo"),
                rule=StoppingRule(self.counts[0], None),
                seed=self.seed,
                prior_mean=pool.state.prior_mean,
                prior_sd=pool.state.prior_sd,
            )
        return self.sessions[name, task]

    def _advance(self, lm: Any, name: str, task: str, count: int) -> dict[ItemId, float]:
        """Ask ``name`` on ``task`` until ``count`` items are answered; all answers by item."""
        from ..adaptive.runner import ask
        from ..adaptive.stopping import StoppingRule

        pool_task = self.tasks[task]
        item_ids = pool_task.pool.params.item_ids
        session = self._session(name, task)
        session.rule = StoppingRule(count, None)
        while session.stop_reason() is None:
            chosen = session.propose()[0]
            answers = ask(lm, pool_task, [item_ids[k] for k in chosen])
            session.record(chosen[None, :], np.array([[answer.score for answer in answers]]))
        asked = np.flatnonzero(session.asked[0])
        return {item_ids[k]: float(session.scores[0, k]) for k in asked}

    def _estimate(self, lm: Any, name: str, level: int) -> Scored:
        from ..adaptive.pool import estimate_pool

        parts = []
        for task, pool_task in self.tasks.items():
            answers = self._advance(lm, name, task, self.counts[level])
            estimate = estimate_pool(pool_task.pool, answers, LEVEL)
            parts.append(Scored(estimate.value, estimate.lower, estimate.upper))
        return combine(parts)

    def _score(self, name: str, level: int) -> Scored:
        from ..adaptive.runner import make_lm

        lm = make_lm(
            self.model, self.model_args[name], device=self.device, batch_size=self.batch_size
        )
        return self._estimate(lm, name, level)

    def evaluate(self, models: Sequence[str], level: int) -> Evaluated:
        return score_models(models, self.levels, level, lambda name: self._score(name, level))
