"""What the benchmark scripts compute alike for one split: the audit size a share of the budget
asks for, the errors and interval coverage of a recipe's estimates of the held-out models, and
how a report writes a number of points that may be missing, a report's rows grouped by case,
and a report's rows measured afresh or read back from its JSON (``--report-only``).

Shared by ``bench_peers`` (``ours_audit``), ``bench_similar``, ``bench_audit_split``,
``bench_guard_cost``, ``bench_small_sources``, ``bench_choice_rules``, ``bench_ppi``,
``bench_placement`` and ``v1_extrapolation``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lmeval_microbench.selection.audit import MIN_AUDIT


def audit_size(share: float, budget: int) -> int:
    """Audit items for a share of the budget: 0 where fewer than an audit needs would be
    drawn (``select_with_audit`` refuses a smaller audit)."""
    size = round(share * budget)
    return size if size >= MIN_AUDIT else 0


def interval_metrics(
    value: np.ndarray, lower: np.ndarray, upper: np.ndarray, truth: np.ndarray
) -> dict[str, float]:
    """MAE and bias in points, the interval's coverage of ``truth`` and its width in points."""
    return {
        "mae": 100 * float(np.mean(np.abs(value - truth))),
        "bias": 100 * float(np.mean(value - truth)),
        "coverage": float(np.mean((lower <= truth) & (truth <= upper))),
        "width": 100 * float(np.mean(upper - lower)),
    }


def points(value: float | None) -> str:
    """A number of points for a report table, ``-`` where there is none."""
    return "-" if value is None else f"{value:.2f}"


def rows_by_case(rows: list[dict[str, Any]]) -> dict[tuple, list[dict[str, Any]]]:
    """A report's cell rows grouped by their ``case`` (matrix, population, protocol, budget):
    the seeds a case's means are taken over."""
    grouped: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[tuple(row["case"])].append(row)
    return grouped


def measured_rows(
    args: argparse.Namespace,
    argv: list[str] | None,
    tool: str,
    saved: Path,
    measure: Callable[[argparse.Namespace], tuple[dict[str, Any], list[dict[str, Any]]]],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """:func:`measured_or_saved` for a tool's parsed ``args`` (``--report-only``): keeps the
    command line in ``args.argv`` (the report names the command that made it) and reads back
    ``saved``."""
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return measured_or_saved(
        args.report_only,
        saved,
        f"python tools/{tool}.py " + " ".join(args.argv),
        lambda: measure(args),
    )


def measured_or_saved(
    report_only: bool,
    saved: Path,
    rendered_by: str,
    measure: Callable[[], tuple[dict[str, Any], list[dict[str, Any]]]],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A report's run info and cell rows: ``measure()`` afresh, or with ``report_only`` those
    of the JSON ``saved``, its info marked as re-rendered by the command ``rendered_by`` (the
    measuring command stays recorded)."""
    if not report_only:
        return measure()
    previous = json.loads(saved.read_text())
    info, rows = previous["info"], previous["cells"]
    info["rendered"] = rendered_by
    return info, rows
