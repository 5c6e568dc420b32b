"""Live rounds on adaptive pools: each promotion asks a model more of the items that measure it.

A level is a number of items asked per pool task (``counts``). A model's adaptive run per task
is kept between rounds as its :class:`~lmeval_microbench.adaptive.engine.AdaptiveSession`, and
the model itself stays loaded (:class:`.models.LoadedModels`); a promotion raises the
sessions' item budget to the new count and asks on, so the next pick is the one an
uninterrupted run would make. As in ``microbench adaptive``, each step asks the next
``items_per_step`` items of every task still short of the count in one model call per request
type (:func:`~lmeval_microbench.adaptive.runner.ask_many`), and a task's estimate is the
pool's (:func:`~lmeval_microbench.adaptive.pool.estimate_pool`).
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
from .models import DeviceModels
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
        devices: Sequence[str | None] = (None,),
        batch_size: str | None = None,
        items_per_step: int = 1,
        keep_models: int | None = None,
    ) -> None:
        from ..adaptive.interleave import refuse_engine_per_call
        from ..adaptive.pool_task import pool_task_name
        from ..adaptive.runner import load_pool_task

        if not tasks:
            raise InputError("no pool tasks given (--tasks)")
        for args in model_args.values():
            refuse_engine_per_call(model, args)
        self.model_args, self.seed, self.items_per_step = dict(model_args), seed, items_per_step
        if items_per_step < 1:
            raise InputError(f"items per step must be at least 1, got {items_per_step}")
        self.models = DeviceModels(
            model, self.model_args, devices=devices, batch_size=batch_size, keep=keep_models
        )
        self.tasks = {
            name: load_pool_task(name, include_path) for name in map(pool_task_name, tasks)
        }
        first, *others = dict.fromkeys(devices)
        self.tasks_on = {first: self.tasks}  # a step builds requests into its task objects
        self.tasks_on.update(
            {d: {name: load_pool_task(name, include_path) for name in self.tasks} for d in others}
        )
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
                batch=self.items_per_step,
                seed=self.seed,
                prior_mean=pool.state.prior_mean,
                prior_sd=pool.state.prior_sd,
            )
        return self.sessions[name, task]

    def _advance(self, lm: Any, name: str, count: int) -> dict[str, dict[ItemId, float]]:
        """Ask ``name`` until every task has ``count`` items answered, all tasks in each step;
        every answer so far by task and item."""
        from ..adaptive.runner import ask_many
        from ..adaptive.stopping import StoppingRule

        tasks = self.tasks_on[self.models.device_of[name]]
        sessions = {task: self._session(name, task) for task in tasks}
        for session in sessions.values():
            session.rule = StoppingRule(count, None)
        while running := [t for t, s in sessions.items() if s.stop_reason() is None]:
            chosen = {task: sessions[task].propose()[0] for task in running}
            batches = [
                (tasks[task], [tasks[task].pool.params.item_ids[k] for k in positions])
                for task, positions in chosen.items()
            ]
            answered = ask_many(lm, batches)
            for (task, positions), answers in zip(chosen.items(), answered, strict=True):
                scores = np.array([[answer.score for answer in answers]])
                sessions[task].record(positions[None, :], scores)
        return {task: self._answers(session) for task, session in sessions.items()}

    def _answers(self, session: Any) -> dict[ItemId, float]:
        item_ids = session.params.item_ids
        return {item_ids[k]: float(session.scores[0, k]) for k in np.flatnonzero(session.asked[0])}

    def _score(self, name: str, level: int) -> Scored:
        from ..adaptive.pool import estimate_pool

        answered = self._advance(self.models.get(name), name, self.counts[level])
        parts = []
        for task, pool_task in self.tasks.items():
            estimate = estimate_pool(pool_task.pool, answered[task], LEVEL)
            parts.append(Scored(estimate.value, estimate.lower, estimate.upper))
        return combine(parts)

    def evaluate(self, models: Sequence[str], level: int) -> Evaluated:
        score = lambda name: self._score(name, level)  # noqa: E731
        return score_models(models, self.levels, level, score, self.models)
