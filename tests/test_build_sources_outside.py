"""The build's notes on its sources: when its guard counts most of them as possibly beyond
them (``build._note_sources_outside``: a population whose scores span a range narrow against
what the bundle's items say of one model, MuSR with 25-100 sources, ``bench/guard_cost.md``),
when too few of them leave any fold to pick the items again (``build._note_not_cross_fitted``,
``bench/small_sources.md``), and when its guard reads models beyond them by an audit of few
items (``build._note_small_audit``, ``bench/audit_counts.md``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lmeval_microbench.build import build_bundle
from lmeval_microbench.responses import ResponseMatrix


def sources(spread: float, seed: int = 0) -> ResponseMatrix:
    """120 models of a Rasch population whose abilities have sd ``spread``, 300 items."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, spread, 120)
    difficulty = rng.normal(size=300)
    p = 1.0 / (1.0 + np.exp(-(theta[:, None] - difficulty[None, :])))
    values = (rng.random(p.shape) < p).astype(float)
    return ResponseMatrix(
        values, [f"m{k}" for k in range(120)], [f"i{j}" for j in range(300)], source="pop.csv"
    )


OUTSIDE = "source models themselves"
NO_FOLD = "leave no fold enough"


def notes(
    matrix: ResponseMatrix,
    estimator: str = "guarded",
    method: str = "balanced",
    marker: str = OUTSIDE,
) -> list[str]:
    """The build's warnings that hold ``marker``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_bundle(
            matrix,
            matrix.mean_scores(),
            name="t",
            benchmark="t",
            method=method,
            budget=25,
            seed=0,
            estimators=[estimator],
            default_estimator=estimator,
        )
    return [str(w.message) for w in caught if marker in str(w.message)]


@pytest.mark.slow  # 12-24 s: the default run stays under 15 minutes
def test_narrow_sources_get_the_note_and_wide_ones_do_not():
    narrow = notes(sources(0.15))
    assert len(narrow) == 1
    assert narrow[0].startswith("pop.csv: the guarded estimator counts")
    assert "narrow against what 25 items say of one model" in narrow[0]
    assert notes(sources(1.5)) == []


def test_no_note_without_the_guard():
    assert notes(sources(0.15), estimator="kridge") == []


def test_ten_sources_leave_no_fold_to_re_select_balanced_items_and_the_build_says_so():
    from lmeval_microbench.crossfit import cross_fit_folds

    assert cross_fit_folds(10) == 0  # no fold is run: each would fit on 9
    population = sources(1.5)
    first = population.select_models(population.model_ids[:10])
    (said,) = notes(first, marker=NO_FOLD)
    assert said.startswith("pop.csv: balanced items") and "10 models" in said
    assert "--method stratified" in said
    # 11 models: one model per fold leaves 10 to pick on; stratified items pick on no answers
    eleven = population.select_models(population.model_ids[:11])
    assert notes(eleven, marker=NO_FOLD) == []
    assert notes(first, method="stratified", marker=NO_FOLD) == []


@pytest.mark.parametrize(
    ("reading", "n_audit", "said"),
    [("audit", 5, True), ("audit", 14, True), ("audit", 15, False), ("checked", 5, False)],
)
def test_a_guard_reading_a_small_audit_is_named_with_the_way_out(reading, n_audit, said):
    from types import SimpleNamespace

    from lmeval_microbench.build import _note_small_audit
    from lmeval_microbench.outside.readings.audit import FEW_AUDIT
    from lmeval_microbench.subset import Subset

    population = sources(1.0)
    ids = population.item_ids[:30]
    subset = Subset(ids, np.full(30, 1 / 30), "lasso", info={"audit_items": list(ids[:n_audit])})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _note_small_audit(SimpleNamespace(reading_name_=reading), population, subset)
    assert len(caught) == int(said)
    if said:
        text = str(caught[0].message)
        assert text.startswith("pop.csv: the guarded estimator reads models beyond the sources")
        assert f"only {n_audit} audit items" in text and f"ask for {FEW_AUDIT} or more" in text


def test_a_build_whose_guard_reads_a_small_audit_says_so(monkeypatch):
    """Through ``build_bundle``: the guard made to read the audit (its folds choose it only
    on real matrices), 5 audit items in a budget of 25: the note, once; 15: none."""
    from lmeval_microbench.estimators.guarded import GuardedEstimator

    population = sources(1.0)
    monkeypatch.setattr(GuardedEstimator, "_choose", lambda self, scores: "audit")

    def build(audit):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            build_bundle(population, population.mean_scores(), name="t", benchmark="t",
                         method="random", budget=25, seed=0, estimators=["guarded"],
                         default_estimator="guarded", audit=audit)  # fmt: skip
        return [str(w.message) for w in caught if "audit correction of only" in str(w.message)]

    (said,) = build(5)
    assert "only 5 audit items" in said
    assert build(15) == []
