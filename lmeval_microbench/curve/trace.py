"""``trace_runs``: lm-eval output folders of a training run in, a :class:`CurveReport` out.

Read every run (:mod:`.reader`), place each at its step (:mod:`.ordering`), draw one curve
per benchmark (:mod:`.assemble`). Problems with single runs are notes; only a series with
no usable run at all is an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ..errors import InputError
from .assemble import assemble_curves
from .ordering import order_runs
from .reader import read_runs
from .report import CurveReport
from .series import TraceOptions


def trace_runs(
    paths: Sequence[str | os.PathLike[str]],
    *,
    step_regex: str | None = None,
    order: str = "auto",
    bundles: Sequence[str | os.PathLike[str]] = (),
    task_map: Mapping[str, str] | None = None,
    options: TraceOptions | None = None,
    shipped: bool = True,
    progress: bool = True,
) -> CurveReport:
    """The curve of the checkpoints whose lm-eval runs are ``paths`` (one folder each)."""
    labels = [str(p) for p in paths]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        raise InputError(f"runs given more than once: {', '.join(twice)}")
    read = read_runs(labels, bundles=bundles, task_map=task_map, shipped=shipped, progress=progress)
    if not read.runs:
        raise InputError("no run could be read: " + "; ".join(read.notes))
    ordering = order_runs([r.identity for r in read.runs], rule=order, step_regex=step_regex)
    kept = {run.label for run in ordering.runs}
    runs = [r for r in read.runs if r.identity.label in kept]
    if not any(r.benchmarks for r in runs):
        raise InputError(
            "no micro-benchmark task in any run (pass --bundle DIR or --task-map): "
            + "; ".join(read.notes + ordering.notes)
        )
    options = options or TraceOptions()
    curves, notes = assemble_curves(runs, ordering.runs, options, progress=progress)
    return CurveReport(ordering.runs, ordering.rule, curves, read.notes + ordering.notes + notes)
