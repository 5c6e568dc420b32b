"""Live rounds on adaptive pools: each promotion asks a model more of the items that measure it.

A level is a number of items asked per pool task (``counts``). A model's adaptive run per task
is kept between rounds as its asked items and answers, step by step; a promotion replays those
steps into a fresh :class:`~lmeval_microbench.adaptive.engine.AdaptiveSession` (with the step
seeds, the next pick is the one an uninterrupted run would make) and asks on until the new
count. Items are asked through lm-eval's model API exactly as ``microbench adaptive`` asks them
(:func:`~lmeval_microbench.adaptive.runner.ask`), and a task's estimate is the pool's
(:func:`~lmeval_microbench.adaptive.pool.estimate_pool`). Several tasks are averaged as in
:mod:`.live`.
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

Steps = list[tuple[list[ItemId], list[float]]]


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
        self.steps: dict[tuple[str, str], Steps] = {}

    def _session(self, pool_task: Any, steps: Steps, count: int) -> Any:
        from ..adaptive.engine import AdaptiveSession
        from ..adaptive.selection import make_selector
        from ..adaptive.stopping import StoppingRule

        pool = pool_task.pool
        session = AdaptiveSession(
            pool.params,
            selector=make_selector("maxinfo"),
            rule=StoppingRule(count, None),
            seed=self.seed,
            prior_mean=pool.state.prior_mean,
            prior_sd=pool.state.prior_sd,
        )
        for items, scores in steps:
            session.record_items(items, scores)
        return session

    def _advance(self, lm: Any, name: str, task: str, count: int) -> dict[ItemId, float]:
        """Ask ``name`` on ``task`` until ``count`` items are answered; all answers by item."""
        from ..adaptive.runner import ask

        pool_task = self.tasks[task]
        steps = self.steps.setdefault((name, task), [])
        session = self._session(pool_task, steps, count)
        while session.stop_reason() is None:
            chosen = session.propose()[0]
            items = [pool_task.pool.params.item_ids[k] for k in chosen]
            scores = [answer.score for answer in ask(lm, pool_task, items)]
            session.record(chosen[None, :], np.array([scores]))
            steps.append((items, scores))
        return {item: s for items, scores in steps for item, s in zip(items, scores, strict=True)}

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
