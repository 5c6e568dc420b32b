"""tools/bench_audit_split.py: chosen items beside an audit sample, and the placement ablation."""

from __future__ import annotations

import json

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


def test_audit_read_sets_each_protocols_runs_beside_their_aipw_placement(tmp_path):
    """Only runs whose guard read ``audit`` count; ``--report-only`` rebuilds the report from
    the JSON's runs and says it was re-rendered."""
    tool = tools_module("bench_audit_split")

    def run(protocol, reading, mae, before=None):
        row = {"key": f"musr/all/{protocol}/25/0", "case": ["musr", protocol, 25],
               "method": "lasso", "share": 0.3, "reading": reading, "mae": mae,
               "coverage": 0.9, "width": 10.0}  # fmt: skip
        if before is not None:
            row["aipw_placed"] = {"mae": before, "coverage": 1.0}
        return row

    rows = [run("random", "audit", 2.0, 4.0), run("random", "checked", 9.0)]
    rows.append(run("extrapolation", "audit", 5.0, 5.0))
    read = tool.audit_read(rows)
    assert read["random"]["runs"] == 1 and read["all"]["runs"] == 2
    assert read["random"]["aipw_placed_mae"] == pytest.approx(4.0)
    assert read["all"]["mae"] == pytest.approx(3.5) and read["all"]["least_coverage"] == 0.9
    info = {"command": "python tools/bench_audit_split.py --jobs 2", "minutes": 1.0,
            "load_average": [0.5, 1.0], "seeds": "0"}  # fmt: skip
    (tmp_path / "audit_split.json").write_text(json.dumps({"info": info, "cells": rows}))
    peers = tmp_path / "peers.json"
    peers.write_text(json.dumps({"cells": []}))
    args = ["--report-only", "--out", str(tmp_path), "--peers", str(peers)]
    assert tool.main(args) == 0
    text = (tmp_path / "audit_split.md").read_text()
    assert "re-rendered from its JSON by `python tools/bench_audit_split.py --report-only" in text
    assert "| random | 1 | 2.00 | 4.00 |" in text


def test_counts_mode_plans_fixed_audits_and_names_them(tmp_path):
    """``--counts``: one budget, a fixed number of audit items per recipe, labelled by count
    and ordered by it (not by the label's text), written to audit_counts.*."""
    tool = tools_module("bench_audit_split")
    assert tool.audit_plans(50, (0, 5, 15)) == [(None, 0), (None, 5), (None, 15)]
    assert [n for _, n in tool.audit_plans(25, None)] == [0, 8, 12]
    assert tool.recipe("lasso", None, 5) == "lasso + 5 audit"
    assert tool.recipe("lasso", 0.3) == "lasso 30 %"

    def run(count, mae):
        return {"key": "musr/all/random/50/0", "case": ["musr", "random", 50], "method": "lasso",
                "share": None, "audit": count, "recipe": tool.recipe("lasso", None, count),
                "reading": "checked", "mae": mae, "coverage": 0.9, "width": 10.0}  # fmt: skip

    rows = [run(15, 1.5), run(5, 2.0), run(0, 1.0)]
    entries = tool.cases(rows, {})
    assert [e["recipe"] for e in entries] == [f"lasso + {n} audit" for n in (0, 5, 15)]
    info = {"command": "python tools/bench_audit_split.py --counts 0,5,15", "minutes": 1.0,
            "load_average": [0.5, 1.0], "seeds": "0", "budgets": "50",
            "counts": "0,5,15"}  # fmt: skip
    (tmp_path / "audit_counts.json").write_text(json.dumps({"info": info, "cells": rows}))
    peers = tmp_path / "peers.json"
    peers.write_text(json.dumps({"cells": []}))
    args = ["--counts", "0,5,15", "--report-only", "--out", str(tmp_path), "--peers", str(peers)]
    assert tool.main(args) == 0
    text = (tmp_path / "audit_counts.md").read_text()
    assert "(audit sizes 0,5,15)" in text and "mean over budgets 50" in text
    assert "| musr | random | lasso + 5 audit | 2.00 |" in text
    assert not (tmp_path / "audit_split.md").exists()


@pytest.mark.parametrize(
    "argv",
    [["--budget", "25"], ["--counts", "0,x"], ["--counts", "0,50"], ["--counts", "-1"]],
)
def test_counts_that_cannot_be_run_are_refused(argv, tmp_path):
    tool = tools_module("bench_audit_split")
    with pytest.raises(SystemExit) as stop:
        tool.main([*argv, "--report-only", "--out", str(tmp_path)])
    assert stop.value.code == 2
