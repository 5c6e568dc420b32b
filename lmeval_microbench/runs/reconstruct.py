"""Post-run reconstruction: full-benchmark estimates from the output folders of lm-eval runs.

lm-eval writes ``OUTPUT/<model>/results_<ts>.json`` and, with ``--log_samples``, one
``samples_<task>_<ts>.jsonl`` per task. :func:`reconstruct_runs` reads any number of such
folders (many models, or many checkpoints of one), finds the runs of micro-benchmark tasks,
joins every logged document to its bundle item *by id* and recomputes each estimate and
interval from the logged per-item scores, without rerunning the model.

The flow, one module a step: :mod:`.bundles` finds the bundles and their documents,
:mod:`.match` decides which bundle a samples file's documents are (our own tasks name
it; foreign tasks such as metabench's ``metabench_arc_secondary`` are mapped with
``task_map`` or recognised by content, never by ids alone), :mod:`.scores` checks the
run and reads its scores by item id, this module estimates and averages, :mod:`.joint`
adds the joint estimator's outputs and :mod:`.report` holds the result (JSON, markdown).

Missing items behave as in the run itself (:mod:`..harness.estimates`): a warning names them
and the estimate is NaN, unless ``allow_missing`` imputes them from the bundle's IRT fit.
The leaderboard average comes with a conservative interval (see :func:`average_estimate`).
"""

from __future__ import annotations

import glob
import math
import os
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from .._conformal import check_level
from .._types import Estimate, ModelId
from ..adaptive.pool import ADAPTIVE, estimate_pool, is_pool, pool_state
from ..bundle import Bundle
from ..collect import (
    SamplesRun,
    find_samples_files,
    folder_model_notes,
    newest_runs,
    preview,
)
from ..errors import InputError, ReconstructionWarning, one_line, own_warning
from ..outside.placement import placement_records
from ..personfit import bundle_person_fit, fit_record, fit_warning, fitted_estimate
from ..reconstruct import bundle_estimator
from .bundles import BundleIndex
from .joint import (
    find_joints,
    guessing_chances,
    joint_bundles,
    joint_estimates,
    load_joint,
    widen_joint,
)
from .match import LoggedSamples, match_run
from .report import (
    AverageEstimate,
    BenchmarkEstimate,
    Reconstruction,
    average_estimate,
    benchmark_order,
    full_size_of,
    suite_of,
)
from .scores import (
    TaskScores,
    merge_split_runs,
    read_task_scores,
)

__all__ = ["ReconstructOptions", "estimate_task_scores", "reconstruct_runs", "score_runs"]


def _warn(message: str) -> None:
    warnings.warn(message, ReconstructionWarning, stacklevel=3)


# ---------------------------------------------------------------------------- estimates
@dataclass(frozen=True)
class ReconstructOptions:
    """How estimates are recomputed; None means "as the run was told, else the default"."""

    estimator: str | None = None
    level: float | None = None
    allow_missing: bool | None = None

    def resolved(self, run_options: Mapping[str, Any]) -> tuple[str | None, float, bool]:
        from ..harness.hooks import _as_bool, _as_float

        estimator = self.estimator or run_options.get("estimator") or None
        level = self.level if self.level is not None else run_options.get("level", 0.9)
        allow = self.allow_missing
        if allow is None:
            allow = _as_bool(run_options.get("allow_missing", False), "microbench_allow_missing")
        return estimator, check_level(_as_float(level, "microbench_level")), bool(allow)


def estimate_task_scores(
    runs: Sequence[TaskScores], options: ReconstructOptions
) -> list[BenchmarkEstimate]:
    """Estimates of runs of one bundle, vectorised over the models of each option set."""
    by_options: dict[tuple[Any, ...], list[TaskScores]] = defaultdict(list)
    for run in runs:
        by_options[options.resolved(run.run_options)].append(run)
    out: list[BenchmarkEstimate] = []
    for (estimator, level, allow_missing), group in by_options.items():
        out += _estimate_group(group, estimator, level, allow_missing)
    return out


