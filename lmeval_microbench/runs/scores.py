"""The scores one samples file gives its bundle's items, with everything checked first.

The third step of reading lm-eval runs (:mod:`.reconstruct`), after :mod:`.match` found the
bundle: the run's config (from its results json) must report the bundle's metric, our own
tasks' documents must carry the bundle's content hashes and foreign documents its questions;
the file must hold as many documents as the run reports. Then the per-item scores are read
by item id (:mod:`..collect`), never by position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .._conformal import check_level
from .._types import ItemId, ModelId
from ..benchmarks import recorded_settings, settings_warning, shipped
from ..bundle import verify_items
from ..collect import Record, SamplesRun, ScoreOptions, preview, scores_from_records
from ..errors import InputError, ItemMismatchError
from .bundles import note, version_text
from .match import LoggedSamples, RunMatch, check_foreign_content

METRIC_ALIASES: dict[str, tuple[str, ...]] = {"mc1": ("acc",)}
"""Names other tasks log a bundle metric under: lm-eval's and metabench's truthfulqa mc1
tasks report mc1 as ``acc``."""

PREFERRED_FILTER = "strict-match"
"""Filter used for foreign generation tasks (lm-eval's gsm8k: the leaderboard's rule)."""


# ---------------------------------------------------------------------------- runs
@dataclass
class TaskScores:
    """The scores one samples file gives one bundle's items, with what the run reported."""

    model: ModelId
    task: str
    path: Path
    match: RunMatch
    metric: str
    filter: str
    scores: dict[ItemId, float]
    missing: list[ItemId]
    run_options: dict[str, Any]
    in_run: dict[str, float] | None


# ---------------------------------------------------------------------------- checks
def _check_run_metadata(run: SamplesRun, match: RunMatch, where: str) -> None:
    """Bundle name and metric the run's config reports must be the bundle's; version warns.

    The config is the run's results json: errors name it beside the samples file.
    """
    bundle = match.ref.bundle
    config = run.task_config
    metadata = run.results_object("configs", run.task, "metadata")
    said = f"{where} (config: {run.results_path})"
    if match.own:
        named = metadata.get("bundle")
        if named is not None and named != bundle.name:
            raise ItemMismatchError(
                f"{said}: the task config names bundle {named!r}, its documents {bundle.name!r}"
            )
        estimated = metadata.get("estimated_metric")
        if estimated is not None and estimated != bundle.metric.name:
            raise ItemMismatchError(
                f"{said}: task {run.task!r} estimated metric {estimated!r}, but bundle "
                f"{bundle.name!r} estimates {bundle.metric.name!r}"
            )
    metric_list = config.get("metric_list")
    listed = [m.get("metric") for m in metric_list or [] if isinstance(m, Mapping)]
    accepted = {bundle.metric.name, *METRIC_ALIASES.get(bundle.metric.name, ())}
    if listed and not accepted & set(listed):
        raise ItemMismatchError(
            f"{said}: task {run.task!r} reports metrics {listed}, none of them the bundle's "
            f"{bundle.metric.name!r} (bundle {bundle.name!r})"
        )
    ran = version_text(run.task_version)
    installed = match.ref.task_version
    if match.own and ran is not None and installed is not None and ran != installed:
        note(
            f"{where}: task {run.task!r} ran as version {ran}, the installed task is version "
            f"{installed}; the item contents were checked, but prompts or scoring may differ",
            stacklevel=4,
        )


def _check_settings(run: SamplesRun, match: RunMatch, where: str) -> None:
    """A run with a chat template (or few-shot as multi-turn) that no source model of a
    shipped bundle used, or without one that all used, is told so (the results json says
    how the run was made)."""
    bundle = match.ref.bundle
    found = shipped(bundle.name, bundle.benchmark)
    results = run.results
    if found is None or results is None:
        return
    chat = results.get("chat_template") is not None
    settings = recorded_settings(bundle.reliability, found)
    message = settings_warning(found, chat, bool(results.get("fewshot_as_multiturn")), settings)
    if message:
        note(f"{where}: {message}", stacklevel=4)


def _check_own_content(match: RunMatch, hashes: Mapping[ItemId, str | None], where: str) -> None:
    """Changed content hashes are an error naming the items (missing ones are handled apart)."""
    bundle = match.ref.bundle
    # a missing item stands in with the bundle's own hash: verify_items then reports changes only
    logged = {item: hashes.get(item, bundle.content_hashes[item]) for item in bundle.item_ids}
    try:
        verify_items(bundle, logged)
    except ItemMismatchError as exc:
        raise ItemMismatchError(f"{where}: {exc}") from exc


def _note_other_documents(scores: Mapping[ItemId, float], bundle: Any, where: str) -> None:
    """A foreign run of more than the bundle's items (the whole benchmark) is read for the
    bundle's items only: say so, it is what the estimate rests on."""
    mine = sum(item in scores for item in bundle.item_ids)
    if len(scores) > mine:
        note(
            f"{where}: read the {mine} of its {len(scores)} documents that are items of bundle "
            f"{bundle.name!r}; the others are not used (the estimate is the bundle's, from "
            "those items alone)",
            stacklevel=4,
        )


