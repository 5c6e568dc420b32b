"""The guarded estimator and its outside readings: hand-checked cases and a simulated shift."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from lmeval_microbench.errors import InputError
from lmeval_microbench.estimators import estimator_from_state, make_estimator
from lmeval_microbench.estimators.guarded import GuardedEstimator
from lmeval_microbench.irt.params import ItemParams
from lmeval_microbench.outside import SourceView, beyond_weight, guarded_interval
from lmeval_microbench.outside.folds import UP, ReadingScore, directed_folds, extrapolation_folds
from lmeval_microbench.outside.guard import GuardBand
from lmeval_microbench.outside.readings import READINGS, make_reading
from lmeval_microbench.outside.readings.base import FlatScaleError, ScaleMap
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import make_selector, select_with_audit
from lmeval_microbench.selection.base import Subset

N_ITEMS = 200


def world(
    seed: int = 0,
    n_source: int = 300,
    n_target: int = 200,
    shift: float = 0.0,
    guessing: float = 0.0,
):
    """2PL items (3PL with a ``guessing`` floor); source abilities N(0, 1); target abilities
    N(shift, 0.5), or with ``shift`` above 0 sources uniform on [-2, 0] and targets on
    [shift - 0.5, shift + 0.5] (every target stronger than every source), and below 0 the
    mirror image (every target weaker)."""
    rng = np.random.default_rng(seed)
    ids = tuple(f"w.{k}" for k in range(N_ITEMS))
    params = ItemParams(
        ids, rng.lognormal(0.0, 0.3, N_ITEMS), rng.normal(0.0, 1.5, N_ITEMS),
        np.full(N_ITEMS, guessing), np.ones(N_ITEMS),
    )  # fmt: skip
    if shift != 0:
        sources = rng.uniform(-2.0, 0.0, n_source) * np.sign(shift)
        targets = rng.uniform(shift - 0.5, shift + 0.5, n_target)
    else:
        sources, targets = rng.normal(0, 1, n_source), rng.normal(shift, 0.5, n_target)
    theta = np.concatenate([sources, targets])
    values = (rng.random((theta.size, N_ITEMS)) < params.probability(theta[:, None])).astype(float)
    models = [f"m{k}" for k in range(theta.size)]
    matrix = ResponseMatrix(values, models, ids, source="world")
    source = matrix.select_models(models[:n_source])
    target = matrix.select_models(models[n_source:])
    return source, target


def whole_truth(matrix: ResponseMatrix) -> np.ndarray:
    return matrix.mean_scores()


def fitted(name: str, source: ResponseMatrix, subset: Subset, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_estimator(name, **params).fit(source, subset, whole_truth(source))


# ---------------------------------------------------------------------------- AIPW by hand
def test_audit_reading_by_hand():
    """No informative items: every item is predicted at its source rate, here 1/2, and the
    two audit items the model got right say the rest is right too: (0 + 4 * 0.5 + 2 * 0.5 +
    6 * 0.5) / 6 = 1."""
    values = np.tile([[1.0, 0.0, 1.0, 0.0, 1.0, 0.0]], (10, 1))
    values[5:] = 1.0 - values[5:]  # every item right for half the sources: rate 1/2
    ids = [f"i{k}" for k in range(6)]
    source = ResponseMatrix(values, [f"m{k}" for k in range(10)], ids)
    subset = Subset(("i0", "i1"), np.full(2, 0.5), "random", info={"audit_items": ["i0", "i1"]})
    view = SourceView.build(source, subset, source.mean_scores(), source.mean_scores())
    reading = make_reading("audit").fit(view)
    value, se = reading.read(np.array([[1.0, 1.0]]), np.array([0.5]))
    assert value[0] == pytest.approx(1.0)
    # residuals 1/2 and 1/2: spread 0, floored at 0.01; 2 of the 6 items audited
    assert se[0] == pytest.approx(np.sqrt(0.01 / 2 * (1 - 2 / 6)))


def test_audit_reading_is_unbiased_for_a_model_unlike_the_sources():
    """A model far outside the sources: averaged over audit draws the AIPW estimate is its
    true score, while the prediction alone (the own reading of the informative items) is not
    needed to be."""
    source, target = world(seed=1, shift=2.5)
    truth = whole_truth(target)
    model = target.values[:1]
    estimates = []
    for seed in range(60):
        subset = select_with_audit(
            make_selector("greedy"), source, 40, 20, seed=seed, target=whole_truth(source)
        )
        view = SourceView.build(source, subset, whole_truth(source), whole_truth(source))
        reading = make_reading("audit").fit(view)
        values = model[:, source.item_positions(subset.item_ids)]
        estimates.append(reading.read(values, np.array([0.5]))[0][0])
    spread = np.std(estimates) / np.sqrt(len(estimates))
    assert abs(np.mean(estimates) - truth[0]) < 3 * spread + 0.005


def test_audit_reading_places_models_by_the_precise_reading():
    """A few audit items make the AIPW estimate noisy; where the model lies is read from the
    de-shrunk reading, so models of the sources' own population are not placed beyond them by
    that noise. A state saved before the placement keeps placing by the AIPW estimate."""
    source, target = world(seed=4)
    subset = select_with_audit(make_selector("random"), source, 20, 6, seed=0)
    view = SourceView.build(source, subset, whole_truth(source), whole_truth(source))
    reading = make_reading("audit").fit(view)
    values = target.values[:, source.item_positions(subset.item_ids)]
    inner = whole_truth(target)
    _, read_se = reading.read(values, inner)
    placed, placed_se = reading.locate(values, inner)
    np.testing.assert_allclose(
        (placed, placed_se), make_reading("deshrunk").fit(view).read(values, inner)
    )
    assert np.all(placed_se < read_se)
    top, bottom = whole_truth(source).max(), whole_truth(source).min()
    by_reading = beyond_weight(*reading.read(values, inner), top, bottom)
    assert beyond_weight(placed, placed_se, top, bottom).mean() < by_reading.mean()
    old = {k: v for k, v in reading.state().items() if k != "locator"}
    np.testing.assert_allclose(
        READINGS["audit"].from_state(old).locate(values, inner), reading.read(values, inner)
    )


def test_audit_reading_refuses_a_broken_locator_state():
    source, _ = world(seed=4)
    subset = select_with_audit(make_selector("random"), source, 20, 6, seed=0)
    view = SourceView.build(source, subset, whole_truth(source), whole_truth(source))
    state = {**make_reading("audit").fit(view).state(), "locator": [1, 2]}
    with pytest.raises(InputError, match="locator"):
        READINGS["audit"].from_state(state)


# ---------------------------------------------------------------------------- readings
@pytest.mark.parametrize("name", sorted(READINGS))
def test_every_reading_survives_its_state(name):
    source, target = world(seed=2)
    subset = select_with_audit(make_selector("random"), source, 30, 10, seed=0)
    view = SourceView.build(source, subset, whole_truth(source), whole_truth(source))
    reading = make_reading(name).fit(view)
    state = json.loads(json.dumps(reading.state(), allow_nan=False))
    again = READINGS[name].from_state(state)
    values = target.values[:5][:, source.item_positions(subset.item_ids)]
    inner = whole_truth(target)[:5]
    for a, b in zip(reading.read(values, inner), again.read(values, inner), strict=True):
        np.testing.assert_allclose(a, b)
    for a, b in zip(reading.locate(values, inner), again.locate(values, inner), strict=True):
        np.testing.assert_allclose(a, b)


def test_own_reading_counts_asked_items_exactly():
    source, _ = world(seed=3)
    subset = Subset(source.item_ids, np.full(N_ITEMS, 1 / N_ITEMS), "all")
    view = SourceView.build(source, subset, whole_truth(source), whole_truth(source))
    reading = make_reading("own").fit(view)
    value, se = reading.read(source.values[:4], whole_truth(source)[:4])
    np.testing.assert_allclose(value, whole_truth(source)[:4])
    np.testing.assert_allclose(se, 0.0, atol=1e-12)


def test_unknown_reading_is_named():
    with pytest.raises(InputError, match=r"unknown outside reading 'onw' \(did you mean 'own'\?\)"):
        make_reading("onw")


# ---------------------------------------------------------------------------- guard
def test_beyond_weight_and_interval():
    weight = beyond_weight(np.array([0.5, 0.9, 0.95, 0.05]), np.full(4, 0.02), 0.9, 0.1)
    np.testing.assert_allclose(weight, [0.0, 0.5, 0.99379, 0.99379], atol=1e-4)
    value, lower, upper = guarded_interval(
        (np.array([0.8]), np.array([0.75]), np.array([0.85])),
        np.array([0.9]),
        (np.array([0.8]), np.array([1.0])),
        np.array([0.5]),
    )
    assert value[0] == pytest.approx(0.8 + 0.1 * (0.5 - 0.05) / 0.95)
    assert (lower[0], upper[0]) == pytest.approx((0.75, 1.0))


def test_guard_band_falls_back_to_a_widened_normal_quantile():
    assert GuardBand(np.array([0.5, 1.0])).quantile(0.9) == pytest.approx(1.5 * 1.6448536)
    band = GuardBand(np.sort(np.linspace(0, 4, 40)))
    assert band.quantile(0.9) == pytest.approx(np.linspace(0, 4, 40)[36])


def test_guard_band_never_narrower_than_a_share_of_the_readings_own_standard_error():
    """Folds where the reading was exact (errors 0) must not shrink its interval to nothing:
    one standard error below the sources, half of one above them."""
    exact = GuardBand(np.zeros(40), np.zeros(40))
    assert exact.quantile(0.9, below=True) == pytest.approx(1.0)
    assert exact.quantile(0.9) == pytest.approx(0.5)
    assert GuardBand(np.zeros(40)).quantile(0.9, below=True) == pytest.approx(1.0)
    assert GuardBand(np.full(40, 0.3)).quantile(0.8) == pytest.approx(0.5)
    assert GuardBand(np.full(40, 0.8), np.full(40, 0.8)).quantile(0.8) == pytest.approx(0.8)
    assert GuardBand(np.full(40, 0.8), np.full(40, 0.8)).quantile(0.8, True) == pytest.approx(1.0)
    assert GuardBand(np.full(40, 1.5)).quantile(0.8) == pytest.approx(1.5)


def test_folds_score_the_strongest_and_the_weakest_from_the_rest():
    truth = np.arange(100, dtype=float)[np.random.default_rng(0).permutation(100)]
    (train1, test1, up1), (train2, test2, up2), (train3, test3, down3), (train4, test4, down4) = (
        directed_folds(truth)
    )
    assert (up1, up2, down3, down4) == ("up", "up", "down", "down")
    assert set(truth[test1]) == set(truth[test2]) == set(range(80, 100))
    assert set(truth[train1]) == set(range(80)) and set(truth[train2]) == set(range(50))
    assert set(truth[test3]) == set(truth[test4]) == set(range(20))
    assert set(truth[train3]) == set(range(20, 100)) and set(truth[train4]) == set(range(50, 100))
    small = directed_folds(np.arange(12, dtype=float))
    assert [(train.size, d) for train, _, d in small] == [(10, "up"), (10, "down")]
    # --method auto validates on the upward folds only
    assert [test.tolist() for _, test in extrapolation_folds(truth)] == [
        test1.tolist(),
        test2.tolist(),
    ]


def test_guard_band_sizes_each_side_by_its_own_folds():
    band = GuardBand(np.full(40, 2.0), np.full(40, 3.0))
    assert band.quantiles(0.9, np.array([False, True])) == pytest.approx([2.0, 3.0])
    old = GuardBand.from_dict({"residuals": [2.0] * 40})  # saved before downward folds
    assert old.below is None and old.quantile(0.9, below=True) == pytest.approx(2.0)
    assert GuardBand.from_dict(band.to_dict()).quantile(0.9, below=True) == pytest.approx(3.0)


# ---------------------------------------------------------------------------- the estimator
def kridge_and_guarded(source: ResponseMatrix, target: ResponseMatrix) -> dict:
    """Bias, MAE and 90 % coverage of ``kridge`` and ``guarded`` on ``target`` (40 random
    items chosen on ``source``)."""
    truth = whole_truth(target)
    subset = make_selector("random").select(source, 40, seed=0)
    items = target.select_items(subset.item_ids)
    outcome = {}
    for name in ("kridge", "guarded"):
        value, lower, upper = fitted(name, source, subset).estimate_matrix(items)
        outcome[name] = {
            "bias": float(np.mean(value - truth)),
            "mae": float(np.mean(np.abs(value - truth))),
            "cover": float(np.mean((lower <= truth) & (truth <= upper))),
        }
    return outcome


def test_guarded_stays_right_for_models_stronger_than_every_source():
    """Targets one to three SDs above the sources: the regression alone is biased low and
    its intervals miss; the guarded estimate is not, and its intervals hold."""
    found = kridge_and_guarded(*world(seed=4, shift=2.0))
    kridge, guarded = found["kridge"], found["guarded"]
    assert kridge["bias"] < -0.02
    assert abs(guarded["bias"]) < 0.5 * abs(kridge["bias"])
    assert 0.85 <= guarded["cover"] <= 1.0 and guarded["cover"] > kridge["cover"]


def test_guarded_stays_right_for_near_random_models_weaker_than_every_source():
    """Four-choice items (guessing floor 1/4), targets two to three SDs below every source,
    near chance: the regression alone reads them 13 points too high with intervals that
    hold for few; the guarded estimate errs less and its intervals hold (the downward folds
    size them)."""
    source, target = world(seed=11, shift=-2.5, guessing=0.25)
    assert whole_truth(target).max() < whole_truth(source).min()
    found = kridge_and_guarded(source, target)
    kridge, guarded = found["kridge"], found["guarded"]
    assert kridge["cover"] < 0.5 and guarded["mae"] < 0.6 * kridge["mae"]
    assert 0.85 <= guarded["cover"] <= 1.0


def test_guarded_changes_nothing_inside_the_sources():
    source, target = world(seed=5)
    subset = make_selector("random").select(source, 40, seed=0)
    items = target.select_items(subset.item_ids)
    inner = fitted("kridge", source, subset).estimate_matrix(items)
    guarded = fitted("guarded", source, subset)
    value = guarded.estimate_matrix(items)
    inside = guarded.outside_weight(items.values) < 0.05
    assert inside.mean() > 0.8
    for a, b in zip(value, inner, strict=True):
        np.testing.assert_allclose(a[inside], b[inside])


def _scaled_truth(matrix: ResponseMatrix) -> np.ndarray:
    """A benchmark score that is not the matrix mean (the matrix a part of the benchmark)."""
    return 0.2 + 0.6 * whole_truth(matrix)


def _fit_on_scaled_truth(name: str, source: ResponseMatrix, subset: Subset):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_estimator(name).fit(source, subset, _scaled_truth(source))


def test_guarded_reads_above_the_sources_with_the_inner_estimate_when_the_target_is_not_the_mean():
    """A target other than the matrix mean: every reading extrapolates the sources' map to it,
    so above the sources the estimate is the inner one. Here (a linear map, targets two SDs
    above) the inner regression is biased and erred more than the reading on the upward
    folds, so the reading's band sizes the interval, and it holds."""
    source, target = world(seed=4, shift=2.0)
    subset = make_selector("random").select(source, 40, seed=0)
    items = target.select_items(subset.item_ids)
    guarded = _fit_on_scaled_truth("guarded", source, subset)
    assert guarded.guard_above_ is False
    value, lower, upper = guarded.estimate_matrix(items)
    inner, inner_lower, inner_upper = guarded.inner_.estimate_matrix(items)
    np.testing.assert_allclose(value, inner)
    assert guarded.guard_band_.inner_above is None
    assert np.all(lower <= inner_lower + 1e-12) and np.all(upper >= inner_upper - 1e-12)
    truth = _scaled_truth(target)
    assert np.mean((lower <= truth) & (truth <= upper)) >= 0.85
    assert np.mean((inner_lower <= truth) & (truth <= inner_upper)) < 0.5
    assert fitted("guarded", source, subset).guard_above_ is True  # the matrix mean: both sides


