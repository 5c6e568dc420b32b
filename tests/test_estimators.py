"""Score estimators on synthetic responses from a known 2PL model (numpy only, seeded)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lmeval_microbench._conformal import fit_band
from lmeval_microbench.errors import InputError, ItemMismatchError
from lmeval_microbench.estimators import (
    DEFAULT_ESTIMATOR,
    ESTIMATORS,
    ScoreEstimator,
    estimator_from_state,
    make_estimator,
)
from lmeval_microbench.estimators.irt import choose_lambda
from lmeval_microbench.irt.params import ItemParams
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection.base import Subset

N_SOURCE = 700
N_HELDOUT = 400
N_ITEMS = 150
BUDGET = 40
NAMES = sorted(ESTIMATORS)
UNCALIBRATED = {"anchor_sum"}
"""Estimators that fit nothing to the sources' scores: they keep their subset's difficulty
offset, so the bias bound of calibrated ones does not apply (tested on their own below)."""
SAMPLING_RMS_BOUND = np.sqrt(0.25 / BUDGET * (N_ITEMS - BUDGET) / (N_ITEMS - 1))
"""Largest rms error of the mean of BUDGET items drawn without replacement from N_ITEMS."""


def simulate_2pl(seed: int, n_models: int, n_items: int) -> tuple[ResponseMatrix, ItemParams]:
    """0/1 responses of ``n_models`` N(0, 1) abilities to 2PL items with known parameters."""
    rng = np.random.default_rng(seed)
    item_ids = [f"synth.{k}" for k in rng.permutation(n_items)]  # ids not in column order
    params = ItemParams(
        tuple(item_ids),
        rng.lognormal(0.0, 0.35, size=n_items),
        rng.normal(0.0, 1.2, size=n_items),
        np.zeros(n_items),
        np.ones(n_items),
        "2pl",
    )
    theta = rng.normal(size=n_models)
    responses = (rng.random((n_models, n_items)) < params.probability(theta)).astype(float)
    return ResponseMatrix(responses, [f"model-{k}" for k in range(n_models)], item_ids), params


@pytest.fixture(scope="module")
def world() -> dict:
    """Source and held-out models of one benchmark; the target is the mean over all items."""
    matrix, params = simulate_2pl(7, N_SOURCE + N_HELDOUT, N_ITEMS)
    target = matrix.values.mean(axis=1)
    rng = np.random.default_rng(11)
    subset_ids = tuple(rng.choice(matrix.item_ids, size=BUDGET, replace=False))
    return {
        "matrix": matrix,
        "params": params,
        "source": matrix.select_models(matrix.model_ids[:N_SOURCE]),
        "heldout": matrix.select_models(matrix.model_ids[N_SOURCE:]),
        "target_source": target[:N_SOURCE],
        "target_heldout": target[N_SOURCE:],
        "subset": Subset(subset_ids, np.full(BUDGET, 1.0 / BUDGET), "random", 11),
    }


def fitted(name: str, world: dict, **kwargs) -> ScoreEstimator:
    """An estimator fitted on the source models (IRT ones get the true item parameters)."""
    return make_estimator(name, **kwargs).fit(
        world["source"], world["subset"], world["target_source"], irt=world["params"]
    )


@pytest.fixture(scope="module")
def fits(world: dict) -> dict[str, ScoreEstimator]:
    return {name: fitted(name, world) for name in NAMES}


# ---------------------------------------------------------------------- accuracy and coverage
def test_anchor_sum_is_the_weighted_sum_of_a_models_answers(world: dict) -> None:
    """On a whole benchmark the asked items count once: the estimate is ``sum(w * answers)``
    exactly, however unequal the weights (read as the mean of the other items, a weighted
    sum counted the asked items twice)."""
    subset = world["subset"]
    weights = np.linspace(0.5, 1.5, subset.budget)
    weights /= weights.sum()
    weighted = Subset(subset.item_ids, weights, "anchor_points", 0)
    estimator = make_estimator("anchor_sum").fit(world["source"], weighted, world["target_source"])
    assert estimator.finite_ is not None
    heldout = world["heldout"].select_items(subset.item_ids)
    value, lower, upper = estimator.estimate_matrix(heldout)
    np.testing.assert_allclose(value, heldout.values @ weights, atol=1e-12)
    assert np.all((lower <= value) & (value <= upper))


@pytest.mark.parametrize("name", sorted(set(NAMES) - UNCALIBRATED))
def test_estimate_recovers_heldout_scores(name: str, world: dict, fits: dict) -> None:
    value, _, _ = fits[name].estimate_matrix(world["heldout"])
    error = value - world["target_heldout"]
    assert np.sqrt(np.mean(error**2)) < SAMPLING_RMS_BOUND
    assert abs(error.mean()) < 0.015
    assert np.corrcoef(value, world["target_heldout"])[0, 1] > 0.9


@pytest.mark.parametrize("name", NAMES)
def test_intervals_cover_heldout_models_at_nominal_rate(name: str, world: dict, fits: dict) -> None:
    _, lower, upper = fits[name].estimate_matrix(world["heldout"], level=0.9)
    truth = world["target_heldout"]
    coverage = np.mean((lower <= truth) & (truth <= upper))
    assert 0.8 <= coverage <= 0.97
    assert np.all(lower <= upper)


def test_wider_level_gives_wider_intervals(world: dict, fits: dict) -> None:
    estimator = fits["mean"]
    _, lo80, hi80 = estimator.estimate_matrix(world["heldout"], level=0.8)
    _, lo95, hi95 = estimator.estimate_matrix(world["heldout"], level=0.95)
    assert np.all(hi95 - lo95 >= hi80 - lo80)
    assert np.mean(hi95 - lo95) > np.mean(hi80 - lo80)


@pytest.mark.parametrize("name", ["mean", "anchor", "pirt", "gpirt"])
def test_whole_matrix_as_subset_reproduces_the_matrix_mean(name: str, world: dict) -> None:
    """With every item observed and no calibration, these estimators are the plain mean."""
    items = world["matrix"].item_ids
    subset = Subset(items, np.full(len(items), 1.0 / len(items)), "all")
    estimator = make_estimator(name, calibration="none").fit(
        world["source"], subset, world["target_source"], irt=world["params"]
    )
    value, _, _ = estimator.estimate_matrix(world["heldout"])
    np.testing.assert_allclose(value, world["target_heldout"], atol=1e-12)


def test_linear_calibration_maps_raw_estimate_to_a_shifted_target(world: dict) -> None:
    """The target need not be the matrix mean: the calibration line learns the map."""
    shift = lambda score: 0.2 + 0.5 * score  # noqa: E731
    estimator = make_estimator("mean").fit(
        world["source"], world["subset"], shift(world["target_source"])
    )
    value, _, _ = estimator.estimate_matrix(world["heldout"])
    assert abs(np.mean(value - shift(world["target_heldout"]))) < 0.01
    assert estimator.head_["slope"] == pytest.approx(0.5, abs=0.1)


def test_calibrated_learns_a_nonlinear_target(world: dict) -> None:
    """A curved full score is fitted by the spline head better than by a calibration line."""
    curve = lambda score: score**3  # noqa: E731
    source, heldout = curve(world["target_source"]), curve(world["target_heldout"])
    errors = {}
    for name in ("irt", "calibrated"):
        estimator = make_estimator(name).fit(
            world["source"], world["subset"], source, irt=world["params"]
        )
        value, _, _ = estimator.estimate_matrix(world["heldout"])
        errors[name] = np.sqrt(np.mean((value - heldout) ** 2))
    assert errors["calibrated"] < 0.9 * errors["irt"]


def test_choose_lambda_prefers_the_less_noisy_estimate() -> None:
    rng = np.random.default_rng(3)
    truth = rng.uniform(0.2, 0.8, size=600)
    precise, noisy = truth + rng.normal(0, 0.01, 600), truth + rng.normal(0, 0.1, 600)
    assert choose_lambda(np.column_stack([precise, noisy]), truth, 5, 0) >= 0.9
    assert choose_lambda(np.column_stack([noisy, precise]), truth, 5, 0) <= 0.1


# ---------------------------------------------------------------------- ids and input checks
@pytest.mark.parametrize("name", NAMES)
def test_estimate_joins_by_item_id(name: str, world: dict, fits: dict) -> None:
    estimator = fits[name]
    model = world["heldout"].model_ids[3]
    scores = world["heldout"].row(model)  # every item, extra ids beyond the subset
    shuffled = dict(sorted(scores.items(), key=lambda kv: hash(kv[0]) % 97))
    first, second = estimator.estimate(scores), estimator.estimate(shuffled)
    np.testing.assert_array_equal(list(first.as_dict().values()), list(second.as_dict().values()))
    value, lower, upper = estimator.estimate_matrix(world["heldout"].select_models([model]))
    assert first.value == pytest.approx(value[0], abs=1e-12)
    assert (first.lower, first.upper) == pytest.approx((lower[0], upper[0]), abs=1e-12)
    reordered = world["heldout"].select_items(list(reversed(world["heldout"].item_ids)))
    np.testing.assert_allclose(
        estimator.estimate_matrix(reordered)[0], estimator.estimate_matrix(world["heldout"])[0]
    )


@pytest.mark.parametrize("name", NAMES)
def test_a_state_of_another_version_is_refused_by_name(name: str, fits: dict) -> None:
    state = {**fits[name].state_dict(), "state_version": 99}
    with pytest.raises(InputError, match=rf"^{name}: estimator state version 99 is not supported"):
        estimator_from_state(state)
    del state["state_version"]
    with pytest.raises(InputError, match=rf"^{name}: estimator state lacks field 'state_version'"):
        estimator_from_state(state)


@pytest.mark.parametrize("name", NAMES)
def test_missing_subset_item_is_named(name: str, world: dict, fits: dict) -> None:
    scores = world["heldout"].row(world["heldout"].model_ids[0])
    dropped = world["subset"].item_ids[5]
    del scores[dropped]
    with pytest.raises(ItemMismatchError, match=dropped.replace(".", r"\.")):
        fits[name].estimate(scores)


@pytest.mark.parametrize("name", NAMES)
def test_nan_or_out_of_range_score_is_an_input_error(name: str, world: dict, fits: dict) -> None:
    scores = world["heldout"].row(world["heldout"].model_ids[0])
    item = world["subset"].item_ids[2]
    for bad in (float("nan"), 1.5, "yes"):
        with pytest.raises(InputError, match=item.replace(".", r"\.")):
            fits[name].estimate({**scores, item: bad})


@pytest.mark.parametrize("name", ["irt", "pirt", "gpirt", "calibrated"])
def test_irt_estimators_accept_missing_items_on_request(name: str, world: dict, fits: dict) -> None:
    scores = world["heldout"].row(world["heldout"].model_ids[0])
    for item in world["subset"].item_ids[:10]:
        del scores[item]
    estimate = fits[name].estimate(scores, allow_missing=True)
    assert 0.0 <= estimate.lower <= estimate.value <= estimate.upper <= 1.0


def test_allow_missing_is_refused_by_estimators_without_irt(fits: dict, world: dict) -> None:
    scores = world["heldout"].row(world["heldout"].model_ids[0])
    with pytest.raises(InputError, match="allow_missing"):
        fits["mean"].estimate(scores, allow_missing=True)


def test_nan_in_matrix_is_named(world: dict, fits: dict) -> None:
    values = world["heldout"].values.copy()
    column = world["heldout"].item_positions([world["subset"].item_ids[1]])[0]
    values[4, column] = np.nan
    broken = ResponseMatrix(values, world["heldout"].model_ids, world["heldout"].item_ids)
    with pytest.raises(InputError, match=world["heldout"].model_ids[4]):
        fits["anchor"].estimate_matrix(broken)
    value, _, _ = fits["pirt"].estimate_matrix(broken, allow_missing=True)
    assert np.all(np.isfinite(value))


def test_target_in_percent_is_rejected(world: dict) -> None:
    with pytest.raises(InputError, match="fractions"):
        make_estimator("mean").fit(world["source"], world["subset"], 100 * world["target_source"])


def test_subset_item_absent_from_source_is_named(world: dict) -> None:
    subset = Subset(("synth.0", "synth.nope"), np.array([0.5, 0.5]), "random")
    with pytest.raises(ItemMismatchError, match=r"synth\.nope"):
        make_estimator("mean").fit(world["source"], subset, world["target_source"])


def test_unknown_estimator_lists_the_known_ones() -> None:
    known = r"anchor, anchor_sum, blend, calibrated"
    with pytest.raises(InputError, match=r"did you mean 'pirt'.*" + known):
        make_estimator("pirtt")
    assert DEFAULT_ESTIMATOR in ESTIMATORS


def test_bad_parameters_are_rejected_at_fit(world: dict) -> None:
    with pytest.raises(InputError, match="interval"):
        make_estimator("mean", interval="wide").fit(
            world["source"], world["subset"], world["target_source"]
        )
    with pytest.raises(InputError, match="features"):
        make_estimator("calibrated", features=["height"]).fit(
            world["source"], world["subset"], world["target_source"], irt=world["params"]
        )


def test_unfitted_estimator_says_so(world: dict) -> None:
    with pytest.raises(InputError, match="not fitted"):
        make_estimator("mean").estimate({"synth.0": 1.0})


# ---------------------------------------------------------------------- state and isolation
@pytest.mark.parametrize("name", NAMES)
def test_state_round_trip_through_json_gives_identical_estimates(
    name: str, world: dict, fits: dict
) -> None:
    estimator = fits[name]
    state = json.loads(json.dumps(estimator.state_dict()))
    for restored in (estimator_from_state(state), type(estimator).from_state(state)):
        assert type(restored) is type(estimator)
        for level in (0.5, 0.9):
            before = estimator.estimate_matrix(world["heldout"], level=level, return_se=True)
            after = restored.estimate_matrix(world["heldout"], level=level, return_se=True)
            for x, y in zip(before, after, strict=True):
                np.testing.assert_array_equal(x, y)


def test_state_of_another_estimator_is_refused(fits: dict) -> None:
    with pytest.raises(InputError, match="'mean'"):
        ESTIMATORS["anchor"].from_state(fits["mean"].state_dict())


@pytest.mark.parametrize(
    "name",
    # blend refits its members: 25-47 s, so it runs with the slow tests (the default run stays
    # under 15 minutes)
    [pytest.param(n, marks=pytest.mark.slow) if n == "blend" else n for n in NAMES],
)
def test_fit_uses_only_the_source_models(name: str, world: dict, fits: dict) -> None:
    """Scrambled held-out rows change neither the fit nor the other models' estimates."""
    matrix = world["matrix"]
    values = matrix.values.copy()
    rng = np.random.default_rng(5)
    values[N_SOURCE:] = rng.integers(0, 2, size=values[N_SOURCE:].shape)
    scrambled = ResponseMatrix(values, matrix.model_ids, matrix.item_ids)
    refit = fitted(name, {**world, "source": scrambled.select_models(matrix.model_ids[:N_SOURCE])})
    assert json.dumps(refit.state_dict()) == json.dumps(fits[name].state_dict())
    original, _, _ = fits[name].estimate_matrix(world["heldout"])
    partly = world["heldout"].values.copy()
    partly[1:] = values[N_SOURCE + 1 :]
    changed = ResponseMatrix(partly, world["heldout"].model_ids, world["heldout"].item_ids)
    assert fits[name].estimate_matrix(changed)[0][0] == original[0]


