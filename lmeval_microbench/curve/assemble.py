"""From the runs read (:mod:`.reader`) in step order (:mod:`.ordering`) to one curve per
benchmark (:mod:`.series`).

A benchmark's points must be comparable: one bundle (the same items, the same fitted
estimator) and one task version (the same prompts and scoring). When the runs of a series
disagree, the largest group is drawn and the other runs are named in a note; a checkpoint
that did not run a benchmark is a gap in that benchmark's curve, also named.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ..runs import ReconstructOptions
from .ordering import RunIdentity
from .reader import BenchmarkAnswers, RunAnswers
from .series import BenchmarkCurve, TraceOptions, trace_benchmark


def _benchmark_order(runs: Sequence[RunAnswers]) -> list[str]:
    from ..runs.report import benchmark_order

    names = {name for run in runs for name in run.benchmarks}
    return sorted(names, key=benchmark_order)


Found = list[tuple[RunIdentity, BenchmarkAnswers]]


def _largest(groups: dict[Any, Found]) -> Any:
    return max(groups, key=lambda key: len(groups[key]))


def _leave_out(benchmark: str, runs: Found, what: str, kept: str, notes: list[str]) -> None:
    names = ", ".join(run.label for run, _ in runs)
    notes.append(
        f"{benchmark}: runs {names} used {what}, the rest of the series {kept}: left out of "
        "this curve (different items or prompts are not the same measurement)"
    )


def _consistent(benchmark: str, found: Found, notes: list[str]) -> Found:
    """The runs of the most used bundle and, among them, of the most used task version
    (runs whose version is unknown stay); a note names the others."""
    by_bundle: dict[str, Found] = defaultdict(list)
    for run, answers in found:
        by_bundle[answers.bundle.name].append((run, answers))
    bundle = _largest(by_bundle)
    for other, runs in by_bundle.items():
        if other != bundle:
            _leave_out(benchmark, runs, f"bundle {other!r}", f"bundle {bundle!r}", notes)
    by_version: dict[str | None, Found] = defaultdict(list)
    for run, answers in by_bundle[bundle]:
        by_version[answers.task_version].append((run, answers))
    known = {v: runs for v, runs in by_version.items() if v is not None}
    if not known:
        return by_bundle[bundle]
    version = _largest(known)
    for other, runs in known.items():
        if other != version:
            _leave_out(benchmark, runs, f"task version {other}", f"version {version}", notes)
    kept = {run.label for run, _ in known[version] + by_version.get(None, [])}
    return [(run, answers) for run, answers in found if run.label in kept]


def resolved_options(options: TraceOptions, answers: BenchmarkAnswers) -> TraceOptions:
    """``options`` where the command line left them open, filled in as the run was told
    (lm-eval ``--metadata microbench_*``), as ``microbench reconstruct`` does."""
    estimator, level, allow = ReconstructOptions(
        options.estimator, options.level, options.allow_missing
    ).resolved(answers.run_options)
    return replace(options, estimator=estimator, level=level, allow_missing=allow)


def assemble_curves(
    runs: Sequence[RunAnswers],
    ordered: Sequence[RunIdentity],
    options: TraceOptions,
    *,
    progress: bool = True,
) -> tuple[list[BenchmarkCurve], list[str]]:
    """One curve per benchmark over the runs in ``ordered`` (the ordering's runs, by
    label), with notes on the runs left out of a benchmark."""
    by_label = {run.identity.label: run for run in runs}
    notes: list[str] = []
    curves = []
    for benchmark in tqdm(_benchmark_order(runs), desc="curves", disable=not progress):
        found = [
            (run, by_label[run.label].benchmarks[benchmark])
            for run in ordered
            if benchmark in by_label[run.label].benchmarks
        ]
        absent = [run.label for run in ordered if benchmark not in by_label[run.label].benchmarks]
        if absent:
            notes.append(f"{benchmark}: no run in {', '.join(absent)}; a gap in its curve")
        found = _consistent(benchmark, found, notes)
        bundle = found[0][1].bundle
        ids = list(bundle.item_ids)
        values = np.array([[a.scores.get(i, np.nan) for i in ids] for _, a in found])
        curve = trace_benchmark(
            bundle,
            [run.label for run, _ in found],
            [run.model for run, _ in found],
            [run.step or 0.0 for run, _ in found],
            values,
            resolved_options(options, found[0][1]),
        )
        _note_missing(curve, notes)
        curves.append(curve)
    return curves, notes


def _note_missing(curve: BenchmarkCurve, notes: list[str]) -> None:
    for point in curve.points:
        if point.estimate is None:
            notes.append(
                f"{curve.benchmark}: run {point.label} scored {point.items_scored} of the "
                "bundle's items: no estimate (pass --allow-missing to impute the others)"
            )
