"""Plain ``lm-eval --tasks microbench_mmlu`` after ``pip install``, no include path (issue 13).

The mechanism (``lmeval_microbench/_lmeval_tasks.py``): the wheel carries
``lmeval_microbench_tasks.pth``, whose one line loads ``_lmeval_microbench_hook``; that module
waits for lm-eval to import ``lm_eval.tasks`` and then makes ``TaskManager`` index the shipped
task folder like lm-eval's own. The fast tests check the pieces and the current (editable)
install; the slow ones install a copy of this repository into fresh virtual environments,
regular and editable, run the real lm-eval CLI there and uninstall again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from importlib.metadata import Distribution, distributions
from pathlib import Path
from types import SimpleNamespace

import pytest

from lmeval_microbench import _lmeval_tasks
from lmeval_microbench._lmeval_tasks import covers_shipped, tasks_dir, with_shipped_tasks

REPO = Path(__file__).resolve().parents[1]
PTH = "lmeval_microbench_tasks.pth"
HOOK = "_lmeval_microbench_hook"
OURS = ("lmeval_microbench", "_lmeval_microbench_hook", "__editable__.lmeval_microbench")
SOURCES = (
    "pyproject.toml",
    "README.md",
    "MANIFEST.in",
    "_lmeval_microbench_hook.py",
    "build_backend",
    "lmeval_microbench",
)
# offline and without build isolation: the build backend needs only setuptools (linked below)
INSTALL = ("install", "--no-deps", "--no-build-isolation", "--no-index")
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def _installed() -> Distribution:
    """Our distribution as installed in this environment's site-packages.

    Not ``importlib.metadata.distribution``: run from the checkout, that can answer with a
    stale ``lmeval_microbench.egg-info`` left in the repository root by an old in-place build.
    """
    purelib = sysconfig.get_paths()["purelib"]
    found = list(distributions(name="lmeval-microbench", path=[purelib]))
    if not found:
        pytest.fail(f"lmeval-microbench is not installed in {purelib}")
    return found[0]


# ----------------------------------------------------------------- the include-path rule


def test_shipped_folder_goes_first_and_user_paths_keep_their_order(tmp_path: Path) -> None:
    """Ours first: on lm-eval >= 0.4.9.1 a user's own task of the same name then wins."""
    ours = str(tasks_dir())
    assert with_shipped_tasks(None) == [ours]
    assert with_shipped_tasks(str(tmp_path)) == [ours, str(tmp_path)]
    assert with_shipped_tasks([tmp_path, "b"]) == [ours, str(tmp_path), "b"]


@pytest.mark.parametrize("relative", ["", "..", "openllm_v1"])
def test_a_path_reaching_the_shipped_tasks_is_left_alone(relative: str) -> None:
    """The folder itself, a folder above it or one of its suites: no task indexed twice."""
    given = str((tasks_dir() / relative).resolve())
    assert covers_shipped(given)
    assert with_shipped_tasks(given) == given
    assert with_shipped_tasks(["elsewhere", Path(given)]) == ["elsewhere", Path(given)]


def test_no_defaults_means_no_shipped_tasks(tmp_path: Path) -> None:
    """``include_defaults=False`` asks for the include paths only: we add nothing."""
    assert with_shipped_tasks(str(tmp_path), include_defaults=False) == str(tmp_path)
    assert with_shipped_tasks(None, include_defaults=False) is None


def test_entry_point_names_the_shipped_folder() -> None:
    """The ``lm_eval.tasks`` entry point (for lm-eval's task plugins, #4015) is declared."""
    points = _installed().entry_points
    (point,) = [p for p in points if p.group == _lmeval_tasks.TASK_ENTRY_POINT_GROUP]
    assert point.load()() == [tasks_dir()]
    assert tasks_dir().is_dir()


# ----------------------------------------------------------------- the start-up hook


FAKE_TASKS = """
class TaskManager:
    def __init__(self, verbosity=None, include_path=None, include_defaults=True, metadata=None):
        self.include_path = include_path
"""

HOOK_SCRIPT = """
import json, sys
sys.path[:0] = [{fake!r}, {repo!r}]
import _lmeval_microbench_hook as hook
hook.install(); hook.install()
finders = sum(isinstance(f, hook.TasksFinder) for f in sys.meta_path)
import lm_eval.tasks as tasks
from lmeval_microbench._lmeval_tasks import is_registered
print(json.dumps({{
    "finders_before": finders,
    "finder_left": hook.installed(),
    "registered": is_registered(tasks.TaskManager),
    "loader": type(tasks.__loader__).__name__,
    "spec_loader": type(tasks.__spec__.loader).__name__,
    "plain": tasks.TaskManager().include_path,
    "positional": tasks.TaskManager(None, "mine").include_path,
    "no_defaults": tasks.TaskManager(include_path="mine", include_defaults=False).include_path,
}}))
"""