def test_guarded_sizes_the_band_above_by_the_inner_estimator_where_it_erred_less():
    """The inner estimator's upward fold errors size the band above only where they were
    smaller than the reading's own there."""
    score = ReadingScore()
    score.scaled[UP].append(np.full(20, 2.0))
    score.reach[UP].append(np.linspace(0.0, 0.05, 20))
    score.misses[UP].append(np.full(20, 0.04))
    better = GuardedEstimator._band(score, np.full(20, 0.02))
    assert better.inner_above is not None and better.inner_reach == pytest.approx(0.05)
    assert GuardedEstimator._band(score, np.full(20, 0.06)).inner_above is None


def test_guard_band_above_is_the_readings_without_inner_fold_errors():
    """A band saved before the inner estimator's fold errors, or one with too few of them,
    sizes the band above by the reading, as before."""
    reading = (np.array([0.9, 0.2]), np.array([0.05, 0.05]))
    inner, below = np.array([0.8, 0.3]), np.array([False, True])
    old = GuardBand(np.full(40, 2.0), np.full(40, 3.0))
    lower, upper = old.edges(0.9, reading, inner, below, np.zeros(2), one_sided=True)
    np.testing.assert_allclose(lower, [0.8, 0.05])
    np.testing.assert_allclose(upper, [1.0, 0.35])
    band = GuardBand(np.full(40, 2.0), np.full(40, 3.0), np.full(40, 0.04))
    lower, upper = band.edges(0.9, reading, inner, below, np.zeros(2), one_sided=True)
    # above: the inner estimate plus its fold quantile; the lower edge is left to the inner
    # interval, which reads a model above the sources too low
    np.testing.assert_allclose(lower, [np.inf, 0.05])
    np.testing.assert_allclose(upper, [0.84, 0.35])
    inner_interval = (inner, inner - 0.03, inner + 0.03)
    _, spanned_lower, spanned_upper = guarded_interval(
        inner_interval, reading[0], (lower, upper), np.ones(2), np.zeros(2)
    )
    np.testing.assert_allclose(spanned_lower, [0.77, 0.05])
    np.testing.assert_allclose(spanned_upper, [0.84, 0.35])
    # further beyond the folds' reach (0.01 here) only the upper edge grows
    lower, upper = band.edges(0.9, reading, inner, below, np.full(2, 0.02), one_sided=True)
    np.testing.assert_allclose(lower, [np.inf, 0.05])
    np.testing.assert_allclose(upper, [0.88, 0.35])
    lower, upper = band.edges(
        0.9, reading, inner, below, np.zeros(2), one_sided=False
    )  # the matrix mean
    np.testing.assert_allclose(lower, [0.8, 0.05])
    np.testing.assert_allclose(upper, [1.0, 0.35])
    again = GuardBand.from_dict(band.to_dict())
    assert again.inner_half_width(0.9) == pytest.approx(0.04)
    for reach in (-1.0, "far", float("nan")):
        with pytest.raises(InputError, match="inner_reach"):
            GuardBand.from_dict({**band.to_dict(), "inner_reach": reach})
    assert GuardBand(np.zeros(3), None, np.full(3, 0.04)).inner_half_width(0.9) == np.inf


