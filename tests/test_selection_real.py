"""Selection on real Open LLM Leaderboard responses: does supervised greedy beat random?"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lmeval_microbench.estimators import make_estimator
from lmeval_microbench.irt import IRTModel
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import make_selector
from lmeval_microbench.truth import align_target, read_scores

BUDGET = 25


@pytest.fixture(scope="module")
def mmlu_split(shared_data):
    """mmlu_B models with a known full score, split 80/20 into source and held-out models."""
    data = shared_data / "openllm_v1"
    matrix = ResponseMatrix.read_parquet(data / "responses" / "mmlu_B.parquet")
    scores = read_scores(data / "scores" / "mmlu_B_scores.csv", "full_score_metabench")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # models without a full score are left out
        matrix, truth = align_target(matrix, scores)
    order = np.random.default_rng(2024).permutation(matrix.n_models)
    cut = int(0.8 * matrix.n_models)
    source_rows, heldout_rows = np.sort(order[:cut]), np.sort(order[cut:])
    source = matrix.select_models([matrix.model_ids[k] for k in source_rows])
    heldout = matrix.select_models([matrix.model_ids[k] for k in heldout_rows])
    return source, truth[source_rows], heldout, truth[heldout_rows]


def heldout_mae(split, subset, params) -> float:
    source, source_truth, heldout, heldout_truth = split
    estimator = make_estimator("calibrated").fit(source, subset, source_truth, irt=params)
    return float(np.mean(np.abs(estimator.estimate_matrix(heldout)[0] - heldout_truth)))


def test_greedy_beats_random_on_heldout_mmlu_models(mmlu_split):
    source, source_truth, _, _ = mmlu_split
    params = IRTModel("2pl", 1).fit(source).params_
    greedy = make_selector("greedy").select(source, BUDGET, seed=0, target=source_truth)
    random_maes = [
        heldout_mae(mmlu_split, make_selector("random").select(source, BUDGET, seed=s), params)
        for s in range(3)
    ]
    assert heldout_mae(mmlu_split, greedy, params) < np.mean(random_maes)
