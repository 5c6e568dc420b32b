"""The interval factor of ``--method auto``: measured on its folds, stored in the band, applied
by ``build`` to the chosen recipe only."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lmeval_microbench._conformal import ConformalBand, fit_band
from lmeval_microbench.auto import FLOOR, choose_recipe
from lmeval_microbench.auto._cv import EXTRAPOLATION, Outcome, exceedance_ratios
from lmeval_microbench.auto.record import BudgetChoice, RecipeChoice
from lmeval_microbench.auto.widen import SHRINK_MODELS, fold_widen, widen_interval
from lmeval_microbench.build import build_bundle, choice_widen
from lmeval_microbench.bundle import load_bundle, save_bundle
from lmeval_microbench.errors import InputError
from lmeval_microbench.estimators import estimator_from_state
from lmeval_microbench.synthetic import random_item_params, simulate_responses


def test_ratios_take_the_half_width_on_the_side_of_the_truth() -> None:
    value = np.array([0.5, 0.5, 0.5, 0.5, 0.5])
    lower = np.array([0.4, 0.4, 0.5, 0.5, 0.3])
    upper = np.array([0.7, 0.7, 0.5, 0.5, 0.6])
    truth = np.array([0.8, 0.3, 0.6, 0.5, 0.5])
    # above: 0.3 / 0.2; below: 0.2 / 0.1; zero width and an error: inf; no error: 0
    assert exceedance_ratios(truth, value, lower, upper) == pytest.approx([1.5, 2.0, np.inf, 0, 0])


def outcome_with_ratios(ratios: np.ndarray, kind: str = "random") -> Outcome:
    """An outcome whose targets have exactly these ratios (truth above, half-width 0.1)."""
    outcome = Outcome()
    value = np.full(ratios.size, 0.4)
    outcome.add(value + 0.1 * ratios, value, value - 0.1, value + 0.1, kind=kind)
    return outcome


def test_factor_is_the_shrunk_conformal_quantile_of_the_random_fold_ratios() -> None:
    ratios = np.arange(1, 21) / 10.0  # 0.1 ... 2.0
    outcome = outcome_with_ratios(ratios)
    # ceil(21 * 0.9) = 19th smallest = 1.9; 20 targets keep 20 / (20 + 50) of the shortfall
    expected = 1.0 + 0.9 * 20 / (20 + SHRINK_MODELS)
    assert fold_widen(outcome) == pytest.approx(expected)
    # extrapolation folds do not count: the guard sizes the interval beyond the sources
    beyond = outcome_with_ratios(np.full(20, 5.0), kind=EXTRAPOLATION)
    outcome.errors += beyond.errors
    outcome.covered += beyond.covered
    outcome.ratios += beyond.ratios
    outcome.kinds += beyond.kinds
    outcome.groups += beyond.groups
    assert fold_widen(outcome) == pytest.approx(expected)


def test_a_band_that_held_is_never_narrowed_and_few_ratios_change_nothing() -> None:
    assert fold_widen(outcome_with_ratios(np.linspace(0.0, 0.8, 30))) == 1.0
    assert fold_widen(outcome_with_ratios(np.full(5, 3.0))) == 1.0  # no finite 90 % quantile
    assert fold_widen(Outcome()) == 1.0


def test_widened_band_scales_half_widths_and_round_trips() -> None:
    rng = np.random.default_rng(0)
    prediction = rng.uniform(0.2, 0.8, 200)
    truth = np.clip(prediction + rng.normal(0, 0.05, 200), 0, 1)
    band = fit_band(prediction, truth, "binned")
    wide = band.widened(1.25)
    grid = np.linspace(0, 1, 21)
    assert wide.half_width(grid, 0.9) == pytest.approx(1.25 * band.half_width(grid, 0.9))
    stored = json.loads(json.dumps(wide.to_dict()))
    assert stored["widen"] == 1.25 and "widen" not in band.to_dict()
    loaded = ConformalBand.from_dict(stored)
    assert loaded.widen == 1.25
    assert np.array_equal(loaded.half_width(grid, 0.9), wide.half_width(grid, 0.9))
    for bad in (0.5, float("nan"), "wide"):
        with pytest.raises(InputError, match="widen"):
            ConformalBand.from_dict(stored | {"widen": bad})


def test_widen_interval_scales_both_sides_inside_the_unit_range() -> None:
    value, low, high = widen_interval(
        np.array([0.5, 0.05]), np.array([0.4, 0.0]), np.array([0.55, 0.1]), 2.0
    )
    assert low == pytest.approx([0.3, 0.0]) and high == pytest.approx([0.6, 0.15])
    assert value.tolist() == [0.5, 0.05]


@pytest.fixture(scope="module")
def matrix():
    matrix, _ = simulate_responses(random_item_params(60, seed=3), 40, seed=4)
    return matrix


def build(matrix, choice=None, estimator="guarded"):
    return build_bundle(
        matrix,
        matrix.mean_scores(),
        name="toy",
        benchmark="toy",
        method="random",
        budget=15,
        estimators=[estimator],
        choice=choice,
    )


def choice_record(widen: float, method: str = "random", estimator: str = "guarded") -> dict:
    chosen = {"method": method, "estimator": estimator, "budget": 15, "interval_widen": widen}
    return {"chosen": chosen}


@pytest.mark.parametrize("estimator", ["guarded", "kridge"])
def test_build_widens_the_chosen_recipe_and_the_bundle_keeps_it(
    matrix, estimator: str, tmp_path
) -> None:
    plain = build(matrix, estimator=estimator)
    wide = build(matrix, choice_record(1.5, estimator=estimator), estimator=estimator)
    loaded = load_bundle(save_bundle(wide, tmp_path / "wide"))
    half, width = {}, {}
    for name, bundle in (("plain", plain), ("wide", wide), ("loaded", loaded)):
        fitted = estimator_from_state(bundle.estimator_state())
        rows = matrix.select_items(bundle.item_ids)
        width[name] = np.subtract(*fitted.estimate_matrix(rows)[2:0:-1])
        # guarded: the inner estimator's interval scales; the guard's part beyond stays
        value, lower, upper = getattr(fitted, "inner_", fitted).estimate_matrix(rows)
        half[name] = np.maximum(upper - value, value - lower)
    inside = (half["plain"] > 0) & (half["plain"] * 1.5 < 0.5)
    assert inside.any()
    assert half["wide"][inside] == pytest.approx(1.5 * half["plain"][inside], rel=1e-6)
    assert np.all(width["wide"] >= width["plain"] - 1e-12)
    assert np.array_equal(width["loaded"], width["wide"])


def test_another_recipe_or_no_choice_is_not_widened(matrix) -> None:
    assert choice_widen(choice_record(1.5), "random", 15, "guarded") == 1.5
    assert choice_widen(choice_record(1.5), "random", 25, "guarded") == 1.0
    assert choice_widen(choice_record(1.5, method="dpp"), "random", 15, "guarded") == 1.0
    assert choice_widen(choice_record(1.5), "random", 15, "kridge") == 1.0
    assert choice_widen(None, "random", 15, "guarded") == 1.0
    plain = build(matrix)
    other = build(matrix, choice_record(1.5, method="dpp"))
    assert plain.estimator_state() == other.estimator_state()


def test_choice_records_the_factor_it_measured(matrix) -> None:
    choice = choose_recipe(
        matrix,
        matrix.mean_scores(),
        methods=["random"],
        estimators=["guarded"],
        budgets=[15],
        inner_repeats=3,
        outer_repeats=0,
        progress=False,
    )
    record = choice.as_record()
    factor = record["chosen"]["interval_widen"]
    assert factor >= 1.0 and factor == choice.chosen.widen
    bundle = build(matrix, record)
    band = bundle.estimator_state()["inner_state"]["band"]
    assert band.get("widen", 1.0) == pytest.approx(factor)


@pytest.mark.parametrize(("factor", "printed"), [(1.2, True), (1.004, False), (1.0, False)])
def test_the_table_names_a_factor_only_when_it_shows(factor: float, printed: bool) -> None:
    row = {"method": FLOOR.method, "estimator": FLOOR.estimator, "score": 2.0, "cv_mae": 1.5}
    row |= {"extrapolation_mae": 2.5, "diff_vs_floor": 0.0}
    choice = RecipeChoice(
        FLOOR.method,
        FLOOR.estimator,
        50,
        FLOOR,
        {50: BudgetChoice(50, FLOOR, [row], widen=factor)},
        {"models_used": 40},
    )
    lines = [line for line in choice.table_lines() if "half-widths" in line]
    assert lines == (
        [
            f"interval half-widths x{factor:.2f}: the chosen recipe's band fell short "
            "on the random folds (select, then fit)"
        ]
        if printed
        else []
    )
