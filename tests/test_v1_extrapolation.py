"""tools/v1_extrapolation.py and tools/bench_v1_default.py: the v1 strongest fifth explained."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tools_support import tools_module


def test_sampling_error_matches_random_draws_of_items():
    """The closed form against 4,000 draws of 50 of 200 items for 30 models."""
    tool = tools_module("v1_extrapolation")
    rng = np.random.default_rng(0)
    values = (rng.random((30, 200)) < rng.uniform(0.2, 0.9, (30, 1))).astype(float)
    full = values.mean(axis=1)
    errors = [
        np.abs(values[:, rng.choice(200, 50, replace=False)].mean(axis=1) - full).mean()
        for _ in range(4000)
    ]
    assert tool.sampling_error(values, 50) == pytest.approx(100 * np.mean(errors), rel=0.03)
    assert tool.sampling_error(values, 200) == 0.0  # every item: nothing left to sample


def _peer_cell(matrix, budget, seed, ours, peers):
    methods = {"ours": {"mae": ours}, **{n: {"mae": v} for n, v in peers.items()}}
    return {"matrix": matrix, "population": "all", "protocol": "extrapolation",
            "budget": budget, "seed": seed, "methods": methods}  # fmt: skip


def test_report_says_which_benchmarks_nothing_reaches(shared_data, tmp_path):
    tool = tools_module("v1_extrapolation")
    cells = [_peer_cell("arc", 50, s, 2.0, {"random_sampling": 3.0, "aipw": 2.5}) for s in (0, 1)]
    cells += [_peer_cell("gsm8k", 50, s, 3.0, {"random_sampling": 1.0}) for s in (0, 1)]
    cells.append(_peer_cell("arc", 50, 2, 9.0, {"aipw": 9.0}))  # lacks random_sampling
    choice = [
        {"key": f"arc/all/extrapolation/50/{s}", "held_out": {"a": {"mae": m}, "b": {"mae": 5.0}}}
        for s, m in ((0, 1.0), (1, 3.0))
    ]
    reliability = {
        "summary": [
            {
                "dataset": "arc",
                "protocol": "extrapolation",
                "best50": {"method": "greedy", "estimator": "kridge", "mae": 1.52},
                "best_all": {"items": 100, "mae": 1.4},
            }
        ]
    }
    for name, content in (("peers", {"cells": cells}), ("choice_rules", {"cells": choice})):
        (tmp_path / f"{name}.json").write_text(json.dumps(content))
    (tmp_path / "reliability.json").write_text(json.dumps(reliability))
    default = {"matrix": "arc", "protocol": "weak", "budget": 50, "mae": 7.0, "bias": 6.9,
               "coverage": 0.3}  # fmt: skip
    (tmp_path / "v1_default.json").write_text(json.dumps({"cases": [default]}))
    args = ["--data", str(shared_data), "--bench", str(tmp_path), "--out", str(tmp_path)]
    assert tool.main(args) == 0
    rows = {
        r["matrix"]: r for r in json.loads((tmp_path / "v1_extrapolation.json").read_text())["rows"]
    }
    arc = rows["arc"]
    assert arc["ours"] == pytest.approx(13 / 3)  # three seeds of ours
    assert arc["best_peer"] == "aipw" and arc["best_candidate"] == pytest.approx(2.0)
    assert arc["anything_reaches_goal"] is False and arc["reliability"]["all_mae"] == 1.4
    assert 0.5 < arc["sampling_error"] < 10 and 0.0 <= arc["all_right_share"] < 1.0
    assert arc["default_true"] == {"extrapolation": None, "weak": default}
    # ARC's matrix mean says little about near-random models: a line through it, fitted on the
    # rest, reads the weakest fifth points too high
    assert arc["line_bias"]["weakest"] > 2 and abs(arc["line_bias"]["strongest"]) < 10
    gsm8k = rows["gsm8k"]
    assert gsm8k["anything_reaches_goal"] is True and gsm8k["best_candidate"] is None
    assert (
        "Out of reach at 50 items on these splits (no method"
        in (tmp_path / "v1_extrapolation.md").read_text()
    )


def test_default_bench_holds_out_the_strongest_and_the_weakest(shared_data):
    tool = tools_module("bench_v1_default")
    top = tool.split_of("winogrande", "extrapolation", 0, shared_data)
    assert top.target_truth.min() >= top.source_truth.max()
    assert top.target.n_models == round(0.2 * (top.target.n_models + top.source.n_models))
    bottom = tool.split_of("winogrande", "weak", 0, shared_data)
    assert bottom.target_truth.max() <= bottom.source_truth.min()


def test_default_bench_cases_average_over_seeds():
    tool = tools_module("bench_v1_default")
    rows = [
        {
            "matrix": "arc",
            "protocol": "weak",
            "budget": 50,
            "recipe": r,
            "mae": m,
            "bias": -m,
            "coverage": c,
            "width": 10.0,
        }
        for r, m, c in (("balanced+guarded", 1.0, 0.8), ("anchor_points+guarded", 3.0, 1.0))
    ]
    (case,) = tool.cases(rows)
    assert case["mae"] == 2.0 and case["coverage"] == pytest.approx(0.9) and case["seeds"] == 2
    assert case["recipes"] == ["anchor_points+guarded", "balanced+guarded"]
    info = {"command": "x", "minutes": 1.0, "load_average": [1.0, 1.0], "what": "W", "how": "H"}
    assert "| arc | weak | 50 | 2 | 2.00 ✗ | -2.00 | 0.90 | 10.0 |" in tool.markdown([case], info)


@pytest.mark.slow
def test_default_bench_builds_and_scores_one_split(shared_data):
    tool = tools_module("bench_v1_default")
    row = tool.measure((shared_data, "hellaswag", "extrapolation", 25, 0, None))
    assert row["n_targets"] > 500 and row["n_sources"] > 2000
    assert 0 < row["mae"] < 20 and 0.0 <= row["coverage"] <= 1.0 and row["width"] > 0
    assert row["recipe"].endswith(("+guarded", "+anchor_sum"))


def test_default_bench_builds_a_fixed_recipe(shared_data):
    """``--recipe``: no choice, the named method and estimator (kridge fits in seconds)."""
    tool = tools_module("bench_v1_default")
    row = tool.measure((shared_data, "hellaswag", "weak", 25, 0, "random+kridge"))
    assert row["recipe"] == "random+kridge" and 0 < row["mae"] < 30


def test_default_bench_refuses_a_recipe_without_its_estimator(capsys):
    tool = tools_module("bench_v1_default")
    with pytest.raises(SystemExit):
        tool.main(["--recipe", "balanced"])
    assert "--recipe must be METHOD+ESTIMATOR, got 'balanced'" in capsys.readouterr().err
