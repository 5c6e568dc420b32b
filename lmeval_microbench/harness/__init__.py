"""lm-eval integration: shipped micro-benchmark tasks whose results include the estimate.

``include_path()`` is the folder to give lm-eval (``--include_path`` or
``TaskManager(include_path=...)``); it holds the Open LLM Leaderboard v1 suite
(:data:`OPENLLM_V1_TASKS`, group :data:`OPENLLM_V1_GROUP`). :mod:`.hooks` holds the functions
the YAMLs call, :mod:`.export` writes new task folders from a bundle and its documents.
This subpackage is the only part of lmeval_microbench that lm-eval calls into.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import BundleError
from .estimates import EstimateOptions, RunEstimate, clear_registry, estimate_run, register_bundle
from .export import GroupSpec, TaskSpec, write_group, write_task

OPENLLM_V1_TASKS = (
    "microbench_arc",
    "microbench_hellaswag",
    "microbench_mmlu",
    "microbench_truthfulqa",
    "microbench_winogrande",
    "microbench_gsm8k",
)
"""Shipped tasks reproducing the Open LLM Leaderboard v1 benchmarks on small subsets."""

OPENLLM_V1_GROUP = "microbench_openllm"
"""Group running the six tasks and averaging their estimates."""


def include_path() -> Path:
    """Folder of the shipped task configs, for lm-eval's ``--include_path``."""
    folder = Path(__file__).resolve().parents[1] / "task_configs"
    if not folder.is_dir():
        raise BundleError(
            f"{folder}: the shipped task configs are missing from this installation "
            "(package data not installed?)"
        )
    return folder


__all__ = [
    "OPENLLM_V1_GROUP",
    "OPENLLM_V1_TASKS",
    "EstimateOptions",
    "GroupSpec",
    "RunEstimate",
    "TaskSpec",
    "clear_registry",
    "estimate_run",
    "include_path",
    "register_bundle",
    "write_group",
    "write_task",
]
