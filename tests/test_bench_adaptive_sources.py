"""tools/bench_adaptive_sources.py: adaptive pools on the peer suite's sub-sampled sources."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tools_support import tools_module

REPO = Path(__file__).resolve().parents[1]


def _row(key: str, coverage: float) -> dict:
    metrics = {"mae": 2.0, "bias": -1.0, "coverage": coverage, "width": 10.0}
    return {"key": key, "sources": 25, "adaptive": {"10": metrics, "25": metrics, "50": metrics}}


def test_summary_pools_seeds_and_joins_the_static_default_of_the_same_split():
    tool = tools_module("bench_adaptive_sources")
    rows = [_row("ifeval/25/random/50/0", 0.8), _row("ifeval/25/random/50/1", 0.9)]
    peers = {
        "cells": [
            {
                "key": "ifeval/25/random/50/0",
                "methods": {
                    "ours": {"mae": 3.0, "coverage": 0.9, "width": 20.0},
                    "aipw": {"mae": 2.5},
                    "pca": {"mae": 4.0},
                },
            }
        ]
    }
    (group,) = tool.summary(rows, tool.static_of(peers))
    assert group["seeds"] == 2 and group["static_seeds"] == 1
    assert group["coverage_10"] == pytest.approx(0.85)
    assert group["min_coverage_10"] == pytest.approx(0.8)
    assert group["static_mae"] == 3.0 and group["best_peer_mae"] == 2.5
    text = tool.markdown([group], {"command": "x", "minutes": 1.0, "load_average": [1, 1],
                                   "v2_seeds": [0, 1], "v1_seeds": [0]})  # fmt: skip
    assert "| ifeval | 25 | random | 2.00 / 0.85 (0.80) / 10.0 |" in text
    assert "25 sources, 10 items: mean coverage under 0.85 in 0 of 1" in text


def test_a_cell_replays_the_held_out_models_of_the_peer_split(shared_data):
    tool = tools_module("bench_adaptive_sources")
    cells = tools_module("peer_cells")
    cell = cells.Cell("musr", "25", "extrapolation", 50, 0)
    row = tool.measure(cell)
    _, target, _, truth = cells.split_cell(cell, shared_data)
    assert row["sources"] == 25 and row["key"] == cell.key
    assert set(row["adaptive"]) == {"10", "25", "50"}
    assert target.n_models == truth.size == round(0.2 * 348)
    assert all(0.0 <= m["coverage"] <= 1.0 and m["width"] > 0 for m in row["adaptive"].values())
    assert np.isfinite([m["mae"] for m in row["adaptive"].values()]).all()


def test_protocols_choose_the_cells_and_name_the_report():
    """``--protocols weak``: only weak cells, written to adaptive_sources_weak.* so the default
    report is not overwritten; an unknown protocol is refused by argparse."""
    tool = tools_module("bench_adaptive_sources")
    weak = tool.cells(1, 1, ("weak",))
    assert weak and {c.protocol for c in weak} == {"weak"}
    assert {c.protocol for c in tool.cells(1, 1)} == {"random", "extrapolation"}
    assert tool.report_name(tool.PROTOCOLS) == "adaptive_sources"
    assert tool.report_name(("weak",)) == "adaptive_sources_weak"
    with pytest.raises(SystemExit) as stop:
        tool.main(["--protocols", "weakest"])
    assert stop.value.code == 2  # argparse's refusal, before any data is read


@pytest.mark.slow
def test_a_checked_cell_reads_runs_as_the_product_prints_them(shared_data):
    """``--checked``: the pool built as ``adaptive build`` builds it and each run read after
    the person-fit check; the same held-out models and item counts as the plain reading."""
    tool = tools_module("bench_adaptive_sources")
    cells = tools_module("peer_cells")
    cell = cells.Cell("musr", "25", "weak", 50, 0)
    plain, checked = tool.measure(cell), tool.measure(cell, checked=True)
    assert checked["key"] == plain["key"] and checked["sources"] == 25
    assert set(checked["adaptive"]) == set(plain["adaptive"]) == {"10", "25", "50"}
    saved = json.loads((REPO / "bench" / "adaptive_sources_weak_checked.json").read_text())
    (row,) = [r for r in saved["rows"] if r["key"] == cell.key]
    for n, metrics in checked["adaptive"].items():  # the committed report reproduces
        assert metrics["mae"] == pytest.approx(row["adaptive"][n]["mae"], abs=0.05)
        assert metrics["coverage"] == pytest.approx(row["adaptive"][n]["coverage"], abs=0.02)
    assert checked["adaptive"]["50"]["width"] < plain["adaptive"]["50"]["width"]
    assert tool.report_name(("weak",), checked=True) == "adaptive_sources_weak_checked"
    assert tool.report_name(tool.PROTOCOLS, checked=True) == "adaptive_sources_checked"
