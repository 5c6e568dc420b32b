"""tools/bench_shipped_guard.py: the shipped recipe and the same one guarded, on real data."""

from __future__ import annotations

import json

import pytest
from tools_support import tools_module

from lmeval_microbench.personfit import BELOW_CHANCE


@pytest.mark.slow
def test_both_estimators_run_on_the_same_splits_and_report(shared_data, tmp_path):
    tool = tools_module("bench_shipped_guard")
    args = ["--shared", str(shared_data), "--benchmarks", "hellaswag", "--repeats", "1"]
    assert tool.main([*args, "--fixed-repeats", "1", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "shipped_guard.json").read_text())["results"]
    per = results["hellaswag"]
    own = per["recipe"]["estimator"]
    assert set(per) == {
        "recipe", "random", "extrapolation", "weak", "floor", "lowest_score", "chance_score",
    }  # fmt: skip
    assert per["floor"] == pytest.approx(per["chance_score"] - BELOW_CHANCE)
    for protocol in ("random", "extrapolation", "weak"):
        mean = per[protocol]["mean"]
        assert set(mean) == {own, "guarded"}
        assert all(0.0 <= m["coverage90"] <= 1.0 and m["mae"] > 0 for m in mean.values())
    # the weakest fifth lies below every source: the unguarded regression reads it too high,
    # and guarded's interval reaching the floor holds where the regression's does not
    weak = per["weak"]["mean"]
    assert weak[own]["bias"] > 0 and weak["guarded"]["coverage90"] > weak[own]["coverage90"] + 0.3
    report = (tmp_path / "shipped_guard.md").read_text()
    recipe = per["recipe"]
    label = f"{recipe['method']} {recipe['budget']} + {own}"
    assert all(f"| hellaswag | {label} | {p} |" in report for p in ("random", "weak"))
