"""Live rounds: many models through lm-eval on micro tasks, a few documents at a time.

The tasks (shipped or a user's micro task folder) hold only their subset items, so a level
is a share of each task's documents: nested prefixes of one seeded random order per task.
A promotion runs ``lm_eval.simple_evaluate`` with ``samples={task: new document indices}``
on the model as loaded once for the whole ranking (:class:`.models.LoadedModels`) and keeps
every item score it logged; a model's estimate at a level is its bundle
estimator's on the items scored so far, the rest imputed from the bundle's IRT model
(``allow_missing``, see ``estimators.missing``). Several tasks are averaged, as the Open LLM
Leaderboard averages its benchmarks, with independent errors combined per side.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..bundle import Bundle
from ..errors import InputError
from .models import DeviceModels, LoadGate
from .rounds import LEVEL, Evaluated, Scored

ALLOW_MISSING = {"microbench_allow_missing": True}


@dataclass(frozen=True)
class TaskInfo:
    """A leaf task: its document count, bundle, version and the item id of each document
    (by document index: what a run read back elsewhere is checked against, see ``cluster``)."""

    name: str
    n_docs: int
    bundle: Bundle
    version: Any
    item_ids: tuple[str | None, ...] = ()


def leaf_tasks(task_dict: Mapping[Any, Any]) -> dict[str, Any]:
    """Leaf task objects by name from lm-eval's (possibly nested) task dict."""
    leaves: dict[str, Any] = {}
    for key, value in task_dict.items():
        if isinstance(value, Mapping):
            leaves.update(leaf_tasks(value))
        else:
            leaves[str(key)] = value
    return leaves


def load_tasks(tasks: Sequence[str], include_path: str | os.PathLike[str]) -> tuple[Any, dict]:
    """lm-eval's task manager over ``include_path`` and the leaf tasks of ``tasks``."""
    from ..harness import lmeval_api
    from ..harness.estimates import registered_bundle

    manager = lmeval_api.task_manager(include_path=str(include_path), metadata=dict(ALLOW_MISSING))
    infos = {}
    for name, task in leaf_tasks(lmeval_api.task_dict(list(tasks), manager)).items():
        bundle_name = (task.config.metadata or {}).get("bundle")
        if bundle_name is None:
            raise InputError(f"task {name!r} is not a micro task (no bundle in its metadata)")
        docs = task.eval_docs
        ids = tuple(None if d.get("item_id") is None else str(d["item_id"]) for d in docs)
        infos[name] = TaskInfo(name, len(docs), registered_bundle(bundle_name), task.VERSION, ids)
    return manager, infos


def level_counts(n_docs: int, fractions: Sequence[float]) -> list[int]:
    """Documents of a task at each level: ``ceil(fraction x n_docs)``, at least one."""
    return [max(1, min(n_docs, math.ceil(f * n_docs))) for f in fractions]


def check_fractions(fractions: Sequence[float]) -> tuple[float, ...]:
    fractions = tuple(float(f) for f in fractions)
    if not fractions or fractions[-1] != 1.0 or any(not 0 < f <= 1 for f in fractions):
        raise InputError(f"level fractions must be in (0, 1] and end at 1, got {list(fractions)}")
    if any(b <= a for a, b in pairwise(fractions)):
        raise InputError(f"level fractions must increase, got {list(fractions)}")
    return fractions


def combine(estimates: Sequence[Scored]) -> Scored:
    """Mean over tasks; each side's half-width is the root sum of squares over the task count."""
    value = float(np.mean([e.value for e in estimates]))
    down = math.sqrt(sum((e.value - e.lower) ** 2 for e in estimates)) / len(estimates)
    up = math.sqrt(sum((e.upper - e.value) ** 2 for e in estimates)) / len(estimates)
    return Scored(value, max(0.0, value - down), min(1.0, value + up))


def item_scores(samples: Sequence[Mapping[str, Any]], metric: str) -> dict[str, float]:
    """``item id -> score`` from lm-eval's logged samples of a micro task."""
    return {str(s["doc"]["item_id"]): float(s[metric]) for s in samples}


