"""Ability estimation: EAP / MAP / MLE against brute-force integration, id joins, edge cases."""

from __future__ import annotations

import numpy as np
import pytest

from lmeval_microbench.errors import InputError, ItemMismatchError
from lmeval_microbench.irt import ItemParams, _math, estimate_abilities, estimate_ability
from lmeval_microbench.irt.ability import MLE_BOUND, MLE_UNBOUNDED_SE
from lmeval_microbench.synthetic import random_item_params, simulate_responses

METHODS = ("eap", "map", "mle")


def _corr(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.corrcoef(x, y)[0, 1])


def _brute_force_posterior(
    params: ItemParams, scores: np.ndarray, prior_mean: float = 0.0, prior_sd: float = 1.0
) -> tuple[float, float, float]:
    """Posterior mean, sd and mode of a 1-D ability on a 200,001-point grid (reference)."""
    grid = np.linspace(prior_mean - 10 * prior_sd, prior_mean + 10 * prior_sd, 200_001)
    observed = ~np.isnan(scores)
    prob = params.probability(grid)[:, observed]
    y = scores[observed]
    log_post = (y * np.log(prob) + (1 - y) * np.log1p(-prob)).sum(axis=1)
    log_post -= 0.5 * ((grid - prior_mean) / prior_sd) ** 2
    weights = np.exp(log_post - log_post.max())
    weights /= weights.sum()
    mean = float(weights @ grid)
    return mean, float(np.sqrt(weights @ grid**2 - mean**2)), float(grid[np.argmax(log_post)])


@pytest.fixture(scope="module")
def simulated() -> tuple[ItemParams, np.ndarray, np.ndarray]:
    params = random_item_params(60, model="3pl", seed=11)
    matrix, theta = simulate_responses(params, 400, seed=12, missing_rate=0.1)
    return params, matrix.values, theta


# ------------------------------------------------------------------------------ accuracy
@pytest.mark.parametrize("method", METHODS)
def test_abilities_track_the_true_abilities(simulated, method: str) -> None:
    params, values, theta = simulated
    estimate, se = estimate_abilities(params, values, params.item_ids, method=method)
    assert estimate.shape == se.shape == (400, 1)
    assert _corr(estimate[:, 0], theta[:, 0]) > 0.9
    assert np.all(np.isfinite(estimate)) and np.all(se > 0)
    # the reported se is an honest scale of the error (ratio within a factor 1.3)
    ratio = np.sqrt(np.mean((estimate - theta) ** 2)) / np.sqrt(np.mean(se**2))
    assert 0.75 < ratio < 1.3


def test_eap_matches_brute_force_posterior_mean_and_sd(simulated) -> None:
    params, values, _ = simulated
    theta, se = estimate_abilities(
        params, values[:5], params.item_ids, method="eap", prior_mean=0.3, prior_sd=1.5
    )
    for row in range(5):
        mean, sd, _ = _brute_force_posterior(params, values[row], prior_mean=0.3, prior_sd=1.5)
        assert theta[row, 0] == pytest.approx(mean, abs=1e-4)
        assert se[row, 0] == pytest.approx(sd, abs=1e-4)


def test_map_matches_brute_force_posterior_mode(simulated) -> None:
    params, values, _ = simulated
    theta, _ = estimate_abilities(params, values[:5], params.item_ids, method="map")
    for row in range(5):
        assert theta[row, 0] == pytest.approx(
            _brute_force_posterior(params, values[row])[2], abs=2e-4
        )


def test_mle_is_the_likelihood_maximum_and_se_the_inverse_information(simulated) -> None:
    params, values, _ = simulated
    row = values[:1]
    theta, se = estimate_abilities(params, row, params.item_ids, method="mle")
    observed = ~np.isnan(row)

    def loglik(t: float) -> float:
        return float(
            _math.ability_loglik(
                np.array([[t]]), row, observed, params.a, params.d, params.g, params.u
            )[0]
        )

    best = theta[0, 0]
    assert loglik(best) >= max(loglik(best - 1e-3), loglik(best + 1e-3))
    info = params.information(np.array([best]))[0, observed[0]].sum()
    assert se[0, 0] == pytest.approx(1 / np.sqrt(info), rel=1e-6)


def test_se_shrinks_with_more_items() -> None:
    params = random_item_params(120, model="2pl", seed=5)
    matrix, _ = simulate_responses(params, 200, seed=6)
    few, many = list(params.item_ids[:20]), list(params.item_ids)
    for method in METHODS:
        _, se_few = estimate_abilities(params, matrix.select_items(few).values, few, method=method)
        _, se_many = estimate_abilities(params, matrix.values, many, method=method)
        assert np.median(se_many) < 0.7 * np.median(se_few)


