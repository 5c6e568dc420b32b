"""tools/bench_floor_rule.py: where an adaptive run's lower edge reaches down to the floor,
the product's rule beside the rule before it and a wider one, applied through the product's own
``estimate_pool``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tools_support import tools_module

from lmeval_microbench.adaptive.pool import estimate_pool
from lmeval_microbench.adaptive.scoring import FLOOR_TEST_MARGIN

N_ITEMS = 10


@pytest.fixture(scope="module")
def weakest_fifth():
    """A pool fitted on the strongest four fifths of simulated models (chance 0.2, so the
    floor lies under the weakest source), the weakest fifth's max-information runs and their
    true scores: the runs near and under the sources' edge that the rules are about."""
    from lmeval_microbench.adaptive import build_pool, pool_state
    from lmeval_microbench.adaptive.selection import MaxInfoSelector
    from lmeval_microbench.adaptive.simulate import replay
    from lmeval_microbench.synthetic import random_item_params, simulate_responses

    matrix, _ = simulate_responses(random_item_params(24, seed=3), 200, seed=7)
    truth = matrix.mean_scores()
    weak, strong = np.split(np.argsort(truth), [40])
    ids = np.asarray(matrix.model_ids)
    sources = np.sort(strong)
    source = matrix.select_models(ids[sources])
    bundle = build_pool(source, truth[sources], name="p", benchmark="toy", chance=0.2)
    pool = pool_state(bundle)
    target = matrix.select_models(ids[weak])
    values = target.values[:, target.item_positions(list(pool.item_ids))]
    order = replay(pool.params, values, selector=MaxInfoSelector(), max_items=N_ITEMS).order
    return pool, values, order, truth[weak]


@pytest.fixture(scope="module")
def read(weakest_fifth):
    pool, values, order, _ = weakest_fifth
    return tools_module("bench_floor_rule").read_rules(pool, values, order, N_ITEMS)


def test_each_rule_is_what_estimate_pool_prints_with_its_score_map(weakest_fifth, read):
    tool = tools_module("bench_floor_rule")
    pool, values, order, _ = weakest_fifth
    moved = np.flatnonzero(~np.isclose(read["+1 band"][1], read["edge"][1]))
    for k in (0, len(values) - 1, *moved):
        scores = {pool.item_ids[j]: float(values[k, j]) for j in order[k, :N_ITEMS]}
        printed = estimate_pool(pool, scores)
        expected = [printed.value, printed.lower, printed.upper]
        np.testing.assert_allclose(read[tool.PRODUCT][:, k], expected)
        own = estimate_pool(tool.rule_pool(pool, FLOOR_TEST_MARGIN, N_ITEMS), scores)
        np.testing.assert_allclose([own.value, own.lower, own.upper], expected)  # the same test
        for name, share in tool.RULES.items():
            ruled = estimate_pool(tool.rule_pool(pool, share, N_ITEMS), scores)
            np.testing.assert_allclose(read[name][:, k], [ruled.value, ruled.lower, ruled.upper])


def test_wider_rules_only_lower_some_lower_edges_to_the_floor(weakest_fifth, read):
    pool, *_ = weakest_fifth
    floor = pool.state.score_map.floor
    before = read["edge"]
    previous = before[1]
    for name in ("+0.5 band", "+1 band"):
        rows = read[name]
        np.testing.assert_allclose(rows[0], before[0], err_msg=name)  # the same estimates
        np.testing.assert_allclose(rows[2], before[2], err_msg=name)  # and upper edges
        moved = ~np.isclose(rows[1], before[1])
        np.testing.assert_allclose(rows[1][moved], np.minimum(before[1][moved], floor))
        assert np.all(rows[1] <= previous + 1e-12), name  # a wider rule never floors less
        previous = rows[1]
    assert (~np.isclose(read["+1 band"][1], before[1])).any()  # the fixture exercises it


def test_scores_and_totals_by_hand():
    tool = tools_module("bench_floor_rule")
    truth = np.array([0.30, 0.50])
    product = np.array([[0.40, 0.50], [0.35, 0.45], [0.45, 0.55]])  # misses the first
    wider = product.copy()
    wider[1, 0] = 0.20
    read = {"edge": product, "+0.5 band": product, "+1 band": wider}
    scored = tool.score_rules(read, truth)
    assert scored["same_value_and_upper"]
    assert scored["coverage"] == {"edge": 0.5, "+0.5 band": 0.5, "+1 band": 1.0}
    assert scored["width"]["edge"] == pytest.approx(10.0)
    assert scored["width"]["+1 band"] == pytest.approx(17.5)
    assert scored["miss_low"]["edge"] == 1 and scored["miss_high"]["edge"] == 0
    assert scored["moved"] == {"edge": 0, "+0.5 band": 0, "+1 band": 1}
    rows = [{"protocol": "weak", "items": n, **scored} for n in (10, 25)]
    summed = tool.totals(rows)["weak"]
    assert summed["edge"] == {"cells": 2, "low": 2, "least": 0.5, "width": pytest.approx(10.0)}
    assert summed["+1 band"]["low"] == 0 and summed["+1 band"]["least"] == 1.0


@pytest.mark.slow
def test_a_musr_weak_cell_is_run_end_to_end(shared_data, tmp_path):
    tool = tools_module("bench_floor_rule")
    args = ["--shared", str(shared_data), "--benchmarks", "musr", "--protocols", "weak"]
    tool.main([*args, "--max-targets", "8", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "floor_rule.json").read_text())
    assert [(r["benchmark"], r["protocol"], r["items"], r["targets"]) for r in saved["rows"]] == [
        ("musr", "weak", n, 8) for n in (10, 25, 50)
    ]
    assert all(r["same_value_and_upper"] for r in saved["rows"])
    assert set(saved["totals"]["weak"]) == set(tool.RULES)
    assert "| musr | weak | 25 | 8 |" in (tmp_path / "floor_rule.md").read_text()
