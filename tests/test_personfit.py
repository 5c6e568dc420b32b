"""Person fit: l_z / l_z*, the guessing test and the widened interval."""

from __future__ import annotations

import numpy as np
import pytest

from lmeval_microbench import personfit as pf
from lmeval_microbench._types import Estimate
from lmeval_microbench.errors import InputError
from lmeval_microbench.irt import ItemParams

N_ITEMS = 30


def _params(n: int = N_ITEMS, n_dims: int = 1, slope: float = 1.5) -> ItemParams:
    """Items from easy (d = 2.5) to hard (d = -2.5), equal slopes."""
    ids = tuple(f"i{k}" for k in range(n))
    a = np.full((n, n_dims), slope / np.sqrt(n_dims))
    return ItemParams(ids, a, np.linspace(2.5, -2.5, n), np.zeros(n), np.ones(n))


def _simulate(params: ItemParams, theta: np.ndarray, seed: int) -> np.ndarray:
    p = params.probability(theta)
    return (np.random.default_rng(seed).random(p.shape) < p).astype(np.float64)


def test_lz_is_the_textbook_formula_at_a_given_ability():
    params = _params(5)
    ids = list(params.item_ids)
    y = np.array([[1.0, 1.0, 0.0, 1.0, 0.0]])
    theta = np.array([[0.3]])
    p = params.probability(theta)[0]
    l0 = np.sum(y[0] * np.log(p) + (1 - y[0]) * np.log(1 - p))
    mean = np.sum(p * np.log(p) + (1 - p) * np.log(1 - p))
    var = np.sum(p * (1 - p) * np.log(p / (1 - p)) ** 2)
    expected = (l0 - mean) / np.sqrt(var)
    got = pf.lz(params, y, ids, corrected=False, theta=theta)
    assert got[0] == pytest.approx(expected, rel=1e-10)


def test_guttman_pattern_fits_and_its_reverse_does_not():
    params = _params()
    ids = list(params.item_ids)
    guttman = np.zeros(N_ITEMS)
    guttman[:15] = 1.0  # the 15 easiest right
    reversed_ = guttman[::-1].copy()  # the 15 hardest right
    for corrected in (False, True):
        stats = pf.lz(params, np.vstack([guttman, reversed_]), ids, corrected=corrected)
        assert stats[0] > 0.5
        assert stats[1] < -5


def test_all_right_or_all_wrong_is_not_judged_by_the_misfit_check():
    """A pattern without a wrong (or a right) answer has no order to judge: such a model was
    once warned that its "right and wrong answers do not follow item difficulty". Partial
    credit at one level, or a single wrong answer, is still judged."""
    params = _params()
    ids = list(params.item_ids)
    right, wrong, half = np.ones(N_ITEMS), np.zeros(N_ITEMS), np.full(N_ITEMS, 0.5)
    one_wrong = right.copy()
    one_wrong[0] = 0.0  # the easiest item wrong
    gapped = right.copy()
    gapped[3] = np.nan
    rows = np.vstack([right, wrong, gapped, half, one_wrong])
    np.testing.assert_array_equal(pf.one_sided(rows), [True, True, True, False, False])
    always = 100.0  # a threshold every finite l_z* lies under
    fits = pf.person_fit(params, rows, ids, 0.25, lz_threshold=always, n_simulations=500)
    assert [f.misfit for f in fits] == [False, False, False, True, True]
    assert all("item difficulty" not in f.reason for f in fits[:3])


def test_lz_star_is_near_standard_normal_for_conforming_models():
    params = _params(40)
    theta = np.random.default_rng(0).standard_normal((3000, 1))
    values = _simulate(params, theta, seed=1)
    stats = pf.lz(params, values, list(params.item_ids))
    finite = stats[np.isfinite(stats)]
    assert finite.size > 2900
    assert abs(finite.mean()) < 0.15
    assert 0.8 < finite.std() < 1.2
    assert np.mean(finite < pf.DEFAULT_LZ_THRESHOLD) < 0.08


