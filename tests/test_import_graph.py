"""The package's import graph has no cycles, and every module imports on its own.

Why: a cycle makes import order matter (``import lmeval_microbench.outside`` in a fresh
interpreter failed while importing ``lmeval_microbench.estimators`` first worked) and ties
together layers that ARCHITECTURE.md keeps apart. The graph is read from the source with
``ast``, so the test names the modules of a cycle instead of failing on whichever import
happens to run first.

What counts as an edge: an import that runs when the module is imported (module level, also
inside ``try``, ``if`` and class bodies), not one inside a function or under ``if
TYPE_CHECKING:``. ``from .pkg import name`` leads to the module that defines ``name`` (package
``__init__`` re-exports are followed) and to every package ``__init__`` the import runs (those
that are not the importer's own ancestors, which are already being imported). Nodes are package
modules; the folders of shipped task files (no ``__init__.py``) are data, not modules.

Two stricter checks keep the layering that removing the cycles gave: no cycle either when the
``TYPE_CHECKING`` imports count (``estimators.base``/``missing`` and ``reliability.plan``/
``splits`` were such cycles: harmless at run time, but each pair was one module in two files),
and none among the subpackages and top-level modules (``rank``/``reliability`` and
``estimators``/``outside`` imported each other through different modules). Imports inside
functions are not checked: the estimator registry binds late on purpose (``estimators.base``
and ``guarded`` look estimators up by name in ``estimators/__init__``).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "lmeval_microbench"

Graph = dict[str, set[str]]


def package_modules(root: Path = REPO / PACKAGE) -> dict[str, Path]:
    """Dotted module name -> source file, for every module in a folder chain of packages."""
    modules: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        folders = path.relative_to(root.parent).parent.parts
        if not all(
            (root.parent.joinpath(*folders[: k + 1]) / "__init__.py").exists()
            for k in range(len(folders))
        ):
            continue  # e.g. task_configs/*/microbench_hooks.py: loaded by lm-eval, by path
        parts = [*folders, path.stem] if path.stem != "__init__" else list(folders)
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_time_imports(
    tree: ast.AST, *, typing: bool = False
) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported (``typing``: and those under
    ``if TYPE_CHECKING:``, which a type checker follows)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        elif isinstance(node, ast.If) and _is_type_checking(node.test) and not typing:
            yield from import_time_imports(ast.Module(body=node.orelse, type_ignores=[]))
        elif isinstance(node, (ast.stmt, ast.excepthandler, ast.match_case)):
            yield from import_time_imports(node, typing=typing)


class ImportGraph:
    """Module -> the package modules its import runs (see the module docstring)."""

    def __init__(self, modules: dict[str, Path], *, typing: bool = False) -> None:
        self.modules = modules
        self.typing = typing
        self.trees = {
            name: ast.parse(path.read_text(), str(path)) for name, path in modules.items()
        }

    def is_package(self, name: str) -> bool:
        return self.modules[name].name == "__init__.py"

    def base_of(self, importer: str, node: ast.ImportFrom) -> str:
        """The absolute module a ``from ... import`` names (relative levels resolved)."""
        if not node.level:
            return node.module or ""
        parts = importer.split(".")
        if not self.is_package(importer):
            parts = parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        return ".".join([*parts, node.module] if node.module else parts)

    def defining_module(self, package: str, name: str) -> str:
        """Where ``name`` of ``package`` comes from: a submodule, a re-export's origin or itself."""
        if f"{package}.{name}" in self.modules:
            return f"{package}.{name}"
        if not self.is_package(package):
            return package
        for node in import_time_imports(self.trees[package]):
            if isinstance(node, ast.ImportFrom):
                bound = {alias.asname or alias.name: alias.name for alias in node.names}
                if name in bound:
                    base = self.base_of(package, node)
                    if base in self.modules:
                        return self.defining_module(base, bound[name])
        return package

    def ran_by(self, importer: str, target: str) -> set[str]:
        """``target`` and its packages, less the importer's own ancestors (already running)."""
        parts = target.split(".")
        chain = {".".join(parts[: k + 1]) for k in range(len(parts))}
        own = importer.split(".")
        ancestors = {".".join(own[: k + 1]) for k in range(len(own))}
        return {m for m in chain - ancestors if m in self.modules}

    def edges(self, importer: str) -> set[str]:
        found: set[str] = set()
        for node in import_time_imports(self.trees[importer], typing=self.typing):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    for k in range(len(parts), 0, -1):
                        if ".".join(parts[:k]) in self.modules:
                            found |= self.ran_by(importer, ".".join(parts[:k]))
                            break
                continue
            base = self.base_of(importer, node)
            if base not in self.modules:
                continue
            found |= self.ran_by(importer, base)
            for alias in node.names:
                if alias.name == "*":
                    continue
                source = self.defining_module(base, alias.name)
                found |= self.ran_by(importer, source) | ({source} - {importer})
        return found - {importer}

    def graph(self) -> Graph:
        return {name: self.edges(name) for name in self.modules}


def by_subpackage(graph: Graph) -> Graph:
    """The graph between the package's subpackages and top-level modules (``pkg.rank``...)."""
    top = {name: ".".join(name.split(".")[:2]) for name in graph}
    folded: Graph = {node: set() for node in top.values()}
    for name, targets in graph.items():
        folded[top[name]] |= {top[t] for t in targets} - {top[name]}
    return folded


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's components with more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return found


