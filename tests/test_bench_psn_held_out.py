"""tools/bench_psn_held_out.py: the held-out psn blocks, and how a case is scored."""

from __future__ import annotations

import pytest
from tools_support import tools_module


@pytest.mark.slow
def test_held_out_blocks_are_whole_benchmarks_the_suite_never_used(shared_data):
    tool = tools_module("bench_psn_held_out")
    peer_cells = tools_module("peer_cells")
    assert not set(tool.HELD_OUT) & set(peer_cells.PSN) and len(tool.HELD_OUT) == 9
    sizes = {m: peer_cells.load_matrix(m, shared_data)[0].shape for m in tool.HELD_OUT}
    assert sizes["psn_arc"] == (12, 295) and sizes["psn_hellaswag"] == (12, 10042)
    # the suite's own blocks keep their item ids (its caches are keyed on them)
    assert peer_cells.load_matrix("psn_mmlu", shared_data)[2][0] == "psn.mmlu.27029"
    cells = tool.cells_of(("psn_humaneval",), [0, 1], shared_data)
    assert len(cells) == 2 * 3 * 2  # protocols x budgets (all under 164 items) x seeds


def _row(matrix, protocol, budget, seed, ours, peers, coverage=1.0):
    methods = {m: {"mae": v} for m, v in peers.items()}
    methods["ours"] = {"mae": ours, "coverage": coverage, "width": 10.0, "recipe": "r"}
    return {"matrix": matrix, "population": "all", "protocol": protocol, "budget": budget,
            "seed": seed, "methods": methods}  # fmt: skip


def test_a_case_is_level_within_a_tenth_of_a_point_of_its_best_peer(monkeypatch):
    tool = tools_module("bench_psn_held_out")
    monkeypatch.setattr(tool, "FAST", ("aipw", "random_sampling"))
    rows = [
        _row("a", "random", 25, 0, 2.0, {"aipw": 1.9, "random_sampling": 3.0}),
        _row("a", "random", 25, 1, 2.2, {"aipw": 2.1, "random_sampling": 3.0}, coverage=0.5),
        _row("b", "random", 25, 0, 3.0, {"aipw": 2.5, "random_sampling": 2.8}),
        _row("b", "extrapolation", 25, 0, 1.0, {"aipw": 1.5, "random_sampling": 2.0}),
    ]
    averaged = tools_module("peers_report").cases(rows)
    found = tool.cases(averaged)
    first = next(c for c in found if c["matrix"] == "a")
    assert first["mae"]["ours"] == pytest.approx(2.1) and first["best_peer"] == "aipw"
    assert first["coverage"] == pytest.approx(0.75)
    random, extrapolation = tool.summary(averaged)
    assert (random["cases"], random["level"]) == (2, 1)  # a: 2.1 <= 2.0 + 0.1; b: 3.0 > 2.6
    assert random["ours"] == pytest.approx((2.1 + 3.0) / 2)
    assert (extrapolation["cases"], extrapolation["level"]) == (1, 1)
    # each against the best of all the others: aipw is level on a (2.0 <= 2.1 + 0.1) and b
    assert random["level_with_the_rest"] == {"ours": 1, "aipw": 2, "random_sampling": 0}
    assert "✗" in tool.markdown({"info": _info(), "summary": [random, extrapolation],
                                 "cases": found})  # fmt: skip


def _info():
    return {"command": "c", "seconds": 1.0, "load_average": [0.1, 0.2], "seeds": [0, 1],
            "method_seconds": {"ours": 60.0, "aipw": 6.0}}  # fmt: skip
