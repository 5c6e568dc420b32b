"""tools/bench_ppi.py: the audit reading's parts as ppi_py gets them, and the report."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from tools_support import tools_module

from lmeval_microbench.outside.readings import make_reading
from lmeval_microbench.outside.readings.base import SourceView
from lmeval_microbench.selection import make_selector, select_with_audit
from lmeval_microbench.synthetic import random_item_params, simulate_responses


def audited_world(n_audit: int = 12):
    """120 models on 80 items; the first 100 are sources, 30 balanced items of which
    ``n_audit`` are audited; the audit reading fitted on them."""
    matrix, _ = simulate_responses(random_item_params(80, seed=3), 120, seed=4)
    source = matrix.select_models(matrix.model_ids[:100])
    target = matrix.select_models(matrix.model_ids[100:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        subset = select_with_audit(make_selector("balanced"), source, 30, n_audit, seed=0)
        truth = source.mean_scores()
        view = SourceView.build(source, subset, truth, truth)
        reading = make_reading("audit").fit(view)
    positions = source.item_positions(subset.item_ids)
    return reading, view, positions, target.values[:, positions]


def test_the_parts_recompose_the_readings_own_estimate():
    """The prediction-powered mean of the parts (mean prediction over the rest plus the mean
    audit residual), as a full score, is what the reading reads: ppi_py gets our numbers."""
    tool = tools_module("bench_ppi")
    reading, view, positions, answers = audited_world()
    parts = tool.aipw_parts(reading, view.rates, positions, answers)
    assert parts["yhat"].shape == (20, 80 - 30 + 12) and parts["y_audit"].shape == (20, 12)
    audit_predictions = np.take_along_axis(
        parts["yhat"], np.tile(parts["audit_index"], (20, 1)), axis=1
    )
    rest_mean = parts["yhat"].mean(axis=1) + (parts["y_audit"] - audit_predictions).mean(axis=1)
    value, _ = reading.read(answers, np.full(20, 0.5))
    np.testing.assert_allclose(tool.as_score(parts, rest_mean), value, atol=1e-12)


def test_the_audit_columns_are_the_audit_items():
    """``audit_index`` points at the audit items among the non-informative ones: their
    predictions there are the predictions the reading's residuals use."""
    tool = tools_module("bench_ppi")
    reading, view, positions, answers = audited_world(n_audit=5)
    parts = tool.aipw_parts(reading, view.rates, positions, answers)
    rest = np.ones(view.rates.size, dtype=bool)
    rest[positions[~np.asarray(reading.audit_, dtype=bool)]] = False
    assert list(np.flatnonzero(rest)[parts["audit_index"]]) == list(
        positions[np.asarray(reading.audit_, dtype=bool)]
    )


def test_the_report_counts_cases_and_states_the_agreement():
    tool = tools_module("bench_ppi")

    def m(mae: float) -> dict:
        return {"mae": mae, "coverage": 0.9, "width": 10.0}

    def row(key: str, ours: float, tuned: float, agreement: float) -> dict:
        return {
            "key": key,
            "n_targets": 3,
            "agreement": agreement,
            "ours": m(ours),
            "ppi": m(ours),
            "ppi_tuned": m(tuned),
            "classical": m(ours + 1.0),
        }

    rows = [
        row("musr/all/random/50/0/15", 2.0, 1.0, 1e-16),
        row("musr/all/random/50/1/15", 2.0, 2.0, 3e-16),
        row("musr/all/extrapolation/50/0/15", 2.0, 3.0, 0.0),
    ]
    groups = tool.grouped(rows)
    assert [(g["protocol"], g["ppi_tuned"]["mae"]) for g in groups] == [
        ("random", 1.5),
        ("extrapolation", 3.0),
    ]
    text = tool.markdown(
        {
            "command": "python tools/bench_ppi.py",
            "seconds": 1,
            "load_average": [0.5, 1.5],
            "ppi_python": "x",
        },
        rows,
        groups,
    )
    assert "differ by at most 3.0e-16 over 9 model readings" in text
    assert "load average 0.5 -> 1.5 on 2 shared cores" in text
    assert "| ppi_tuned | 2.25 | 0.90 | 0.90 | 10.0 | 1 / 1 of 2 |" in text
    assert "| classical | 3.00 | 0.90 | 0.90 | 10.0 | 0 / 2 of 2 |" in text


def test_bench_ppi_report_only_rerenders_the_committed_json(tmp_path):
    """The committed report re-renders from its JSON (the command of the measurement stays)."""
    tool = tools_module("bench_ppi")
    committed = tool.REPO / "bench" / "ppi.json"
    if not committed.exists():
        pytest.skip("bench/ppi.json not generated yet: run python tools/bench_ppi.py")
    (tmp_path / "ppi.json").write_text(committed.read_text())
    assert tool.main(["--report-only", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "ppi.md").read_text()
    assert "Point estimates: ours and ppi_py's `lam=1` differ by at most" in text
    assert "re-rendered by `python tools/bench_ppi.py --report-only" in text