# ---------------------------------------------------------------------- conformal band
def test_conformal_quantile_is_the_finite_sample_rank() -> None:
    prediction = np.full(99, 0.5)
    truth = prediction + np.arange(1, 100) / 1000.0
    band = fit_band(prediction, truth, "constant")
    assert band.quantile(0.9) == pytest.approx(0.090)  # ceil(100 * 0.9) = 90th smallest
    assert band.quantile(0.995) == np.inf  # not enough residuals for 99.5 %
    with pytest.raises(InputError, match="level"):
        band.quantile(1.0)


def test_binned_scale_follows_the_residual_spread() -> None:
    rng = np.random.default_rng(2)
    prediction = rng.uniform(0, 1, size=3000)
    truth = prediction + rng.normal(0, 0.01 + 0.1 * prediction)
    band = fit_band(prediction, truth, "binned")
    low, high = band.scale(np.array([0.1, 0.9]))
    assert high > 3 * low
    for part in (prediction < 0.3, prediction > 0.7):
        half = band.half_width(prediction[part], 0.9)
        assert 0.85 <= np.mean(np.abs(truth - prediction)[part] <= half) <= 0.95


def test_irt_estimators_fit_their_own_parameters_on_the_source(world: dict) -> None:
    """Without ``irt=`` the estimator fits a 2PL on the source models (all their items)."""
    estimator = make_estimator("pirt", irt_options={"max_iter": 200}).fit(
        world["source"], world["subset"], world["target_source"]
    )
    assert set(estimator.params_.item_ids) == set(world["source"].item_ids)
    true_slopes = world["params"].subset(list(estimator.params_.item_ids)).a[:, 0]
    assert np.corrcoef(estimator.params_.a[:, 0], true_slopes)[0, 1] > 0.8
    value, _, _ = estimator.estimate_matrix(world["heldout"])
    assert np.sqrt(np.mean((value - world["target_heldout"]) ** 2)) < SAMPLING_RMS_BOUND