def _estimate_group(
    runs: Sequence[TaskScores], estimator: str | None, level: float, allow_missing: bool
) -> list[BenchmarkEstimate]:
    bundle = runs[0].match.ref.bundle
    if estimator in (None, ADAPTIVE) and is_pool(bundle):
        return [_adaptive_estimate(run, bundle, level) for run in runs]
    fitted = bundle_estimator(bundle, estimator)
    if allow_missing and not fitted.imputes_missing:
        raise InputError(
            f"bundle {bundle.name!r}: allow_missing imputes unscored items from IRT parameters, "
            f"and neither the bundle nor estimator {fitted.name!r} has them"
        )
    ids = list(bundle.item_ids)
    values = np.array([[run.scores.get(item, np.nan) for item in ids] for run in runs])
    observed = ~np.isnan(values)
    complete = observed.all(axis=1)
    usable = complete | (observed.any(axis=1) if allow_missing else complete)
    results: list[Estimate | None] = [None] * len(runs)
    rows = np.flatnonzero(usable)
    if rows.size:
        from ..responses import ResponseMatrix

        matrix = ResponseMatrix(
            values[rows], [f"row{k}" for k in rows], ids, source=f"bundle {bundle.name}"
        )
        value, lower, upper, se = fitted.estimate_matrix(
            matrix, level=level, allow_missing=allow_missing, return_se=True
        )
        for j, k in enumerate(rows):
            results[k] = Estimate(
                float(value[j]), float(lower[j]), float(upper[j]), level, float(se[j])
            )
    fits = _person_fits(runs, bundle, values, results)
    placements = placement_records(fitted, values)
    out = []
    for k, run in enumerate(runs):
        _warn_missing(run, bundle, fitted.name, allow_missing)
        out.append(
            BenchmarkEstimate(
                model=run.model,
                benchmark=bundle.benchmark,
                task=run.task,
                bundle=bundle.name,
                estimator=fitted.name,
                metric=run.metric,
                items_scored=int(observed[k].sum()),
                items_in_bundle=bundle.budget,
                full_size=full_size_of(bundle),
                subset_mean=float(np.nanmean(values[k])) if observed[k].any() else math.nan,
                estimate=results[k],
                missing=tuple(run.missing),
                in_run=run.in_run,
                samples=str(run.path),
                person_fit=fits[k],
                placement=placements[k],
            )
        )
    return out


def _adaptive_estimate(run: TaskScores, bundle: Bundle, level: float) -> BenchmarkEstimate:
    """An adaptive run over an item pool: the pool's own estimate from the items it asked.

    An adaptive run asks only some of the pool's items by design, so the unasked items are not
    missing scores: the estimate is the one the run printed (:func:`..adaptive.estimate_pool`),
    recomputed from the logged answers whatever order they come in.
    """
    result = estimate_pool(pool_state(bundle), run.scores, level) if run.scores else None
    if result is not None and result.note:
        _warn(fit_warning(run.model, bundle.name, result.note))
    return BenchmarkEstimate(
        model=run.model,
        benchmark=bundle.benchmark,
        task=run.task,
        bundle=bundle.name,
        estimator=ADAPTIVE,
        metric=run.metric,
        items_scored=len(run.scores),
        items_in_bundle=bundle.budget,
        full_size=full_size_of(bundle),
        subset_mean=float(np.mean(list(run.scores.values()))) if run.scores else math.nan,
        estimate=None
        if result is None
        else Estimate(result.value, result.lower, result.upper, level, math.nan),
        missing=(),
        in_run=run.in_run,
        samples=str(run.path),
        person_fit=None if result is None else result.person_fit,
        placement=None if result is None else result.placement,
    )