def test_guarded_still_guards_below_the_sources_when_the_target_is_not_the_mean():
    source, target = world(seed=11, shift=-2.5, guessing=0.25)
    truth = _scaled_truth(target)
    subset = make_selector("random").select(source, 40, seed=0)
    items = target.select_items(subset.item_ids)
    guarded = _fit_on_scaled_truth("guarded", source, subset)
    value, lower, upper = guarded.estimate_matrix(items)
    inner, inner_lower, inner_upper = guarded.inner_.estimate_matrix(items)
    assert np.mean(np.abs(value - truth)) < 0.6 * np.mean(np.abs(inner - truth))
    covered = np.mean((lower <= truth) & (truth <= upper))
    assert covered > np.mean((inner_lower <= truth) & (truth <= inner_upper)) and covered >= 0.85


def test_guarded_state_saved_before_the_one_sided_guard_guards_both_sides():
    source, _target = world(seed=4, shift=2.0)
    subset = make_selector("random").select(source, 40, seed=0)
    state = _fit_on_scaled_truth("guarded", source, subset).state_dict()
    assert state["guard_above"] is False
    del state["guard_above"]
    assert estimator_from_state(state).guard_above_ is True


def test_guarded_state_round_trip():
    source, target = world(seed=6, shift=1.0)
    subset = select_with_audit(make_selector("random"), source, 40, 10, seed=0)
    estimator = fitted("guarded", source, subset)
    state = json.loads(json.dumps(estimator.state_dict(), allow_nan=False))
    again = estimator_from_state(state)
    items = target.select_items(subset.item_ids)
    for a, b in zip(estimator.estimate_matrix(items), again.estimate_matrix(items), strict=True):
        np.testing.assert_allclose(a, b)
    assert state["reading"]["name"] in READINGS and set(state["fold_mae"]) <= set(READINGS)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"inner": "guarded"}, "inner must be one of"),
        ({"inner": "nope"}, "inner must be one of"),
        ({"reading": "nope"}, "reading must be 'auto' or one of"),
        ({"reading": "audit"}, "reading 'audit' cannot be used: the subset has 0 audit items"),
    ],
)
def test_guarded_refuses_bad_parameters(params, message):
    source, _ = world(seed=7)
    subset = make_selector("random").select(source, 20, seed=0)
    with pytest.raises(InputError, match=message):
        fitted("guarded", source, subset, **params)