# ---------------------------------------------------------------------------- reading a run
def _metric_for(match: RunMatch, first: Record) -> str:
    """The bundle's metric, or an alias of it that the file logs (foreign tasks only)."""
    metric = match.ref.bundle.metric.name
    if match.own:
        return metric
    logged = set(first.data.get("metrics") or first.data)
    if metric in logged:
        return metric
    for alias in METRIC_ALIASES.get(metric, ()):
        if alias in logged:
            return alias
    return metric  # the reader's error lists the metrics present


def _filter_for(match: RunMatch, logged: LoggedSamples) -> str | None:
    """Own tasks have one filter; foreign ones: ``strict-match`` if present, else the first."""
    if match.own:
        return None
    filters = logged.run.filters
    names = list(filters.names) if filters is not None else []
    if not names:
        names = list(
            dict.fromkeys(str(r.data["filter"]) for r in logged.records if "filter" in r.data)
        )
    return PREFERRED_FILTER if PREFERRED_FILTER in names else "0"


def _in_run_estimate(run: SamplesRun) -> dict[str, float] | None:
    found = run.task_results
    keys = {
        "value": "estimate,none",
        "lower": "estimate_lower,none",
        "upper": "estimate_upper,none",
    }
    if not all(isinstance(found.get(k), (int, float)) for k in keys.values()):
        return None
    return {name: float(found[key]) for name, key in keys.items()}


def _run_options(run: SamplesRun) -> dict[str, Any]:
    """The ``microbench_*`` options the run was given through lm-eval ``--metadata``,
    checked here so that a bad value is reported with the results json it is in."""
    from ..harness.hooks import _as_bool, _as_float

    metadata = run.results_object("configs", run.task, "metadata")
    options: dict[str, Any] = {}
    try:
        if "microbench_estimator" in metadata:
            options["estimator"] = metadata["microbench_estimator"]
        if "microbench_level" in metadata:
            level = _as_float(metadata["microbench_level"], "microbench_level")
            options["level"] = check_level(level)
        if "microbench_allow_missing" in metadata:
            allow = metadata["microbench_allow_missing"]
            options["allow_missing"] = _as_bool(allow, "microbench_allow_missing")
    except InputError as exc:
        raise InputError(f"{run.results_path}: configs.{run.task}.metadata: {exc}") from exc
    return options


def read_task_scores(logged: LoggedSamples, model: ModelId, match: RunMatch) -> TaskScores:
    """One samples file's scores on its bundle's items, checked (content, metadata)."""
    run, where = logged.run, str(logged.path)
    _check_run_metadata(run, match, where)
    _check_settings(run, match, where)
    options = ScoreOptions(
        metric=_metric_for(match, logged.records[0]),
        filter=_filter_for(match, logged),
        id_field=match.id_field,
        id_prefix=match.id_prefix,
        benchmark=match.ref.bundle.benchmark,
    )
    sample = scores_from_records(
        logged.records, options, source=where, task=run.task, filters=run.filters
    )
    run.check_count(len(sample.scores))
    bundle = match.ref.bundle
    if match.own:
        hashes = sample.items["content_hash"].to_dict()
        strangers = [item for item in sample.scores if item not in bundle.content_hashes]
        if strangers:
            raise ItemMismatchError(
                f"{where}: documents of bundle {bundle.name!r} that are not its items: "
                f"{preview(strangers)}"
            )
        _check_own_content(match, hashes, where)
    else:
        check_foreign_content(logged, match, where)
        _note_other_documents(sample.scores, bundle, where)
    scores = {item: sample.scores[item] for item in bundle.item_ids if item in sample.scores}
    missing = [item for item in bundle.item_ids if item not in sample.scores]
    return TaskScores(
        model=model,
        task=run.task,
        path=run.path,
        match=match,
        metric=options.metric,
        filter=sample.filter,
        scores=scores,
        missing=missing,
        run_options=_run_options(run),
        in_run=_in_run_estimate(run) if match.own else None,
    )


def merge_split_runs(scored: Sequence[TaskScores]) -> list[TaskScores]:
    """One run per model and bundle: files that hold disjoint parts of a bundle's items
    (lm-eval's ``leaderboard_musr`` writes one samples file per subtask) are merged.

    Only runs of other tasks than ours are merged (ours hold a whole bundle each), and only
    when no item is in two of them; anything else is left for the one-run-per-benchmark
    check to report. Items in none of the files stay missing, named by the estimate's
    warning, with the files that were read.
    """
    groups: dict[tuple[ModelId, str], list[TaskScores]] = {}
    for run in scored:
        groups.setdefault((run.model, run.match.ref.bundle.name), []).append(run)
    merged: list[TaskScores] = []
    for runs in groups.values():
        items = [item for run in runs for item in run.scores]
        if len(runs) == 1 or any(r.match.own for r in runs) or len(items) != len(set(items)):
            merged += runs
            continue
        scores = {item: score for run in runs for item, score in run.scores.items()}
        bundle = runs[0].match.ref.bundle
        missing = [item for item in bundle.item_ids if item not in scores]
        if missing:
            note(
                f"model {runs[0].model!r}: bundle {bundle.name!r} read from {len(runs)} files "
                f"({', '.join(r.task for r in runs)}); {len(missing)} of its items are in "
                "none of them (a subtask not run?)",
                stacklevel=3,
            )
        merged.append(
            replace(
                runs[0],
                task="+".join(r.task for r in runs),
                scores=scores,
                missing=missing,
                in_run=None,
            )
        )
    return merged
