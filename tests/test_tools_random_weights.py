"""``tools/bench_random_weights.py`` checks each interval against the model's own whole score."""

from __future__ import annotations

import pytest
from tools_support import tools_module


def run(value: float, lower: float, upper: float, chance: float) -> dict[str, float | bool]:
    return {
        "value": value,
        "lower": lower,
        "upper": upper,
        "subset_mean": value,
        "flagged": False,
        "chance": chance,
    }


def test_intervals_are_checked_against_each_models_own_whole_score():
    bench = tools_module("bench_random_weights")
    v1 = {name: run(0.25, 0.2, 0.3, 0.25) for name in bench.V1}
    # IFEval: each interval misses the stand-in chance score (0.075), holds the model's own
    first = {**v1, "ifeval": run(0.13, 0.08, 0.18, 0.075), "musr": run(0.4, 0.36, 0.45, 0.37)}
    second = {**v1, "ifeval": run(0.16, 0.1, 0.22, 0.075), "musr": run(0.36, 0.3, 0.4, 0.37)}
    models = [
        {"static": first, "whole": {"ifeval": 0.12, "musr": 0.34}},
        {"static": second, "whole": {"ifeval": 0.15, "musr": 0.36}},
    ]
    rows = {r["benchmark"]: r for r in bench.summary(models, "static")}
    assert rows["ifeval"]["contains_chance"] == 0
    assert rows["ifeval"]["contains_whole"] == 100
    assert rows["ifeval"]["whole_error"] == pytest.approx(1.0)
    assert (rows["ifeval"]["whole_min"], rows["ifeval"]["whole_max"]) == pytest.approx((12, 15))
    assert rows["musr"]["contains_whole"] == 50  # 0.34 lies below [0.36, 0.45]
    assert "whole" not in rows["arc"]  # no whole-benchmark run: no claim
    text = bench.markdown(list(rows.values()), "cmd", 1.0, 30)
    assert "| arc | static | 2 | 25.0 | 25.0 | 100 % | 0.0 | - | - | - | 0 % |" in text
    assert "contains it in 3 of 4 runs" in text
