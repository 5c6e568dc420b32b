"""tools/bench_inloop.py: its pages are what the script renders from the committed JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tools_support import tools_module

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.mark.parametrize("stem", ["inloop", "inloop_gpu"])
def test_committed_page_is_the_rendering_of_its_json(stem: str) -> None:
    tool = tools_module("bench_inloop")
    report = json.loads((BENCH / f"{stem}.json").read_text())
    assert tool.markdown(report) == (BENCH / f"{stem}.md").read_text()


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_every_table_row_has_the_header_s_cells(device: str) -> None:
    tool = tools_module("bench_inloop")
    row = {
        "model": "m", "task": "t", "eval_batch_size": 8, "parameters": 1e6,
        "step_seconds_median": 0.1, "evaluation_seconds": [1.0, 0.5], "evaluation_in_steps": 7.5,
        "overhead_percent": dict.fromkeys(tool.SCHEDULES, 1.5), "load_average_1min": 1.0,
        "gpu_memory_gib": {"training_peak": 2.0, "evaluation_extra": 0.5},
    }  # fmt: skip
    options = {"device": device, "threads": "1", "every": "4", "evaluations": "2",
               "batch": "4", "length": "256", "eval_batch": "8"}  # fmt: skip
    page = tool.markdown({"where": "here", "options": options, "rows": [row, row]})
    table = [line for line in page.splitlines() if line.startswith("|")]
    assert len(table) == 4
    assert len({line.count("|") for line in table}) == 1, table
    assert ("GiB" in table[2]) == (device == "cuda")
    assert ("No GPU was available" in page) == (device == "cpu")
