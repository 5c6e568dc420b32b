"""tools/bench_adaptive_fit.py: adaptive runs read before and after the pool's person-fit
check, through the product's own functions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tools_support import tools_module

from lmeval_microbench.adaptive.pool import estimate_pool, posterior_estimate

CHANCE = 0.5  # the pool of the ``coin_flip_pool`` fixture (conftest.py)


def test_each_run_is_read_as_the_product_reads_it(coin_flip_pool):
    tool = tools_module("bench_adaptive_fit")
    pool, values, order = coin_flip_pool
    part = tool.read_runs(pool, values, order, 15)
    ids = pool.item_ids
    for k in (0, 25):
        scores = {ids[j]: float(values[k, j]) for j in order[k, :15]}
        before, _, _ = posterior_estimate(pool, scores)
        after = estimate_pool(pool, scores)
        assert [a[k] for a in part["raw"]] == [before.value, before.lower, before.upper]
        assert [a[k] for a in part["checked"]] == [after.value, after.lower, after.upper]
        assert part["guessing"][k] == bool(after.person_fit.get("guessing"))


def test_the_check_moves_only_runs_flagged_as_guessing_and_their_intervals_reach_chance(
    coin_flip_pool,
):
    tool = tools_module("bench_adaptive_fit")
    pool, values, order = coin_flip_pool
    part = tool.read_runs(pool, values, order, 20)
    raw, checked, guessing = part["raw"], part["checked"], part["guessing"]
    assert guessing[20:].mean() > guessing[:20].mean()  # the coin flips are the ones flagged
    for a, b in zip(raw, checked, strict=True):
        np.testing.assert_array_equal(a[~guessing], b[~guessing])
    assert np.all(checked[1][guessing] <= CHANCE) and np.all(checked[2][guessing] >= CHANCE)
    above = guessing & (raw[0] > CHANCE)
    assert above.any()
    assert np.all(checked[0][above] < raw[0][above])  # moved toward chance by P(guessing)


def test_merge_replaces_a_benchmarks_rows_and_keeps_the_others(tmp_path):
    tool = tools_module("bench_adaptive_fit")
    metrics = {"mae": 1.0, "bias": 0.0, "coverage": 0.9, "width": 5.0}

    def row(bm: str, protocol: str, mae: float) -> dict:
        return {
            "benchmark": bm, "protocol": protocol, "items": 10, "chance": "given",
            "targets": 5, "raw": {**metrics, "mae": mae}, "checked": metrics,
            "guessing": 0.0, "misfit": 0.0, "replay_gap": 0.0,
        }  # fmt: skip

    def report(path, rows, command):
        info = {"command": command, "seconds": 1.0, "load_average": "1", "max_targets": 5}
        path.mkdir()
        (path / "adaptive_fit.json").write_text(
            json.dumps({"info": {**info, "seed": 0}, "rows": rows})
        )
        return path / "adaptive_fit.json"

    out = tmp_path / "out"
    report(out, [row("musr", "weak", 1.0), row("arc", "weak", 2.0)], "python x.py --a")
    other = report(tmp_path / "b", [row("musr", "weak", 3.0)], "python x.py --b")
    tool.main(["--out", str(out), "--merge", str(other)])
    saved = json.loads((out / "adaptive_fit.json").read_text())
    assert [(r["benchmark"], r["raw"]["mae"]) for r in saved["rows"]] == [
        ("arc", 2.0),
        ("musr", 3.0),
    ]
    assert saved["info"]["command"] == "python x.py --a (+ --b)"
    tool.main(["--out", str(out), "--merge", str(other)])  # the same run again: named once
    assert json.loads((out / "adaptive_fit.json").read_text())["info"] == saved["info"]
    assert "| musr | weak | given | 10 | 5 | 3.00 → 1.00 |" in (out / "adaptive_fit.md").read_text()


@pytest.mark.slow
def test_a_musr_weak_cell_is_run_end_to_end(shared_data, tmp_path):
    tool = tools_module("bench_adaptive_fit")
    args = ["--shared", str(shared_data), "--benchmarks", "musr", "--protocols", "weak"]
    tool.main([*args, "--max-targets", "8", "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "adaptive_fit.json").read_text())["rows"]
    assert [(r["benchmark"], r["protocol"], r["items"], r["targets"]) for r in rows] == [
        ("musr", "weak", n, 8) for n in (10, 25, 50)
    ]
    assert all(r["chance"] == "given" and r["replay_gap"] < 1e-9 for r in rows)
    assert all(r["checked"]["width"] >= r["raw"]["width"] for r in rows)