# ---------------------------------------------------------------------------- audit items
def test_audit_items_are_a_random_sample_of_the_rest():
    source, _ = world(seed=8)
    subset = select_with_audit(
        make_selector("greedy"), source, 30, 12, seed=3, target=whole_truth(source)
    )
    audit = subset.info["audit_items"]
    assert len(audit) == 12 and subset.budget == 30
    assert set(audit) <= set(subset.item_ids) and len(set(subset.item_ids)) == 30
    assert subset.weights.sum() == pytest.approx(1.0)
    assert subset.weights[-12:] == pytest.approx(np.full(12, 0.4 / 12))


@pytest.mark.parametrize(("n_audit", "message"), [(1, "at least 2"), (30, "leave none")])
def test_audit_sizes_that_cannot_work_are_refused(n_audit, message):
    source, _ = world(seed=9)
    with pytest.raises(InputError, match=message):
        select_with_audit(make_selector("random"), source, 30, n_audit, seed=0)


# ---------------------------------------------------------------------------- finite population
def test_whole_benchmark_estimates_count_asked_items_exactly():
    """190 of a 200-item benchmark asked: the score is the asked part plus an estimate of 10
    items, so no estimate can be more than 5 points off and every interval lies in that
    range; fitted for a target that is not the matrix mean, the intervals do not know that."""
    source, target = world(seed=10, n_source=30)
    truth = whole_truth(target)
    subset = make_selector("random").select(source, 190, seed=0)
    items = target.select_items(subset.item_ids)
    known = items.values.sum(axis=1) / N_ITEMS
    for name in ("mean", "kridge", "guarded"):
        estimator = fitted(name, source, subset)
        value, lower, upper = estimator.estimate_matrix(items)
        assert np.all(np.abs(value - truth) <= 10 / N_ITEMS + 1e-12), name
        assert np.all(lower >= known - 1e-12) and np.all(upper <= known + 10 / N_ITEMS + 1e-12)
    shifted = whole_truth(source) * 0.999 + 0.0005
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = make_estimator("mean").fit(source, subset, shifted)
    assert other.finite_ is None
    _, lower, upper = other.estimate_matrix(items)
    assert np.any(lower < known - 1e-6) or np.any(upper > known + 10 / N_ITEMS + 1e-6)