def test_hook_registers_when_lm_eval_tasks_loads_then_leaves(tmp_path: Path) -> None:
    """On a stand-in ``lm_eval.tasks`` (no site, no real lm-eval): one finder, used once."""
    package = tmp_path / "lm_eval" / "tasks"
    package.mkdir(parents=True)
    (tmp_path / "lm_eval" / "__init__.py").write_text("")
    (package / "__init__.py").write_text(FAKE_TASKS)
    script = HOOK_SCRIPT.format(fake=str(tmp_path), repo=str(REPO))
    done = subprocess.run(
        [sys.executable, "-S", "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    ours = str(tasks_dir())
    assert seen["finders_before"] == 1 and not seen["finder_left"] and seen["registered"]
    assert seen["loader"] == seen["spec_loader"] == "SourceFileLoader"
    assert seen["plain"] == [ours]
    assert seen["positional"] == [ours, "mine"]
    assert seen["no_defaults"] == "mine"


def test_a_broken_package_of_ours_only_warns(tmp_path: Path) -> None:
    """lm-eval must keep working whatever happens to our package: a warning, not an error."""
    (tmp_path / "lm_eval" / "tasks").mkdir(parents=True)
    (tmp_path / "lm_eval" / "__init__.py").write_text("")
    (tmp_path / "lm_eval" / "tasks" / "__init__.py").write_text(FAKE_TASKS)
    (tmp_path / "lmeval_microbench").mkdir()
    (tmp_path / "lmeval_microbench" / "__init__.py").write_text("raise ImportError('broken')")
    script = (
        f"import sys; sys.path[:0] = [{str(tmp_path)!r}, {str(REPO)!r}]; "
        f"import {HOOK}; {HOOK}.install(); import lm_eval.tasks as t; "
        "print(t.TaskManager(include_path='mine').include_path)"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "mine"
    assert "shipped tasks not registered" in done.stderr and "broken" in done.stderr


def test_an_lm_eval_reading_task_entry_points_gets_no_wrapper(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once upstream indexes the ``lm_eval.tasks`` entry points, :func:`register` steps aside."""
    monkeypatch.setattr(_lmeval_tasks, "UPSTREAM_TASK_ENTRY_POINTS", "0.0.1")
    assert _lmeval_tasks.lm_eval_reads_task_entry_points()

    class TaskManager:
        def __init__(self, include_path: object = None, include_defaults: bool = True) -> None:
            self.include_path = include_path

    _lmeval_tasks.register(SimpleNamespace(TaskManager=TaskManager))
    assert not _lmeval_tasks.is_registered(TaskManager)
    assert TaskManager().include_path is None


def test_hook_imports_nothing_at_start_up() -> None:
    """What the ``.pth`` runs in every interpreter: only the hook module, no package of ours."""
    script = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); before = set(sys.modules); "
        f"import {HOOK}; {HOOK}.install(); "
        "print(sorted(set(sys.modules) - before))"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == f"[{HOOK!r}]"


# ----------------------------------------------------------------- the build backend


def _record_hash(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def test_backend_adds_the_pth_to_the_wheel_and_its_record(tmp_path: Path) -> None:
    """The ``.pth`` is a file of the distribution (so pip uninstall removes it), idempotently."""
    sys.path.insert(0, str(REPO / "build_backend"))
    try:
        import microbench_build_backend as backend
    finally:
        sys.path.remove(str(REPO / "build_backend"))
    wheel = tmp_path / "toy-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("toy.py", "x = 1\n")
        archive.writestr(
            "toy-1.0.dist-info/RECORD", "toy.py,sha256=abc,6\ntoy-1.0.dist-info/RECORD,,\n"
        )
    backend.add_pth(wheel)
    backend.add_pth(wheel)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        text = archive.read(PTH)
        rows = archive.read("toy-1.0.dist-info/RECORD").decode().splitlines()
    assert names.count(PTH) == 1 and names[-1] == "toy-1.0.dist-info/RECORD"
    assert text == f"import {HOOK}; {HOOK}.install()\n".encode()
    assert rows == [
        "toy.py,sha256=abc,6",
        f"{PTH},sha256={_record_hash(text)},{len(text)}",
        "toy-1.0.dist-info/RECORD,,",
    ]


# ----------------------------------------------------------------- this environment


@pytest.mark.slow
def test_current_install_carries_the_pth_and_lm_eval_sees_the_tasks() -> None:
    """The (editable) install of this checkout: ``TaskManager()`` alone finds task and group."""
    files = {str(f) for f in _installed().files or []}
    if PTH not in files:
        pytest.fail(f"{PTH} not installed: reinstall this checkout (pip install -e . --no-deps)")
    assert HOOK in sys.modules, f"{PTH} did not run at start-up (python -S?)"
    from lm_eval.tasks import TaskManager

    assert _lmeval_tasks.is_registered(TaskManager)
    manager = TaskManager()
    assert "microbench_mmlu" in manager.all_subtasks
    assert "microbench_openllm" in manager.all_groups
    assert {"microbench_arc", "microbench_gsm8k"} <= set(manager.all_tasks)


# ----------------------------------------------------------------- fresh environments


def _site_packages(venv: Path) -> Path:
    """purelib of a POSIX virtual environment made by this interpreter."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return venv / "lib" / version / "site-packages"


def _is_ours(name: str) -> bool:
    return name.startswith(OURS) or name == PTH


def _fresh_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A new venv whose dependencies are links to this environment's, ours excluded.

    Installing lm-eval and its dependencies from the registry would take minutes; what is
    under test is our own install and uninstall, which happen for real in the new venv's
    site-packages. The links live inside the venv (dill, used by datasets, pickles modules
    from outside ``sys.prefix`` and site-packages by value, which fails for pyarrow).
    """
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    shared = venv / "shared-site-packages"
    shared.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not _is_ours(entry.name) and entry.suffix != ".pth":
            (shared / entry.name).symlink_to(entry)
    site = _site_packages(venv)
    (site / "shared.pth").write_text(f"{shared}\n")
    return venv / "bin" / "python", site


def _source_copy(tmp_path: Path) -> Path:
    """This checkout's package sources, so that building never writes into the checkout."""
    copy = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info")
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, copy / name, ignore=ignore)
        else:
            copy.mkdir(exist_ok=True)
            shutil.copy2(path, copy / name)
    return copy


def _run(python: Path, *args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, **OFFLINE}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(python), *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(args[:4])} failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    return done


def _pip(python: Path, *args: str, cwd: Path) -> None:
    """pip (of this environment, through the links) acting on the fresh venv, offline."""
    _run(python, "-m", "pip", "--disable-pip-version-check", *args, cwd=cwd)


def _lm_eval_run(python: Path, task: str, cwd: Path) -> str:
    """The real lm-eval CLI, no --include_path, on the offline ``dummy`` model, one item."""
    args = ("-m", "lm_eval", "run", "--model", "dummy", "--tasks", task, "--limit", "1")
    done = _run(python, *args, cwd=cwd)
    return done.stdout + done.stderr


GONE_SCRIPT = textwrap.dedent(
    """
    import importlib.util, json, sys
    import lm_eval.tasks
    from lm_eval.tasks import TaskManager
    print(json.dumps({
        "hook": "_lmeval_microbench_hook" in sys.modules,
        "package": importlib.util.find_spec("lmeval_microbench") is not None,
        "wrapped": hasattr(TaskManager.__init__, "__lmeval_microbench_wrapped__"),
        "task": "microbench_mmlu" in TaskManager().all_tasks if sys.argv[1:] else None,
    }))
    """
)


def _assert_uninstalled(python: Path, site: Path, cwd: Path, index: bool) -> None:
    """After pip uninstall: no file of ours, nothing at start-up, (optionally) no task."""
    _pip(python, "uninstall", "-y", "lmeval-microbench", cwd=cwd)
    left = sorted(p.name for p in site.iterdir() if _is_ours(p.name))
    left += sorted(p.name for p in (site / "__pycache__").glob("*") if _is_ours(p.name))
    assert left == [], left
    done = _run(python, "-c", GONE_SCRIPT, *(["index"] if index else []), cwd=cwd)
    gone = json.loads(done.stdout.strip().splitlines()[-1])
    assert gone == {
        "hook": False,
        "package": False,
        "wrapped": False,
        "task": False if index else None,
    }


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="venv layout and links of POSIX systems")
def test_regular_install_then_plain_lm_eval_then_uninstall(tmp_path: Path) -> None:
    """pip install (a wheel): ``lm-eval run --tasks microbench_openllm`` works; uninstall: gone."""
    python, site = _fresh_venv(tmp_path)
    _pip(
        python,
        *INSTALL,
        str(_source_copy(tmp_path)),
        cwd=tmp_path,
    )
    assert (site / PTH).read_text() == f"import {HOOK}; {HOOK}.install()\n"
    assert (site / f"{HOOK}.py").is_file() and (site / "lmeval_microbench").is_dir()
    out = _lm_eval_run(python, "microbench_openllm", tmp_path)
    assert "|microbench_openllm|" in out.replace(" ", "")
    assert f"Task: microbench_mmlu ({site}/lmeval_microbench/task_configs/" in out
    _assert_uninstalled(python, site, tmp_path, index=True)


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="venv layout and links of POSIX systems")
def test_editable_install_then_plain_lm_eval_then_uninstall(tmp_path: Path) -> None:
    """pip install -e: the tasks come from the source tree; uninstall leaves nothing of ours."""
    python, site = _fresh_venv(tmp_path)
    source = _source_copy(tmp_path)
    _pip(
        python,
        *INSTALL,
        "-e",
        str(source),
        cwd=tmp_path,
    )
    assert (site / PTH).is_file() and not (site / "lmeval_microbench").exists()
    out = _lm_eval_run(python, "microbench_mmlu", tmp_path)
    assert f"Task: microbench_mmlu ({source}/lmeval_microbench/task_configs/" in out
    assert "microbench_mmlu (5-shot prompts built in)" in out
    _assert_uninstalled(python, site, tmp_path, index=False)
