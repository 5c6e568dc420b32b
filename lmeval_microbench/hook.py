"""Post-run reconstruction: full-benchmark estimates from the output folders of lm-eval runs.

lm-eval writes ``OUTPUT/<model>/results_<ts>.json`` and, with ``--log_samples``, one
``samples_<task>_<ts>.jsonl`` per task. :func:`reconstruct_runs` reads any number of such
folders (many models, or many checkpoints of one), finds the runs of micro-benchmark tasks,
joins every logged document to its bundle item *by id* and recomputes each estimate and
interval from the logged per-item scores, without rerunning the model.

Two kinds of runs are understood:

* runs of our own tasks (``microbench_*``): every document carries ``item_id`` and the
  ``bundle`` name, and its content hash must equal the one the bundle records;
* runs of foreign tasks over the same items (metabench's ``metabench_arc_secondary``, ...),
  mapped to a bundle with ``task_map`` or detected because every bundle item id
  (``"{benchmark}.{metabench_idx}"``, ``"mmlu.{mb_sub_idx}"``) is among the run's
  documents. Their documents have another shape, so instead of the content hash the
  question fields they share with the bundle's shipped documents are compared.

Missing items behave as in the run itself (:mod:`.harness.estimates`): a warning names them
and the estimate is NaN, unless ``allow_missing`` lets an IRT-based estimator skip them.
The leaderboard average comes with a conservative interval (see :func:`average_estimate`).
"""

from __future__ import annotations

import math
import os
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from tqdm.auto import tqdm

from ._io import canonical_json
from ._types import Estimate, ItemId, ModelId
from .bundle import BUNDLE_FILE, Bundle, load_bundle, verify_items
from .collect import (
    DEFAULT_ID_FIELDS,
    Record,
    SamplesRun,
    ScoreOptions,
    doc_of,
    find_samples_files,
    format_id,
    iter_json_records,
    lookup,
    newest_runs,
    preview,
    scores_from_records,
)
from .errors import BundleError, InputError, ItemMismatchError
from .estimators._conformal import check_level
from .reconstruct import (
    AverageEstimate,
    BenchmarkEstimate,
    Reconstruction,
    average_estimate,
    benchmark_order,
    bundle_estimator,
    full_size_of,
)

METRIC_ALIASES: dict[str, tuple[str, ...]] = {"mc1": ("acc",)}
"""Names other tasks log a bundle metric under: lm-eval's and metabench's truthfulqa mc1
tasks report mc1 as ``acc``."""

FOREIGN_ID_FIELDS = ("mb_sub_idx", "metabench_idx", *DEFAULT_ID_FIELDS)
"""Doc fields tried, in order, as the item id of a foreign task's documents."""

PREFERRED_FILTER = "strict-match"
"""Filter used for foreign generation tasks (lm-eval's gsm8k: the leaderboard's rule)."""

OWN_FIELDS = ("item_id", "bundle")

JOINT_FILE = "joint.json"
"""A fitted :class:`~lmeval_microbench.joint.JointEstimator` state (JSON) at the root of a
task suite, beside its data folders; used for the joint average when present."""


class ReconstructionWarning(UserWarning):
    """Something about a run deserves attention but does not stop the reconstruction."""


# ---------------------------------------------------------------------------- bundles
@dataclass(frozen=True)
class BundleRef:
    """A bundle found on disk, with the documents and task version shipped beside it."""

    bundle: Bundle
    folder: Path
    docs: Mapping[ItemId, Mapping[str, Any]] | None = None
    """``items.jsonl`` beside ``bundle.json`` by item id (None when absent)."""
    task_version: str | None = None
    """``metadata.version`` of the task YAML running this folder (None when not found)."""


class _TolerantLoader(yaml.SafeLoader):
    """Reads lm-eval YAMLs without resolving tags such as ``!function``."""


_TolerantLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _version_text(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return str(float(value))
    except (TypeError, ValueError):
        return str(value)


def _task_versions(suite: Path) -> dict[str, str | None]:
    """Data folder name -> task version, from the task YAMLs of a suite folder."""
    versions: dict[str, str | None] = {}
    for path in sorted(suite.glob("*.yaml")):
        try:
            config = yaml.load(path.read_text(encoding="utf-8"), Loader=_TolerantLoader)
        except (OSError, yaml.YAMLError):
            continue
        if not isinstance(config, dict):
            continue
        folder = (config.get("dataset_kwargs") or {}).get("microbench_items")
        if isinstance(folder, str):
            versions[folder] = _version_text((config.get("metadata") or {}).get("version"))
    return versions


def _read_item_docs(folder: Path) -> dict[ItemId, dict[str, Any]] | None:
    from .harness.docs import ITEMS_JSONL, read_docs

    path = folder / ITEMS_JSONL
    return {doc["item_id"]: doc for doc in read_docs(path)} if path.is_file() else None


def load_bundle_ref(
    folder: str | os.PathLike[str], versions: Mapping[str, str | None] | None = None
) -> BundleRef:
    """A bundle folder with its shipped documents and the version of the task running it.

    ``versions`` is :func:`_task_versions` of the parent folder when already read.
    """
    folder = Path(folder)
    if folder.name == BUNDLE_FILE:
        folder = folder.parent
    bundle = load_bundle(folder)
    if versions is None:
        versions = _task_versions(folder.parent)
    return BundleRef(bundle, folder, _read_item_docs(folder), versions.get(folder.name))


class BundleIndex:
    """Bundles by name: the shipped suite plus the folders the user names."""

    def __init__(self, refs: Iterable[BundleRef]) -> None:
        self.by_name: dict[str, BundleRef] = {}
        for ref in refs:
            known = self.by_name.get(ref.bundle.name)
            if known is not None and known.bundle != ref.bundle:
                raise BundleError(
                    f"two different bundles are named {ref.bundle.name!r}: {known.folder} and "
                    f"{ref.folder}; bundle names must be unique"
                )
            if known is None:
                self.by_name[ref.bundle.name] = ref

    @classmethod
    def discover(
        cls, locations: Sequence[str | os.PathLike[str]] = (), *, shipped: bool = True
    ) -> BundleIndex:
        """Every bundle under ``locations`` (bundle folders or folders of them) and shipped.

        User bundles come first, so a user's copy of a shipped bundle (same name, same
        content) is the one whose documents are used.
        """
        folders: list[Path] = []
        for location in locations:
            path = Path(location)
            if (path / BUNDLE_FILE).is_file() or path.name == BUNDLE_FILE:
                folders.append(path if path.is_dir() else path.parent)
            elif path.is_dir():
                found = sorted(p.parent for p in path.rglob(BUNDLE_FILE))
                if not found:
                    raise BundleError(f"{path}: no {BUNDLE_FILE} in this folder or below")
                folders += found
            else:
                raise BundleError(f"{path}: no such bundle folder")
        if shipped:
            from .harness import include_path

            folders += sorted(p.parent for p in include_path().rglob(BUNDLE_FILE))
        suites = {folder.parent: _task_versions(folder.parent) for folder in folders}
        return cls(load_bundle_ref(folder, suites[folder.parent]) for folder in folders)

    def named(self, name: str, *, task: str) -> BundleRef:
        try:
            return self.by_name[name]
        except KeyError:
            raise BundleError(
                f"task {task!r}: its documents belong to bundle {name!r}, which is neither "
                f"shipped nor given with --bundle; known bundles: {preview(sorted(self.by_name))}"
            ) from None

    def for_target(self, target: str, *, task: str) -> BundleRef:
        """The bundle a ``--task-map`` entry names: a bundle name or a benchmark name."""
        if target in self.by_name:
            return self.by_name[target]
        matches = [ref for ref in self.by_name.values() if ref.bundle.benchmark == target]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise BundleError(
                f"task map {task}={target}: no bundle or benchmark named {target!r}; "
                f"bundles: {preview(sorted(self.by_name))}"
            )
        names = sorted(ref.bundle.name for ref in matches)
        raise BundleError(
            f"task map {task}={target}: several bundles of benchmark {target!r} "
            f"({preview(names)}); name the bundle instead"
        )


def parse_task_map(text: str | Sequence[str] | None) -> dict[str, str]:
    """``"a=arc,b=mmlu"`` (or a list of such texts) -> ``{"a": "arc", "b": "mmlu"}``."""
    parts: list[str] = []
    for chunk in [text] if isinstance(text, str) else list(text or []):
        parts += [p.strip() for p in chunk.split(",") if p.strip()]
    mapping: dict[str, str] = {}
    for part in parts:
        task, sep, target = (s.strip() for s in part.partition("="))
        if not sep or not task or not target:
            raise InputError(f"task map entry {part!r}: expected TASK=BENCHMARK_OR_BUNDLE")
        if task in mapping and mapping[task] != target:
            raise InputError(f"task map: task {task!r} mapped twice ({mapping[task]}, {target})")
        mapping[task] = target
    return mapping


# ---------------------------------------------------------------------------- runs
@dataclass(frozen=True)
class RunMatch:
    """How the documents of one samples file are read as items of one bundle."""

    ref: BundleRef
    id_field: str
    id_prefix: str
    own: bool
    """True for our own tasks (documents carry ``item_id`` and ``bundle``)."""


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


class LoggedSamples:
    """A samples file of one run, parsed once: its records, first document, ids by field."""

    def __init__(self, run: SamplesRun) -> None:
        self.run = run
        self.path = run.path
        self.records: list[Record] = list(iter_json_records(run.path))
        if not self.records:
            raise InputError(f"{run.path}: no sample records")
        self._ids: dict[tuple[str, str], dict[ItemId, Mapping[str, Any]]] = {}

    @property
    def task(self) -> str:
        return self.run.task

    @property
    def first_doc(self) -> Mapping[str, Any]:
        return doc_of(self.records[0])

    def docs_by_id(self, field: str, prefix: str) -> dict[ItemId, Mapping[str, Any]]:
        """Every document by ``prefix + doc[field]`` (a document logged per filter: once)."""
        key = (field, prefix)
        if key not in self._ids:
            docs: dict[ItemId, Mapping[str, Any]] = {}
            for record in self.records:
                found, value = lookup(record, field)
                if found:
                    docs[prefix + format_id(value, field, record.where)] = doc_of(record)
            self._ids[key] = docs
        return self._ids[key]


def _coverage_match(logged: LoggedSamples, ref: BundleRef) -> tuple[RunMatch, int] | None:
    """The id field and prefix under which most of the bundle's items are in the file."""
    best: tuple[RunMatch, int] | None = None
    for id_field in (f for f in FOREIGN_ID_FIELDS if f in logged.first_doc):
        for prefix in ("", f"{ref.bundle.benchmark}."):
            ids = logged.docs_by_id(id_field, prefix)
            found = sum(item in ids for item in ref.bundle.item_ids)
            if found and (best is None or found > best[1]):
                best = (RunMatch(ref, id_field, prefix, own=False), found)
    return best


def _tokens(text: str) -> set[str]:
    return {t for t in text.replace("-", "_").split("_") if t}


def match_run(
    logged: LoggedSamples, index: BundleIndex, task_map: Mapping[str, str]
) -> RunMatch | None:
    """The bundle a samples file's documents belong to, or None for an unrelated task.

    Own tasks name their bundle in every document. A task of ``task_map`` takes the named
    bundle; others are matched when *every* item of exactly one bundle is among their
    documents (several: the one whose benchmark is a word of the task name).
    """
    doc, task, path = logged.first_doc, logged.task, logged.path
    if all(isinstance(doc.get(name), str) for name in OWN_FIELDS):
        return RunMatch(index.named(doc["bundle"], task=task), "item_id", "", own=True)
    if task in task_map:
        ref = index.for_target(task_map[task], task=task)
        found = _coverage_match(logged, ref)
        if found is None:
            raise ItemMismatchError(
                f"{path}: task {task!r} is mapped to bundle {ref.bundle.name!r}, but none of its "
                f"items is among the documents (ids tried from doc fields "
                f"{[f for f in FOREIGN_ID_FIELDS if f in doc]}, e.g. {ref.bundle.item_ids[0]!r})"
            )
        return found[0]
    complete = []
    for ref in index.by_name.values():
        found = _coverage_match(logged, ref)
        if found is not None and found[1] == ref.bundle.budget:
            complete.append(found[0])
    if len(complete) > 1:
        named = [m for m in complete if m.ref.bundle.benchmark in _tokens(task)]
        complete = named if len(named) == 1 else complete
    if len(complete) > 1:
        names = sorted(m.ref.bundle.name for m in complete)
        raise ItemMismatchError(
            f"{path}: task {task!r} holds every item of several bundles ({preview(names)}); "
            f"choose one with --task-map {task}=BUNDLE"
        )
    return complete[0] if complete else None


# ---------------------------------------------------------------------------- checks
def _config(results: Mapping[str, Any] | None, task: str) -> Mapping[str, Any]:
    config = ((results or {}).get("configs") or {}).get(task)
    return config if isinstance(config, Mapping) else {}


def _check_run_metadata(run: SamplesRun, match: RunMatch, where: str) -> None:
    """Bundle name and metric the run's config reports must be the bundle's; version warns."""
    bundle = match.ref.bundle
    config = _config(run.results, run.task)
    metadata = config.get("metadata") or {}
    if match.own:
        named = metadata.get("bundle")
        if named is not None and named != bundle.name:
            raise ItemMismatchError(
                f"{where}: the task config names bundle {named!r}, its documents {bundle.name!r}"
            )
        estimated = metadata.get("estimated_metric")
        if estimated is not None and estimated != bundle.metric.name:
            raise ItemMismatchError(
                f"{where}: task {run.task!r} estimated metric {estimated!r}, but bundle "
                f"{bundle.name!r} estimates {bundle.metric.name!r}"
            )
    listed = [m.get("metric") for m in config.get("metric_list") or [] if isinstance(m, Mapping)]
    accepted = {bundle.metric.name, *METRIC_ALIASES.get(bundle.metric.name, ())}
    if listed and not accepted & set(listed):
        raise ItemMismatchError(
            f"{where}: task {run.task!r} reports metrics {listed}, none of them the bundle's "
            f"{bundle.metric.name!r} (bundle {bundle.name!r})"
        )
    ran = _version_text(((run.results or {}).get("versions") or {}).get(run.task))
    installed = match.ref.task_version
    if match.own and ran is not None and installed is not None and ran != installed:
        _warn(
            f"{where}: task {run.task!r} ran as version {ran}, the installed task is version "
            f"{installed}; the item contents were checked, but prompts or scoring may differ"
        )


def _check_own_content(match: RunMatch, hashes: Mapping[ItemId, str | None], where: str) -> None:
    """Changed content hashes are an error naming the items (missing ones are handled apart)."""
    bundle = match.ref.bundle
    # a missing item stands in with the bundle's own hash: verify_items then reports changes only
    logged = {item: hashes.get(item, bundle.content_hashes[item]) for item in bundle.item_ids}
    try:
        verify_items(bundle, logged)
    except ItemMismatchError as exc:
        raise ItemMismatchError(f"{where}: {exc}") from exc


def _same_field(shipped: Any, logged: Any) -> bool:
    """Equal values; a logged text may add a prefix (metabench puts winogrande's few-shot
    examples in front of the sentence), the shipped text must then end it."""
    if isinstance(shipped, str) and isinstance(logged, str):
        return logged == shipped or logged.endswith("\n\n" + shipped)
    return canonical_json(shipped) == canonical_json(logged)


def _check_foreign_content(
    match: RunMatch, docs: Mapping[ItemId, Mapping[str, Any]], where: str
) -> None:
    """Fields a foreign document shares with the bundle's shipped ``source`` must be equal."""
    shipped = match.ref.docs
    bundle = match.ref.bundle
    if shipped is None:
        _warn(
            f"{where}: bundle {bundle.name!r} has no items.jsonl to compare the documents of this "
            "foreign task with; their content was not verified"
        )
        return
    changed: list[str] = []
    unchecked: list[ItemId] = []
    for item in bundle.item_ids:
        if item not in docs:
            continue
        source = shipped[item].get("source") or {}
        shared = [key for key in source if key in docs[item]]
        if not shared:
            unchecked.append(item)
            continue
        differing = [key for key in shared if not _same_field(source[key], docs[item][key])]
        if differing:
            changed.append(f"{item!r} (fields {differing})")
    if changed:
        raise ItemMismatchError(
            f"{where}: {len(changed)} documents differ from bundle {bundle.name!r}'s items: "
            f"{preview(changed)}"
        )
    if unchecked:
        _warn(
            f"{where}: {len(unchecked)} documents share no field with bundle {bundle.name!r}'s "
            f"items and were not verified: {preview(unchecked)}"
        )


def _warn(message: str) -> None:
    warnings.warn(message, ReconstructionWarning, stacklevel=3)


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
    names = logged.run.filter_names or []
    if not names:
        names = list(
            dict.fromkeys(str(r.data["filter"]) for r in logged.records if "filter" in r.data)
        )
    return PREFERRED_FILTER if PREFERRED_FILTER in names else "0"


def _in_run_estimate(results: Mapping[str, Any] | None, task: str) -> dict[str, float] | None:
    found = ((results or {}).get("results") or {}).get(task) or {}
    keys = {
        "value": "estimate,none",
        "lower": "estimate_lower,none",
        "upper": "estimate_upper,none",
    }
    if not all(isinstance(found.get(k), (int, float)) for k in keys.values()):
        return None
    return {name: float(found[key]) for name, key in keys.items()}


def _run_options(results: Mapping[str, Any] | None, task: str) -> dict[str, Any]:
    """The ``microbench_*`` options the run was given through lm-eval ``--metadata``."""
    metadata = _config(results, task).get("metadata") or {}
    return {
        key.removeprefix("microbench_"): metadata[key]
        for key in ("microbench_estimator", "microbench_level", "microbench_allow_missing")
        if key in metadata
    }


def read_task_scores(logged: LoggedSamples, model: ModelId, match: RunMatch) -> TaskScores:
    """One samples file's scores on its bundle's items, checked (content, metadata)."""
    run, where = logged.run, str(logged.path)
    _check_run_metadata(run, match, where)
    options = ScoreOptions(
        metric=_metric_for(match, logged.records[0]),
        filter=_filter_for(match, logged),
        id_field=match.id_field,
        id_prefix=match.id_prefix,
        benchmark=match.ref.bundle.benchmark,
    )
    sample = scores_from_records(
        logged.records, options, source=where, task=run.task, filter_names=run.filter_names
    )
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
        _check_foreign_content(match, logged.docs_by_id(match.id_field, match.id_prefix), where)
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
        run_options=_run_options(run.results, run.task),
        in_run=_in_run_estimate(run.results, run.task) if match.own else None,
    )


