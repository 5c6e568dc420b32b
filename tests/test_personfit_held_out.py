"""The misfit threshold from held-out l_z*: each source scored by an IRT fitted without it."""

from __future__ import annotations

import numpy as np
import pytest

from lmeval_microbench import personfit as pf
from lmeval_microbench.irt import ItemParams, fit_source_irt
from lmeval_microbench.responses import ResponseMatrix

N_ITEMS = 120
SUBSET = 40


def _population(n_models: int, seed: int) -> np.ndarray:
    """0/1 answers of 2PL models (slopes 0.5-2.5, easy to hard items) at normal abilities."""
    rng = np.random.default_rng(0)
    ids = tuple(f"i{k}" for k in range(N_ITEMS))
    params = ItemParams(
        ids,
        rng.uniform(0.5, 2.5, (N_ITEMS, 1)),
        rng.uniform(-2.5, 2.5, N_ITEMS),
        np.zeros(N_ITEMS),
        np.ones(N_ITEMS),
    )
    theta = np.random.default_rng(seed).normal(0.0, 1.0, (n_models, 1))
    p = params.probability(theta)
    return (np.random.default_rng(seed + 1).random(p.shape) < p).astype(np.float64)


def _matrix(values: np.ndarray) -> ResponseMatrix:
    items = [f"i{k}" for k in range(values.shape[1])]
    return ResponseMatrix(values, [f"m{k}" for k in range(values.shape[0])], items)


def test_each_source_is_scored_by_an_irt_fitted_without_it():
    source = _matrix(_population(12, seed=1))  # under 25: one model left out at a time
    ids = list(source.item_ids[:SUBSET])
    held_out = pf.held_out_lz(source, ids, seed=0)
    assert held_out.shape == (12,) and np.isfinite(held_out).all()
    for k in (0, 7):
        others = [m for m in source.model_ids if m != source.model_ids[k]]
        irt = fit_source_irt(source.select_models(others), seed=0)
        alone = pf.lz(irt, source.values[[k]][:, :SUBSET], ids)[0]
        assert held_out[k] == pytest.approx(alone, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(
    ("n_sources", "most_now", "least_before"), [(15, 0.2, 0.4), (30, 0.1, 0.2)]
)
def test_few_sources_no_longer_flag_many_new_ordinary_models(n_sources, most_now, least_before):
    """Scored by the IRT fitted on them, few sources fit it far better than a new model does:
    the rule before (their own 4 % quantile; N(0, 1) under 20) flagged 29-52 % of new models
    from the same population here, the held-out threshold 3-14 %."""
    values = _population(n_sources + 400, seed=2)
    source = _matrix(values[:n_sources])
    ids = list(source.item_ids[:SUBSET])
    irt = fit_source_irt(source, seed=0)
    spec = pf.build_spec(source, ids, values[:n_sources].mean(axis=1), 0.0)
    new_lz = pf.lz(irt, values[n_sources:, :SUBSET], ids)
    in_sample = np.quantile(pf.lz(irt, values[:n_sources, :SUBSET], ids), pf.BUILD_LZ_QUANTILE)
    before = pf.DEFAULT_LZ_THRESHOLD if n_sources < 20 else in_sample
    assert spec.lz_threshold < in_sample
    assert "fitted without it" in spec.lz_rule and f"{n_sources} source models" in spec.lz_rule
    assert np.mean(new_lz < spec.lz_threshold) <= most_now
    assert np.mean(new_lz < before) >= least_before


def test_too_few_scored_sources_keep_the_normal_quantile():
    values = _population(12, seed=3)
    values[:3, 1:] = np.nan  # three models with one scored item: no l_z*
    source = _matrix(values)
    ids = list(source.item_ids[:SUBSET])
    spec = pf.build_spec(source, ids, np.nanmean(values, axis=1), 0.0)
    assert spec.lz_threshold == pf.DEFAULT_LZ_THRESHOLD
    assert "only 9 source models" in spec.lz_rule