class LiveEvaluator:
    """Scores models with lm-eval, one promotion at a time: see the module docstring."""

    def __init__(
        self,
        model_args: Mapping[str, str],
        tasks: Sequence[str],
        include_path: str | os.PathLike[str],
        *,
        fractions: Sequence[float],
        model: str = "hf",
        seed: int = 0,
        devices: Sequence[str | None] = (None,),
        batch_size: str | None = None,
        keep_models: int | None = None,
    ) -> None:
        self.model_args = dict(model_args)
        self.manager, self.tasks = load_tasks(tasks, include_path)
        first, *others = dict.fromkeys(devices)
        self.manager_on = {first: self.manager}  # one per device: threads share no task state
        self.manager_on.update({d: load_tasks(tasks, include_path)[0] for d in others})
        fractions = check_fractions(fractions)
        rng = np.random.default_rng(seed)
        self.order = {t: rng.permutation(info.n_docs) for t, info in self.tasks.items()}
        self.counts = {t: level_counts(i.n_docs, fractions) for t, i in self.tasks.items()}
        self.levels = tuple(
            int(sum(c[k] for c in self.counts.values())) for k in range(len(fractions))
        )
        self.models = DeviceModels(
            model, self.model_args, devices=devices, batch_size=batch_size, keep=keep_models
        )
        self.scores: dict[str, dict[str, dict[str, float]]] = {}
        self.level_of: dict[str, int] = {}

    def _new_docs(self, name: str, level: int) -> dict[str, list[int]]:
        done = self.level_of.get(name)
        docs = {}
        for task, counts in self.counts.items():
            start = 0 if done is None else counts[done]
            docs[task] = sorted(int(i) for i in self.order[task][start : counts[level]])
        return {t: d for t, d in docs.items() if d}

    def _run(self, name: str, docs: dict[str, list[int]]) -> dict[str, Any]:
        from ..harness import lmeval_api

        return lmeval_api.simple_evaluate(
            model=self.models.get(name),
            tasks=list(docs),
            task_manager=self.manager_on[self.models.device_of[name]],
            samples=docs,
            log_samples=True,
        )

    def _check_versions(self, results: Mapping[str, Any]) -> None:
        for task, version in (results.get("versions") or {}).items():
            if task in self.tasks and str(version) != str(self.tasks[task].version):
                raise InputError(
                    f"task {task!r} ran as version {version}, the ranking uses version "
                    f"{self.tasks[task].version}: rank models on one task version"
                )

    def _estimate(self, name: str) -> Scored:
        """The model's estimate after the person-fit check its lm-eval run announced (the
        same rule as every other estimate, :func:`..personfit.widen_for_fit`)."""
        from ..personfit import check_estimate
        from ..reconstruct import bundle_estimator

        parts = []
        for task, info in self.tasks.items():
            scores = self.scores[name].get(task, {})
            missing = len(scores) < info.bundle.budget
            est = bundle_estimator(info.bundle).estimate(scores, level=LEVEL, allow_missing=missing)
            checked = check_estimate(info.bundle, scores, est)[0] or est
            parts.append(Scored(checked.value, checked.lower, checked.upper))
        return combine(parts)

    def _score(self, name: str, level: int) -> Scored:
        results = self._run(name, self._new_docs(name, level))
        self._check_versions(results)
        kept = self.scores.setdefault(name, {})
        for task, samples in results["samples"].items():
            metric = self.tasks[task].bundle.metric.name
            kept.setdefault(task, {}).update(item_scores(samples, metric))
        self.level_of[name] = level
        return self._estimate(name)

    def evaluate(self, models: Sequence[str], level: int) -> Evaluated:
        score = lambda name: self._score(name, level)  # noqa: E731
        return score_models(models, self.levels, level, score, self.models)


def score_models(
    models: Sequence[str],
    levels: Sequence[int],
    level: int,
    score: Callable[[str], Scored],
    loaded: DeviceModels | None = None,
) -> Evaluated:
    """Every model through ``score``; one that raises is reported with why, the rest go on.

    With models on several devices (``loaded.device_of``), one thread per device scores its
    models one after another, so the devices work at once (PyTorch releases the interpreter
    lock in its kernels); each model is loaded first, alone (:class:`.models.LoadGate`). The
    results are those of one after another, in the order given.

    lm-eval's own progress bars are per task; this one says where the round is: a bar on a
    terminal, else (a log file, a cluster job) a line per model, so a long round is never
    silent.
    """
    label = f"level {level + 1}/{len(levels)} ({levels[level]} items)"
    bar = sys.stderr.isatty()
    progress = tqdm(total=len(models), desc=label, unit="model", disable=not bar)
    lock = threading.Lock()
    scores: dict[str, Scored] = {}
    failures: dict[str, str] = {}

    def record(name: str, result: Scored | None, error: str | None) -> None:
        with lock:
            if result is not None:
                scores[name] = result
            else:
                failures[name] = str(error)
            progress.update(1)
            if not bar:
                count = f"model {len(scores) + len(failures)} of {len(models)}"
                done = "failed" if error else "done"
                print(f"{label}: {count} {done}: {name}", file=sys.stderr)

    gate = LoadGate()

    def attempt(name: str, together: bool) -> Scored:
        if not together:
            return score(name)
        if not loaded.is_loaded(name):  # load alone, then evaluate beside the other devices
            with gate.loading():
                loaded.get(name)
        with gate.evaluating():
            return score(name)

    def run(names: Sequence[str], together: bool) -> None:
        for name in names:
            try:
                result, error = attempt(name, together), None
            except Exception as exc:  # a failed model is reported, not fatal
                result, error = None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            record(name, result, error)

    groups: dict[str | None, list[str]] = {}
    for name in models:
        groups.setdefault(None if loaded is None else loaded.device_of[name], []).append(name)
    if len(groups) == 1:
        run(models, together=False)
    else:
        with ThreadPoolExecutor(max_workers=len(groups)) as pool:
            list(pool.map(lambda names: run(names, together=True), groups.values()))
    progress.close()
    return Evaluated(
        {m: scores[m] for m in models if m in scores},
        {m: failures[m] for m in models if m in failures},
    )
