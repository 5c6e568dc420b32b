"""tools/bench_musr_tasks.py: MuSR's tasks as whole benchmarks, and the report per population."""

from __future__ import annotations

import numpy as np
import pytest
from tools_support import tools_module


def test_each_task_is_its_own_whole_benchmark(shared_data):
    peer_cells = tools_module("peer_cells")
    tool = tools_module("bench_musr_tasks")
    musr, musr_truth, musr_ids = peer_cells.load_matrix("musr", shared_data)
    sizes = {}
    for name in peer_cells.MUSR_BLOCKS:
        values, truth, ids = peer_cells.load_matrix(name, shared_data)
        task = name.removeprefix("musr_")
        assert all(i.startswith(f"musr.{task}.") for i in ids)
        columns = [musr_ids.index(i) for i in ids]
        assert np.array_equal(values, musr[:, columns])  # the same answers, by item id
        assert np.allclose(truth, values.mean(axis=1))  # the truth is the task's own mean
        sizes[task] = values.shape
    assert sizes == {
        "murder_mysteries": (348, 250),
        "object_placements": (348, 256),
        "team_allocation": (348, 250),
    }
    cells = tool.cells_of()
    assert len(cells) == 3 * 2 * 2 * 3 * 2  # tasks x populations x protocols x budgets x seeds
    rows = peer_cells.cell_rows(musr_truth, cells[0], peer_cells.V1_ALL)
    assert cells[0].population == "66" and rows[0].size == 66 and rows[1].size == 70


def _row(population, protocol, seed, ours, lasso, aipw):
    methods = {"lasso": {"mae": lasso}, "aipw": {"mae": aipw}}
    methods["ours"] = {"mae": ours, "coverage": 0.9, "width": 10.0, "recipe": "r"}
    return {"matrix": "musr_team_allocation", "population": population, "protocol": protocol,
            "budget": 50, "seed": seed, "methods": methods}  # fmt: skip


def test_the_report_keeps_the_populations_apart_and_names_lasso():
    tool = tools_module("bench_musr_tasks")
    rows = [
        _row("66", "random", 0, 3.0, 2.0, 3.5),
        _row("66", "random", 1, 3.2, 2.2, 3.3),
        _row("all", "random", 0, 1.0, 1.5, 2.0),
    ]
    averaged = tools_module("peers_report").cases(rows)
    few = tool.by_population(averaged, "66")
    assert list(few) == [("musr_team_allocation", "66", "random", 50)]
    (random,) = [s for s in tool.summary(few, tool.PEERS) if s["protocol"] == "random"]
    assert random["ours"] == pytest.approx(3.1) and random["best_peer"] == pytest.approx(2.1)
    assert random["level"] == 0 and random["level_with_the_rest"]["lasso"] == 1
    info = {"command": "c", "seconds": 1.0, "load_average": [0.1, 0.2], "seeds": [0, 1],
            "method_seconds": {"ours": 60.0}}  # fmt: skip
    report = {"info": info, "populations": {}}
    for population in ("66", "all"):
        part = tool.by_population(averaged, population)
        report["populations"][population] = {
            "summary": tool.summary(part, tool.PEERS),
            "cases": tool.cases(part),
        }
    text = tool.report_markdown(report)
    assert "## Sources: 66 of them" in text and "## Sources: all 278 other models" in text
    assert "| lasso |" in text.replace(" lasso | our coverage", " lasso |")
    assert "3.10 ✗" in text and "1.00 |" in text
