"""Start-up hook of lmeval-microbench: wait until lm-eval loads its task package, nothing else.

``lmeval_microbench_tasks.pth`` (installed next to this module by the wheel) calls
:func:`install` when the interpreter starts. lm-eval 0.4.x finds tasks only in its own
``lm_eval/tasks`` folder and in ``--include_path``; there is no task entry point to declare
yet (upstream PR #4015). So that ``lm-eval --tasks microbench_mmlu`` works after
``pip install``, this module puts one finder on ``sys.meta_path`` that answers for exactly one
module name, ``lm_eval.tasks``: it lets the real finder locate and run that package, then
hands its ``TaskManager`` to :func:`lmeval_microbench._lmeval_tasks.register`, and removes
itself. Interpreters that never import lm-eval pay one string comparison per import and
import nothing of ours; this file deliberately imports only :mod:`sys` at start-up (importing
the ``lmeval_microbench`` package costs ~50 ms, so that happens only once lm-eval is loading).
``pip uninstall lmeval-microbench`` removes this file and the ``.pth`` with the rest.
"""

import sys

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: importing typing costs start-up time
if TYPE_CHECKING:
    from typing import Any

TARGET = "lm_eval.tasks"


class _ThenRegister:
    """Loader wrapper: run the real loader, then register our tasks on the loaded module."""

    def __init__(self, loader: "Any") -> None:
        self.loader = loader

    def create_module(self, spec: "Any") -> "Any":
        """Leave module creation to the real loader (the default semantics when it has none)."""
        create = getattr(self.loader, "create_module", None)
        return None if create is None else create(spec)

    def exec_module(self, module: "Any") -> None:
        """Execute ``lm_eval.tasks``, restore its real loader, then register (never raising)."""
        self.loader.exec_module(module)
        module.__loader__ = self.loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        _register(module)

    def __getattr__(self, name: str) -> "Any":
        """Anything else (resource readers, ``get_code``...) is the real loader's business."""
        return getattr(self.loader, name)


class TasksFinder:
    """Meta-path finder that is blind to every module but ``lm_eval.tasks``."""

    def find_spec(self, fullname: str, path: "Any" = None, target: "Any" = None) -> "Any":
        """Locate ``lm_eval.tasks`` with the other finders and wrap its loader; else None."""
        if fullname != TARGET:
            return None
        uninstall()
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            spec = None if find is None else find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenRegister(spec.loader)
                return spec
        return None


def _register(module: "Any") -> None:
    """Hand lm-eval's task package to our package; a failure here must not break lm-eval."""
    try:
        from lmeval_microbench._lmeval_tasks import register

        register(module)
    except Exception as error:  # lm-eval must keep working whatever happens to our package
        import warnings

        warnings.warn(
            f"lmeval-microbench: shipped tasks not registered with lm-eval ({error!r}); "
            'use --include_path "$(microbench tasks-dir)"',
            RuntimeWarning,
            stacklevel=2,
        )


def installed() -> bool:
    """Whether the finder is waiting on ``sys.meta_path``."""
    return any(isinstance(finder, TasksFinder) for finder in sys.meta_path)


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once); no-op if lm-eval's tasks are loaded."""
    if installed():
        return
    tasks = sys.modules.get(TARGET)
    if tasks is not None:
        _register(tasks)
        return
    sys.meta_path.insert(0, TasksFinder())


def uninstall() -> None:
    """Take the finder off ``sys.meta_path`` (it has one job, done at most once)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, TasksFinder)]
