"""tools/bench_adaptive_equal.py: adaptive runs beside static items at the same item count."""

from __future__ import annotations

import json

import pytest
from tools_support import tools_module


def _row(protocol: str, items: int, adaptive: float, task: float, default: float | None):
    def reading(mae: float) -> dict[str, float]:
        return {"mae": mae, "coverage90": 0.9, "width90": 10.0}

    return {
        "protocol": protocol,
        "items": items,
        "adaptive": reading(adaptive),
        "static": reading(task),
        "default_build": None if default is None else reading(default),
    }


def test_the_tally_counts_pools_where_adaptive_is_level_within_a_tenth_of_a_point():
    tool = tools_module("bench_adaptive_equal")
    rows = [
        _row("random", 50, 1.0, 1.0, 0.5),  # level with the task (equal), behind the build
        _row("random", 50, 2.0, 1.95, 3.0),  # within 0.1 of the task, ahead of the build
        _row("random", 50, 2.0, 1.5, 2.5),  # behind the task, ahead of the build
        _row("random", 25, 3.0, 4.0, None),  # ahead; no default build at 25 items
    ]
    by_items = {t["items"]: t for t in tool.tally(rows)}
    assert by_items[50]["pools"] == 3 and by_items[50]["level_with_task"] == 2
    assert by_items[50]["level_with_default"] == 2
    assert by_items[50]["default_mae"] == pytest.approx(2.0)
    assert by_items[25]["level_with_task"] == 1 and "default_mae" not in by_items[25]


def test_splits_that_do_not_reproduce_bench_adaptive_stop_the_tool(shared_data):
    """The static recipe refitted must give bench/adaptive.json's MAE, or the comparison is
    not on the same models: a recorded MAE that differs stops the tool before any build."""
    tool = tools_module("bench_adaptive_equal")
    adaptive = json.loads((tool.REPO / "bench" / "adaptive.json").read_text())
    recorded = adaptive["results"]["hellaswag"]["extrapolation"]["static_same_split"]["mae"]
    task = (shared_data, "hellaswag", "extrapolation", adaptive["config"], recorded + 0.5)
    with pytest.raises(SystemExit, match="not the same split or targets"):
        tool.measure(task)


@pytest.mark.slow
def test_one_pool_is_read_at_every_item_count_beside_its_adaptive_run(shared_data, tmp_path):
    tool = tools_module("bench_adaptive_equal")
    args = ["--shared", str(shared_data), "--benchmarks", "hellaswag"]
    assert tool.main([*args, "--protocols", "extrapolation", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "adaptive_equal.json").read_text())
    adaptive = json.loads((tool.REPO / "bench" / "adaptive.json").read_text())
    recorded = adaptive["results"]["hellaswag"]["extrapolation"]
    assert report["checks"]["hellaswag/extrapolation"] == pytest.approx(
        recorded["static_same_split"]["mae"], abs=1e-6
    )
    assert [r["items"] for r in report["rows"]] == [10, 25, 50]
    for row in report["rows"]:
        assert row["recipe"] == "greedy + guarded"  # the shipped task's method and reading
        assert row["adaptive"]["mae"] == recorded["maxinfo"][str(row["items"])]["mae"]
        assert row["static"]["mae"] > 0 and 0 <= row["static"]["coverage90"] <= 1
    assert [r["default_build"] is None for r in report["rows"]] == [True, True, False]
    assert "+guarded" in report["rows"][-1]["default_build"]["recipe"]
    text = (tmp_path / "adaptive_equal.md").read_text()
    assert "| hellaswag | extrapolation | 50 |" in text
