"""tools/bench_choice_rules.py: the rules beside each other, seed by seed, re-rendered from JSON."""

from __future__ import annotations

import json

import pytest
from tools_support import tools_module

from lmeval_microbench.auto import _cv


def row(method, estimator, cv, extrapolation, floor_cv=3.0, floor_ex=3.0):
    """A candidate row as ``choose_recipe`` records it (intervals held on both kinds)."""
    return {
        "method": method, "estimator": estimator, "budget": 25, "cv_mae": cv,
        "extrapolation_mae": extrapolation, "score": (cv + extrapolation) / 2,
        "diff_vs_floor": (cv + extrapolation - floor_cv - floor_ex) / 2, "diff_se": 0.1,
        "coverage90": 0.9, "extrapolation_coverage90": 0.95,
    }  # fmt: skip


def cell(key, maes):
    """Floor 3/3 on the folds; anchor points better on extrapolation folds, worse on random."""
    candidates = [row("balanced", "guarded", 3.0, 3.0), row("anchor_points", "guarded", 3.6, 2.0)]
    held_out = {name: {"mae": mae, "bias": 0.0, "coverage": 0.9} for name, mae in maes.items()}
    return {"key": key, "chosen": "anchor_points+guarded", "candidates": candidates,
            "held_out": held_out}  # fmt: skip


def test_variants_weigh_the_kinds_of_fold_differently():
    tool = tools_module("bench_choice_rules")
    rows = cell("arc/all/random/25/0", {})["candidates"]
    variants = tool.VARIANTS
    assert tool.variant_rule(rows, variants["lowest of extrapolation"]) == "anchor_points+guarded"
    # random folds alone, and the worse of the two kinds: the floor (3.0 < 3.6)
    assert tool.variant_rule(rows, variants["lowest of random"]) == "balanced+guarded"
    assert tool.variant_rule(rows, variants["lowest of max"]) == "balanced+guarded"
    # a tie with the floor goes to the floor
    tied = [row("balanced", "guarded", 3.0, 3.0), row("anchor_points", "guarded", 3.0, 3.0)]
    assert tool.variant_rule(tied, variants["lowest of 1:2"]) == "balanced+guarded"


def test_by_seed_averages_each_rules_picks_over_one_seeds_cells():
    tool = tools_module("bench_choice_rules")
    maes = {"balanced+guarded": 2.0, "anchor_points+guarded": 1.0}
    cells = [cell("arc/all/random/25/0", maes), cell("arc/all/random/50/0", maes)]
    flipped = {"balanced+guarded": 1.0, "anchor_points+guarded": 4.0}
    cells.append(cell("arc/all/random/25/2", flipped))
    seeds = tool.by_seed(cells)
    assert set(seeds) == {"0", "2"} and seeds["0"]["cells"] == 2 and seeds["2"]["cells"] == 1
    assert seeds["0"]["floor"] == pytest.approx(2.0) and seeds["0"]["lowest"] == pytest.approx(1.0)
    assert seeds["2"]["lowest"] == pytest.approx(4.0) and seeds["2"]["oracle"] == pytest.approx(1.0)
    assert set(tool.RULES) <= set(seeds["2"])


def test_report_only_re_renders_from_the_json_and_says_so(tmp_path):
    tool = tools_module("bench_choice_rules")
    maes = {"balanced+guarded": 2.0, "anchor_points+guarded": 1.0}
    info = {"command": "python tools/bench_choice_rules.py --jobs 2", "seconds": 10.0,
            "load_average": [0.5, 1.5]}  # fmt: skip
    (tmp_path / "choice_rules.json").write_text(
        json.dumps({"info": info, "cells": [cell("arc/all/random/25/0", maes)]})
    )
    peers = tmp_path / "peers.json"
    methods = {"ours": {"mae": 1.0}, "aipw": {"mae": 1.5}}
    peers.write_text(json.dumps({"cells": [{"key": "arc/all/random/25/0", "methods": methods}]}))
    args = ["--report-only", "--out", str(tmp_path), "--peers", str(peers)]
    assert tool.main(args) == 0
    text = (tmp_path / "choice_rules.md").read_text()
    assert "Written by `python tools/bench_choice_rules.py --jobs 2`" in text
    assert "re-rendered from its JSON by `python tools/bench_choice_rules.py --report-only" in text
    assert "## Seed by seed" in text and "| 0 | 1 |" in text
    report = json.loads((tmp_path / "choice_rules.json").read_text())
    assert report["against_peers"]["lowest"]["within"] == 1  # 1.0 against aipw's 1.5


@pytest.mark.slow
def test_extrapolation_repeats_draw_more_items_per_fold(shared_data, monkeypatch):
    """``--extrapolation-repeats``: each extrapolation fold is scored on that many item draws
    (25 sources: seconds); the code's own count is restored after the test."""
    tool = tools_module("bench_choice_rules")
    monkeypatch.setattr(_cv, "EXTRAPOLATION_REPEATS", _cv.EXTRAPOLATION_REPEATS)
    cell = tool.Cell("arc", "25", "extrapolation", 25, 0)
    splits = {}
    for repeats in (3, 4):
        found = tool.measure_cell((shared_data, cell, (), repeats))
        splits[repeats] = {row["splits"] for row in found["candidates"]}
    (three,), (four,) = splits[3], splits[4]
    assert four - three == 2  # two upward folds, one more draw each
