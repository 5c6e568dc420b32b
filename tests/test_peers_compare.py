"""tools/peers_compare.py: two peer-suite reports set side by side, cell by cell."""

from __future__ import annotations

import json

from tools_support import tools_module


def _cell(seed: int, coverage: float, width: float, mae: float, recipe: str = "random+guarded"):
    metrics = {"mae": mae, "coverage": coverage, "width": width, "recipe": recipe}
    return {
        "key": f"m/25/random/50/{seed}", "matrix": "m", "population": "25",
        "protocol": "random", "budget": 50, "seed": seed,
        "methods": {"ours": metrics, "aipw": {"mae": 1.0}},
    }  # fmt: skip


def _report(cells: list[dict], command: str) -> dict:
    return {"info": {"command": command, "started": "today"}, "cells": cells}


def test_coverage_width_and_low_cases_before_and_after(tmp_path):
    tool = tools_module("peers_compare")
    before = _report([_cell(0, 0.80, 10.0, 2.0), _cell(1, 0.84, 12.0, 3.0)], "old")
    after = _report([_cell(0, 0.90, 12.0, 2.0), _cell(1, 0.86, 14.0, 3.5, "dpp+guarded")], "new")
    (row,) = tool.group_rows(tool.paired_cells(before, after, "ours"))
    assert (row["protocol"], row["population"], row["cells"]) == ("random", "25", 2)
    assert abs(row["coverage_before"] - 0.82) < 1e-12 and abs(row["width_after"] - 13.0) < 1e-12
    assert (row["low_cells_before"], row["low_cells_after"]) == (2, 0)
    assert row["low_cases_before"] == ["m 50 (0.820)"] and row["low_cases_after"] == []
    paths = {}
    for name, report in (("before", before), ("after", after)):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(report))
    out = tmp_path / "cmp.md"
    tool.main(["--before", str(paths["before"]), "--after", str(paths["after"]), "--out", str(out)])
    text = out.read_text()
    assert "| ours | random | 25 | 2 | 0.820 -> 0.880 | 11.0 -> 13.0 | 2 -> 0 |" in text
    # only the second cell's MAE moved, and the recipe it changed with is named
    assert "(1):" in text and "| ours | m/25/random/50/1 | 3.00 | 3.50 | random+guarded |" in text


def test_a_cell_scored_in_one_report_only_is_left_out():
    tool = tools_module("peers_compare")
    before = _report([_cell(0, 0.9, 10.0, 2.0)], "old")
    after = _report([_cell(0, 0.9, 10.0, 2.0), _cell(1, 0.9, 10.0, 2.0)], "new")
    assert len(tool.paired_cells(before, after, "ours")) == 1
    assert tool.paired_cells(before, after, "ours_inside") == []