def test_missing_scores_are_left_out():
    params = _params()
    ids = list(params.item_ids)
    values = _simulate(params, np.array([[0.2], [-0.7]]), seed=2)
    holed = values.copy()
    holed[:, [3, 11, 20]] = np.nan
    keep = [k for k in range(N_ITEMS) if k not in (3, 11, 20)]
    full = pf.lz(params, values[:, keep], [ids[k] for k in keep])
    assert np.allclose(pf.lz(params, holed, ids), full)
    test_holed = pf.guessing_test(params, holed, ids, 0.25, n_simulations=200)
    test_kept = pf.guessing_test(
        params, values[:, keep], [ids[k] for k in keep], 0.25, n_simulations=200
    )
    assert np.allclose(test_holed.log_ratio, test_kept.log_ratio)
    one = np.full((1, N_ITEMS), np.nan)
    one[0, 0] = 1.0
    assert np.isnan(pf.lz(params, one, ids)[0])


def test_random_responders_are_flagged_and_ordinary_ones_are_not():
    params = _params()
    ids = list(params.item_ids)
    rng = np.random.default_rng(3)
    random_answers = (rng.random((300, N_ITEMS)) < 0.25).astype(np.float64)
    ordinary = _simulate(params, rng.normal(0.5, 1.0, (300, 1)), seed=4)
    source = _simulate(params, rng.normal(0.5, 1.0, (2000, 1)), seed=5)
    threshold = pf.calibrate_lz_threshold(params, source, ids, false_alarm=0.05)
    fits_random = pf.person_fit(
        params, random_answers, ids, 0.25, lz_threshold=threshold, n_simulations=500
    )
    fits_ordinary = pf.person_fit(
        params, ordinary, ids, 0.25, lz_threshold=threshold, n_simulations=500
    )
    assert np.mean([f.guessing for f in fits_random]) > 0.95
    assert np.mean([f.flagged for f in fits_random]) > 0.95
    assert all("guessing" in f.reason for f in fits_random if f.guessing)
    assert np.mean([f.misfit for f in fits_ordinary]) < 0.10
    assert np.mean([f.guessing for f in fits_ordinary]) < 0.10
    assert all(f.reason == "" for f in fits_ordinary if not f.flagged)


def test_far_fewer_right_answers_than_chance_is_not_guessing():
    """The count test is two-sided: a model far below the chance rates (systematically
    wrong, or below the weakest sources standing in for chance) is not a guesser."""
    params = _params()
    ids = list(params.item_ids)
    rng = np.random.default_rng(11)
    below = (rng.random((200, N_ITEMS)) < 0.1).astype(np.float64)
    test = pf.guessing_test(params, below, ids, 0.5, n_simulations=1000, seed=12)
    # the likelihood ratio alone leaves many of them looking like guessing ...
    assert np.mean(test.p_value >= 0.01) > 0.2
    # ... the count of right answers, far below chance, does not
    assert np.mean(test.score_p_value < 0.01) > 0.95
    fits = pf.person_fit(params, below, ids, 0.5, n_simulations=1000)
    assert np.mean([f.guessing for f in fits]) < 0.05
    at_chance = (rng.random((200, N_ITEMS)) < 0.5).astype(np.float64)
    at_chance_p = pf.guessing_test(params, at_chance, ids, 0.5, n_simulations=1000).score_p_value
    assert 0.0 < np.mean(at_chance_p < 0.05) < 0.12


def test_guessing_p_value_is_uniform_ish_under_guessing():
    params = _params()
    ids = list(params.item_ids)
    answers = (np.random.default_rng(6).random((400, N_ITEMS)) < 0.5).astype(np.float64)
    test = pf.guessing_test(params, answers, ids, 0.5, n_simulations=1000, seed=7)
    assert 0.02 < np.mean(test.p_value < 0.1) < 0.2
    assert np.all((test.posterior >= 0) & (test.posterior <= 1))


def test_per_item_chance_and_multidimensional_items():
    params = _params(n_dims=2)
    ids = list(params.item_ids)
    chance = np.linspace(0.2, 0.5, N_ITEMS)
    answers = (np.random.default_rng(8).random((50, N_ITEMS)) < chance).astype(np.float64)
    fits = pf.person_fit(params, answers, ids, chance, n_simulations=300)
    assert np.mean([f.guessing for f in fits]) > 0.9
    assert all(np.isfinite(f.lz) for f in fits)


