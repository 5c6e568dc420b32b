"""tools/bench_adaptive_placement.py: is an adaptive run named on the side its truth lies?"""

from __future__ import annotations

import json

import numpy as np
import pytest
from tools_support import tools_module


def row(bm: str, protocol: str, side: list[str], above: list[bool], below: list[bool]) -> dict:
    """A row as the tool records it: its runs counted (errors 1, 2, ...; the last missed)."""
    n = len(side)
    counted = tools_module("bench_placement").counts(
        np.array(side, dtype=object), np.array(above), np.array(below),
        np.arange(1.0, n + 1), np.array([True] * (n - 1) + [False]),
    )  # fmt: skip
    return {"case": [bm, protocol, 25], "n_source": 278, "named_far": 0, **counted,
            "mae": 2.0, "coverage": 0.9, "seconds": 1.0}  # fmt: skip


def test_report_only_pools_groups_and_checks_against_the_adaptive_report(tmp_path):
    tool = tools_module("bench_adaptive_placement")
    rows = [
        row("ifeval", "extrapolation", ["above", "", "above"], [True] * 3, [False] * 3),
        row("musr", "extrapolation", ["", "", "above"], [True] * 3, [False] * 3),
        row("mmlu", "weak", ["below", "", ""], [False] * 3, [True, True, False]),
    ]
    rows[1]["named_far"] = 1
    info = {"command": "python tools/bench_adaptive_placement.py --jobs 2", "minutes": 3.0,
            "load_average": [0.5, 1.0], "seed": 0, "max_targets": 200}  # fmt: skip
    (tmp_path / "adaptive_placement.json").write_text(json.dumps({"info": info, "cells": rows}))
    adaptive = tmp_path / "adaptive.json"
    found = {"maxinfo": {"25": {"mae": 2.004, "coverage90": 0.9}}}
    adaptive.write_text(json.dumps({"results": {"ifeval": {"extrapolation": found}}}))
    argv = ["--report-only", "--out", str(tmp_path), "--adaptive", str(adaptive)]
    assert tool.main(argv) == 0
    text = (tmp_path / "adaptive_placement.md").read_text()
    assert "1 of 3 rows have a counterpart in `bench/adaptive.json`" in text
    assert "MAE within 4.0e-03 points" in text
    assert "far side (above with a true score under the sources' median, or below" in text
    assert "1 of 4 named runs" in text
    # the two v2 rows pooled: 3 of 6 beyond named, none inside; named errors 1, 3 (missed),
    # 3 (missed), unnamed 2, 1, 2
    v2 = "| OLL v2 (IFEval, MuSR) | extrapolation | 25 | 6 | 3/6 (50 %) | - | 0/3 (0 %) |"
    assert v2 + " 2.33 / 0.33 | 1.67 / 1.00 |" in text
    assert "| mmlu | weak | 25 | 3 | 1/2 (50 %) | 0/1 (0 %) | 0/1 (0 %) | 1.00 / 1.00 |" in text


@pytest.mark.slow
def test_ifeval_strongest_fifth_is_named_above_and_reproduces_the_adaptive_report(shared_data):
    """IFEval's strongest fifth held out (seed 0): the pool's runs reproduce
    ``bench/adaptive.json``'s error, and after 50 items most are named above, none below."""
    tool = tools_module("bench_adaptive_placement")
    rows = tool.measure_case((shared_data, "ifeval", "extrapolation", 0, 200))
    assert [r["case"][2] for r in rows] == [10, 25, 50]
    check = tool.reproduction(rows, tool.REPO / "bench" / "adaptive.json")
    assert check["compared"] == 3 and check["max_mae_gap"] < 0.01
    last = rows[-1]
    assert last["beyond"] == last["models"] and last["named_wrong"] == 0
    assert last["named_far"] == 0 and last["named_right"] > last["models"] / 2
