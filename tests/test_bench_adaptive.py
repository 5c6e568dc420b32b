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


def test_a_merge_replaces_the_protocols_it_brings_and_keeps_the_others(tmp_path, monkeypatch):
    tool = tools_module("bench_adaptive")
    config = {"command": "python tools/bench_adaptive.py --a", "finished": "then"}
    config |= {"max_targets": 5, "repeats": 1, "seed": 0}
    saved = {"config": config, "results": {"mmlu": {"random": "r0", "weak": "w0"}}}
    (tmp_path / "adaptive.json").write_text(json.dumps(saved))
    other = tmp_path / "other.json"
    brought = {"mmlu": {"weak": "w1"}, "musr": {"weak": "m1"}}
    command = "python tools/bench_adaptive.py --b"
    later = dict(config, command=command, finished="now")
    other.write_text(json.dumps({"config": later, "results": brought}))
    written = {}
    monkeypatch.setattr(
        tool, "write_reports", lambda out, results, cfg: written.update(r=results, c=cfg)
    )
    assert tool.main(["--out", str(tmp_path), "--merge", str(other)]) == 0
    assert written["r"] == {"mmlu": {"random": "r0", "weak": "w1"}, "musr": {"weak": "m1"}}
    # which run made which rows: the earlier run keeps only what the later one did not bring
    assert written["c"]["runs"] == [
        {"command": config["command"], "finished": "then", "rows": {"mmlu": ["random"]}},
        {"command": command, "finished": "now", "rows": {"mmlu": ["weak"], "musr": ["weak"]}},
    ]
    note = tool.runs_note(written["c"])[0]
    assert "--a` (then): mmlu random / `python tools/bench_adaptive.py --b` (now)" in note
    assert note.endswith("mmlu weak; musr weak")
    assert tool.runs_note(config) == []  # one run: nothing to say


def test_each_benchmark_is_replayed_with_the_floor_of_its_shipped_pool():
    tool = tools_module("bench_adaptive")
    assert tool.pool_floor("mmlu") == 0.25 - 0.05  # four choices, given
    assert tool.pool_floor("ifeval") == 0.0  # generative: no chance levels, no floor above 0
