"""tools/bench_peers.py: metrics taken from an earlier report: benchpred's, ours only when asked."""

from __future__ import annotations

import json

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
