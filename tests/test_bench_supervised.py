"""tools/bench_supervised.py: the four supervised recipes on a peer-suite cell of real data."""

from __future__ import annotations

import json

import pytest
from tools_support import tools_module


@pytest.mark.slow
def test_each_recipe_is_built_scored_and_reported(shared_data, tmp_path):
    tool = tools_module("bench_supervised")
    args = ["--data", str(shared_data), "--matrices", "psn_bbh", "--budgets", "25", "--seeds", "0"]
    args += ["--cache", str(tmp_path / "cache"), "--peers-cache", str(tmp_path / "no_peers")]
    tool.main([*args, "--out", str(tmp_path)])
    cases = json.loads((tmp_path / "supervised.json").read_text())["cases"]
    assert [(c["protocol"], c["budget"]) for c in cases] == [("random", 25), ("extrapolation", 25)]
    for case in cases:
        assert set(case["methods"]) == set(tool.RECIPES)  # no peer cache: only the recipes
        for metrics in case["methods"].values():
            assert metrics["mae"] > 0 and 0.0 <= metrics["coverage"] <= 1.0
    report = (tmp_path / "supervised.md").read_text()
    assert "| psn_bbh | random | 25 | - | - |" in report  # the default's cells: not run here
    # a second run reads every build from the cache
    tool.main([*args, "--out", str(tmp_path / "again")])
    again = json.loads((tmp_path / "again" / "supervised.json").read_text())["cases"]
    assert again == cases
