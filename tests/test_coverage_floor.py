"""tools/coverage_floor.py: single cells' coverage set beside an exact conformal interval's."""

from __future__ import annotations

import json

import pytest
from tools_support import tools_module


def test_one_held_out_model_is_covered_with_the_mean_probability():
    """9 sources: the interval is the largest residual, its coverage Beta(9, 1) with mean
    0.9; one held-out model is then covered (coverage 1 > 0.95) with probability 0.9."""
    tool = tools_module("coverage_floor")
    below, above = tool.outside_probability(9, 1)
    assert below == pytest.approx(0.1, abs=1e-3) and above == pytest.approx(0.9, abs=1e-3)


def test_more_sources_and_targets_leave_fewer_cells_outside():
    tool = tools_module("coverage_floor")
    few = tool.outside_probability(25, 70)
    many = tool.outside_probability(1000, 700)
    assert few[0] > 0.05 and many[0] < 0.005 and many[1] < 0.005


def test_tally_counts_random_cells_of_ours_per_family_and_population(tmp_path):
    tool = tools_module("coverage_floor")

    def cell(matrix, population, protocol, coverage):
        return {"matrix": matrix, "population": population, "protocol": protocol,
                "n_targets": 70, "methods": {"ours": {"coverage": coverage}}}  # fmt: skip

    cells = [cell("ifeval", "25", "random", 0.70), cell("musr", "25", "random", 0.90)]
    cells += [cell("musr", "25", "extrapolation", 0.5), cell("arc", "all", "random", 0.99)]
    peers = tmp_path / "peers.json"
    peers.write_text(json.dumps({"cells": cells}))
    assert tool.main(["--peers", str(peers), "--out", str(tmp_path)]) == 0
    groups = {
        g["group"]: g for g in json.loads((tmp_path / "coverage_floor.json").read_text())["groups"]
    }
    assert set(groups) == {"v2, 25 sources", "v1, all sources"}  # extrapolation left out
    assert groups["v2, 25 sources"]["cells"] == 2 and groups["v2, 25 sources"]["below"] == 1
    assert groups["v1, all sources"]["above"] == 1
    assert 0 < groups["v2, 25 sources"]["expected_below"] < 1


def test_beyond_tally_counts_cells_outside_the_sources_with_their_widths(tmp_path):
    """Strongest and weakest fifths apart, per group; widths beside that group's random ones."""
    tool = tools_module("coverage_floor")

    def cell(protocol, coverage, width):
        return {"matrix": "musr", "population": "all", "protocol": protocol, "n_targets": 70,
                "methods": {"ours": {"coverage": coverage, "width": width}}}  # fmt: skip

    cells = [cell("random", 0.9, 10.0), cell("extrapolation", 1.0, 30.0)]
    cells += [cell("extrapolation", 0.8, 20.0), cell("weak", 0.9, 12.0)]
    beyond = {(g["protocol"], g["group"]): g for g in tool.beyond_tally(cells)}
    assert set(beyond) == {("extrapolation", "v2, all sources"), ("weak", "v2, all sources")}
    up = beyond[("extrapolation", "v2, all sources")]
    assert (up["cells"], up["below"], up["above"]) == (2, 1, 1)
    assert up["mean_width"] == pytest.approx(25.0) and up["random_width"] == pytest.approx(10.0)
    assert tool.beyond_tally([cell("weak", 0.9, 12.0)])[0]["random_width"] is None