def _person_fits(
    runs: Sequence[TaskScores],
    bundle: Bundle,
    values: np.ndarray,
    results: list[Estimate | None],
) -> list[dict[str, Any]]:
    """Person fit of every run's scored items; flagged estimates are widened in ``results``
    (in place) and warned about, naming the model and bundle."""
    fits = bundle_person_fit(bundle, values)
    records = []
    for k, run in enumerate(runs):
        fit = None if fits is None else fits[k]
        estimate, note = fitted_estimate(results[k], fit, bundle.person_fit)
        if note:
            _warn(fit_warning(run.model, bundle.name, note))
        records.append(fit_record(fit, bundle.person_fit, note, estimate is not results[k]))
        results[k] = estimate
    return records


def _warn_missing(run: TaskScores, bundle: Bundle, estimator: str, allow_missing: bool) -> None:
    if not run.missing:
        return
    head = (
        f"model {run.model!r}, task {run.task!r}: {len(run.missing)} of {bundle.budget} items "
        f"of bundle {bundle.name!r} have no score ({preview(run.missing)}; was --limit used?)"
    )
    if allow_missing:
        _warn(
            f"{head}; estimator {estimator!r} imputes them from the IRT model and its "
            "interval is widened for them"
        )
    else:
        _warn(
            f"{head}: the estimate is NaN (to impute them, with a wider interval: "
            f"`microbench reconstruct OUTPUT_PATH --allow-missing`, or in the lm-eval run "
            f"--metadata '{{\"microbench_allow_missing\": true}}')"
        )


def _bonferroni_estimates(
    runs: Sequence[TaskScores], options: ReconstructOptions, k: int, level: float
) -> dict[tuple[ModelId, str], Estimate | None]:
    wider = replace(options, level=1 - (1 - level) / k)
    by_bundle: dict[str, list[TaskScores]] = defaultdict(list)
    for run in runs:
        by_bundle[run.match.ref.bundle.name].append(run)
    found: dict[tuple[ModelId, str], Estimate | None] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReconstructionWarning)  # said once already
        for group in by_bundle.values():
            for record in estimate_task_scores(group, wider):
                found[(record.model, record.benchmark)] = record.estimate
    return found


