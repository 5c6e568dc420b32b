"""Helpers of tools/bench_reliability.py on synthetic data (the full run is the tool's job)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tools_support import tools_module

from lmeval_microbench.errors import InputError
from lmeval_microbench.estimators import make_estimator
from lmeval_microbench.estimators._fitting import MIN_CALIBRATION_MODELS, MIN_SOURCE_MODELS
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection.base import Subset
from lmeval_microbench.synthetic import random_item_params, simulate_responses

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location(
        "bench_reliability", REPO / "tools" / "bench_reliability.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def partial_benchmark():
    """200 models x 60 of 200 items; truth = the mean over all 200 (like the B matrices)."""
    params = random_item_params(200, seed=5)
    full, _ = simulate_responses(params, 200, seed=6)
    matrix = full.select_items(full.item_ids[:60])
    return matrix, full.mean_scores()


# ---------------------------------------------------------------------- ridge baseline
def test_ridge_with_a_tiny_penalty_is_least_squares(tool):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2, size=(80, 6)).astype(float)
    y = rng.normal(size=80)
    intercept, coef, alpha = tool.ridge_gcv(x, y, alphas=np.array([1e-10]))
    design = np.column_stack([np.ones(80), x])
    expected = np.linalg.lstsq(design, y, rcond=None)[0]
    assert alpha == 1e-10
    np.testing.assert_allclose([intercept, *coef], expected, atol=1e-7)


def test_ridge_gcv_fits_signal_and_shrinks_noise(tool):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 2, size=(400, 30)).astype(float)
    weights = rng.uniform(0, 1, size=30)
    signal = x @ weights / weights.sum()
    intercept, coef, _ = tool.ridge_gcv(x, signal + rng.normal(0, 0.01, size=400))
    fresh = rng.integers(0, 2, size=(200, 30)).astype(float)
    error = tool.ridge_predict(intercept, coef, fresh) - fresh @ weights / weights.sum()
    assert np.mean(np.abs(error)) < 0.005
    noise = rng.normal(0.5, 0.1, size=400)
    intercept, coef, alpha = tool.ridge_gcv(x, noise)
    assert alpha > 10 and np.std(x @ coef) < 0.2 * np.std(noise)


def test_ridge_cv_errors_shrink_with_more_items(tool, partial_benchmark):
    matrix, truth = partial_benchmark
    every = tool.ridge_cv(matrix.values, truth, seed=0)
    few = tool.ridge_cv(matrix.values, truth, n_items=8, seed=0)
    assert every["items"] == 60 and few["items"] == 8 and every["models"] == 200
    assert every["mae"] < few["mae"]
    constant = np.mean(np.abs(truth - truth.mean())) * 100
    assert few["mae"] < constant  # 8 items still beat predicting the mean


def test_ridge_cv_needs_a_complete_matrix(tool):
    values = np.array([[1.0, np.nan], [0.0, 1.0]] * 10)
    with pytest.raises(InputError, match="missing responses"):
        tool.ridge_cv(values, np.linspace(0, 1, 20))


# ---------------------------------------------------------------------- anchors from files
def test_metabench_own_error_reads_test_rows_only(tool, tmp_path):
    path = tmp_path / "x_B_scores.csv"
    pd.DataFrame(
        {
            "model": ["a", "b", "c", "d"],
            "split": ["train", "test", "test", "val"],
            "full_score_metabench": [50.0, 60.0, 70.0, 40.0],
            "pred_from_subset_irt": [90.0, 61.0, 67.0, 10.0],
        }
    ).to_csv(path, index=False)
    result = tool.metabench_own_error(path)
    assert result == {"mae": 2.0, "rmse": pytest.approx(math.sqrt(5.0)), "n": 2}
    assert tool.metabench_own_error(tmp_path / "absent.csv") is None
    pd.DataFrame({"model": ["a"], "split": ["test"]}).to_csv(path, index=False)
    with pytest.raises(InputError, match="full_score_metabench"):
        tool.metabench_own_error(path)


def _write_matrix(path: Path, models: list[str], n_items: int, prefix: str) -> ResponseMatrix:
    values = np.arange(len(models) * n_items).reshape(len(models), n_items) % 2
    matrix = ResponseMatrix(values, models, [f"{prefix}.{k}" for k in range(n_items)])
    path.parent.mkdir(parents=True, exist_ok=True)
    matrix.to_parquet(path)
    return matrix


def test_openllm_truth_is_joined_by_model_in_percent(tool, tmp_path):
    _write_matrix(tmp_path / "responses" / "arc_B.parquet", ["m1", "m2", "m3"], 4, "arc")
    (tmp_path / "scores").mkdir()
    pd.DataFrame(
        {"model": ["m3", "m1", "other"], "split": "train", "full_score_metabench": [80, 20, 5]}
    ).to_csv(tmp_path / "scores" / "arc_B_scores.csv", index=False)
    matrix, truth, note = tool.load_openllm(tmp_path, "arc")
    assert matrix.model_ids == ("m1", "m3")
    np.testing.assert_allclose(truth, [0.2, 0.8])
    assert "1 matrix models without it left out" in note


def test_hellaswag_truth_comes_from_the_leaderboard(tool, tmp_path):
    _write_matrix(tmp_path / "responses" / "hellaswag_B.parquet", ["m1", "m2"], 3, "hellaswag")
    pd.DataFrame({"name": ["m2", "m1"], "hellaswag": [85.5, float("nan")]}).to_csv(
        tmp_path / "open-llm-leaderboard.csv", index=False
    )
    matrix, truth, note = tool.load_openllm(tmp_path, "hellaswag")
    assert matrix.model_ids == ("m2",) and truth.tolist() == [0.855]
    assert "open-llm-leaderboard.csv" in note


def test_psn_block_ids_name_their_column_and_truth_is_the_block_mean(tool, tmp_path):
    values = np.array([[1, 0, 1, 1, 0], [0, 0, 1, 0, 1], [1, 1, 1, 1, 1]])
    pd.DataFrame(values).to_csv(tmp_path / "combine.csv", header=False, index=False)
    pd.DataFrame(
        {
            "benchmark": ["A", "BBH"],
            "start_col": [0, 2],
            "n_items": [2, 3],
            "end_col_exclusive": [2, 5],
        }
    ).to_csv(tmp_path / "column_segments_inferred.csv", index=False)
    matrix, truth, _ = tool.load_psn_block(tmp_path, "BBH")
    assert matrix.item_ids == ("psn.bbh.2", "psn.bbh.3", "psn.bbh.4")
    np.testing.assert_allclose(truth, [2 / 3, 2 / 3, 1.0])
    with pytest.raises(InputError, match="'MMLU' listed 0 times"):
        tool.load_psn_block(tmp_path, "MMLU")


# ---------------------------------------------------------------------- combinations
def test_own_estimators_are_whatever_is_registered_beyond_the_published(tool):
    assert tool.own_estimators(["mean", "calibrated", "ridge", "stacked"]) == ("ridge", "stacked")
    assert tool.preferred_estimators(()) == ("calibrated",)
    combos = tool.openllm_combos(["random", "anchor_points", "greedy"], ("ridge",))
    assert combos == {
        "random": ("calibrated", "ridge", "mean"),
        "anchor_points": ("calibrated", "ridge", "anchor"),
        "greedy": ("calibrated", "ridge"),
    }
    assert tool.role_of("anchor_points", "anchor") == "Anchor Points"
    assert tool.role_of("dpp", "ridge") == "grid"


def test_psn_without_irt_keeps_only_irt_free_pairs(tool):
    combos = tool.psn_combos((), irt=False)
    assert "tinybenchmarks" not in combos and "metabench" not in combos
    assert all(not tool.needs_irt(e) for names in combos.values() for e in names)
    with_irt = tool.psn_combos((), irt=True)
    assert with_irt["tinybenchmarks"] == ("gpirt",) and "calibrated" in with_irt["random"]


# ---------------------------------------------------------------------- summary and defaults
def _record(protocol, method, estimator, budget, mae, mdad=2.0, dataset="arc", items=None):
    return {
        "dataset": dataset,
        "protocol": protocol,
        "method": method,
        "estimator": estimator,
        "budget": budget,
        "items": items or (100 if budget == "all" else budget),
        "mae": mae,
        "mdad": mdad,
        "role": "grid",
    }


def test_default_is_the_smallest_budget_good_under_both_protocols(tool):
    records = [
        # 25 items: fine on random splits, falls apart on stronger models
        _record("random", "greedy", "calibrated", 25, 1.4),
        _record("extrapolation", "greedy", "calibrated", 25, 4.0),
        _record("random", "dpp", "calibrated", 50, 1.45),
        _record("extrapolation", "dpp", "calibrated", 50, 2.0),
        _record("random", "anchor_points", "anchor", 50, 1.3),
        _record("extrapolation", "anchor_points", "anchor", 50, 1.95),
        _record("random", "all", "calibrated", "all", 1.2),
        _record("extrapolation", "all", "calibrated", "all", 1.8),
        _record("random", "all", "ridge_items", "all", 0.5),  # baselines are no candidates
        _record("extrapolation", "all", "ridge_items", "all", 0.5),
    ]
    chosen = tool.choose_default(records, "arc", ("calibrated",))
    assert (chosen["method"], chosen["estimator"], chosen["budget"]) == ("dpp", "calibrated", 50)
    assert chosen["eligible"] and chosen["thresholds_mae"] == {"random": 1.5, "extrapolation": 2.25}
    chosen = tool.choose_default(records, "arc", ("anchor",))
    assert chosen["method"] == "anchor_points"
    only_all = [r for r in records if r["budget"] == "all" and r["estimator"] != "ridge_items"]
    chosen = tool.choose_default(only_all, "arc", ("calibrated",))
    assert chosen == chosen | {"method": "random", "budget": 100, "all_items": True}
    assert tool.choose_default(records, "gsm8k", ("calibrated",)) is None
    tied = [_record(p, "all", e, "all", 1.0) for p in ("random", "extrapolation")
            for e in ("anchor", "mean")]  # fmt: skip
    assert tool.choose_default(tied, "arc", ("calibrated",))["estimator"] == "mean"


def test_mdad_cut_handles_never(tool):
    assert tool.mdad_cut(2.0, 4.0) == pytest.approx(0.5)
    assert tool.mdad_cut(3.0, math.inf) == 1.0
    assert tool.mdad_cut(math.inf, 3.0) is None
    assert tool.mdad_cut(None, 3.0) is None


def test_summary_marks_targets_met_and_missed(tool):
    records = [
        _record("random", "random", "mean", 50, 2.0, mdad=4.0),
        _record("random", "random", "calibrated", 50, 1.6, mdad=3.5),
        _record("random", "metabench", "calibrated", 50, 1.4, mdad=2.5),
        _record("random", "all", "calibrated", "all", 1.1, mdad=2.0),
    ]
    [row] = tool.summary_rows(records, ["arc"])
    assert row["best50"]["method"] == "metabench" and row["target_mae50"] == "met"
    assert row["target_mae_all"] == "missed" and row["mae_all"] == 1.1
    assert row["mdad_cut"] == pytest.approx(0.375) and row["target_mdad"] == "met"
    lines = tool.target_lines([row])
    assert "**missed** on 1 of 1: arc random (1.10)" in lines[0]
    assert lines[1].endswith("**met**.")


# ---------------------------------------------------------------------- end to end
def test_evaluate_dataset_runs_the_chosen_pairs_and_the_ridge_baseline(tool, partial_benchmark):
    matrix, truth = partial_benchmark
    dataset = tool.Dataset(
        "synthetic",
        matrix,
        truth,
        "mean over 200 items",
        ("random", "extrapolation"),
        {"random": ("mean",), "stratified": ("anchor",)},
        (10, "all"),
        ridge=True,
    )
    records, info = tool.evaluate_dataset(
        dataset, repeats={"random": 2, "extrapolation": 1}, progress=False
    )
    keys = {(r["protocol"], r["method"], r["estimator"], r["budget"]) for r in records}
    for protocol in ("random", "extrapolation"):
        assert {
            (protocol, "random", "mean", 10),
            (protocol, "stratified", "anchor", 10),
            (protocol, "all", "mean", "all"),
            (protocol, "all", "anchor", "all"),
            (protocol, "all", "ridge_items", "all"),
        } <= keys
        assert (protocol, "random", "anchor", 10) not in keys
    ridge = next(r for r in records if r["estimator"] == "ridge_items")
    assert math.isnan(ridge["coverage90"]) and ridge["role"].startswith("baseline")
    assert info["irt_fits"] == 0 and info["repeats"] == {"random": 2, "extrapolation": 1}
    assert all(r["n_targets"] == 40 for r in records)


# ---------------------------------------------------------------------- few source models
def _whole_benchmark(n_models: int) -> tuple[ResponseMatrix, Subset]:
    params = random_item_params(50, seed=8)
    matrix, _ = simulate_responses(params, n_models, seed=9)
    ids = matrix.item_ids[:10]
    return matrix, Subset(ids, np.full(10, 0.1), "random")


def test_few_source_models_fall_back_to_no_calibration(tool):
    assert MIN_SOURCE_MODELS <= 11 < MIN_CALIBRATION_MODELS  # the psn loo splits
    matrix, subset = _whole_benchmark(12)
    with pytest.warns(UserWarning, match="no calibration line"):
        estimator = make_estimator("mean").fit(matrix, subset, matrix.mean_scores())
    assert estimator.calibration == "none"
    value, lower, upper = estimator.estimate_matrix(matrix)
    subset_mean = matrix.select_items(subset.item_ids).mean_scores()
    np.testing.assert_allclose(value, subset_mean)
    assert np.all((lower <= value) & (value <= upper))


def test_few_source_models_need_the_matrix_mean_as_target(tool):
    matrix, subset = _whole_benchmark(12)
    shifted = np.clip(matrix.mean_scores() * 0.5 + 0.3, 0, 1)
    with pytest.raises(InputError, match="calibration line needs at least 20"):
        make_estimator("mean").fit(matrix, subset, shifted)
    small, subset = _whole_benchmark(MIN_SOURCE_MODELS - 1)
    with pytest.raises(InputError, match=f"at least {MIN_SOURCE_MODELS} are needed"):
        make_estimator("mean").fit(small, subset, small.mean_scores())


def test_a_rerun_keeps_defaults_json_and_names_where_its_choice_differs(tool, tmp_path):
    kept_defaults_note = tools_module("leaderboard_report").kept_defaults_note

    recipe = {"method": "greedy", "estimator": "kridge", "budget": 100}
    chosen = {**recipe, "budget": 50, "random_mae": 1.39, "extrapolation_mae": 1.59}
    note = kept_defaults_note({"wino": chosen, "arc": None}, {"wino": recipe})
    assert "It differs on:" in note[0]
    assert note[2].startswith("- wino: kept greedy + kridge at 100 items; this run's rule picks")
    same = kept_defaults_note({"wino": {**chosen, "budget": 100}}, {"wino": recipe})
    assert same[0].endswith("it agrees on every benchmark.") and len(same) == 2
    assert kept_defaults_note({"wino": chosen}, None) == []  # nothing kept: nothing to say

    (tmp_path / "defaults.json").write_text('{"benchmarks": {"wino": {"budget": 100}}}')
    for folder in ("openllm_v1", "psn_irt"):  # parsing needs the folders, not their data
        (tmp_path / "data" / folder).mkdir(parents=True)
    args = ["--shared", str(tmp_path / "data"), "--out-dir", str(tmp_path), "--benchmarks", "arc"]
    assert tool.kept_defaults(tool.parse_args(args)) == {"wino": {"budget": 100}}
    chosen_config = tool.parse_args([*args, "--choose-defaults"])
    assert tool.kept_defaults(chosen_config) is None


def test_jobs_change_how_the_report_runs_not_where_it_goes(tool, tmp_path):
    """``--jobs`` and ``--choose-defaults`` leave a run the full default one (written to
    ``bench/``); any option that changes the numbers sends it to a temporary folder."""
    assert tool.changes_numbers([]) == []
    assert tool.changes_numbers(["--jobs", "2", "--choose-defaults"]) == []
    assert tool.changes_numbers(["--jobs=2"]) == []
    assert tool.changes_numbers(["--jobs", "2", "--quick"]) == ["--quick"]
    assert tool.changes_numbers(["--repeats", "2", "--jobs", "3"]) == ["--repeats", "2"]
    for folder in ("openllm_v1", "psn_irt"):  # parsing needs the folders, not their data
        (tmp_path / "data" / folder).mkdir(parents=True)
    data = ["--shared", str(tmp_path / "data")]
    assert tool.parse_args([*data, "--jobs", "2"]).jobs == 2
    with pytest.raises(SystemExit):
        tool.parse_args([*data, "--jobs", "0"])