def test_widening_reaches_chance_only_when_guessing():
    estimate = Estimate(0.517, 0.465, 0.570, 0.9, 0.03)
    guess = pf.PersonFit(-3.0, -2.0, 0.4, 0.9, 0.01, 25, True, True, "looks like guessing")
    wide, note = pf.widen_for_fit(estimate, guess, 0.25)
    # the value moves to the mixture 0.1 * 0.517 + 0.9 * 0.25 (P(guessing) = 0.9)
    assert wide.value == pytest.approx(0.1 * 0.517 + 0.9 * 0.25)
    assert (wide.lower, wide.upper) == (0.25, 0.570)
    assert "chance-level score 25.0" in note and "guessing" in note and "0.90" in note
    # below chance the value stays: guessing says "no better than chance", not "better"
    below = Estimate(0.10, 0.05, 0.2)
    wide, note = pf.widen_for_fit(below, guess, 0.25)
    assert (wide.value, wide.lower, wide.upper) == (0.10, 0.05, 0.25)
    assert "chance-level score 25.0 (estimate kept)" in note
    # the weakest sources standing in for chance: their score is a floor, not a guesser's
    for start in (estimate, below):
        wide, note = pf.widen_for_fit(start, guess, 0.25, stand_in=True)
        assert wide.value == start.value
        assert (wide.lower, wide.upper) == (min(start.lower, 0.25), max(start.upper, 0.25))
        assert "weakest source models' score 25.0 (estimate kept)" in note
    unsure = pf.PersonFit(-1.0, -2.0, 0.4, 0.3, 0.01, 25, False, True, "could be guessing")
    wide, _ = pf.widen_for_fit(estimate, unsure, 0.25)
    assert wide.value == pytest.approx(0.7 * 0.517 + 0.3 * 0.25) and wide.lower == 0.25
    misfit = pf.PersonFit(-3.0, -2.0, 0.001, 0.0, 0.01, 25, True, False, "unlike the source")
    same, note = pf.widen_for_fit(estimate, misfit, 0.25)
    assert same == estimate and note == "unlike the source"
    fine = pf.PersonFit(0.1, -2.0, 0.001, 0.0, 0.01, 25, False, False, "")
    assert pf.widen_for_fit(estimate, fine, 0.25) == (estimate, "")
    with pytest.raises(InputError):
        pf.widen_for_fit(estimate, fine, 1.5)


def test_bad_inputs_are_refused():
    params = _params(3)
    ids = list(params.item_ids)
    with pytest.raises(InputError):
        pf.chance_vector([0.2, 0.3], 3)
    with pytest.raises(InputError):
        pf.chance_vector(1.0, 3)
    assert pf.chance_vector(0.0, 3).min() == pf.CHANCE_FLOOR
    with pytest.raises(InputError):
        pf.person_fit(params, np.ones((1, 3)), ids, 0.25, alpha=0.0)
    with pytest.raises(InputError):
        pf.calibrate_lz_threshold(params, np.ones((5, 3)), ids)


def test_population_floor_uses_the_weakest_models():
    values = np.array([[1, 0], [0, 0], [1, 1], [1, 1]], dtype=float)
    truth = np.array([0.5, 0.0, 0.9, 0.8])
    assert np.allclose(pf.population_floor(values, truth, share=0.5), [0.5, 0.0])


def test_a_random_responder_on_the_shipped_hellaswag_bundle(shared_data):
    """Issue 12.3: a 7-of-25 random answerer was estimated at 51.7 [46.5, 57.0] (chance 25)."""
    from lmeval_microbench.bundle import load_bundle
    from lmeval_microbench.harness import include_path
    from lmeval_microbench.reconstruct import bundle_estimator

    bundle = load_bundle(include_path() / "openllm_v1" / "hellaswag")
    ids = list(bundle.item_ids)
    rng = np.random.default_rng(9)
    answers = (rng.random((40, len(ids))) < 0.25).astype(np.float64)
    fits = pf.person_fit(bundle.irt, answers, ids, 0.25, n_simulations=500)
    estimator = bundle_estimator(bundle, None)
    contains, moved = [], []
    for row, fit in zip(answers, fits, strict=True):
        estimate = estimator.estimate(dict(zip(ids, row, strict=True)))
        wide, _ = pf.widen_for_fit(estimate, fit, 0.25)
        contains.append(wide.lower <= 0.25 <= wide.upper)
        moved.append(abs(wide.value - 0.25))
    assert np.mean([f.flagged for f in fits]) >= 0.95
    assert np.mean(contains) >= 0.95
    assert np.mean(moved) <= 0.05  # the point value too, not only the interval's end


