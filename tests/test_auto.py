"""``--method auto``: the recipe chosen by nested cross-validation, its record and its rule."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lmeval_microbench.auto import FALLBACK_CALIBRATED, FLOOR, Candidate, choose_recipe
from lmeval_microbench.auto._cv import Outcome
from lmeval_microbench.auto._rule import candidate_rows, pick
from lmeval_microbench.auto.choice import _pick_budget, default_candidates
from lmeval_microbench.auto.record import BudgetChoice
from lmeval_microbench.bundle import load_bundle
from lmeval_microbench.cli.app import main
from lmeval_microbench.errors import InputError
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.synthetic import random_item_params, simulate_responses

FAST = {"inner_repeats": 3, "outer_repeats": 2, "progress": False}


@pytest.fixture(scope="module")
def irt_matrix():
    """Items of varied difficulty and slope: informative selections can beat random ones."""
    matrix, _ = simulate_responses(random_item_params(60, seed=1), 60, seed=2)
    return matrix


@pytest.fixture(scope="module")
def exchangeable():
    """Every item alike (each model answers each with its own rate): the floor is optimal."""
    rng = np.random.default_rng(5)
    rate = rng.uniform(0.2, 0.9, size=40)
    values = (rng.random((40, 80)) < rate[:, None]).astype(float)
    ids = [f"item{k}" for k in range(80)]
    return ResponseMatrix(values, [f"m{k}" for k in range(40)], ids, source="exchangeable")


def test_choice_records_every_candidate_and_the_protocol(irt_matrix):
    choice = choose_recipe(
        irt_matrix,
        irt_matrix.mean_scores(),
        methods=["random", "dpp"],
        estimators=["mean", "kridge"],
        budgets=[10],
        **FAST,
    )
    record = json.loads(json.dumps(choice.as_record(), allow_nan=False))
    labels = {(c["method"], c["estimator"]) for c in record["candidates"]}
    assert labels == {
        ("random", "mean"), ("random", "kridge"), ("dpp", "mean"), ("dpp", "kridge"),
        (FLOOR.method, FLOOR.estimator),
    }  # fmt: skip
    assert all(c["cv_mae"] > 0 and c["status"] == "ok" for c in record["candidates"])
    assert sum(c["chosen"] for c in record["candidates"]) == 1
    chosen = record["chosen"]
    assert (chosen["method"], chosen["estimator"], chosen["budget"]) == (
        choice.method,
        choice.estimator,
        10,
    )
    protocol = record["protocol"]
    assert protocol["models_used"] == 60 and protocol["inner"]["splits"] == 3
    assert protocol["outer"]["splits"] == 2
    nested = record["nested"]["10"]
    assert nested["auto_mae"] > 0 and nested["floor_mae"] > 0 and sum(nested["picks"].values()) == 2
    assert any("candidate" in line for line in choice.table_lines())


def test_floor_is_chosen_when_the_target_is_the_mean_of_exchangeable_items(exchangeable):
    # random folds only: with every item alike no selection can do better than the floor's
    # random items on models like the sources (under extrapolation every calibrated mean is
    # biased, by amounts that differ); the plain mean may beat the floor's estimator there,
    # and may win
    choice = choose_recipe(
        exchangeable,
        exchangeable.mean_scores(),
        methods=[FLOOR.method, "anchor_points", "greedy"],
        estimators=["mean"],
        budgets=[10],
        inner_repeats=6,
        outer_repeats=0,
        progress=False,
        extrapolation=False,
    )
    assert choice.method == FLOOR.method and choice.estimator in {"mean", FLOOR.estimator}
    assert choice.protocol["outer"] is None


def _row(method, estimator, mae, diff, diff_se):
    return {
        "method": method,
        "estimator": estimator,
        "cv_mae": mae,
        "score": mae,
        "diff_vs_floor": diff,
        "diff_se": diff_se,
    }


def test_rule_keeps_the_lowest_score_and_gives_ties_to_the_floor():
    floor_row = _row(FLOOR.method, FLOOR.estimator, 5.0, 0.0, 0.0)
    near = [floor_row, _row("anchor_points", "guarded", 4.8, -0.2, 0.3)]
    assert pick(near, FLOOR) == Candidate("anchor_points", "guarded")
    tie = [_row("anchor_points", "guarded", 5.0, 0.0, 0.3), floor_row]
    assert pick(tie, FLOOR) == FLOOR
    worse = [floor_row, _row("anchor_points", "guarded", 5.2, 0.2, 0.3)]
    assert pick(worse, FLOOR) == FLOOR
    assert pick([_row(FLOOR.method, FLOOR.estimator, None, None, None)], FLOOR) is None


def test_a_candidate_whose_intervals_missed_on_the_folds_does_not_compete():
    """bench/peers.md: greedy + kridge won MuSR's extrapolation cells on error with its
    intervals covering 0.41-0.56 of the strongest models."""
    floor_row = {**_row(FLOOR.method, FLOOR.estimator, 5.0, 0.0, 0.0), "coverage90": 0.9}
    better = _row("greedy", "kridge", 3.0, -2.0, 0.1)
    low = {**better, "coverage90": 0.92, "extrapolation_coverage90": 0.21}
    assert pick([floor_row, low], FLOOR) == FLOOR
    held = {**better, "coverage90": 0.85, "extrapolation_coverage90": 0.83}
    assert pick([floor_row, held], FLOOR) == Candidate("greedy", "kridge")
    no_extrapolation = {**better, "coverage90": 0.88, "extrapolation_coverage90": None}
    assert pick([floor_row, no_extrapolation], FLOOR) == Candidate("greedy", "kridge")


def test_choice_for_models_like_the_sources_validates_on_random_folds_with_guarded_only(
    irt_matrix,
):
    choice = choose_recipe(
        irt_matrix,
        irt_matrix.mean_scores(),
        methods=["random", "dpp"],
        budgets=[10],
        extrapolation=False,
        **{**FAST, "outer_repeats": 0},
    )
    record = choice.as_record()
    assert {c["estimator"] for c in record["candidates"]} == {"guarded"}
    assert record["protocol"]["inner"]["extrapolation_folds"] == 0
    assert all(c["extrapolation_mae"] is None for c in record["candidates"])


def test_failed_candidates_are_recorded_not_scored():
    table = {(FLOOR, 5): Outcome(), (Candidate("dpp", "irt"), 5): Outcome(failure="too few")}
    truth = np.array([0.5, 0.6])
    table[(FLOOR, 5)].add(truth, truth + 0.01, truth - 0.1, truth + 0.1)
    rows = candidate_rows(table, [FLOOR, Candidate("dpp", "irt")], 5, FLOOR)
    assert rows[-1]["status"] == "failed: too few" and rows[-1]["cv_mae"] is None
    assert pick(rows, FLOOR) == FLOOR


def test_target_mae_picks_the_smallest_sufficient_budget(irt_matrix):
    choice = choose_recipe(
        irt_matrix,
        irt_matrix.mean_scores(),
        methods=["random"],
        estimators=["mean"],
        budgets=[5, 15, 40],
        target_mae=0.01,
        inner_repeats=3,
        outer_repeats=0,
        progress=False,
    )
    assert choice.budget == 40 and "no budget" in choice.notes[0]
    maes = {b: c.cv_mae for b, c in choice.per_budget.items()}
    assert maes[5] > maes[15] > maes[40]
    assert _pick_budget(choice.per_budget, maes[15] + 1e-9) == (15, "")
    assert _pick_budget(choice.per_budget, maes[5] + 1e-9) == (5, "")


def test_pick_budget_takes_the_first_budget_within_target():
    rows = {
        b: [_row(FLOOR.method, FLOOR.estimator, mae, 0.0, 0.0)] for b, mae in ((10, 6.0), (25, 3.0))
    }
    per_budget = {b: BudgetChoice(b, FLOOR, r) for b, r in rows.items()}
    assert _pick_budget(per_budget, 4.0)[0] == 25
    assert _pick_budget(per_budget, 7.0)[0] == 10
    assert _pick_budget(per_budget, None)[0] == 25


def test_default_candidates_drop_stratified_without_strata(irt_matrix):
    candidates, notes = default_candidates(None, ["mean"], irt_matrix)
    assert "stratified" not in {c.method for c in candidates}
    assert any("stratified" in n for n in notes)
    named, _ = default_candidates(["stratified"], ["mean"], irt_matrix)
    assert named == [Candidate("stratified", "mean")]


def test_supervised_selections_are_tried_only_for_models_like_the_sources(irt_matrix):
    default, _ = default_candidates(None, ["guarded"], irt_matrix)
    inside, _ = default_candidates(None, ["guarded"], irt_matrix, extrapolation=False)
    assert {c.method for c in inside} - {c.method for c in default} == {"greedy", "dpp"}
    # every like-sources candidate widens beyond the sources: no anchor points' own sum
    unnamed, _ = default_candidates(None, None, irt_matrix, extrapolation=False)
    assert {c.estimator for c in unnamed} == {"guarded"}
    assert Candidate("anchor_points", "anchor_sum") in default_candidates(None, None, irt_matrix)[0]
    # a method the user names is tried whatever the folds
    named, _ = default_candidates(["greedy"], ["guarded"], irt_matrix)
    assert named == [Candidate("greedy", "guarded")]


def test_under_ten_models_beyond_a_folds_least_keep_the_floor_without_choosing(irt_matrix):
    # 15 models whose truth is the matrix mean: folds could be cut, but on three or four
    # models each they choose by luck (bench/small_sources.md), so the floor stands
    small = irt_matrix.select_models(irt_matrix.model_ids[:15])
    choice = choose_recipe(small, small.mean_scores(), budgets=[10], progress=False)
    assert (choice.method, choice.estimator) == (FLOOR.method, FLOOR.estimator)
    assert "too few to choose a recipe on" in choice.notes[0]
    assert choice.as_record()["candidates"] == []
    named = choose_recipe(
        small,
        small.mean_scores(),
        budgets=[10],
        floor=Candidate("random", "guarded"),
        progress=False,
    )
    assert (named.method, named.estimator) == ("random", "guarded")
    twenty = irt_matrix.select_models(irt_matrix.model_ids[:20])
    chosen = choose_recipe(twenty, twenty.mean_scores(), budgets=[10], progress=False)
    assert chosen.as_record()["candidates"]
    # where the truth is another score a fold trains on 20 (a calibration line): the margin
    # of 10 models counts from there
    scored = irt_matrix.select_models(irt_matrix.model_ids[:25])
    kept = choose_recipe(scored, scored.mean_scores() * 0.5 + 0.1, budgets=[10], progress=False)
    assert (kept.method, kept.estimator) == (FLOOR.method, FLOOR.estimator)
    assert "beyond the 20 a fold trains on" in kept.notes[0]
    thirty = irt_matrix.select_models(irt_matrix.model_ids[:30])
    runs = choose_recipe(thirty, thirty.mean_scores() * 0.5 + 0.1, budgets=[10], progress=False)
    assert runs.as_record()["candidates"]


def test_too_few_models_to_choose_fall_back_to_a_recipe_that_needs_no_choice(irt_matrix):
    # 15 models whose truth is not the matrix mean: folds would leave fewer than the 20
    # sources a calibration line needs, so nothing is cross-validated
    small = irt_matrix.select_models(irt_matrix.model_ids[:15])
    choice = choose_recipe(small, small.mean_scores() * 0.5 + 0.1, budgets=[5], progress=False)
    assert (choice.method, choice.estimator) == (
        FALLBACK_CALIBRATED.method,
        FALLBACK_CALIBRATED.estimator,
    )
    assert "too few to cross-validate" in choice.notes[0]
    record = json.loads(json.dumps(choice.as_record(), allow_nan=False))
    assert record["chosen"]["cv_mae"] is None and record["candidates"] == []


def test_fewer_models_than_any_estimator_needs_is_a_clear_error(irt_matrix):
    tiny = irt_matrix.select_models(irt_matrix.model_ids[:9])
    with pytest.raises(InputError, match="9 models have responses and scores; a bundle needs"):
        choose_recipe(tiny, tiny.mean_scores(), budgets=[5], progress=False)


# ---------------------------------------------------------------------------- CLI
@pytest.fixture(scope="module")
def matrix_file(irt_matrix, tmp_path_factory):
    path = tmp_path_factory.mktemp("auto") / "matrix.parquet"
    irt_matrix.select_models(irt_matrix.model_ids[:30]).to_parquet(path)
    return path


def test_cli_build_method_auto_writes_the_record(matrix_file, tmp_path, capsys):
    out = tmp_path / "bundle"
    argv = [
        "build",
        "--responses",
        str(matrix_file),
        "--method",
        "auto",
        "--budget",
        "8",
        "--benchmark",
        "toy",
        "--estimators",
        "mean,kridge",
        "--nested-folds",
        "2",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    bundle = load_bundle(out)
    record = bundle.reliability["auto"]
    assert record["chosen"]["method"] == bundle.subset.method
    assert record["chosen"]["estimator"] == bundle.default_estimator
    assert {c["estimator"] for c in record["candidates"]} == {"mean", "kridge", FLOOR.estimator}
    assert record["protocol"]["models_used"] == 30
    err = capsys.readouterr().err
    assert "| candidate | score | random folds | extrapolation |" in err and "nested CV" in err


def test_cli_build_for_models_like_the_sources(matrix_file, tmp_path):
    out = tmp_path / "bundle"
    argv = ["build", "--responses", str(matrix_file), "--budget", "8", "--benchmark", "toy"]
    argv += ["--method", "dpp", "--default-estimator", "auto", "--new-models", "like-sources"]
    assert main([*argv, "--out", str(out)]) == 0
    record = load_bundle(out).reliability["auto"]
    assert record["protocol"]["inner"]["extrapolation_folds"] == 0
    assert {c["estimator"] for c in record["candidates"]} == {"guarded"}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--budget", "auto", "--target-mae", "-1"], "target MAE"),
        (["--budget", "auto"], "--budget auto needs --target-mae"),
        (["--budget", "8", "--target-mae", "2"], "pass it with --budget auto"),
        (["--budget", "8", "--method", "nope"], "unknown selection method 'nope'"),
        (["--budget", "8", "--default-estimator", "nope"], "unknown estimator 'nope'"),
        (
            [
                *("--budget", "8", "--method", "dpp", "--default-estimator", "kridge"),
                *("--new-models", "like-sources"),
            ],
            "nothing is chosen",
        ),
    ],
)
def test_cli_bad_auto_values_fail_before_any_work(tmp_path, capsys, extra, message):
    missing = tmp_path / "no_such_matrix.parquet"  # never read: the options fail first
    argv = [
        "build",
        "--responses",
        str(missing),
        "--benchmark",
        "toy",
        "--out",
        str(tmp_path / "b"),
    ]
    argv += extra
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "no_such_matrix" not in err


def test_splits_the_floor_cannot_be_fitted_on_are_left_out_for_every_candidate(flat_below):
    source, score = flat_below  # the fold trained on the weaker half has no scale map
    choice = choose_recipe(source, score, budgets=[20], seed=0, **FAST)
    record = choice.as_record()
    assert record["protocol"]["dropped_splits"]["20"] > 0
    assert any("hardly moves" in note for note in record["notes"])
    chosen = next(c for c in record["candidates"] if c["chosen"])
    assert chosen["status"] == "ok" and chosen["extrapolation_mae"] is not None


def test_a_floor_that_fails_on_every_split_is_refused_with_the_reason(flat_everywhere):
    source, score = flat_everywhere
    with pytest.raises(InputError, match=r"failed on every split: .*the matrix mean hardly moves"):
        choose_recipe(source, score, budgets=[20], seed=0, **FAST)