def test_eap_se_is_floored_at_the_grid_resolution() -> None:
    params = random_item_params(4000, model="2pl", seed=1)
    matrix, _ = simulate_responses(params, 3, seed=2)
    _, se = estimate_abilities(params, matrix.values, params.item_ids, method="eap")
    assert np.all(se >= 0.05 / np.sqrt(12) - 1e-12)


# ------------------------------------------------------------------------------ edge cases
def test_mle_of_perfect_and_zero_patterns_is_bounded_with_large_se() -> None:
    params = random_item_params(25, model="2pl", seed=3)
    values = np.vstack([np.ones(25), np.zeros(25), np.full(25, np.nan)])
    theta, se = estimate_abilities(params, values, params.item_ids, method="mle")
    assert theta[0, 0] == MLE_BOUND and theta[1, 0] == -MLE_BOUND
    np.testing.assert_array_equal(se, MLE_UNBOUNDED_SE)
    assert np.all(np.isfinite(theta))


def test_prior_methods_fall_back_to_the_prior_without_data() -> None:
    params = random_item_params(10, model="2pl", seed=3)
    values = np.full((1, 10), np.nan)
    for method in ("eap", "map"):
        theta, se = estimate_abilities(
            params, values, params.item_ids, method=method, prior_mean=0.5, prior_sd=2.0
        )
        assert theta[0, 0] == pytest.approx(0.5, abs=1e-9)
        assert se[0, 0] == pytest.approx(2.0, abs=1e-6)


def test_perfect_pattern_gets_finite_eap_and_map() -> None:
    params = random_item_params(25, model="2pl", seed=3)
    for method in ("eap", "map"):
        theta, _ = estimate_abilities(params, np.ones((1, 25)), params.item_ids, method=method)
        assert 0 < theta[0, 0] < MLE_BOUND


# ------------------------------------------------------------------------------ id joins
@pytest.mark.parametrize("method", METHODS)
def test_column_order_does_not_matter(simulated, method: str) -> None:
    params, values, _ = simulated
    order = np.random.default_rng(0).permutation(len(params.item_ids))
    ids = [params.item_ids[k] for k in order]
    base = estimate_abilities(params, values[:50], params.item_ids, method=method)
    shuffled = estimate_abilities(params, values[:50, order], ids, method=method)
    np.testing.assert_allclose(shuffled[0], base[0], atol=1e-9)
    np.testing.assert_allclose(shuffled[1], base[1], atol=1e-9)


def test_nan_columns_equal_leaving_the_items_out(simulated) -> None:
    params, values, _ = simulated
    subset = list(params.item_ids[:30])
    padded = values[:20].copy()
    padded[:, 30:] = np.nan
    full = estimate_abilities(params, padded, params.item_ids)
    short = estimate_abilities(params, values[:20, :30], subset)
    np.testing.assert_allclose(full[0], short[0], atol=1e-9)


def test_single_model_wrapper_matches_the_matrix_version(simulated) -> None:
    params, values, _ = simulated
    scores = {i: v for i, v in zip(params.item_ids, values[0], strict=True) if not np.isnan(v)}
    for method in METHODS:
        theta, se = estimate_ability(params, scores, method=method)
        assert theta.shape == se.shape == (1,)
        matrix_theta, matrix_se = estimate_abilities(
            params, values[:1], params.item_ids, method=method
        )
        np.testing.assert_allclose(theta, matrix_theta[0], atol=1e-9)
        np.testing.assert_allclose(se, matrix_se[0], atol=1e-9)


# ------------------------------------------------------------------------------ errors
def test_unknown_item_is_a_mismatch() -> None:
    params = random_item_params(5, model="2pl", seed=0)
    with pytest.raises(ItemMismatchError, match="not-an-item"):
        estimate_abilities(params, np.ones((1, 2)), [params.item_ids[0], "not-an-item"])


@pytest.mark.parametrize(
    ("values", "ids", "message"),
    [
        (np.ones((2, 3)), ["item00000", "item00001"], "expected \\(n_models, 2\\)"),
        (np.ones((1, 2)), ["item00000", "item00000"], "duplicate item ids"),
        (np.array([[0.5, 1.5]]), ["item00000", "item00001"], "1.5 .*'item00001'"),
        (np.array([[0.5, np.inf]]), ["item00000", "item00001"], "outside \\[0, 1\\]"),
        (np.array([["a", "b"]]), ["item00000", "item00001"], "not numeric"),
    ],
)
def test_bad_scores_are_rejected(values: np.ndarray, ids: list[str], message: str) -> None:
    params = random_item_params(5, model="2pl", seed=0)
    with pytest.raises(InputError, match=message):
        estimate_abilities(params, values, ids)


