"""Where an adaptive run's ability places it against the source models: by hand, on a shipped
pool, on a pool saved without ability edges, and in what ``microbench adaptive`` prints."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from adaptive_support import with_state
from scipy.stats import norm

from lmeval_microbench.adaptive import pool_state
from lmeval_microbench.adaptive.bands import ABOVE, BELOW, SideBands, run_placement
from lmeval_microbench.adaptive.pool import ADAPTIVE, estimate_pool
from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
from lmeval_microbench.bundle import load_bundle

SIDES = (SideBands(BELOW, 0.4, (), ability_edge=-1.0), SideBands(ABOVE, 0.8, (), ability_edge=1.0))


def test_run_placement_by_hand():
    theta, se = np.array([2.0, 0.0, -1.5, 1.0]), np.array([0.5, 0.5, 1.0, 0.3])
    found = run_placement(SIDES, (theta, se))
    np.testing.assert_allclose(found.above, norm.sf((1.0 - theta) / se))
    np.testing.assert_allclose(found.below, norm.cdf((-1.0 - theta) / se))
    assert found.above[0] == pytest.approx(0.97725, abs=1e-5)
    # at the edge itself the probability is a half: named (SIDE_P is inclusive)
    assert found.sides() == ["above", "", "below", "above"]


def test_a_pool_without_both_ability_edges_places_nothing():
    older = (SideBands(BELOW, 0.4, ()), SideBands(ABOVE, 0.8, (), ability_edge=1.0))
    assert run_placement(older, (np.zeros(2), np.ones(2))) is None
    assert run_placement(SIDES[1:], (np.zeros(2), np.ones(2))) is None


@pytest.fixture(scope="module")
def mmlu_pool():
    return pool_state(load_bundle(SHIPPED_POOLS / "openllm_v1" / "mmlu"))


def test_a_shipped_pool_places_runs_by_their_answers(mmlu_pool):
    """The 25 hardest items right: above; the 25 easiest wrong: below; a source-like run
    (right where most sources are right): among the sources. Only items whose discrimination
    is positive: on the 10 of MMLU's 102 with a negative one a right answer lowers the ability
    (every item right reads 1.92, under the sources' upper edge of 3.06). The record is the
    run's own posterior against the pool's edges."""
    rates = mmlu_pool.state.score_map.rates
    usable = mmlu_pool.params.a[:, 0] > 0
    by_rate = [k for k in np.argsort(rates) if usable[k]]
    ids = mmlu_pool.item_ids
    strong = estimate_pool(mmlu_pool, {ids[k]: 1.0 for k in by_rate[:25]})
    weak = estimate_pool(mmlu_pool, {ids[k]: 0.0 for k in by_rate[-25:]})
    middle = [k for k in np.argsort(np.abs(rates - 0.5)) if usable[k]][:25]
    typical = estimate_pool(mmlu_pool, {ids[k]: float(rates[k] > 0.5) for k in middle})
    assert strong.placement["side"] == "above" and strong.placement["p_above"] >= 0.5
    assert weak.placement["side"] == "below" and weak.placement["p_below"] >= 0.5
    assert typical.placement["side"] == ""
    edges = {s.side: s.ability_edge for s in mmlu_pool.state.score_map.sides}
    expected = norm.sf((edges[ABOVE] - strong.theta) / strong.se)
    assert strong.placement["p_above"] == pytest.approx(expected, rel=1e-9)


def test_a_pool_saved_before_ability_edges_gives_no_placement(mmlu_pool):
    state = mmlu_pool.bundle.estimator_state(ADAPTIVE)
    stripped = {
        **state,
        **{side: {k: v for k, v in state[side].items() if k != "ability_edge"}
           for side in (BELOW, ABOVE)},
    }  # fmt: skip
    older = pool_state(with_state(mmlu_pool.bundle, stripped))
    found = estimate_pool(older, {mmlu_pool.item_ids[0]: 1.0})
    assert found.placement is None


def test_the_adaptive_table_marks_the_side_and_prints_the_legend(capsys):
    from lmeval_microbench.cli.adaptive import _print

    def result(task: str, side: str, answers: tuple[float, ...] = ()) -> SimpleNamespace:
        record = {"side": side, "p_above": 0.9 if side == "above" else 0.0, "p_below": 0.0}
        estimate = SimpleNamespace(
            value=0.8, lower=0.7, upper=0.9, n_items=25, theta=2.5, se=0.4, flagged=False,
            note="", placement=record,
        )  # fmt: skip
        return SimpleNamespace(
            task=task, estimate=estimate, stop_reason="max_items", seconds=1.0, unparsed=[],
            answers=[SimpleNamespace(score=a) for a in answers],
        )  # fmt: skip

    _print([result("microbench_pool_mmlu", "above"), result("microbench_pool_arc", "")])
    out = capsys.readouterr().out
    assert "80.0↑" in out and out.count("↑") == 2  # the mark and the legend's
    _print([result("microbench_pool_arc", "")])
    assert "↑" not in capsys.readouterr().out
    # every asked item right: told on stderr that the interval is open above; one wrong: not
    _print([result("microbench_pool_arc", "", (1.0, 1.0)), result("microbench_pool_mmlu", "",
            (1.0, 0.0))])  # fmt: skip
    err = capsys.readouterr().err
    assert "microbench_pool_arc: the evaluated model answered every item" in err
    assert "microbench_pool_mmlu" not in err
