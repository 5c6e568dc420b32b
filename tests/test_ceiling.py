"""A model with every item right gets an interval open above: by hand, through imputation,
on a shipped micro task and on a shipped adaptive pool."""

from __future__ import annotations

import numpy as np
import pytest

from lmeval_microbench.adaptive import MaxInfoSelector, pool_state, replay
from lmeval_microbench.adaptive.pool import estimate_pool
from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
from lmeval_microbench.bundle import load_bundle
from lmeval_microbench.estimators import estimator_from_state
from lmeval_microbench.outside.ceiling import open_above, saturated

ARC = SHIPPED_POOLS.parents[1] / "task_configs" / "openllm_v1" / "arc"


def test_saturated_rows_by_hand():
    nan = np.nan
    rows = np.array(
        [[1, 1, 1], [1, nan, 1], [1, 0.5, 1], [nan, nan, nan], [1, 0.9999, 1], [0, 0, 0]],
        dtype=float,
    )
    assert saturated(rows).tolist() == [True, True, False, False, False, False]
    upper = np.linspace(0.5, 0.75, 6)
    np.testing.assert_array_equal(open_above(rows, upper), [1.0, 1.0, *upper[2:]])


def test_the_shipped_arc_task_opens_above_for_every_item_right():
    """ARC's 50 items: 260 source models answered them all right (full scores 71-75 %), so a
    model that does is read as one of them, 73.3; the interval used to end at 74.8."""
    bundle = load_bundle(ARC)
    estimator = estimator_from_state(bundle.estimator_state())
    right = dict.fromkeys(bundle.item_ids, 1.0)
    found = estimator.estimate(right)
    raw = estimator.predict_rows(np.ones((1, len(bundle.item_ids))), 0.9)
    assert found.upper == 1.0 and raw[2][0] < 0.8
    assert found.value == pytest.approx(raw[0][0]) and found.lower == pytest.approx(raw[1][0])
    one_wrong = {**right, bundle.item_ids[0]: 0.0}
    assert estimator.estimate(one_wrong).upper < 0.8


def test_an_adaptive_run_with_every_asked_item_right_opens_above():
    pool = pool_state(load_bundle(SHIPPED_POOLS / "openllm_v1" / "arc"))
    order = replay(
        pool.params, np.ones((1, len(pool.item_ids))), selector=MaxInfoSelector(), max_items=25
    ).order[0]
    right = {pool.item_ids[k]: 1.0 for k in order}
    assert estimate_pool(pool, right).upper == 1.0
    slipped = {**right, pool.item_ids[order[0]]: 0.0}
    assert estimate_pool(pool, slipped).upper < 0.8