def _with_parts(params: ItemParams, theta: np.ndarray, seed: int, parts: int = 4) -> np.ndarray:
    """Each item scored as the share of ``parts`` right/wrong parts (partial credit)."""
    p = params.probability(theta)
    draws = np.random.default_rng(seed).random((parts, *p.shape)) < p
    return draws.mean(axis=0)


def test_answer_spread_is_zero_for_right_wrong_and_the_parts_share_for_partial_credit():
    params = _params()
    rng = np.random.default_rng(20)
    binary = _simulate(params, rng.normal(0, 1, (200, 1)), seed=21)
    assert np.all(pf.statistics.answer_spread(binary) == 0.0)
    guessers = (rng.random((4, 2000, N_ITEMS)) < 0.3).mean(axis=0)
    # the mean of four right/wrong parts keeps 3/4 of y(1 - y)
    assert np.median(pf.statistics.answer_spread(guessers)) == pytest.approx(0.75, abs=0.05)
    holed = binary.copy()
    holed[:, :5] = np.nan
    holed[0] = np.nan
    assert np.all(pf.statistics.answer_spread(holed) == 0.0)


def test_partial_credit_ordinary_models_are_not_taken_for_guessers_and_guessers_are():
    """Drawn right or wrong, random responders spread their scores far wider than a model
    with partial credit, whose likelihood ratio then looked like guessing; matched to the
    answers' spread, the test keeps its power on partial-credit guessers."""
    params = _params()
    ids = list(params.item_ids)
    rng = np.random.default_rng(22)
    ordinary = _with_parts(params, rng.normal(-1.5, 0.5, (300, 1)), seed=23)
    guessers = (rng.random((4, 300, N_ITEMS)) < 0.25).mean(axis=0)
    ordinary_test = pf.guessing_test(params, ordinary, ids, 0.25, n_simulations=500, seed=24)
    guesser_fits = pf.person_fit(params, guessers, ids, 0.25, n_simulations=500, seed=25)
    assert np.mean(ordinary_test.p_value >= 0.01) < 0.10
    assert np.mean([f.guessing for f in guesser_fits]) > 0.95
    p_under_null = pf.guessing_test(params, guessers, ids, 0.25, n_simulations=500).p_value
    assert 0.02 < np.mean(p_under_null < 0.1) < 0.2


def test_the_posterior_weighs_guessing_under_the_wide_ability_prior_and_the_flag_does_not():
    """P(guessing) compares guessing with an ordinary model of ability prior N(0, 3²): a
    model weaker than every source (theta -1.5 on a prior of sd 1) then needs no guessing to
    explain it, and its estimate moves less far toward chance; a true guesser's posterior
    stays high. The p-values, hence the flag, are those of the sources' N(0, 1)."""
    params = _params()
    ids = list(params.item_ids)
    weak = _simulate(params, np.full((300, 1), -1.5), seed=4)
    guessers = (np.random.default_rng(5).random((300, N_ITEMS)) < 0.1).astype(np.float64)
    for values in (weak, guessers):
        wide = pf.guessing_test(params, values, ids, 0.1, n_simulations=200, seed=1)
        narrow = pf.guessing_test(
            params, values, ids, 0.1, n_simulations=200, seed=1, posterior_sd=1.0
        )
        np.testing.assert_array_equal(wide.p_value, narrow.p_value)
        np.testing.assert_array_equal(wide.log_ratio, narrow.log_ratio)
        prior_odds = np.log(pf.DEFAULT_PRIOR_GUESS / (1 - pf.DEFAULT_PRIOR_GUESS))
        np.testing.assert_allclose(
            narrow.posterior, 1 / (1 + np.exp(narrow.log_ratio - prior_odds))
        )
        flagged = (wide.p_value >= 0.01) & (wide.score_p_value >= 0.01)
        assert flagged.sum() > 50
        if values is weak:
            assert wide.posterior[flagged].mean() < narrow.posterior[flagged].mean() - 0.05
        else:
            assert wide.posterior[flagged].mean() > 0.8
    with pytest.raises(InputError, match="posterior_sd"):
        pf.guessing_test(params, weak, ids, 0.1, n_simulations=10, posterior_sd=0.0)
