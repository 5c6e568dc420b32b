"""``microbench items`` and ``tasks-dir --pools``: where a bundle's items and the pools are
(issue 22), plus what every command shares: one-line warnings and a quiet closed pipe."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
from lmeval_microbench.bundle import load_bundle
from lmeval_microbench.cli import tasks_dir
from lmeval_microbench.cli.app import main
from lmeval_microbench.harness import include_path
from lmeval_microbench.runs import ReconstructionWarning


def _items(capsys, *argv: str) -> dict:
    assert main(["items", *argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", ["mmlu", "microbench_mmlu", "openllm-v1-mmlu-50-stratified"])
def test_a_shipped_bundle_is_found_by_benchmark_task_or_bundle_name(capsys, name):
    shipped = load_bundle(include_path() / "openllm_v1" / "mmlu")
    listed = _items(capsys, name)
    assert listed["bundle"] == shipped.name
    assert [row["item_id"] for row in listed["items"]] == list(shipped.item_ids)
    assert [row["weight"] for row in listed["items"]] == [
        shipped.weights[i] for i in shipped.item_ids
    ]


def test_a_pool_is_found_by_its_task_name(capsys):
    pool = load_bundle(SHIPPED_POOLS / "openllm_v2" / "musr")
    listed = _items(capsys, "microbench_pool_musr")
    assert listed["bundle"] == pool.name and len(listed["items"]) == len(pool.item_ids)


def test_a_bundle_folder_is_listed_as_a_table(capsys):
    folder = include_path() / "openllm_v2" / "ifeval"
    assert main(["items", str(folder / "bundle.json")]) == 0
    out = capsys.readouterr().out
    bundle = load_bundle(folder)
    assert out.startswith(f"{bundle.name} ({folder}): {len(bundle.item_ids)} items of ifeval")
    assert all(f"| {item} |" in out for item in bundle.item_ids)


def test_an_unknown_name_is_one_line_listing_the_shipped_names(capsys):
    assert main(["items", "no-such-bundle"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("microbench items: error: no-such-bundle: no such bundle folder")
    assert "microbench_pool_mmlu" in err and len(err.splitlines()) == 1


def test_tasks_dir_prints_the_pools_folder(capsys):
    assert main(["tasks-dir", "--pools"]) == 0
    assert capsys.readouterr().out.strip() == str(SHIPPED_POOLS)
    assert main(["tasks-dir"]) == 0
    assert capsys.readouterr().out.strip() == str(include_path())


def test_every_command_prints_our_warnings_as_one_line(capsys, monkeypatch):
    def warn_and_succeed(args) -> int:
        warnings.warn("a run\n   was skipped", ReconstructionWarning, stacklevel=1)
        return 0

    monkeypatch.setattr(tasks_dir, "run", warn_and_succeed)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(["tasks-dir"]) == 0
    assert capsys.readouterr().err == "warning: a run was skipped\n"


def test_a_closed_pipe_ends_quietly():
    code = "import sys; from lmeval_microbench.cli.app import main; sys.exit(main(sys.argv[1:]))"
    listing = subprocess.Popen(
        [sys.executable, "-c", code, "items", "microbench_pool_musr", "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert listing.stdout is not None and listing.stderr is not None
    listing.stdout.readline()
    listing.stdout.close()  # as `| head -1` does; the listing (140 kB) outgrows the pipe
    err = listing.stderr.read().decode()
    assert listing.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_plots_need_no_extra_install():
    """curve, rank and reliability draw PNGs: matplotlib comes with the default install, so
    no command has a 'no plots' branch the README's quick-start install would hit."""
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert any(dep.startswith("matplotlib") for dep in project["dependencies"])
    assert project["optional-dependencies"]["plots"] == []  # kept for old install commands
    package = Path(__file__).parents[1] / "lmeval_microbench"
    users = [p for p in package.rglob("*.py") if "matplotlib_available()" in p.read_text()]
    assert [p.name for p in users] == ["plots.py"]
