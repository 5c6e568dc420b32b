"""Pool task names: ``microbench_pool_<benchmark>`` beside the static ``microbench_<benchmark>``.

A pool task is written by the same writer as the static tasks
(:func:`~lmeval_microbench.harness.export.write_task`), so its documents, hooks and scoring are
the static task's; only its name and its data folder (every item) differ. Separate names keep
both suites indexable by lm-eval at once.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..harness.export import TaskSpec

POOL_TASK_PREFIX = "microbench_pool_"
SHIPPED_POOLS = Path(__file__).resolve().parent / "pools"
"""The shipped pools, one folder per suite of :data:`lmeval_microbench.benchmarks.SUITES`
(``tools/build_pools.py``). Not under ``task_configs/``: every bundle there is indexed by
``microbench reconstruct``, and a pool holds all of a benchmark's matrix items, so runs
matched by item ids (metabench's ``*_secondary`` tasks) would match two bundles of one
benchmark."""


def shipped_pool_tasks(suite: str | None = None) -> list[str]:
    """Names of the shipped pool tasks (of one suite's folder, or of all)."""
    root = SHIPPED_POOLS if suite is None else SHIPPED_POOLS / suite
    return sorted(p.stem for p in root.rglob(f"{POOL_TASK_PREFIX}*.yaml"))


STATIC_TASK_PREFIX = "microbench_"


def pool_task_spec(static: TaskSpec, benchmark: str) -> TaskSpec:
    """The task spec of the pool of ``benchmark`` made from its static task's spec."""
    alias = (static.alias or static.task).replace(STATIC_TASK_PREFIX, POOL_TASK_PREFIX, 1)
    return replace(static, task=f"{POOL_TASK_PREFIX}{benchmark}", alias=alias)


def pool_task_name(task: str) -> str:
    """The pool task a user means by ``task``: a static task name maps to its pool."""
    if task.startswith(POOL_TASK_PREFIX) or not task.startswith(STATIC_TASK_PREFIX):
        return task
    return POOL_TASK_PREFIX + task[len(STATIC_TASK_PREFIX) :]