# ---------------------------------------------------------------------------- entry point
def reconstruct_runs(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    bundles: Sequence[str | os.PathLike[str]] = (),
    task_map: Mapping[str, str] | None = None,
    estimator: str | None = None,
    level: float | None = None,
    allow_missing: bool | None = None,
    joint: str | os.PathLike[str] | None = None,
    model_id: ModelId | None = None,
    shipped: bool = True,
    progress: bool = True,
) -> Reconstruction:
    """Estimates of every micro-benchmark run found under ``paths`` (lm-eval output folders).

    ``bundles`` adds bundle folders (or folders of them) to the shipped ones; ``task_map``
    maps foreign task names to a bundle or benchmark name. ``estimator``, ``level`` and
    ``allow_missing`` default to what each run was given with lm-eval ``--metadata``
    (``microbench_*``), else the bundle's estimator, 0.9 and False, as in the run itself.
    ``joint`` is a fitted joint estimator state (JSON); without it, a :data:`JOINT_FILE`
    in the shipped suite or a ``bundles`` folder is used when there is one. The model of a
    run is named by its results json (see :class:`~lmeval_microbench.collect.SamplesRun`),
    or ``model_id`` for samples of one folder. Warnings (:class:`ReconstructionWarning`,
    and the user warnings of this package's readers, re-raised as one) are also kept in
    ``notes``, one line each. A path that is missing or holds no samples file is a note
    too; only when none holds any is it an error.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        result = _reconstruct(
            paths,
            bundles=bundles,
            task_map=dict(task_map or {}),
            options=ReconstructOptions(estimator, level, allow_missing),
            joint=joint,
            model_id=model_id,
            shipped=shipped,
            progress=progress,
        )
    for warning in caught:
        category = warning.category
        if own_warning(category, warning.filename):  # a note, whichever module raised it
            result.notes.append(one_line(warning.message))
            category = ReconstructionWarning
        warnings.warn_explicit(warning.message, category, warning.filename, warning.lineno)
    return result


def _reconstruct(
    paths: Any,
    *,
    bundles: Sequence[str | os.PathLike[str]],
    task_map: dict[str, str],
    options: ReconstructOptions,
    joint: str | os.PathLike[str] | None,
    model_id: ModelId | None,
    shipped: bool,
    progress: bool,
) -> Reconstruction:
    index = BundleIndex.discover(bundles, shipped=shipped)
    joint_paths = [Path(joint)] if joint is not None else find_joints(index)
    runs = _newest_runs(paths, model_id)
    unknown = sorted(set(task_map) - {r.task for _, r in runs})
    if unknown:
        raise InputError(f"task map names tasks with no samples file: {preview(unknown)}")
    scored, skipped = score_runs(runs, index, task_map, progress=progress)
    if not scored:
        raise InputError(
            f"no micro-benchmark runs under {preview(_as_list(paths))}: no samples file belongs "
            f"to a known bundle (skipped: {preview(skipped)}); pass --bundle DIR or --task-map"
        )
    scored = merge_split_runs(scored)
    _check_one_run_per_benchmark(scored)
    estimates: list[BenchmarkEstimate] = []
    by_bundle: dict[str, list[TaskScores]] = defaultdict(list)
    for run in scored:
        by_bundle[run.match.ref.bundle.name].append(run)
    for group in by_bundle.values():
        estimates += estimate_task_scores(group, options)
    _note_in_run_differences(estimates)
    result = Reconstruction(estimates, _averages(scored, estimates, options), skipped)
    # a joint state found beside its bundles serves the models that ran all of them and stays
    # silent otherwise; one the user named warns for every model it cannot serve
    for path in joint_paths:
        estimator = load_joint(path)
        bundles = joint_bundles(estimator, index)
        found = joint_estimates(
            estimator, scored, bundles, options.level, warn_incomplete=joint is not None
        )
        for model, outputs in found.items():
            result.joint.setdefault(model, widen_joint(outputs, guessing_chances(estimates, model)))
    return result


def score_runs(
    runs: Sequence[tuple[ModelId, SamplesRun]],
    index: BundleIndex,
    task_map: Mapping[str, str],
    *,
    progress: bool,
    skip: Callable[[LoggedSamples], bool] | None = None,
) -> tuple[list[TaskScores], list[str]]:
    """The checked scores of every run whose documents a bundle of ``index`` holds, and the
    runs no bundle matched (``file (task)``). ``skip`` sets a run aside before it is matched
    (``microbench estimate``: our own tasks' runs of other bundles); it is listed too."""
    scored: list[TaskScores] = []
    skipped: list[str] = []
    for model, run in tqdm(runs, desc="reading samples", unit="file", disable=not progress):
        with run.named_in_errors():
            logged = LoggedSamples(run)
            match = None if skip and skip(logged) else match_run(logged, index, task_map)
            if match is None:
                skipped.append(f"{run.path} ({run.task})")
                continue
            scored.append(read_task_scores(logged, model, match))
    return scored, skipped


def _as_list(paths: Any) -> list[Any]:
    return [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)


def _samples_files(paths: Any) -> list[Path]:
    """Every samples file under ``paths``; a path that is missing or holds none is named in a
    note and the others are read (``reconstruct out/ ckpt-*/`` with no ``ckpt-*`` folder:
    the shell passes the pattern itself). An error only when no path holds any."""
    found: set[Path] = set()
    unread: list[str] = []
    for entry in _as_list(paths):
        path = Path(entry)
        if not path.exists():
            hint = " (a pattern that matched nothing?)" if glob.has_magic(str(entry)) else ""
            unread.append(f"{path}: no such file or folder{hint}")
            continue
        files = find_samples_files(path)
        if not files:
            unread.append(f"{path}: no samples_*.jsonl in it (was --log_samples given?)")
        found.update(files)
    if not found:
        raise InputError(
            f"no samples_*.jsonl under {preview(_as_list(paths))} ({'; '.join(unread)}): run "
            "lm-eval with --log_samples --output_path DIR"
        )
    for text in unread:
        _warn(f"{text}; skipped")
    return sorted(found)


def _newest_runs(paths: Any, model_id: ModelId | None) -> list[tuple[ModelId, SamplesRun]]:
    """The newest samples file of every model and task under ``paths``, with its model."""
    samples = [SamplesRun(path) for path in _samples_files(paths)]
    folders = sorted({str(run.path.parent) for run in samples})
    if model_id is not None and len(folders) > 1:
        raise InputError(
            f"model id {model_id!r} given, but the samples come from several folders "
            f"({preview(folders)}): reconstruct one folder at a time"
        )
    with warnings.catch_warnings(record=True) as duplicates:  # older runs set aside: notes
        warnings.simplefilter("always", UserWarning)
        runs = newest_runs([(model_id or run.model_id, run) for run in samples], "newest")
    for warning in duplicates:
        _warn(one_line(warning.message))
    if model_id is None:
        for text in folder_model_notes(run for _, run in runs):
            _warn(text)
    return runs


def _check_one_run_per_benchmark(scored: Sequence[TaskScores]) -> None:
    seen: dict[tuple[ModelId, str], TaskScores] = {}
    for run in scored:
        key = (run.model, run.match.ref.bundle.benchmark)
        if key in seen:
            raise InputError(
                f"model {run.model!r} has two runs of benchmark {key[1]!r}: {seen[key].path} "
                f"({seen[key].task}) and {run.path} ({run.task}); remove one or give each model "
                "its own output folder"
            )
        seen[key] = run


def _note_in_run_differences(estimates: Sequence[BenchmarkEstimate]) -> None:
    for found in estimates:
        if found.in_run is None or found.estimate is None:
            continue
        gap = abs(found.in_run["value"] - found.value)
        if math.isfinite(found.in_run["value"]) and gap > 1e-9:
            _warn(
                f"model {found.model!r}, task {found.task!r}: the run reported estimate "
                f"{found.in_run['value']:.6f}, recomputed {found.value:.6f} (other estimator or "
                "level than the run's?)"
            )


def _averages(
    scored: Sequence[TaskScores],
    estimates: Sequence[BenchmarkEstimate],
    options: ReconstructOptions,
) -> list[AverageEstimate]:
    """Per model with two or more benchmarks: the mean estimate and its interval.

    Models with the same number of benchmarks and level share one vectorised pass.
    """
    per_model: dict[tuple[ModelId, str | None], dict[str, BenchmarkEstimate]] = defaultdict(dict)
    for found in estimates:
        per_model[(found.model, suite_of(found.bundle, found.benchmark))][found.benchmark] = found
    groups: dict[tuple[int, float], list[tuple[ModelId, str | None]]] = defaultdict(list)
    for (model, suite), found in per_model.items():
        if len(found) < 2:
            continue
        levels = {e.estimate.level for e in found.values() if e.estimate is not None}
        if len(levels) > 1:
            _warn(
                f"model {model!r}: the benchmarks' intervals have different levels {levels}; "
                "no average is reported (pass --level)"
            )
            continue
        level = levels.pop() if levels else (options.level or 0.9)
        groups[(len(found), level)].append((model, suite))
    averages = []
    for (k, level), keys in groups.items():
        members = {model for model, _ in keys}
        wide = _bonferroni_estimates([r for r in scored if r.model in members], options, k, level)
        for model, suite in keys:
            mine = per_model[(model, suite)]
            ordered = {b: mine[b] for b in sorted(mine, key=benchmark_order)}
            bounds = {b: wide[(model, b)] for b in ordered}
            averages.append(average_estimate(model, ordered, bounds, level, suite))
    return averages
