"""tools/bench_ceiling.py: the open upper end on the shipped tasks and what it costs."""

from __future__ import annotations

import json

import pytest
from tools_support import tools_module


def cell(matrix: str, protocol: str, all_right: int, before: float, now: float) -> dict:
    return {"key": f"{matrix}/all/{protocol}/50/0", "case": [matrix, protocol, 50],
            "models": 10, "all_right": all_right, "all_right_above_sources": all_right,
            "before": {"mae": 1.0, "bias": 0.0, "coverage": before, "width": 10.0},
            "now": {"mae": 1.0, "bias": 0.0, "coverage": now, "width": 12.0}}  # fmt: skip


def test_report_only_renders_the_three_parts(tmp_path):
    tool = tools_module("bench_ceiling")
    shipped = [{"benchmark": "arc", "items": 50, "static_before": "73.3 [71.8, 74.8]",
                "static_now": "73.3 [71.8, 100.0]", "sources": 3390, "sources_all_right": 260,
                "their_scores": [0.709, 0.749], "strongest_score": 0.799, "strongest_subset": 0.96,
                "adaptive_now": {"10": "a", "25": "b", "50": "c"}}]  # fmt: skip
    metrics = {"mae": 1.0, "bias": 0.0, "coverage": 0.5, "width": 20.0}
    builds = [{"case": ["truthfulqa", "extrapolation"], "recipe": "balanced+guarded",
               "models": 678, "all_right": 23, "all_right_above_sources": 23,
               "all_right_truths": [1.0, 1.0], "before": metrics, "now": metrics,
               "all_right_before": {**metrics, "coverage": 0.0},
               "all_right_now": {**metrics, "coverage": 1.0}}]  # fmt: skip
    info = {"command": "python tools/bench_ceiling.py --jobs 2", "minutes": 20.0,
            "load_average": [0.9, 1.9], "shipped": shipped, "v1_builds": builds}  # fmt: skip
    rows = [cell("arc", "extrapolation", 3, 0.9, 1.0), cell("mmlu", "extrapolation", 0, 0.8, 0.8)]
    (tmp_path / "ceiling.json").write_text(json.dumps({"info": info, "cells": rows}))
    assert tool.main(["--report-only", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "ceiling.md").read_text()
    assert "| arc | 50 | 73.3 [71.8, 74.8] | 73.3 [71.8, 100.0] | 260 of 3390 | 70.9-74.9 |" in text
    assert "79.9 / 96 % | a / b / c |" in text
    build = "| truthfulqa | extrapolation | balanced+guarded | 678 | 23 (23) | 100.0-100.0 | "
    assert build in text
    assert "0.00 / 20.0 | 1.00 / 20.0 | 0.50 / 20.0 | 0.50 / 20.0 |" in text
    # both cells are v1 extrapolation: 20 models, 3 all right, one cell with one; coverage and
    # width means over the cells
    group = "| OLL v1 (six) | extrapolation | 2 | 20 | 3 | 3 | 1 | 0.850 -> 0.900 | 10.0 -> 12.0 |"
    assert group in text


def test_the_shipped_arc_task_opens_above_and_260_sources_answered_it_all_right(shared_data):
    found = tools_module("bench_ceiling").shipped(shared_data, "arc")
    assert found["static_before"].endswith("74.8]") and found["static_now"].endswith("100.0]")
    assert found["sources_all_right"] == 260 and found["strongest_subset"] < 1.0
    assert found["strongest_score"] > found["their_scores"][1]
    assert all(text.endswith("100.0]") for text in found["adaptive_now"].values())


@pytest.mark.slow
def test_truthfulqas_strongest_fifth_all_right_is_covered_now(shared_data):
    found = tools_module("bench_ceiling").measure_build(
        (shared_data, "truthfulqa", "extrapolation", 50, 0, None)
    )
    assert found["all_right"] > 0 and found["all_right_truths"] == [1.0, 1.0]
    assert found["all_right_before"]["coverage"] < 0.5 <= found["all_right_now"]["coverage"]
    assert found["now"]["mae"] == found["before"]["mae"]
