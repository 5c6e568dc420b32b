"""tools/bench_item_pools.py: a pool of a whole benchmark's items as the matrix."""

from __future__ import annotations

import pytest
from tools_support import tools_module


def test_pools_are_seeded_draws_without_repeats():
    tool = tools_module("bench_item_pools")
    pool = tool.pool_items(756, 100, seed=0)
    assert pool.size == 100 and len(set(pool.tolist())) == 100 and pool.max() < 756
    assert (pool == tool.pool_items(756, 100, seed=0)).all()
    assert not (pool == tool.pool_items(756, 100, seed=1)).all()


def test_summary_counts_refusals_now_and_before_and_averages_the_builds_that_ran():
    tool = tools_module("bench_item_pools")
    case = {"matrix": "musr", "pool": 100, "population": "66", "protocol": "extrapolation"}
    ran = {
        **case, "seed": 0, "refused": None, "dropped": 3, "mae": 4.0, "bias": -1.0,
        "coverage": 0.9, "width": 18.0, "recipe": "balanced+guarded",
    }  # fmt: skip
    refused = {**case, "seed": 1, "refused": "auto: the floor ... hardly moves"}
    rows = tool.summary([ran, refused], before=[{**refused, "seed": 0}, refused])
    assert len(rows) == 1
    row = rows[0]
    assert (row["refused"], row["refused_before"], row["seeds"]) == (1, 2, 2)
    assert row["mae"] == 4.0 and row["dropped"] == 3
    info = {"command": "c", "seconds": 1.0, "load": [0, 0], "before": "b.json"}
    report = tool.render(rows, info)
    assert "| musr | 100 | 66 | extrapolation | 1/2 | 2/2 | 3.0 | 4.00 | -1.00 | 0.90 |" in report
    assert "- auto: the floor ... hardly moves" in report


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_a_pool_whose_weaker_sources_give_no_scale_map_builds(shared_data):
    tool = tools_module("bench_item_pools")
    found = tool.measure(("musr", 100, "66", "extrapolation", 0, str(shared_data)))
    assert found["refused"] is None
    assert found["mae"] < 8 and found["coverage"] > 0.7
