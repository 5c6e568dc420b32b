"""tools/bench_outside_estimates.py: other estimates for models outside the sources, measured."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_guard_reach import far_below_world, fitted_guarded, random_subset
from tools_support import tools_module

from lmeval_microbench.outside import reached_below
from lmeval_microbench.outside.guard import W_MIN


def test_variants_blend_only_as_far_as_the_guard_places_a_model_outside():
    tool = tools_module("bench_outside_estimates")
    guarded = (np.array([0.5, 0.5, 0.5]), np.array([0.4, 0.4, 0.4]), np.array([0.6, 0.6, 0.6]))
    blend = (np.array([0.7, 0.7, 0.7]), np.array([0.5, 0.5, 0.5]), np.array([0.9, 0.9, 0.9]))
    weight = np.array([0.0, W_MIN + (1 - W_MIN) / 2, 1.0])  # inside, half-way, beyond
    below = np.array([np.nan, 0.2, np.nan])  # the own reading places the second far below
    found = tool.variants(guarded, blend, weight, below)
    assert found["guarded"] is guarded and found["blend"] is blend
    np.testing.assert_allclose(found["outside_only"][0], [0.5, 0.7, 0.7])
    np.testing.assert_allclose(found["by_weight"][0], [0.5, 0.6, 0.7])
    np.testing.assert_allclose(found["by_weight"][1], [0.4, 0.45, 0.5])
    np.testing.assert_allclose(found["by_weight"][2], [0.6, 0.75, 0.9])
    np.testing.assert_allclose(np.stack(found["own_below"]), [[0.5, 0.2, 0.5], [0.4, 0.2, 0.4],
                                                             [0.6, 0.6, 0.6]])  # fmt: skip


def test_wholly_below_is_where_the_guard_reaches_below():
    """The own reading the tool moves the estimate to is the one ``reached_below`` stretches
    the interval to, on the same models (a synthetic world of models far below the sources)."""
    tool = tools_module("bench_outside_estimates")
    source, target = far_below_world(0)
    subset = random_subset(source, 0)
    guarded = fitted_guarded(source, subset, source.mean_scores())
    values = target.select_items(subset.item_ids).values
    below = tool.wholly_below(guarded, values)
    inner = guarded.inner_.predict_rows(values, 0.9)[0]
    own = guarded.reach_.read(values, inner)
    reaching = np.isfinite(reached_below(np.full(len(values), np.inf), own, guarded.bottom_))
    assert 0.3 < reaching.mean() < 1.0
    np.testing.assert_array_equal(~np.isnan(below), reaching)
    np.testing.assert_allclose(below[reaching], own[0][reaching])
    guarded.reach_ = None  # a target that is not the matrix mean: no own reading
    assert np.isnan(tool.wholly_below(guarded, values)).all()


def test_only_cells_read_with_guarded_outside_psn_are_rebuilt():
    tool = tools_module("bench_outside_estimates")
    peers = {
        "musr/25/random/50/0": {"ours": {"recipe": "balanced+guarded", "widen": 1.2}},
        "musr/25/random/50/1": {"ours": {"recipe": "balanced+anchor_sum"}},
        "arc/all/weak/50/0": {"ours": {"recipe": "greedy+guarded"}},
    }
    (found,) = tool.guarded_cells(peers, {"musr"})
    assert found == (tool.Cell("musr", "25", "random", 50, 0), "balanced", 1.2)


@pytest.mark.slow
def test_a_rebuilt_cell_reproduces_the_suite_and_is_set_beside_its_peers(shared_data, tmp_path):
    tool = tools_module("bench_outside_estimates")
    key = "musr/25/extrapolation/50/0"
    cell = tool.cell_of(key)
    # the suite's own number for this cell, from the tool's rebuild with the same recipe
    row = tool.measure_cell((shared_data, cell, "balanced", 1.0))
    ours = {**row["guarded"], "recipe": "balanced+guarded", "widen": 1.0}
    methods = {"ours": ours, "lasso": {"mae": 2.0}, "aipw": {"mae": 9.0}}
    peers = tmp_path / "peers.json"
    peers.write_text(json.dumps({"cells": [{"key": key, "methods": methods}]}))
    args = ["--data", str(shared_data), "--matrices", "musr", "--peers", str(peers)]
    assert tool.main([*args, "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "outside_estimates.json").read_text())
    assert report["info"]["cells"] == 1 and report["info"]["reproduced"] < 1e-9
    (case,) = report["cases"]
    assert case["best_peer"] == "lasso" and case["best_peer_mae"] == 2.0
    # the strongest fifth lies above 25 sources: the guard places most of it outside
    assert case["outside_share"] > 0.5
    assert case["by_weight_mae"] != case["guarded_mae"]
    assert case["below_share"] == 0.0 and case["own_below_mae"] == case["guarded_mae"]
    (group,) = report["summary"]
    assert group["group"] == "v2, extrapolation, 25-100 sources" and group["cases"] == 1
    assert group["guarded_level"] == int(case["guarded_mae"] <= 2.1)
    assert (
        "| musr | 25 | extrapolation | 50 | 1 |" in (tmp_path / "outside_estimates.md").read_text()
    )