def test_bad_method_and_prior_are_rejected() -> None:
    params = random_item_params(5, model="2pl", seed=0)
    with pytest.raises(InputError, match="method must be one of"):
        estimate_abilities(params, np.ones((1, 5)), params.item_ids, method="wle")
    with pytest.raises(InputError, match="positive sd"):
        estimate_abilities(params, np.ones((1, 5)), params.item_ids, prior_sd=0.0)


# ------------------------------------------------------------------------------ multidimensional
def test_two_dimensional_eap_and_map_against_a_brute_force_grid() -> None:
    """D > 1 EAP uses adaptive quadrature around the mode; compare with a 701^2 grid."""
    params = random_item_params(40, model="2pl", n_dims=2, seed=8)
    matrix, _ = simulate_responses(params, 3, seed=9)
    eap, eap_se = estimate_abilities(params, matrix.values, params.item_ids, method="eap")
    map_, _ = estimate_abilities(params, matrix.values, params.item_ids, method="map")
    axis = np.linspace(-7, 7, 701)
    grid = np.stack(np.meshgrid(axis, axis, indexing="ij"), axis=-1).reshape(-1, 2)
    prob = params.probability(grid)
    for row in range(3):
        y = matrix.values[row]
        log_post = (y * np.log(prob) + (1 - y) * np.log1p(-prob)).sum(axis=1)
        log_post -= 0.5 * np.sum(grid**2, axis=1)
        weights = np.exp(log_post - log_post.max())
        weights /= weights.sum()
        mean = weights @ grid
        sd = np.sqrt(weights @ grid**2 - mean**2)
        np.testing.assert_allclose(eap[row], mean, atol=1e-4)
        np.testing.assert_allclose(eap_se[row], sd, atol=1e-4)
        # the reference mode is a grid point (step 0.02)
        np.testing.assert_allclose(map_[row], grid[np.argmax(log_post)], atol=0.015)


# ------------------------------------------------------------------------------ derivatives
@pytest.mark.parametrize("model", ["2pl", "3pl", "4pl"])
def test_fisher_information_matches_numerical_derivative(model: str) -> None:
    params = random_item_params(15, model=model, seed=4)
    theta = np.linspace(-3, 3, 13)
    step = 1e-5
    slope = (params.probability(theta + step) - params.probability(theta - step)) / (2 * step)
    prob = params.probability(theta)
    numerical = slope**2 / (prob * (1 - prob))
    np.testing.assert_allclose(params.information(theta), numerical, rtol=1e-6, atol=1e-10)


@pytest.mark.parametrize(("model", "n_dims"), [("3pl", 1), ("4pl", 1), ("2pl", 2)])
def test_ability_gradient_matches_numerical_derivative(model: str, n_dims: int) -> None:
    params = random_item_params(20, model=model, n_dims=n_dims, seed=6)
    matrix, theta = simulate_responses(params, 4, seed=7, missing_rate=0.2)
    values = matrix.values
    observed = ~np.isnan(values)
    args = (values, observed, params.a, params.d, params.g, params.u)
    grad, info = _math.ability_score_and_information(theta, *args)
    step = 1e-6
    for k in range(n_dims):
        shift = np.zeros(n_dims)
        shift[k] = step
        numerical = (
            _math.ability_loglik(theta + shift, *args) - _math.ability_loglik(theta - shift, *args)
        ) / (2 * step)
        np.testing.assert_allclose(grad[:, k], numerical, rtol=1e-5, atol=1e-6)
    assert np.all(np.linalg.eigvalsh(info) > 0)
    if n_dims == 1:
        expected = (params.information(theta) * observed).sum(axis=1)
        np.testing.assert_allclose(info[:, 0, 0], expected, rtol=1e-10)


def test_item_gradient_matches_numerical_derivative() -> None:
    """The M-step's score function is the derivative of the expected log-likelihood."""
    rng = np.random.default_rng(0)
    nodes, _ = _math.latent_grid(1, 21)
    for model in ("2pl", "3pl", "4pl"):
        params = random_item_params(6, model=model, seed=1)
        eta = _math.pack(model, params.a, params.d, params.g, params.u)
        n = rng.uniform(5, 50, size=(21, 6))
        r = n * rng.uniform(0.05, 0.95, size=(21, 6))
        grad, info = _math.item_score_and_information(model, 1, eta, nodes, r, n)
        step = 1e-6
        for k in range(eta.shape[1]):
            shift = np.zeros_like(eta)
            shift[:, k] = step
            numerical = (
                _math.item_loglik(model, 1, eta + shift, nodes, r, n)
                - _math.item_loglik(model, 1, eta - shift, nodes, r, n)
            ) / (2 * step)
            np.testing.assert_allclose(grad[:, k], numerical, rtol=1e-5, atol=1e-5)
        assert np.all(np.linalg.eigvalsh(info) > 0)
