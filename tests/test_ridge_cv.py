"""The one GCV ridge (``estimators/_ridge_cv.py``) behind calibrated, the joint head and the
leaderboard baseline: its paths agree with each other and with the ridge they stand for."""

from __future__ import annotations

import numpy as np
import pytest

from lmeval_microbench.estimators._ridge_cv import centred_ridge_gcv, gcv_score, ridge_gcv


def data(seed: int, n: int = 80, p: int = 12, outputs: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, p))
    y = x @ rng.normal(size=(p, outputs)) + rng.normal(size=(n, outputs))
    return x - x.mean(axis=0), y - y.mean(axis=0)


@pytest.mark.parametrize("seed", range(3))
def test_paths_agree(seed: int) -> None:
    """Eigen path (closed form or residuals), per-column solve and one output at a time pick
    the same penalty and coefficients."""
    xc, yc = data(seed)
    grid = np.logspace(-3, 3, 13) * xc.shape[0]
    both = ridge_gcv(xc, yc, grid)
    for o in range(yc.shape[1]):
        single = ridge_gcv(xc, yc[:, o], grid)
        closed = ridge_gcv(xc, yc[:, o], grid, rss="closed-form")
        solved = ridge_gcv(xc, yc[:, o], np.repeat(grid[:, None], xc.shape[1], axis=1))
        for other in (single, closed, solved):
            assert int(other.index) == int(both.index[o])
            np.testing.assert_allclose(other.coef, both.coef[:, o], rtol=1e-8, atol=1e-10)
            assert float(other.score) == pytest.approx(float(both.score[o]), rel=1e-8)


def test_fit_is_the_ridge_solution_and_intercept_is_unpenalised() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(size=(50, 4)) + 3.0
    y = 2.0 + x @ np.array([1.0, -1.0, 0.5, 0.0]) + 0.1 * rng.normal(size=50)
    intercept, coef, index = centred_ridge_gcv(x, y, np.array([0.5]))
    xc = x - x.mean(axis=0)
    expected = np.linalg.solve(xc.T @ xc + 0.5 * np.eye(4), xc.T @ (y - y.mean()))
    assert index == 0
    np.testing.assert_allclose(coef, expected, rtol=1e-10)
    assert intercept == pytest.approx(y.mean() - x.mean(axis=0) @ coef)


def test_saturated_fits_clamp_or_refuse() -> None:
    rss, dof = np.array([1.0, 1.0, 1.0]), np.array([5.0, 9.5, 10.0])
    clamp = gcv_score(10, rss, dof, "clamp")
    refuse = gcv_score(10, rss, dof, "refuse")
    assert clamp.tolist() == [10 / 25, 10.0, 10.0]
    assert refuse[0] == clamp[0] and refuse[1] == pytest.approx(40.0) and refuse[2] == np.inf


def test_bad_options_are_refused() -> None:
    xc, yc = data(0)
    with pytest.raises(ValueError, match="rss"):
        ridge_gcv(xc, yc[:, 0], np.ones(2), rss="exact")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="per column"):
        ridge_gcv(xc, yc[:, 0], np.ones((2, xc.shape[1])), rss="closed-form")
