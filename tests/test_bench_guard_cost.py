"""tools/bench_guard_cost.py: the guard against its inner regression on real peer-suite cells."""

from __future__ import annotations

import json

import pytest
from tools_support import tools_module


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")
def test_guard_costs_inside_a_narrow_population_and_pays_beyond_the_sources(shared_data):
    tool = tools_module("bench_guard_cost")
    # MuSR with 50 sources: their scores span some 16 points, the reading of 50 items errs by
    # about 7, so the guard counts nearly every source as possibly outside and moves the
    # held-out models of a random split for nothing
    narrow = tool.measure(("musr/50/random/50/0", "balanced+guarded", str(shared_data)))
    assert narrow["sources_outside"] > tool.NOTE_SHARE and narrow["range"] < 20
    assert narrow["guarded"]["mae"] > narrow["inner"]["mae"] + 0.5
    # IFEval's strongest fifth: the inner regression stays among the sources, the guard follows
    # the models out, and only its interval holds
    beyond = tool.measure(
        ("ifeval/all/extrapolation/50/0", "anchor_points+guarded", str(shared_data))
    )
    assert beyond["outside"] > 0.9
    assert beyond["guarded"]["mae"] < beyond["inner"]["mae"] - 3
    assert beyond["guarded"]["coverage"] > 0.85 > beyond["inner"]["coverage"]
    assert tool.measure(("mmlu/all/random/100/0", "anchor_points+anchor_sum", "x")) is None
    report = tool.render([narrow, beyond], {"command": "c", "seconds": 1.0, "load": [0, 0]})
    assert "| musr/50/random/50/0 | balanced+guarded |" in report
    split = {(r["protocol"], r["over"]): r for r in tool.note_split([narrow, beyond])}
    assert split[("random", True)]["cells"] == 1 and split[("random", False)]["cells"] == 0


def test_weak_cells_are_the_peer_reports_weakest_fifth_with_the_default_recipe(tmp_path):
    tool = tools_module("bench_guard_cost")
    cells = [
        {"key": "arc/all/weak/50/0", "protocol": "weak", "methods": {"ours": {"recipe": "a+b"}}},
        {"key": "arc/all/random/50/0", "protocol": "random", "methods": {"ours": {"recipe": "c"}}},
        {"key": "arc/all/weak/50/1", "protocol": "weak", "methods": {"ours": {"error": "x"}}},
    ]
    report = tmp_path / "peers.json"
    report.write_text(json.dumps({"cells": cells}), encoding="utf-8")
    # only weak cells, and only those the default build ran (an error has no recipe)
    assert tool.weak_cells(report) == [{"key": "arc/all/weak/50/0", "chosen": "a+b"}]
