"""The answers of each checkpoint's lm-eval run, per benchmark and item, read by the code
``microbench reconstruct`` uses (:mod:`lmeval_microbench.runs`): same bundle matching, same
content checks, same join by item id.

A curve needs item-level answers, not only estimates: the paired test of two checkpoints
(:mod:`.significance`) swaps their answers item by item. Each run (one lm-eval
``--output_path`` folder, one checkpoint) becomes a :class:`RunAnswers`: its identity and,
per benchmark, a :class:`BenchmarkAnswers`. A problem with one run or one samples file is
a note naming it, and the rest of the curve is still drawn.

Static micro tasks (shipped or a user's own bundles) are read here. An adaptive run, whose
items differ between checkpoints, would be another reader producing the same
:class:`BenchmarkAnswers` (its ``scores`` over the items it asked); :mod:`.series` builds the
checkpoints x items matrix by item id, so different item sets only leave NaN cells.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from .._types import ItemId
from ..bundle import Bundle
from ..collect import SamplesRun, find_samples_files, folder_model_notes, newest_runs
from ..errors import InputError, MicrobenchError
from ..runs import BundleIndex, LoggedSamples, match_run, read_task_scores, version_text
from .ordering import RunIdentity


@dataclass(frozen=True)
class BenchmarkAnswers:
    """One checkpoint's scores on one bundle's items, with the task that produced them."""

    bundle: Bundle
    task: str
    task_version: str | None
    scores: Mapping[ItemId, float]
    run_options: Mapping[str, Any]
    samples: Path

    @property
    def benchmark(self) -> str:
        return self.bundle.benchmark


@dataclass
class RunAnswers:
    """One checkpoint: who it is and its answers per benchmark."""

    identity: RunIdentity
    benchmarks: dict[str, BenchmarkAnswers] = field(default_factory=dict)


@dataclass
class ReadResult:
    """The runs that could be read and a note for every run or file that could not."""

    runs: list[RunAnswers]
    notes: list[str]


def read_runs(
    paths: Sequence[str | os.PathLike[str]],
    *,
    bundles: Sequence[str | os.PathLike[str]] = (),
    task_map: Mapping[str, str] | None = None,
    shipped: bool = True,
    progress: bool = True,
) -> ReadResult:
    """Every run folder of ``paths`` (one checkpoint each), in the order given."""
    index = BundleIndex.discover(bundles, shipped=shipped)
    runs: list[RunAnswers] = []
    notes: list[str] = []
    for path in tqdm(paths, desc="reading runs", unit="run", disable=not progress):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                found = _read_run(str(path), index, dict(task_map or {}), notes)
            except MicrobenchError as exc:
                notes.append(f"run {path}: {exc}; left out")
                found = None
        notes += [f"run {path}: {w.message}" for w in caught if _worth_noting(w)]
        if found is not None:
            runs.append(found)
    return ReadResult(runs, notes)


def _worth_noting(caught: warnings.WarningMessage) -> bool:
    """Our warnings and lm-eval's, not libraries' deprecation chatter."""
    return not issubclass(caught.category, (DeprecationWarning, FutureWarning))


def _read_run(
    label: str, index: BundleIndex, task_map: dict[str, str], notes: list[str]
) -> RunAnswers | None:
    files = find_samples_files(label)
    if not files:
        notes.append(f"run {label}: no samples_*.jsonl (run lm-eval with --log_samples); left out")
        return None
    for path in files:
        if not path.is_file():  # found by name: a folder called samples_*.jsonl
            raise InputError(f"{path}: a folder, not a samples file")
    samples = [SamplesRun(path) for path in files]
    models = sorted({s.model_id for s in samples})
    if len(models) > 1:
        notes.append(
            f"run {label} holds runs of {len(models)} models ({', '.join(models)}): one "
            "folder per checkpoint; left out"
        )
        return None
    notes += [f"run {label}: {text}" for text in folder_model_notes(samples)]
    model = models[0]
    model_args = samples[0].results_object("config").get("model_args")
    answers = RunAnswers(RunIdentity(label, model, model_args))
    for _, run in newest_runs([(model, s) for s in samples], "newest"):
        try:
            found = _read_task(run, model, index, task_map)
        except MicrobenchError as exc:
            notes.append(f"run {label}: {exc}; this task left out")
            continue
        if found is None:
            continue
        known = answers.benchmarks.get(found.benchmark)
        if known is not None:
            notes.append(
                f"run {label}: two runs of benchmark {found.benchmark!r} ({known.samples}, "
                f"{found.samples}); the first is used"
            )
            continue
        answers.benchmarks[found.benchmark] = found
    return answers


def _read_task(
    run: SamplesRun, model: str, index: BundleIndex, task_map: dict[str, str]
) -> BenchmarkAnswers | None:
    """One samples file's answers, None for a task that is no bundle's."""
    with run.named_in_errors():
        logged = LoggedSamples(run)
        match = match_run(logged, index, task_map)
        if match is None:
            return None
        scored = read_task_scores(logged, model, match)
    return BenchmarkAnswers(
        bundle=match.ref.bundle,
        task=scored.task,
        task_version=version_text(run.task_version),
        scores=dict(scored.scores),
        run_options=dict(scored.run_options),
        samples=scored.path,
    )