@pytest.mark.parametrize(
    ("score", "match"),
    [("x", r"joint: score of item 'a\.1' is not a number: 'x'"),
     (float("nan"), r"joint: score of item 'a\.1' is not in \[0, 1\] \(got nan\)"),
     (1.5, r"is not in \[0, 1\] \(got 1\.5\)")],
)  # fmt: skip
def test_checked_score_names_the_item_and_its_owner(score, match):
    from lmeval_microbench.estimators._fitting import checked_score

    assert checked_score("a.1", "0.25") == 0.25
    with pytest.raises(InputError, match=match):
        checked_score("a.1", score, owner="joint")


@pytest.mark.parametrize("name", NAMES)
def test_every_item_right_opens_the_upper_end_and_nothing_else(name: str, fits: dict) -> None:
    """A model with every subset item right: the estimate and lower end as the estimator reads
    them, the upper end 1 (nothing in its answers bounds it above). One wrong answer: the
    interval as the estimator gives it."""
    estimator = fits[name]
    rows = np.ones((2, BUDGET))
    rows[1, 0] = 0.0
    raw = estimator.predict_rows(rows, 0.9)
    value, lower, upper = estimator.estimate_matrix(
        ResponseMatrix(rows, ["all-right", "one-wrong"], list(estimator.item_ids_))
    )
    np.testing.assert_allclose(value, raw[0])
    np.testing.assert_allclose(lower, raw[1])
    assert upper[0] == 1.0 and upper[1] == pytest.approx(raw[2][1])
    single = estimator.estimate(dict.fromkeys(estimator.item_ids_, 1.0))
    assert single.upper == 1.0 and single.value == pytest.approx(raw[0][0])


def test_with_an_item_imputed_the_scored_answers_decide_the_open_end(fits: dict) -> None:
    """``allow_missing``: an unscored item is imputed; every scored answer right still opens
    the upper end, and the imputed value does not count as an answer."""
    estimator = fits["irt"]
    scores = dict.fromkeys(estimator.item_ids_[1:], 1.0)
    assert estimator.estimate(scores, allow_missing=True).upper == 1.0
    scores[estimator.item_ids_[1]] = 0.0
    assert estimator.estimate(scores, allow_missing=True).upper < 1.0
