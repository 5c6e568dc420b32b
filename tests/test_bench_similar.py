"""tools/bench_similar.py and ``bench_choice_rules --paired``: the similar estimator measured."""

from __future__ import annotations

import json

import pytest
from tools_support import tools_module

from lmeval_microbench.auto import choice
from lmeval_microbench.auto._cv import Candidate


@pytest.mark.slow
def test_similar_is_built_scored_and_set_beside_the_peers(shared_data, tmp_path):
    tool = tools_module("bench_similar")
    key = "psn_bbh/all/random/25/0"
    peers = tmp_path / "peers.json"
    methods = {"ours": {"mae": 5.0, "coverage": 0.9}, "aipw": {"mae": 4.0},
               "random_sampling": {"mae": 6.0}, "lasso": {"mae": 3.5}}  # fmt: skip
    peers.write_text(json.dumps({"cells": [{"key": key, "methods": methods}]}))
    args = ["--data", str(shared_data), "--matrices", "psn_bbh", "--psn-seeds", "0"]
    assert tool.main([*args, "--peers", str(peers), "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "similar.json").read_text())
    # random and strongest fifth at 10/25/50/100 items, weakest fifth at 50
    assert len(report["cells"]) == 9
    assert sum(c["case"][2] == "weak" for c in report["cells"]) == 1
    for cell in report["cells"]:
        assert cell["mae"] > 0 and 0.0 <= cell["coverage"] <= 1.0 and cell["width"] > 0
    (case,) = [c for c in report["cases"] if c["case"] == ["psn_bbh", "all", "random", 25]]
    assert case["best_peer"] == "lasso" and case["best_peer_mae"] == 3.5
    assert case["aipw_mae"] == 4.0 and case["ours_mae"] == 5.0
    (group,) = report["summary"]  # only the case with peers counts
    assert group["group"] == "psn, random, all sources" and group["cases"] == 1
    assert "| psn_bbh | all | random | 25 | 1 |" in (tmp_path / "similar.md").read_text()


@pytest.mark.slow
def test_choice_rules_scores_a_paired_candidate(shared_data, monkeypatch):
    """``--paired balanced+similar``: the choice scores the extra candidate, and it is built
    and estimates the held-out models like every other (25 sources: seconds)."""
    tool = tools_module("bench_choice_rules")
    # the worker sets the module's list; the test restores it for the tests after it
    monkeypatch.setattr(choice, "PAIRED_CANDIDATES", choice.PAIRED_CANDIDATES)
    monkeypatch.setattr(choice, "DEFAULT_METHODS", choice.DEFAULT_METHODS)

    cell = tool.Cell("arc", "25", "random", 25, 0)
    found = tool.measure_cell((shared_data, cell, (Candidate("balanced", "similar"),), 3))
    assert any(row["estimator"] == "similar" for row in found["candidates"])
    assert found["held_out"]["balanced+similar"]["mae"] > 0
    assert Candidate("balanced", "similar") in choice.PAIRED_CANDIDATES
    # a method outside the default ones joins them, or its paired candidate would be dropped
    found = tool.measure_cell((shared_data, cell, (Candidate("lasso", "guarded"),), 3))
    assert sum(row["method"] == "lasso" for row in found["candidates"]) == 1  # not twice
    assert found["held_out"]["lasso+guarded"]["mae"] > 0 and "lasso" in choice.DEFAULT_METHODS