# ---------------------------------------------------------------------------- estimates
@dataclass(frozen=True)
class ReconstructOptions:
    """How estimates are recomputed; None means "as the run was told, else the default"."""

    estimator: str | None = None
    level: float | None = None
    allow_missing: bool | None = None

    def resolved(self, run_options: Mapping[str, Any]) -> tuple[str | None, float, bool]:
        from .harness.hooks import _as_bool, _as_float

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
    fitted = bundle_estimator(bundle, estimator)
    if allow_missing and not fitted.supports_missing:
        raise InputError(
            f"bundle {bundle.name!r}: allow_missing needs an IRT-based estimator; "
            f"{fitted.name!r} needs a score on every subset item"
        )
    ids = list(bundle.item_ids)
    values = np.array([[run.scores.get(item, np.nan) for item in ids] for run in runs])
    observed = ~np.isnan(values)
    complete = observed.all(axis=1)
    usable = complete | (observed.any(axis=1) if allow_missing else complete)
    results: list[Estimate | None] = [None] * len(runs)
    rows = np.flatnonzero(usable)
    if rows.size:
        from .responses import ResponseMatrix

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
            )
        )
    return out


def _warn_missing(run: TaskScores, bundle: Bundle, estimator: str, allow_missing: bool) -> None:
    if not run.missing:
        return
    head = (
        f"model {run.model!r}, task {run.task!r}: {len(run.missing)} of {bundle.budget} items "
        f"of bundle {bundle.name!r} have no score ({preview(run.missing)}; was --limit used?)"
    )
    if allow_missing:
        _warn(
            f"{head}; estimator {estimator!r} skips them, its interval was calibrated on all "
            f"{bundle.budget} items and is too narrow now"
        )
    else:
        _warn(
            f"{head}: the estimate is NaN (pass allow_missing / --allow-missing to let an "
            "IRT-based estimator skip them)"
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
    shipped: bool = True,
    progress: bool = True,
) -> Reconstruction:
    """Estimates of every micro-benchmark run found under ``paths`` (lm-eval output folders).

    ``bundles`` adds bundle folders (or folders of them) to the shipped ones; ``task_map``
    maps foreign task names to a bundle or benchmark name. ``estimator``, ``level`` and
    ``allow_missing`` default to what each run was given with lm-eval ``--metadata``
    (``microbench_*``), else the bundle's estimator, 0.9 and False, as in the run itself.
    ``joint`` is a fitted joint estimator state (JSON); without it, a :data:`JOINT_FILE`
    in the shipped suite or a ``bundles`` folder is used when there is one. Warnings
    (:class:`ReconstructionWarning`) are also kept in ``notes``.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ReconstructionWarning)
        result = _reconstruct(
            paths,
            bundles=bundles,
            task_map=dict(task_map or {}),
            options=ReconstructOptions(estimator, level, allow_missing),
            joint=joint,
            shipped=shipped,
            progress=progress,
        )
    for warning in caught:
        if issubclass(warning.category, ReconstructionWarning):
            result.notes.append(str(warning.message))
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return result


def _reconstruct(
    paths: Any,
    *,
    bundles: Sequence[str | os.PathLike[str]],
    task_map: dict[str, str],
    options: ReconstructOptions,
    joint: str | os.PathLike[str] | None,
    shipped: bool,
    progress: bool,
) -> Reconstruction:
    index = BundleIndex.discover(bundles, shipped=shipped)
    joint_paths = [Path(joint)] if joint is not None else _find_joints(index)
    files = find_samples_files(paths)
    if not files:
        raise InputError(
            f"no samples_*.jsonl under {preview(_as_list(paths))}: run lm-eval with "
            "--log_samples --output_path DIR"
        )
    runs = newest_runs([(r.model_id, r) for r in map(SamplesRun, files)], "newest")
    unknown = sorted(set(task_map) - {r.task for _, r in runs})
    if unknown:
        raise InputError(f"task map names tasks with no samples file: {preview(unknown)}")
    scored: list[TaskScores] = []
    skipped: list[str] = []
    for model, run in tqdm(runs, desc="reading samples", unit="file", disable=not progress):
        logged = LoggedSamples(run)
        match = match_run(logged, index, task_map)
        if match is None:
            skipped.append(f"{run.path} ({run.task})")
            continue
        scored.append(read_task_scores(logged, model, match))
    if not scored:
        raise InputError(
            f"no micro-benchmark runs under {preview(_as_list(paths))}: no samples file belongs "
            f"to a known bundle (skipped: {preview(skipped)}); pass --bundle DIR or --task-map"
        )
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
        bundles = _joint_bundles(estimator, index)
        found = joint_estimates(
            estimator, scored, bundles, options, warn_incomplete=joint is not None
        )
        for model, outputs in found.items():
            result.joint.setdefault(model, outputs)
    return result


def _as_list(paths: Any) -> list[Any]:
    return [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)


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
    per_model: dict[ModelId, dict[str, BenchmarkEstimate]] = defaultdict(dict)
    for found in estimates:
        per_model[found.model][found.benchmark] = found
    groups: dict[tuple[int, float], list[ModelId]] = defaultdict(list)
    for model, found in per_model.items():
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
        groups[(len(found), level)].append(model)
    averages = []
    for (k, level), models in groups.items():
        members = set(models)
        wide = _bonferroni_estimates([r for r in scored if r.model in members], options, k, level)
        for model in models:
            ordered = {
                b: per_model[model][b] for b in sorted(per_model[model], key=benchmark_order)
            }
            bounds = {b: wide[(model, b)] for b in ordered}
            averages.append(average_estimate(model, ordered, bounds, level))
    return averages


# ---------------------------------------------------------------------------- joint estimates
def _find_joints(index: BundleIndex) -> list[Path]:
    """The :data:`JOINT_FILE` of every suite folder the bundles live in."""
    suites = sorted({ref.folder.parent for ref in index.by_name.values()})
    return [suite / JOINT_FILE for suite in suites if (suite / JOINT_FILE).is_file()]


def load_joint(path: str | os.PathLike[str]) -> Any:
    """A fitted joint estimator from its JSON state (no pickles)."""
    import json

    from .joint import JointEstimator

    path = Path(path)
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: cannot read the joint estimator state ({exc})") from exc
    try:
        return JointEstimator.from_state(state)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from exc


def _joint_bundles(joint: Any, index: BundleIndex) -> dict[str, Bundle]:
    """The bundle of each of the joint estimator's benchmarks: the one holding its subset.

    A subset no loaded bundle of that benchmark holds is an error: the estimator would read
    answers to other items.
    """
    by_benchmark: dict[str, Bundle] = {}
    for benchmark in joint.benchmarks_:
        fitted = set(joint.subsets_[benchmark].item_ids)
        found = [
            ref.bundle
            for ref in index.by_name.values()
            if ref.bundle.benchmark == benchmark and set(ref.bundle.item_ids) == fitted
        ]
        if not found:
            raise BundleError(
                f"the joint estimator's {benchmark} subset ({len(fitted)} items) is not the "
                f"items of any {benchmark} bundle in use; refit it on the bundles' subsets"
            )
        by_benchmark[benchmark] = found[0]
    return by_benchmark


def joint_estimates(
    joint: Any,
    scored: Sequence[TaskScores],
    bundles: Mapping[str, Bundle],
    options: ReconstructOptions,
    *,
    warn_incomplete: bool = True,
) -> dict[ModelId, Mapping[str, Estimate]]:
    """The joint estimator's outputs for every model that ran all its benchmarks in full.

    ``bundles`` are the joint estimator's, by benchmark: runs of other bundles do not count.
    Other models get none; ``warn_incomplete`` says so in a warning per model.
    """
    level = options.level if options.level is not None else 0.9
    names = {bundle.name for bundle in bundles.values()}
    scores: dict[ModelId, dict[ItemId, float]] = defaultdict(dict)
    benchmarks: dict[ModelId, set[str]] = defaultdict(set)
    for run in scored:
        if not run.missing and run.match.ref.bundle.name in names:
            scores[run.model].update(run.scores)
            benchmarks[run.model].add(run.match.ref.bundle.benchmark)
    out: dict[ModelId, Mapping[str, Estimate]] = {}
    for model, found in scores.items():
        lacking = sorted(set(joint.benchmarks_) - benchmarks[model])
        if lacking:
            if warn_incomplete:
                _warn(
                    f"model {model!r}: no joint estimate (benchmarks {lacking} not run in "
                    "full); the per-benchmark estimates and their average stand"
                )
            continue
        out[model] = dict(joint.estimate(found, level=level))
    return out
