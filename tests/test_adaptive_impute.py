"""The shifted imputation of unasked items (adaptive.estimation.impute) and its pool field."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, logit

from lmeval_microbench.adaptive import build_pool, pool_state
from lmeval_microbench.adaptive.bands import Band
from lmeval_microbench.adaptive.estimation import PSEUDO_ANSWERS, impute
from lmeval_microbench.adaptive.pool import ADAPTIVE, AdaptiveState
from lmeval_microbench.adaptive.scoring import ScoreMap
from lmeval_microbench.errors import InputError
from lmeval_microbench.synthetic import random_item_params, simulate_responses

RNG = np.random.default_rng(5)
EXPECTED = RNG.uniform(0.1, 0.9, size=(4, 12))
ASKED = np.zeros((4, 12), dtype=bool)
ASKED[:, :5] = True
ASKED[3] = False  # a row that has not answered anything yet


def test_shifted_rows_match_their_hit_rate_with_one_pseudo_answer():
    scores = np.zeros((4, 12))
    scores[0, :5] = 1.0
    scores[1, :5] = [1, 0, 1, 0, 1]
    scores[2, :5] = 0.0
    out = impute(EXPECTED, ASKED, scores)
    np.testing.assert_array_equal(out[ASKED], scores[ASKED])
    for row in range(3):
        own = EXPECTED[row, :5].mean()
        target = (scores[row, :5].sum() + PSEUDO_ANSWERS * own) / (5 + PSEUDO_ANSWERS)
        # one common logit shift c explains the unasked values ...
        shift = logit(out[row, 5:]) - logit(EXPECTED[row, 5:])
        np.testing.assert_allclose(shift, shift[0], atol=1e-6)
        # ... and it moves the asked items' expectations onto the target hit rate
        np.testing.assert_allclose(
            expit(logit(EXPECTED[row, :5]) + shift[0]).mean(), target, atol=1e-9
        )
    assert np.all(out[0, 5:] > EXPECTED[0, 5:]) and np.all(out[2, 5:] < EXPECTED[2, 5:])
    np.testing.assert_allclose(out[3], EXPECTED[3])  # nothing asked: no shift


def test_answers_that_match_the_expectations_change_nothing():
    scores = np.where(ASKED, EXPECTED, 0.0)
    np.testing.assert_allclose(
        impute(EXPECTED, ASKED, scores), np.where(ASKED, scores, EXPECTED), atol=1e-9
    )


def test_posterior_mode_is_the_plain_expectation_and_unknown_modes_are_refused():
    scores = np.where(ASKED, 1.0, np.nan)
    plain = impute(EXPECTED, ASKED, scores, "posterior")
    np.testing.assert_array_equal(plain, np.where(ASKED, 1.0, EXPECTED))
    with pytest.raises(InputError, match="imputation"):
        impute(EXPECTED, ASKED, scores, "mean")


def test_new_pools_record_the_shift_and_old_pools_load_without_it():
    params = random_item_params(20, seed=3)
    matrix, _ = simulate_responses(params, 200, seed=4)
    bundle = build_pool(matrix, matrix.mean_scores(), name="p", benchmark="toy", estimator="ridge")
    state = bundle.estimator_state(ADAPTIVE)
    assert state["imputation"] == "shifted"
    assert pool_state(bundle).state.score_map.imputation == "shifted"
    older = {k: v for k, v in state.items() if k != "imputation"}
    assert AdaptiveState.from_bundle(bundle, older).score_map.imputation == "posterior"


def test_bands_measure_the_distance_outside_each_span():
    rng = np.random.default_rng(8)
    prediction = rng.uniform(0.3, 0.7, 400)
    truth = prediction + rng.normal(0, 0.03, 400)
    wide = Band.fit(10, prediction, truth, (prediction - 0.2, prediction + 0.2))
    plain = Band.fit(10, prediction, truth, (prediction, prediction))
    # every truth inside its span: nothing left for the band to add
    assert np.all(wide.half_width(prediction, 0.9) == 0.0)
    half = plain.half_width(prediction, 0.9)
    assert np.mean(np.abs(truth - prediction) <= half) >= 0.88
    # the interval is the span widened by the band (spans of zero width: the plain band)
    score_map = ScoreMap(estimator=None, bands=(plain,))  # type: ignore[arg-type]
    low, high = score_map.interval(prediction, 10, span=(prediction - 0.05, prediction + 0.01))
    np.testing.assert_allclose(
        high - low,
        np.clip(prediction + 0.01 + half, 0, 1) - np.clip(prediction - 0.05 - half, 0, 1),
    )


def test_a_pool_with_an_unknown_imputation_is_refused_by_name():
    from lmeval_microbench.errors import BundleError

    params = random_item_params(20, seed=3)
    matrix, _ = simulate_responses(params, 200, seed=4)
    bundle = build_pool(matrix, matrix.mean_scores(), name="p", benchmark="toy", estimator="ridge")
    state = dict(bundle.estimator_state(ADAPTIVE), imputation="median")
    with pytest.raises(BundleError, match=r"bundle 'p'.*unknown imputation 'median'"):
        AdaptiveState.from_bundle(bundle, state)
