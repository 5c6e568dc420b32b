"""tools/bench_small_sources.py: the default build on real matrices cut to few source models."""

from __future__ import annotations

import pytest
from tools_support import tools_module


@pytest.mark.filterwarnings("ignore")
def test_ten_sources_get_the_fallback_and_the_report_says_what_the_default_was(shared_data):
    tool = tools_module("bench_small_sources")
    cell = tool.Cell("arc", "10", "random", 25, 1)
    result = tool.measure(("mean", cell))
    assert result["sources"] == 10
    fallback = f"{tool.FALLBACK.method}+{tool.FALLBACK.estimator}"
    # 10 models leave no fold to choose on: the default is the fallback, bit for bit
    assert result["default_recipe"] == fallback
    assert result["default"] == result["fallback"]
    assert result["floor"] != result["fallback"] != result["guarded"]
    for name in ("default", "floor", "fallback", "guarded"):
        assert 0.0 <= result[name]["coverage"] <= 1.0 and result[name]["width"] > 0
    (row,) = tool.summary([result])
    assert (row["sources"], row["protocol"], row["default_is"]) == ("10", "random", {"fallback": 1})
    report = tool.render([result], {"command": "c", "seconds": 1.0, "load": [0, 0]})
    assert "| 10 | random | 1 |" in report and "fallback 1 |" in report


@pytest.mark.filterwarnings("ignore")
def test_score_cells_read_the_whole_benchmark_score_with_the_default_and_the_floor(shared_data):
    tool = tools_module("bench_small_sources")
    cell = tool.Cell("arc", "22", "random", 25, 0)
    result = tool.measure((tool.SCORED, cell))
    assert result["key"] == f"score:{cell.key}" and result["sources"] == 22
    assert set(result) >= {"default", "floor"} and "fallback" not in result
    (row,) = tool.summary([result])
    assert (row["sources"], row["protocol"]) == ("22 (score)", "random")
    report = tool.render([result], {"command": "c", "seconds": 1.0, "load": [0, 0]})
    assert "| 22 (score) | random | 1 |" in report and "- | - | - | -" in report


def test_populations_narrow_the_cells_and_leave_the_psn_blocks():
    tool = tools_module("bench_small_sources")
    every = tool.cells(1, 1)
    ten = tool.cells(1, 1, ("10",))
    assert {c.population for c in every} == {*tool.POPULATIONS, "all"}
    assert {c.population for c in ten} == {"10", "all"}
    assert [c for c in every if c.population == "all"] == [c for c in ten if c.population == "all"]
