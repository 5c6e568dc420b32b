"""tools/bench_audit_split.py: chosen items beside an audit sample, and the placement ablation."""

from __future__ import annotations

import pytest
from tools_support import tools_module


def test_audit_size_draws_two_or_none():
    tool = tools_module("cell_scoring")
    assert [tool.audit_size(0.3, b) for b in (5, 25, 100)] == [2, 8, 30]
    assert tool.audit_size(0.3, 3) == 0 and tool.audit_size(0.0, 100) == 0


def test_placement_ablation_only_touches_an_audit_reading():
    tool = tools_module("bench_audit_split")
    state = {"reading": {"name": "audit", "state": {"audit": [1, 0], "locator": {"se": 1.0}}}}
    before = tool.placed_by_aipw(state)
    assert "locator" not in before["reading"]["state"] and "locator" in state["reading"]["state"]
    assert tool.placed_by_aipw({"reading": {"name": "checked", "state": {}}}) is None


@pytest.mark.slow
def test_lasso_with_an_audit_is_placed_by_the_deshrunk_reading(shared_data, monkeypatch):
    """MuSR's random split, 25 lasso items of which 8 audited: the guard reads the audit
    reading, and placing models by its own AIPW estimate errs more than the de-shrunk
    placement (bench/audit_split.md: 5.33 against 1.56 points on this cell)."""
    tool = tools_module("bench_audit_split")
    monkeypatch.setattr(tool, "METHODS", ("lasso",))
    monkeypatch.setattr(tool, "SHARES", (0.0, 0.3))
    rows = tool.measure_cell((shared_data, tool.Cell("musr", "all", "random", 25, 1)))
    plain, audited = rows
    assert plain["share"] == 0.0 and "aipw_placed" not in plain
    assert audited["reading"] == "audit"
    assert audited["mae"] < audited["aipw_placed"]["mae"] - 1.0
    assert audited["mae"] == pytest.approx(1.56, abs=0.3)
    entries = tool.cases(rows, {})
    (summary,) = [g for g in tool.summary(entries) if g["recipe"] == "lasso 30 %"]
    assert summary["audit_read"] == 1 and summary["ours_mae"] is None
    info = {"command": "x", "minutes": 0, "load_average": [0, 0], "seeds": "1"}
    assert "| musr | random | lasso 30 % |" in tool.markdown(entries, tool.summary(entries), info)
