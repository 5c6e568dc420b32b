"""tools/bench_gaps.py: gaps punched into the source rows, and the default build on them."""

from __future__ import annotations

import numpy as np
import pytest
from tools_support import tools_module


def test_gaps_fall_only_on_the_source_rows_in_each_pattern():
    tool = tools_module("bench_gaps")
    values = np.ones((50, 200))
    rows = np.arange(10, 50)
    for pattern in tool.PATTERNS:
        gapped = tool.punch_gaps(values, rows, pattern, seed=0)
        assert not np.isnan(gapped[:10]).any() and values.sum() == 50 * 200
        share = np.isnan(gapped[rows]).mean()
        expected = {"none": 0.0, "scattered 2 %": 0.02, "scattered 5 %": 0.05, "blocks": 0.02}
        assert share == pytest.approx(expected[pattern], abs=0.006), pattern
        assert np.array_equal(
            np.isnan(gapped), np.isnan(tool.punch_gaps(values, rows, pattern, seed=0))
        )
    blocks = np.isnan(tool.punch_gaps(values, rows, "blocks", seed=1))
    hit = np.flatnonzero(blocks.any(axis=1))
    assert hit.size == 8  # a fifth of the 40 sources
    for row in hit:  # one run of a tenth of the items
        run = np.flatnonzero(blocks[row])
        assert run.size == 20 and np.all(np.diff(run) == 1)
    with pytest.raises(ValueError, match="unknown gap pattern"):
        tool.punch_gaps(values, rows, "holes", seed=0)


def test_summary_and_report_average_the_seeds_of_a_case():
    tool = tools_module("bench_gaps")
    cell = {
        "matrix": "musr", "population": "66", "protocol": "random", "pattern": "blocks",
        "missing": 0.02, "models_used": 66, "items_used": 756, "sources": 66, "mae": 2.0,
        "bias": -1.0, "coverage": 0.9, "width": 10.0, "recipe": "balanced+guarded",
    }  # fmt: skip
    rows = tool.summary([{**cell, "seed": 0}, {**cell, "seed": 1, "mae": 3.0}])
    assert len(rows) == 1 and rows[0]["mae"] == 2.5 and rows[0]["seeds"] == 2
    report = tool.render(rows, {"command": "c", "seconds": 1.0, "load": [0, 0]})
    assert "| musr | 66 | random | blocks | 2.0 % | 66 x 756 (of 66) | 2.50 | -1.00 |" in report


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_the_default_build_runs_on_a_real_matrix_with_gaps_in_every_source(shared_data):
    tool = tools_module("bench_gaps")
    found = tool.measure(("musr", "66", "random", 0, "scattered 5 %", str(shared_data)))
    assert found["missing"] == pytest.approx(0.05, abs=0.005)
    assert (found["models_used"], found["items_used"]) == (66, 756)
    assert found["mae"] < 5 and found["coverage"] > 0.8
