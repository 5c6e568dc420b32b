"""tools/bench_personfit_sources.py: the misfit check's false alarms by source population."""

from __future__ import annotations

import numpy as np
from tools_support import tools_module

from lmeval_microbench import personfit as pf


def test_a_real_cell_of_twelve_sources_flags_far_fewer_ordinary_models(shared_data):
    tool = tools_module("bench_personfit_sources")
    row = tool.measure_cell((shared_data, "musr", 0, 12))
    assert row["sources"] == 12 and row["held_out"] == round(0.2 * 348)
    assert row["threshold_before"] == pf.DEFAULT_LZ_THRESHOLD  # under 20: N(0, 1)
    assert row["threshold_now"] < row["threshold_before"]
    assert row["held_out_before"] > 0.3 and row["held_out_now"] < 0.1
    assert row["random_any_now"] > 0.9  # random responders still flagged (the guessing test)


def test_summary_and_report_pool_matrices_and_seeds():
    tool = tools_module("bench_personfit_sources")
    rows = [
        {
            "matrix": matrix,
            "group": "v1",
            "seed": seed,
            "sources": 12,
            "population": "12",
            "held_out": 10,
            "threshold_before": -1.645,
            "threshold_now": -5.0 - seed,
            "seconds_now": 1.0,
            **{key: rate for key in tool.RATES},
        }
        for matrix, seed, rate in (("arc", 0, 0.1), ("arc", 1, 0.3), ("mmlu", 0, 0.2))
    ]
    (group,) = tool.summary(rows)
    assert group["cells"] == 3 and group["threshold_now"] == -5 - 1 / 3
    np.testing.assert_allclose(group["held_out_now"], [0.2, 0.1, 0.3])
    info = {"command": "c", "minutes": 1.0, "load_average": [0.1, 0.2], "matrices": ["arc"]}
    text = tool.markdown([group], rows, {**info, "seeds": "0,1"})
    assert "| v1 | 12 | 3 | 20.0 (10-30) | 20.0 (10-30) |" in text
    assert "| arc | 12 | 20.0 | 20.0 |" in text and "| mmlu | 12 | 20.0 |" in text
