"""tools/bench_similar_penalty.py: the similar reading's penalty rules scored on real splits."""

from __future__ import annotations

from tools_support import tools_module

from lmeval_microbench.outside.readings.similar import ALPHAS, PENALTY


def test_every_rule_is_scored_on_a_real_cell(shared_data, monkeypatch):
    """One 10-source cell of psn BBH: the per-model choice and each fixed penalty give an
    error, the shipped penalty among them, and they are not all the same."""
    tool = tools_module("bench_similar_penalty")
    monkeypatch.setattr(tool, "DATA", shared_data)
    assert tool.variants()[tool.PER_MODEL] == ALPHAS
    assert f"{PENALTY:g}" in tool.variants()
    found = tool.measure(tool.Cell("psn_bbh", "all", "extrapolation", 25, 0))
    assert found["sources"] == 10
    errors = [found[name] for name in tool.variants()]
    assert all(0.0 < e < 100.0 for e in errors)
    assert len(set(errors)) > 1


def test_summary_and_report_by_group_and_protocol():
    tool = tools_module("bench_similar_penalty")
    names = list(tool.variants())
    cells = [
        {"key": f"arc/10/{protocol}/25/{seed}", **{n: 1.0 + k + seed for k, n in enumerate(names)}}
        for protocol in ("random", "extrapolation")
        for seed in (0, 1)
    ]
    rows = tool.summary({"10 sources (v1, v2)": cells})
    assert [(r["protocol"], r["cells"]) for r in rows] == [("random", 2), ("extrapolation", 2)]
    assert rows[0][tool.PER_MODEL] == 1.5  # mean over the seeds
    text = tool.render(rows, {"command": "python tools/bench_similar_penalty.py", "seconds": 1.0,
                              "load": [0.1, 0.2]})  # fmt: skip
    assert "| 10 sources (v1, v2) | random | 2 | **1.50** | 2.50 |" in text