def test_logistic_sums_equal_the_sum_over_every_item():
    """Items sharing a logit are summed once, times their count: the same sums, binary
    rates (few distinct logits) or partial credit (all distinct)."""
    from scipy.special import expit

    from lmeval_microbench.outside.readings.own import logistic_sums, shift_grid

    grid = shift_grid()
    rng = np.random.default_rng(0)
    for logits in (rng.choice([-2.0, 0.0, 0.5, 3.0], size=300), rng.normal(size=120)):
        direct = expit(grid[:, None] + logits[None, :]).sum(axis=1)
        np.testing.assert_allclose(logistic_sums(grid, logits), direct, rtol=1e-12)


def test_a_fold_whose_sources_give_no_scale_map_is_skipped_not_fatal(flat_below):
    source, score = flat_below
    weak = score < np.median(score)
    with pytest.raises(FlatScaleError):
        ScaleMap.fit(source.values[weak].mean(axis=1), score[weak], whole=False)
    subset = make_selector("random").select(source, 30, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        guarded = make_estimator("guarded").fit(source, subset, score)
    assert guarded.reading_name_ in guarded.fold_mae_  # scored on the folds that could map
    value, lower, upper = guarded.estimate_matrix(source.select_items(subset.item_ids))
    assert np.all(np.isfinite(value)) and np.all(lower <= value) and np.all(value <= upper)


def test_sources_whose_matrix_mean_gives_no_scale_map_are_refused_naming_the_matrix(
    flat_everywhere,
):
    source, score = flat_everywhere
    subset = make_selector("random").select(source, 30, seed=0)
    with pytest.raises(FlatScaleError, match=r"^flat.csv: guarded: .* among these 60 models"):
        make_estimator("guarded").fit(source, subset, score)
