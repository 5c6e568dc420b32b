"""``reliability --methods adaptive``: adaptive testing beside static subsets on the same splits."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import kendalltau
from tools_support import tools_module

import lmeval_microbench.reliability.evaluate as evaluate_module
from lmeval_microbench.cli._options import ADAPTIVE_METHOD
from lmeval_microbench.cli.app import main
from lmeval_microbench.reliability import run_reliability
from lmeval_microbench.reliability.plan import ADAPTIVE
from lmeval_microbench.synthetic import random_item_params, simulate_responses

choose_default = tools_module("leaderboard_defaults").choose_default


@pytest.fixture(scope="module")
def run():
    """The records, and the pools they summarise: each target's truth, estimate and interval."""
    matrix, _ = simulate_responses(random_item_params(30, seed=4), 150, seed=5)
    pools: dict = {}
    real_plan = evaluate_module.evaluate_plan

    def keep_pools(*args, **kwargs):
        pools.update(real_plan(*args, **kwargs))
        return pools

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(evaluate_module, "evaluate_plan", keep_pools)
        result = run_reliability(
            matrix,
            matrix.mean_scores(),
            methods=("random", ADAPTIVE),
            estimators=("mean",),
            budgets=(5, 15, "all"),
            protocols=("random", "extrapolation"),
            repeats=2,
            progress=False,
        )
    return result.records, pools, matrix


@pytest.fixture(scope="module")
def records(run):
    return run[0]


def test_the_cli_and_the_library_name_adaptive_alike():
    assert ADAPTIVE == ADAPTIVE_METHOD


def test_adaptive_gets_a_record_per_protocol_and_numeric_budget(records):
    adaptive = [r for r in records if r["method"] == ADAPTIVE]
    assert {(r["protocol"], r["budget"]) for r in adaptive} == {
        (p, b) for p in ("random", "extrapolation") for b in (5, 15)
    }
    assert all(r["estimator"] == ADAPTIVE for r in adaptive)
    static = {(r["protocol"], r["budget"]): r for r in records if r["method"] == "random"}
    for r in adaptive:
        # the same held-out models as the static subset of that protocol and budget
        assert r["n_targets"] == static[(r["protocol"], r["budget"])]["n_targets"]
        assert math.isfinite(r["mae"]) and 0.0 <= r["coverage90"] <= 1.0


def test_adaptive_metrics_recomputed_from_the_targets(run):
    """MAE, coverage and Kendall tau of each adaptive record, recomputed with numpy/scipy from
    the truths, estimates and intervals of its targets (the truths: the targets' row means)."""
    records, pools, matrix = run
    row_means = np.nanmean(matrix.values, axis=1)
    adaptive = [r for r in records if r["method"] == ADAPTIVE]
    for r in adaptive:
        repeats = pools[(r["protocol"], ADAPTIVE, ADAPTIVE, r["budget"])].by_repeat()
        assert len(repeats) == 2 and all(len(rep[0]) == r["n_targets"] for rep in repeats)
        truth, value, lower, upper = (np.concatenate([rep[k] for rep in repeats]) for k in range(4))
        assert np.all(np.isclose(truth[:, None], row_means[None, :]).any(axis=1))
        assert r["mae"] == pytest.approx(100 * np.mean(np.abs(value - truth)))
        assert r["coverage90"] == pytest.approx(np.mean((lower <= truth) & (truth <= upper)))
        taus = [kendalltau(rep[1], rep[0]).statistic for rep in repeats]
        assert r["kendall_tau"] == pytest.approx(np.mean(taus))


def test_more_adaptive_items_give_a_smaller_error_on_random_splits(records):
    mae = {
        r["budget"]: r["mae"]
        for r in records
        if r["method"] == ADAPTIVE and r["protocol"] == "random"
    }
    assert mae[15] < mae[5]


def test_a_static_default_is_never_adaptive(records):
    rows = [dict(r, dataset="toy") for r in records]
    for r in rows:  # make adaptive look best everywhere
        if r["method"] == ADAPTIVE:
            r["mae"] = 0.0
    chosen = choose_default(rows, "toy", ())
    assert chosen is None or chosen["method"] != ADAPTIVE


def test_cli_runs_adaptive_and_rejects_unknown_methods(tmp_path, capsys):
    matrix, _ = simulate_responses(random_item_params(20, seed=6), 120, seed=7)
    matrix.to_parquet(tmp_path / "m.parquet")
    args = ["reliability", "--responses", str(tmp_path / "m.parquet"), "--estimators", "mean"]
    args += ["--budgets", "5", "--protocols", "random", "--repeats", "1", "--no-plots", "--quiet"]
    assert main([*args, "--methods", "random,adaptiv", "--out", str(tmp_path / "x.json")]) == 2
    assert "unknown selection method 'adaptiv'" in capsys.readouterr().err
    assert main([*args, "--methods", "adaptive", "--out", str(tmp_path / "r.json")]) == 0
    rows = json.loads((tmp_path / "r.json").read_text())
    assert [(r["method"], r["estimator"], r["budget"]) for r in rows] == [(ADAPTIVE, ADAPTIVE, 5)]
    assert "adaptive" in (tmp_path / "r.md").read_text()
