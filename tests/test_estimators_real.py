"""Estimators on real Open LLM Leaderboard models: intervals must hold on held-out models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lmeval_microbench.estimators import DEFAULT_ESTIMATOR, make_estimator
from lmeval_microbench.irt import IRTModel
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection.base import Subset

BENCHMARK = "arc"
BUDGET = 50


def load_with_truth(shared_data: Path, benchmark: str) -> tuple[ResponseMatrix, np.ndarray]:
    """The benchmark's matrix and each model's true full-benchmark score as a fraction."""
    folder = shared_data / "openllm_v1"
    matrix = ResponseMatrix.read_parquet(folder / "responses" / f"{benchmark}_B.parquet")
    scores = pd.read_csv(folder / "scores" / f"{benchmark}_B_scores.csv")
    truth = scores.drop_duplicates("model").set_index("model")["full_score_metabench"]
    truth = truth.reindex(list(matrix.model_ids))
    known = [m for m, value in truth.items() if np.isfinite(value)]
    return matrix.select_models(known), truth.loc[known].to_numpy() / 100.0


@pytest.fixture(scope="module")
def split(shared_data: Path) -> dict:
    """80 % source / 20 % held-out models, a random 50-item subset, IRT fitted on the source."""
    matrix, truth = load_with_truth(shared_data, BENCHMARK)
    rng = np.random.default_rng(2024)
    order = rng.permutation(matrix.n_models)
    n_heldout = matrix.n_models // 5
    source_rows, heldout_rows = np.sort(order[n_heldout:]), np.sort(order[:n_heldout])
    source = matrix.select_models([matrix.model_ids[k] for k in source_rows])
    items = rng.choice(matrix.item_ids, size=BUDGET, replace=False)
    return {
        "source": source,
        "heldout": matrix.select_models([matrix.model_ids[k] for k in heldout_rows]),
        "target_source": truth[source_rows],
        "target_heldout": truth[heldout_rows],
        "subset": Subset(tuple(items), np.full(BUDGET, 1.0 / BUDGET), "random", 2024),
        "irt": IRTModel(model="2pl", n_dims=1, random_state=0).fit(source).params_,
    }


def heldout_errors(name: str, split: dict) -> tuple[np.ndarray, np.ndarray]:
    estimator = make_estimator(name).fit(
        split["source"], split["subset"], split["target_source"], irt=split["irt"]
    )
    value, lower, upper = estimator.estimate_matrix(split["heldout"])
    truth = split["target_heldout"]
    return value - truth, (lower <= truth) & (truth <= upper)


def test_default_estimator_intervals_cover_heldout_models(split: dict) -> None:
    _, inside = heldout_errors(DEFAULT_ESTIMATOR, split)
    assert inside.size > 500
    assert 0.82 <= inside.mean() <= 0.97


def test_default_estimator_beats_the_calibrated_subset_mean(split: dict) -> None:
    """IRT features must earn their keep over the plain (calibrated) subset accuracy."""
    default_error, _ = heldout_errors(DEFAULT_ESTIMATOR, split)
    mean_error, _ = heldout_errors("mean", split)
    assert np.mean(np.abs(default_error)) < 0.9 * np.mean(np.abs(mean_error))
