"""tools/bench_adaptive.py: which matrix and which static recipe each benchmark is read with."""

from __future__ import annotations

import json

import numpy as np
from tools_support import tools_module


def test_v2_benchmarks_are_whole_matrices_beside_their_shipped_micro_task(shared_data):
    tool = tools_module("bench_adaptive")
    matrix, truth, recipe = tool.load_benchmark(shared_data, "musr")
    assert matrix.values.shape == (348, 756)
    np.testing.assert_allclose(truth, matrix.values.mean(axis=1))  # the whole benchmark's score
    shipped = json.loads((tool.V2_TASKS / "musr" / "bundle.json").read_text())
    assert recipe["method"] == shipped["subset"]["method"]
    assert recipe["budget"] == len(shipped["subset"]["items"])
    assert recipe["estimator"] == shipped["default_estimator"] and not recipe["all_items"]


def test_v1_benchmarks_keep_their_recipe_from_bench_defaults(shared_data):
    tool = tools_module("bench_adaptive")
    matrix, truth, recipe = tool.load_benchmark(shared_data, "hellaswag")
    defaults = json.loads((tool.REPO / "bench" / "defaults.json").read_text())["benchmarks"]
    assert recipe == defaults["hellaswag"]
    assert matrix.n_items == 58 and truth.size == matrix.n_models
    assert not np.isnan(matrix.values).any()
