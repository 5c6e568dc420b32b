"""Plain ``lm-eval --tasks microbench_mmlu``: lm-eval finds the shipped tasks with no include path.

lm-eval 0.4.9 to 0.4.13 index tasks from exactly two places: every ``*.yaml`` under its own
``lm_eval/tasks`` folder, and the folders given as ``--include_path`` /
``TaskManager(include_path=...)``. It reads no environment variable and no entry-point group
for tasks (entry points exist upstream for models and metrics, #4013/#4014; for tasks the PR is
still open, #4015). The options we weighed:

* copying our YAMLs into ``lm_eval/tasks`` from the wheel: writes into another package's folder,
  and cannot work for editable installs (their files stay in the source tree);
* a ``.pth`` line that imports our package at start-up: works, but makes every Python process of
  the environment pay for it, lm-eval or not;
* what we do: a ``.pth`` line that only puts a finder for the single module ``lm_eval.tasks`` on
  ``sys.meta_path`` (``_lmeval_microbench_hook``, ~0.5 ms, imports nothing), and this module,
  imported only once lm-eval itself loads its task package. :func:`register` then wraps
  ``TaskManager.__init__`` so that the default index also covers :func:`tasks_dir`, as if its
  folders were part of lm-eval's own. Both files are in the wheel's RECORD, so
  ``pip uninstall`` removes them; regular and editable installs get the same two files.

The wrapper changes one argument and nothing else: ``include_path`` gains our folder, first (so
a user's own ``--include_path`` task of the same name still wins on 0.4.13, as upstream's
plugin design wants: built-in, then plugins, then include paths); it is left alone when the
caller asked for no default tasks (``include_defaults=False``) or already passes our folder, a
folder above it or one of its suites (``--include_path "$(microbench tasks-dir)"``,
``microbench eval``), so no task is indexed twice and lm-eval's other tasks are untouched.

We also declare the ``lm_eval.tasks`` entry point (:func:`task_dirs`), the group #4015 proposes,
so that an lm-eval that reads it needs nothing from us: once such a version is out, set
:data:`UPSTREAM_TASK_ENTRY_POINTS` to it and :func:`register` steps aside.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

TASK_ENTRY_POINT_GROUP = "lm_eval.tasks"
# First lm-eval release that indexes the ``lm_eval.tasks`` entry points itself; None: none yet.
UPSTREAM_TASK_ENTRY_POINTS: str | None = None
_WRAPPED = "__lmeval_microbench_wrapped__"

IncludePath = str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None


def tasks_dir() -> Path:
    """Folder of the shipped task suites (what ``microbench tasks-dir`` prints)."""
    return Path(__file__).resolve().parent / "task_configs"


def task_dirs() -> list[Path]:
    """The ``lm_eval.tasks`` entry point: the folders an lm-eval task index should walk."""
    return [tasks_dir()]


def _as_list(include_path: IncludePath) -> list[str | os.PathLike[str]]:
    """``include_path`` as lm-eval accepts it (None, one path or several) as a list."""
    if include_path is None:
        return []
    if isinstance(include_path, (str, os.PathLike)):
        return [include_path]
    return list(include_path)


def _related(folder: Path, other: Path) -> bool:
    """Whether indexing both folders would index some YAML file twice."""
    return folder == other or other in folder.parents or folder in other.parents


def covers_shipped(include_path: IncludePath) -> bool:
    """Whether ``include_path`` already reaches (some of) the shipped tasks."""
    ours = tasks_dir()
    for entry in _as_list(include_path):
        for part in str(os.fspath(entry)).split(os.pathsep):
            if part and _related(ours, Path(part).expanduser().resolve()):
                return True
    return False


def with_shipped_tasks(include_path: IncludePath, include_defaults: bool = True) -> IncludePath:
    """``include_path`` with the shipped tasks first, unless unwanted or already there."""
    ours = tasks_dir()
    if not include_defaults or not ours.is_dir() or covers_shipped(include_path):
        return include_path
    return [str(ours), *(os.fspath(p) for p in _as_list(include_path))]


def lm_eval_reads_task_entry_points() -> bool:
    """Whether the installed lm-eval indexes ``lm_eval.tasks`` entry points on its own."""
    if UPSTREAM_TASK_ENTRY_POINTS is None:
        return False
    from importlib.metadata import version

    from packaging.version import Version

    return Version(version("lm_eval")) >= Version(UPSTREAM_TASK_ENTRY_POINTS)


def _wrap_init(init: Callable[..., None]) -> Callable[..., None]:
    """``TaskManager.__init__`` that indexes the shipped tasks like lm-eval's own."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def __init__(*args: Any, **kwargs: Any) -> None:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = bound.arguments
        if "include_path" in arguments:
            arguments["include_path"] = with_shipped_tasks(
                arguments["include_path"], bool(arguments.get("include_defaults", True))
            )
        init(*bound.args, **bound.kwargs)

    setattr(__init__, _WRAPPED, True)
    return __init__


def is_registered(task_manager_class: type) -> bool:
    """Whether :func:`register` has wrapped this ``TaskManager`` class."""
    return bool(getattr(task_manager_class.__init__, _WRAPPED, False))


def register(tasks_module: ModuleType) -> None:
    """Make ``tasks_module.TaskManager`` index the shipped tasks (idempotent).

    Called by ``_lmeval_microbench_hook`` right after lm-eval's ``lm_eval.tasks`` package has
    loaded; ``TaskManager`` is defined there (0.4.9) or imported into it (0.4.13), the same
    class object either way, so every ``TaskManager(...)`` of the process sees the change.
    """
    manager = getattr(tasks_module, "TaskManager", None)
    if manager is None or is_registered(manager) or lm_eval_reads_task_entry_points():
        return
    manager.__init__ = _wrap_init(manager.__init__)


__all__ = [
    "TASK_ENTRY_POINT_GROUP",
    "UPSTREAM_TASK_ENTRY_POINTS",
    "covers_shipped",
    "is_registered",
    "lm_eval_reads_task_entry_points",
    "register",
    "task_dirs",
    "tasks_dir",
    "with_shipped_tasks",
]
