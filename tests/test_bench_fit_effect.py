"""tools/bench_fit_effect.py: the default build's estimates before and after person fit."""

from __future__ import annotations

import json

import numpy as np
from tools_support import tools_module


def test_given_chance_comes_from_the_shipped_pools_and_only_where_choices_are_known(
    shared_data,
):
    tool = tools_module("bench_fit_effect")
    cells = tools_module("peer_cells")
    _, _, ids = cells.load_matrix("winogrande", shared_data)
    chance = tool.given_chance("winogrande", ids)
    assert set(chance) == set(ids) and set(chance.values()) == {0.5}
    _, _, ids = cells.load_matrix("ifeval", shared_data)
    assert tool.given_chance("ifeval", ids) is None  # no choices: the weakest sources stand in
    assert tool.given_chance("psn_bbh", ["x"]) is None


def test_a_weak_cell_is_run_both_ways_and_reported(shared_data, tmp_path):
    tool = tools_module("bench_fit_effect")
    args = ["--data", str(shared_data), "--matrices", "psn_mmlu", "--protocols", "weak"]
    tool.main([*args, "--psn-seeds", "0", "--budget", "25", "--out", str(tmp_path)])
    (row,) = json.loads((tmp_path / "fit_effect.json").read_text())["rows"]
    assert (row["matrix"], row["protocol"], row["chance"], row["targets"]) == (
        "psn_mmlu",
        "weak",
        "stand-in",
        2,
    )
    # the weakest sources stand in for chance: the check moves no value, only widens (it
    # does widen on this seed: 32.8 -> 38.6 points)
    assert row["raw"]["mae"] == row["checked"]["mae"]
    assert row["checked"]["width"] > row["raw"]["width"]
    assert "| psn_mmlu | weak | stand-in | 2 |" in (tmp_path / "fit_effect.md").read_text()


def test_summaries_pool_the_seeds():
    tool = tools_module("bench_fit_effect")
    truth = np.array([0.5, 0.6])
    estimate = (np.array([0.52, 0.6]), np.array([0.45, 0.61]), np.array([0.6, 0.7]))
    part = {
        "truth": truth,
        "raw": estimate,
        "checked": estimate,
        "rules": {name: estimate[0] for name in tool.RULES},
        "guessing": np.array([True, False]),
        "misfit": np.array([False, False]),
        "recipe": "random+guarded",
    }
    summary = tool.summarise([part, part])
    assert summary["targets"] == 4 and summary["guessing"] == 0.5
    assert np.isclose(summary["raw"]["mae"], 1.0) and summary["raw"]["coverage"] == 0.5
    maes = tool.rules_mae([part, part])
    assert set(maes) == set(tool.RULES)
    assert np.isclose(maes["widen only"], 1.0)
    del part["rules"]  # bench_adaptive_fit's parts: the same metrics, no other weights
    assert "rules_mae" not in tool.summarise([part]) and tool.summarise([part])["targets"] == 2


def test_other_weights_scale_the_move_of_flagged_estimates_only():
    tool = tools_module("bench_fit_effect")
    raw = np.array([0.60, 0.60, 0.20, 0.50])
    # moved by P(guessing) 0.5 toward chance 0.25; unflagged; flagged below chance (kept);
    # flagged with no finite posterior (weight 1: moved all the way)
    checked = np.array([0.425, 0.60, 0.20, 0.25])
    fits = [
        {"guessing": True, "guess_posterior": 0.5},
        {"guessing": False, "guess_posterior": 0.01},
        {"guessing": True, "guess_posterior": 0.9},
        {"guessing": True, "guess_posterior": None},
    ]
    wide = {"ability sd 2": np.array([0.25, 0.5, 0.5, 0.4])}  # refitted posteriors
    rules = tool.reweighted(raw, checked, fits, wide)
    assert np.allclose(rules["P(guessing)"], checked)
    # a refitted posterior replaces P(guessing) as the weight: 0.25 moves half as far
    assert np.allclose(rules["ability sd 2"], [0.60 - 0.25 * 0.35, 0.60, 0.20, 0.50 - 0.4 * 0.25])
    assert np.allclose(rules["widen only"], raw)
    # P = 0.5 at the product's prior odds 1:4 is 0.8 at even odds (odds 1 x 4) ...
    assert np.allclose(rules["even odds"], [0.60 - 0.8 * 0.35, 0.60, 0.20, 0.25])
    assert np.allclose(rules["odds beyond even"], [0.60 - 0.6 * 0.35, 0.60, 0.20, 0.25])
    # ... and 4 / 13 at prior odds 1:9 (odds 1 x 4 / 9)
    assert np.isclose(rules["prior 0.1"][0], 0.60 - 4 / 13 * 0.35)
    assert np.isclose(rules["prior 0.1"][3], 0.25)  # weight 1 stays 1 at any prior odds
