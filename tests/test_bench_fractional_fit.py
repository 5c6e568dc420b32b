"""tools/bench_fractional_fit.py: person fit on real answers scored with partial credit."""

from __future__ import annotations

import numpy as np
import pytest
from tools_support import tools_module


def test_parts_average_consecutive_items_and_drop_the_rest():
    tool = tools_module("bench_fractional_fit")
    values = np.array([[1, 0, 1, 1, 0, 1, 1], [0, 0, 0, 1, 1, 1, 1]], dtype=float)
    merged, ids = tool.with_parts(values, [f"i{k}" for k in range(7)], 3)
    assert np.allclose(merged, [[2 / 3, 2 / 3], [0.0, 1.0]])
    assert ids == ["i0+3", "i3+3"]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_partial_credit_is_checked_against_matched_responders(shared_data):
    tool = tools_module("bench_fractional_fit")
    found = tool.measure("musr", tool.PARTS, seed=0, budget=25)
    assert found["held_out"] > 50
    binary, matched = found["binary"], found["matched"]
    # the binary null takes more ordinary partial-credit models for guessers ...
    assert matched["held_out_guessing"] < binary["held_out_guessing"]
    # ... and the matched null still catches random responders
    assert matched["responders_guessing"] > 0.9
    report = tool.markdown(
        {"musr|partial": [found]},
        {"command": "c", "seconds": 1, "load": [0, 0], "budget": 25, "seeds": [0]},
    )
    assert "| musr | partial |" in report
