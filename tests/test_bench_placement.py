"""tools/bench_placement.py: does the side a model's answers are placed on match its truth?"""

from __future__ import annotations

import json

import numpy as np
import pytest
from tools_support import tools_module


def row(protocol: str, side: list[str], above: list[bool], below: list[bool]) -> dict:
    """A cell as the tool records it: its models counted (errors 1, 2, ...; the last missed)."""
    n = len(side)
    counted = tools_module("bench_placement").counts(
        np.array(side, dtype=object), np.array(above), np.array(below),
        np.arange(1.0, n + 1), np.array([True] * (n - 1) + [False]),
    )  # fmt: skip
    return {"key": f"musr/all/{protocol}/50/0", "case": ["musr", protocol, 50],
            "recipe": "balanced+guarded", **counted, "mae": 2.0, "coverage": 0.9,
            "seconds": 1.0}  # fmt: skip


def test_tally_counts_named_models_against_their_truth():
    """Two of three models beyond are named in the first cell (one on the wrong side counts
    as wrong, not as a hit), one inside model is named; the second cell's one model below is
    named right. Errors split between named and unnamed, pooled over the cells."""
    tool = tools_module("bench_placement")
    beyond = row("extrapolation", ["above", "below", "", "above"], [True, True, True, False],
                 [False] * 4)  # fmt: skip
    found = tool.tally([beyond, row("random", ["below"], [False], [True])])
    assert found["cells"] == 2 and found["models"] == 5
    assert found["beyond"] == 4 and found["named"] == 4 and found["named_right"] == 2
    assert found["named_wrong"] == 2 and found["inside"] == 1 and found["named_of_inside"] == 1
    # pooled over the cells: errors 1, 2, 4 (the fourth missed) and 1 (missed)
    assert found["named_errors"]["mae"] == pytest.approx((1 + 2 + 4 + 1) / 4)
    assert found["named_errors"]["coverage"] == pytest.approx(2 / 4)
    assert found["unnamed_errors"] == {"mae": 3.0, "coverage": 1.0}


def test_report_only_renders_groups_and_cases(tmp_path):
    tool = tools_module("bench_placement")
    rows = [row("random", ["", "", "above"], [False] * 3, [False] * 3),
            row("weak", ["below", "", ""], [False] * 3, [True, True, False])]  # fmt: skip
    info = {"command": "python tools/bench_placement.py --jobs 2", "minutes": 3.0,
            "load_average": [0.5, 1.0]}  # fmt: skip
    (tmp_path / "placement.json").write_text(json.dumps({"info": info, "cells": rows}))
    peers = tmp_path / "peers.json"
    ours = {"musr/all/random/50/0": 2.001, "musr/all/weak/50/0": 2.5}
    cells = [{"key": k, "methods": {"ours": {"mae": m, "coverage": 0.9}}} for k, m in ours.items()]
    peers.write_text(json.dumps({"cells": cells}))
    assert tool.main(["--report-only", "--out", str(tmp_path), "--peers", str(peers)]) == 0
    text = (tmp_path / "placement.md").read_text()
    assert "reproduce the peer suite's of 1 of 2 cells (MAE within 1.0e-03 points" in text
    assert "not: musr/all/weak/50/0 (0.50)" in text
    assert "re-rendered from its JSON by `python tools/bench_placement.py --report-only" in text
    assert "| OLL v2 (IFEval, MuSR) | random | 3 | - | 1/3 (33 %) | 1/1 (100 %) |" in text
    assert "| musr | weak | 50 | 3 | 1/2 (50 %) | 0/1 (0 %) | 0/1 (0 %) |" in text


@pytest.mark.slow
def test_a_rebuilt_cell_reproduces_the_peer_suite(shared_data):
    """MuSR's strongest fifth at 50 items, seed 0: the default's recipe rebuilt gives the
    peer suite's MAE, and most of those models are named above the sources, none below."""
    tool = tools_module("bench_placement")
    peers = tool.REPO / "bench" / "peers.json"
    (cell, ours) = next(
        (c, o) for c, o in tool.peer_cells(peers, ["musr"])
        if c.protocol == "extrapolation" and c.budget == 50 and c.seed == 0
    )  # fmt: skip
    found = tool.measure_cell((shared_data, cell, ours))
    assert found["mae"] == pytest.approx(ours["mae"], abs=0.01)
    assert found["coverage"] == pytest.approx(ours["coverage"], abs=0.02)
    assert found["beyond"] == found["models"] and found["named_wrong"] == 0
    assert found["named_right"] > found["models"] / 2
