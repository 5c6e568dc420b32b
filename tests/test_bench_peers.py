"""tools/bench_peers.py: metrics taken from an earlier report: benchpred's, ours only when asked."""

from __future__ import annotations

import json

import pytest
from tools_support import tools_module


def test_a_rerun_of_ours_takes_benchpreds_metrics_from_the_earlier_report(shared_data, tmp_path):
    tool = tools_module("bench_peers")
    cells = tool.grid(["psn_bbh"], [0], [25], {"psn_bbh": 6511}, [0, 1])
    keys = [cell.key for cell in cells]
    aipw = {"mae": 4.2, "bias": 0.1, "tau": 1.0, "seconds": 0.01, "items": 25}
    earlier = {
        "cells": [
            {"key": keys[0], "n_targets": 2, "methods": {"aipw": aipw, "ours": {"mae": 9.9}}},
            {"key": keys[1], "n_targets": 3, "methods": {"aipw": aipw}},  # another split
        ]
    }
    path = tmp_path / "peers.json"
    path.write_text(json.dumps(earlier))
    reused = tool.earlier_metrics(path)
    assert set(reused[keys[0]]["methods"]) == {"aipw"}  # ours only when asked for
    cache = tool.Cache(tmp_path / "empty-cache")
    methods = [*tool.OURS, *tool.PEERS]
    rows = tool.collect(cells, methods, shared_data, cache, 1000, reused)
    by_key = {row["key"]: row for row in rows}
    assert by_key[keys[0]]["methods"] == {"aipw": aipw}
    assert by_key[keys[0]]["from_earlier"] == ["aipw"]
    assert by_key[keys[1]]["methods"] == {}  # a different number of targets: not the same cell
    assert all(not row["methods"] for row in rows[2:])
    without = tool.collect(cells, methods, shared_data, cache, 1000)
    assert all(not row["methods"] for row in without)


def test_ours_from_an_earlier_report_only_when_asked_and_said(shared_data, tmp_path):
    tool = tools_module("bench_peers")
    cells = tool.grid(["psn_bbh"], [0], [25], {"psn_bbh": 6511}, [0])
    ours = {"mae": 9.9, "coverage": 0.9, "width": 20.0}
    path = tmp_path / "peers.json"
    path.write_text(
        json.dumps({"cells": [{"key": cells[0].key, "n_targets": 2, "methods": {"ours": ours}}]})
    )
    kept = tool.earlier_metrics(path, tool.OURS)
    cache = tool.Cache(tmp_path / "empty-cache")
    rows = tool.collect(cells, [*tool.OURS, *tool.PEERS], shared_data, cache, 1000, kept)
    assert rows[0]["methods"] == {"ours": ours} and rows[0]["from_earlier"] == ["ours"]


def test_the_tiers_say_which_cells_each_method_runs():
    """Fast peers and ours everywhere; the medium tier on the whole current benchmarks' seeds
    0-2 only (the report compares methods on the seeds every one of them ran)."""
    tool = tools_module("bench_peers")
    cell = tool.Cell("musr", "all", "random", 50, 2)
    assert tool.runs_method("lasso", cell) and tool.runs_method("pca", cell)
    assert not tool.runs_method("lasso", tool.Cell("arc", "all", "random", 50, 0))
    assert not tool.runs_method("lasso", tool.Cell("musr", "all", "random", 50, 3))
    assert not tool.runs_method("lasso", tool.Cell("musr", "all", "weak", 50, 0))
    assert tool.runs_method("pca", tool.Cell("arc", "all", "weak", 50, 5))
    assert tool.runs_method("ours", tool.Cell("psn_bbh", "all", "random", 10, 9))


def test_the_report_says_where_each_tier_ran():
    report = tools_module("peers_report")
    info = {"tier_cells": tools_module("bench_peers").TIER_CELLS}
    assert report.tier_cells(info).startswith(" (fast: every cell; medium: the v2 matrices")
    assert report.tier_cells({}) == ""  # an earlier run's info, written before tiers were
    kept = report.kept_for({"ours_inside": ["arc", "musr"], "ours": ["psn_bbh"]})
    assert kept == "`ours_inside` on arc, musr; `ours` on psn_bbh"


def test_kept_groups_name_the_protocols_only_some_of_whose_cells_were_kept():
    tool = tools_module("peers_report")
    rows = [
        {"matrix": "arc", "protocol": "random", "from_earlier": []},
        {"matrix": "arc", "protocol": "extrapolation", "from_earlier": ["ours"]},
        {"matrix": "musr", "protocol": "random", "from_earlier": ["ours"]},
        {"matrix": "musr", "protocol": "extrapolation", "from_earlier": ["ours"]},
        {"matrix": "mmlu", "protocol": "random", "from_earlier": ["ours_inside"]},
    ]
    assert tool.kept_groups(rows, "ours") == ["arc (extrapolation)", "musr"]
    assert tool.kept_groups(rows, "ours_audit") == []


def test_an_unknown_protocol_is_refused_in_one_line(capsys):
    tool = tools_module("bench_peers")
    assert tool.parse_args(["--protocols", "random,weak"]).protocols == "random,weak"
    with pytest.raises(SystemExit):
        tool.parse_args(["--protocols", "random,wek"])
    assert "--protocols: unknown ['wek']" in capsys.readouterr().err


def test_head_to_head_counts_each_method_on_the_target_cases_it_ran():
    report = tools_module("peers_report")

    def mae(value):
        return {"mae": value}

    table = {
        ("a", "all", "random", 50): {"ours": mae(2.0), "aipw": mae(1.95), "lasso": mae(1.0)},
        ("a", "all", "extrapolation", 25): {"ours": mae(3.0), "aipw": mae(4.0)},
        ("a", "all", "random", 10): {"ours": mae(9.0), "aipw": mae(1.0)},  # not a target case
        ("a", "25", "random", 50): {"ours": mae(9.0), "aipw": mae(1.0)},  # nor this
        ("b", "all", "random", 100): {"ours": mae(1.0), "ours_inside": mae(0.1)},
    }
    rows = {line.split(" | ")[0]: line for line in report.head_to_head_lines(table)}
    # aipw: 2 target cases, ours within 0.1 of it in both (2.0 <= 2.05, 3.0 <= 4.1); best peer
    # of the second case only (lasso is the first's); ours' variants are not peers
    assert rows["| aipw"] == "| aipw | 2 | 2/2 (100 %) | 2.50 | 2.98 | 1 |"
    assert rows["| lasso"] == "| lasso | 1 | 0/1 (0 %) | 2.00 | 1.00 | 1 |"
    assert not any(key.startswith("| ours") for key in rows)
