"""``truth.is_matrix_mean``: whether the target is the mean over the matrix items, asked by the
estimators, the outside readings, the recipe choice and the gap filling alike."""

from __future__ import annotations

import numpy as np

from lmeval_microbench.auto.choice import required_sources
from lmeval_microbench.estimators._fitting import MIN_CALIBRATION_MODELS, MIN_SOURCE_MODELS
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.truth import MEAN_TOLERANCE, is_matrix_mean

VALUES = np.array([[1.0, 0.0, np.nan, 1.0], [0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, np.nan]])


def test_row_means_over_scored_items_are_the_matrix_mean():
    assert is_matrix_mean(VALUES, np.array([2 / 3, 0.5, 1.0]))


def test_a_target_off_by_more_than_the_tolerance_is_not():
    target = np.array([2 / 3, 0.5, 1.0]) + np.array([0.0, 10 * MEAN_TOLERANCE, 0.0])
    assert not is_matrix_mean(VALUES, target)
    assert is_matrix_mean(VALUES, np.array([2 / 3, 0.5 + MEAN_TOLERANCE / 2, 1.0]))


def test_the_choice_needs_calibration_models_only_where_the_target_is_another_score():
    rng = np.random.default_rng(0)
    values = (rng.random((30, 12)) < 0.6).astype(float)
    values[0, 3] = np.nan  # an unscored item does not count in the row's mean
    matrix = ResponseMatrix(values, [f"m{k}" for k in range(30)], [f"i{k}" for k in range(12)])
    mean = np.nanmean(values, axis=1)
    assert required_sources(matrix, mean) == MIN_SOURCE_MODELS
    assert required_sources(matrix, 0.9 * mean) == MIN_CALIBRATION_MODELS