def one_cycle(graph: Graph, component: list[str]) -> list[str]:
    """A shortest import path round the component from its first module, for the message."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt_frontier = []
        for node in frontier:
            for nxt in sorted(graph[node] & members):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    nxt_frontier.append(nxt)
        frontier = nxt_frontier
    return component


def cycle_report(graph: Graph) -> str:
    """One line per cycle: a path round it, then every module caught in it ("" when none)."""
    lines = []
    for component in strongly_connected(graph):
        path = " -> ".join(one_cycle(graph, component))
        lines.append(f"{len(component)} modules: {path} (all: {', '.join(component)})")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- tests
def test_the_checker_sees_relative_imports_re_exports_and_skips_lazy_ones(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "data").mkdir()
    files = {
        "__init__.py": "",
        "a.py": "from .sub import thing\n",
        "b.py": "import typing\nif typing.TYPE_CHECKING:\n    from . import a\n"
        "def f():\n    from . import a\n",
        "sub/__init__.py": "from .impl import thing\n",
        "sub/impl.py": "try:\n    from ..b import f\nexcept ImportError:\n    pass\n",
        "data/hooks.py": "from pkg import a\n",
    }
    for name, text in files.items():
        (pkg / name).write_text(text)
    modules = package_modules(pkg)
    assert "pkg.data.hooks" not in modules
    graph = ImportGraph(modules).graph()
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.impl"}
    assert graph["pkg.b"] == set()
    assert ImportGraph(modules, typing=True).graph()["pkg.b"] == {"pkg.a"}
    assert by_subpackage(graph) == {
        "pkg": set(),
        "pkg.a": {"pkg.sub"},
        "pkg.b": set(),
        "pkg.sub": {"pkg.b"},
    }
    assert graph["pkg.sub.impl"] == {"pkg.b"}
    assert strongly_connected(graph) == []
    (pkg / "b.py").write_text("from .a import thing\n")
    graph = ImportGraph(package_modules(pkg)).graph()
    assert strongly_connected(graph) == [["pkg.a", "pkg.b", "pkg.sub", "pkg.sub.impl"]]
    assert cycle_report(graph).startswith("4 modules: pkg.a -> ")


def test_no_import_cycle_among_package_modules() -> None:
    graph = ImportGraph(package_modules()).graph()
    assert len(graph) > 100 and "lmeval_microbench.estimators.base" in graph
    report = cycle_report(graph)
    assert not report, f"import cycles in {PACKAGE}:\n{report}"


def test_no_cycle_when_type_checking_imports_count() -> None:
    """A cycle hidden under ``if TYPE_CHECKING:`` is still two modules that need each other."""
    report = cycle_report(ImportGraph(package_modules(), typing=True).graph())
    assert not report, f"import cycles in {PACKAGE} (typing imports included):\n{report}"


def test_no_cycle_among_subpackages() -> None:
    """Subpackages form layers: none imports, through any of its modules, one that imports it."""
    graph = by_subpackage(ImportGraph(package_modules()).graph())
    assert {"lmeval_microbench.rank", "lmeval_microbench.reliability"} <= set(graph)
    report = cycle_report(graph)
    assert not report, f"import cycles between subpackages of {PACKAGE}:\n{report}"


IMPORT_EACH = """
import importlib, json, sys, traceback
package, failed = sys.argv[2], {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed[name] = traceback.format_exc(limit=-3)
print(json.dumps(failed))
"""


@pytest.mark.slow  # 11-25 s: the default run stays under 15 minutes
def test_every_module_imports_first_in_a_fresh_interpreter() -> None:
    """Each module imported with no module of ours loaded before it (one interpreter per half
    of the modules, both at once: the imports take most of a minute in one)."""
    names = sorted(package_modules())
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", IMPORT_EACH, json.dumps(half), PACKAGE],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for half in (names[::2], names[1::2])
    ]
    failed: dict[str, str] = {}
    for run in runs:
        out, err = run.communicate()
        assert run.returncode == 0, err
        failed.update(json.loads(out.strip().splitlines()[-1]))
    first = "\n".join(f"{name}:\n{error}" for name, error in list(failed.items())[:3])
    assert not failed, f"{len(failed)} modules fail to import first ({sorted(failed)}):\n{first}"


def lm_eval_importers(modules: dict[str, Path]) -> dict[str, list[int]]:
    """Modules that import ``lm_eval`` anywhere (also inside functions), with the lines."""
    found: dict[str, list[int]] = {}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots = [node.module.split(".")[0]]
            else:
                continue
            if "lm_eval" in roots:
                found.setdefault(name, []).append(node.lineno)
    return found


def test_only_harness_imports_lm_eval() -> None:
    """What we rely on of lm-eval's API sits in ``harness/`` (``lmeval_api.py`` for code that
    runs models); the rest of the package goes through it, lazily or not."""
    importers = lm_eval_importers(package_modules())
    outside = {n: lines for n, lines in importers.items() if not n.startswith(f"{PACKAGE}.harness")}
    assert f"{PACKAGE}.harness.lmeval_api" in importers
    assert not outside, f"lm_eval imported outside harness/: {outside}"
