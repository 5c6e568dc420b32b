"""IRTModel on small and wide matrices (few models, thousands of items): convergence, the
fallback from parameter-expanded to plain EM, the fit report and its warning.

The wide design (12 models x 2,000 items, one model far above the rest, so it answers nearly
every non-constant item right) made the EM before the safeguard diverge on every seed 0-3
(slopes of 1e11-1e14 after 200 steps); it now converges in 19-32 steps.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lmeval_microbench.errors import ConvergenceWarning
from lmeval_microbench.irt import IRTModel
from lmeval_microbench.irt.report import PARAMETER_BOUND, FitReport
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.synthetic import random_item_params, simulate_responses


def _wide(seed: int, n_items: int = 2000) -> ResponseMatrix:
    params = random_item_params(n_items, seed=seed)
    theta = np.r_[np.linspace(-1.5, 1.5, 11), 4.5][:, None]
    matrix, _ = simulate_responses(params, 12, seed=seed, theta=theta)
    return matrix.drop_items(matrix.constant_items())


@pytest.mark.parametrize("seed", [0, 1])
def test_wide_matrix_with_a_top_model_converges(seed: int) -> None:
    matrix = _wide(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = IRTModel("2pl", max_iter=200).fit(matrix)
    report = model.fit_report_
    assert model.converged_ and report.converged and report.trusted
    assert report.n_iter < 100
    assert report.expansion_fallback_at is not None
    assert report.items_at_bound == ()
    assert np.all(np.isfinite(model.params_.a)) and np.max(np.abs(model.params_.a)) < 20
    # the top model stays on top, the others keep their order
    assert np.argmax(model.abilities_[:, 0]) == 11
    assert np.corrcoef(model.abilities_[:11, 0], np.arange(11))[0, 1] > 0.95


def test_synthetic_20_models_3000_items_recovers_probabilities() -> None:
    params = random_item_params(3000, seed=0)
    matrix, theta = simulate_responses(params, 20, seed=100)
    matrix = matrix.drop_items(matrix.constant_items())
    model = IRTModel("2pl").fit(matrix)
    assert model.fit_report_.trusted
    assert np.corrcoef(model.abilities_[:, 0], theta[:, 0])[0, 1] > 0.98
    truth = params.subset(list(model.params_.item_ids)).probability(theta)
    assert np.mean(np.abs(model.params_.probability(model.abilities_) - truth)) < 0.12


def test_fit_that_cannot_converge_says_why() -> None:
    matrix = _wide(0, n_items=300)
    matrix.source = "wide-test-matrix"
    with pytest.warns(ConvergenceWarning) as caught:
        model = IRTModel("2pl", max_iter=3).fit(matrix)
    message = str(caught[0].message)
    assert "wide-test-matrix" in message
    assert f"12 models x {matrix.n_items} items" in message
    assert "max_iter=3" in message and "after 3 steps" in message
    assert "cannot be trusted" in message
    report = model.fit_report_
    assert isinstance(report, FitReport)
    assert not model.converged_ and not report.trusted
    assert report.n_iter == model.n_iter_ == 3
    assert report.worst_item in matrix.item_ids
    assert f"{report.max_change:.3g}" in message and report.worst_item in message


def test_parameters_stay_in_the_box() -> None:
    matrix = _wide(1, n_items=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = IRTModel("2pl", max_iter=40, prior_sd=None).fit(matrix)
    assert np.max(np.abs(model.params_.a)) <= PARAMETER_BOUND
    assert np.max(np.abs(model.params_.d)) <= PARAMETER_BOUND


def test_normal_matrix_is_unchanged() -> None:
    """500 x 400 2PL: the same fit as before the safeguard (values recorded from that code)."""
    params = random_item_params(400, seed=0)
    matrix, _ = simulate_responses(params, 500, seed=100)
    model = IRTModel("2pl").fit(matrix)
    report = model.fit_report_
    assert report.trusted and report.expansion_fallback_at is None
    assert model.n_iter_ == 7
    assert model.loglik_ == pytest.approx(-96860.15774534931, rel=1e-9)
    np.testing.assert_allclose(
        model.params_.a[:3, 0],
        [0.9684588364607, 0.8248938099007711, 1.1284374389232432],
        rtol=1e-7,
    )
    np.testing.assert_allclose(
        model.params_.d[:2], [-0.5029294259702951, 0.9275589831662098], rtol=1e-7
    )
    assert "converged in 7 EM steps" in report.message()
