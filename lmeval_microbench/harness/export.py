"""Write lm-eval task folders that run a bundle's items offline and report its estimate.

A *suite* folder (what ``--include_path`` points at, or a folder below it) holds:

* ``<task>.yaml`` per task, and optionally a group YAML;
* ``microbench_hooks.py``: a generated shim that re-exports :mod:`.hooks` and tells the
  loader where the suite lives (``!function`` resolves modules next to the YAML in every
  lm-eval version, a dotted package path only in recent ones);
* one data folder per task: the bundle (``bundle.json``) and its documents (``items.jsonl``).

Every document carries the full prompt (few-shot examples included) as its context, so the
YAML sets ``num_fewshot: 0`` and lm-eval sends the context unchanged: no sampler, no template,
nothing that can drift between lm-eval versions.

Rewriting a suite with unchanged content leaves the files byte for byte as they were (the
bundle's creation time is kept), so regenerated task folders give clean diffs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._io import write_text_if_changed
from ..bundle import BUNDLE_FILE, Bundle, load_bundle, save_bundle
from ..errors import BundleError, InputError
from .docs import ITEMS_JSONL, check_docs_match_bundle, write_docs
from .hooks import ESTIMATE_METRICS, HELPERS, PROCESSORS

HOOKS_MODULE = "microbench_hooks"
"""Module name of the generated shim beside the YAMLs."""

OUTPUT_TYPES = ("multiple_choice", "generate_until")


@dataclass(frozen=True)
class TaskSpec:
    """One lm-eval task of a suite.

    Parameters
    ----------
    task
        lm-eval task name, e.g. ``"microbench_arc"``.
    data_dir
        Name of the task's data folder inside the suite, e.g. ``"arc"``.
    output_type
        ``"multiple_choice"`` (documents carry ``context``, ``options``, ``gold``; or, with
        ``multiple_input``, ``contexts``, ``continuation``, ``gold``) or ``"generate_until"``
        (documents carry ``context`` and ``answer``).
    process_results
        Name of a scoring hook in :data:`.hooks.PROCESSORS`.
    alias
        Name shown in lm-eval's table (defaults to ``task``).
    multiple_input
        One context per option, scored on a shared continuation (winogrande).
    generation_kwargs
        lm-eval ``generation_kwargs`` of a ``generate_until`` task.
    comment
        Lines written at the top of the YAML (where the prompts come from).
    target_delimiter
        What lm-eval puts between context and continuation (the original task's).
    filter_list
        lm-eval ``filter_list`` applied to generated text before scoring (one entry: the
        filter the bundle's scores went through), or None.
    fields
        ``(key, YAML value)`` pairs replacing the ``doc_to_*`` lines the output type implies:
        a task that runs lm-eval's own prompt functions (the leaderboard v2 tasks).
    aggregations
        Per reported metric, the hook that aggregates it (default: lm-eval's ``mean``).
    metadata
        More ``metadata`` entries (what the task was derived from).
    num_fewshot_comment
        The comment beside ``num_fewshot: 0``.
    """

    task: str
    data_dir: str
    output_type: str
    process_results: str
    alias: str | None = None
    multiple_input: bool = False
    generation_kwargs: Mapping[str, Any] | None = None
    comment: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)
    target_delimiter: str = " "
    filter_list: Sequence[Mapping[str, Any]] | None = None
    fields: tuple[tuple[str, str], ...] | None = None
    aggregations: Mapping[str, str] | None = None
    metadata: Mapping[str, Any] | None = None
    num_fewshot_comment: str = "the few-shot examples are part of each document's context"

    def __post_init__(self) -> None:
        if self.output_type not in OUTPUT_TYPES:
            raise InputError(f"{self.task}: output_type must be one of {OUTPUT_TYPES}")
        if self.process_results not in PROCESSORS:
            raise InputError(
                f"{self.task}: unknown scoring hook {self.process_results!r}; "
                f"known: {sorted(PROCESSORS)}"
            )
        if (self.output_type == "generate_until") != (self.generation_kwargs is not None):
            raise InputError(f"{self.task}: generation_kwargs go with generate_until tasks only")
        if Path(self.data_dir).name != self.data_dir:
            raise InputError(f"{self.task}: data_dir must be a plain folder name")
        if self.filter_list is not None and self.output_type != "generate_until":
            raise InputError(f"{self.task}: filter_list goes with generate_until tasks only")

    @property
    def filter_name(self) -> str:
        """The lm-eval filter key of the task's metrics (``none`` without a filter)."""
        return "none" if not self.filter_list else str(self.filter_list[0]["name"])

    @property
    def metrics(self) -> tuple[str, ...]:
        """Per-item metrics the scoring hook reports (averaged by lm-eval)."""
        return PROCESSORS[self.process_results][0]

    @property
    def estimated_metric(self) -> str:
        """The metric the bundle must estimate."""
        return PROCESSORS[self.process_results][1]


@dataclass(frozen=True)
class GroupSpec:
    """A group YAML averaging the tasks' estimates (unweighted: one vote per benchmark)."""

    group: str
    tasks: tuple[str, ...]
    alias: str | None = None
    comment: str = ""


# ---------------------------------------------------------------------------- YAML text
def _q(value: Any) -> str:
    """A YAML scalar or flow sequence; JSON text is valid YAML and escapes safely."""
    return json.dumps(value, ensure_ascii=False)


def _comment_lines(text: str) -> list[str]:
    return [f"# {line}".rstrip() for line in text.strip().splitlines()] if text.strip() else []


def _function(name: str) -> str:
    return f"!function {HOOKS_MODULE}.{name}"


def _fields(spec: TaskSpec) -> list[str]:
    if spec.fields is not None:
        return [f"{key}: {value}" for key, value in spec.fields]
    if spec.output_type == "generate_until":
        return ["doc_to_text: context", "doc_to_target: answer"]
    if spec.multiple_input:  # doc_to_text yields the gold index: lm-eval's multiple-input mode
        return ["doc_to_text: gold", "doc_to_choice: contexts", "doc_to_target: continuation"]
    return ["doc_to_text: context", "doc_to_choice: options", "doc_to_target: gold"]


def task_yaml(spec: TaskSpec, bundle: Bundle) -> str:
    """The YAML text of one task."""
    lines = [*_comment_lines(spec.comment), f"task: {spec.task}"]
    lines.append(f"task_alias: {_q(spec.alias or spec.task)}")
    if spec.tags:
        lines.append(f"tag: {_q(list(spec.tags))}")
    lines += [
        f"custom_dataset: {_function('load_docs')}",
        "dataset_kwargs:",
        f"  microbench_items: {_q(spec.data_dir)}",
        "test_split: test",
        f"output_type: {spec.output_type}",
        *_fields(spec),
        f"target_delimiter: {_q(spec.target_delimiter)}",
        f"num_fewshot: 0  # {spec.num_fewshot_comment}",
    ]
    if spec.generation_kwargs is not None:
        lines.append("generation_kwargs:")
        lines += [f"  {key}: {_q(value)}" for key, value in spec.generation_kwargs.items()]
    if spec.filter_list is not None:
        lines.append(f"filter_list: {_q([dict(entry) for entry in spec.filter_list])}")
    lines.append(f"process_results: {_function(spec.process_results)}")
    lines.append("metric_list:")
    aggregations = spec.aggregations or {}
    for metric in spec.metrics:
        how = _function(aggregations[metric]) if metric in aggregations else "mean"
        lines += [f"  - metric: {metric}", f"    aggregation: {how}", "    higher_is_better: true"]
    for metric in ESTIMATE_METRICS:
        lines += [
            f"  - metric: {metric}",
            f"    aggregation: {_function(metric)}",
            "    higher_is_better: true",
        ]
    lines += [
        "metadata:",
        "  version: 1.0",
        f"  bundle: {_q(bundle.name)}",
        f"  estimated_metric: {_q(bundle.metric.name)}",
    ]
    lines += [f"  {key}: {_q(value)}" for key, value in (spec.metadata or {}).items()]
    return "\n".join(lines) + "\n"


def group_yaml(spec: GroupSpec) -> str:
    """The YAML text of a group averaging its tasks' ``estimate``."""
    lines = [*_comment_lines(spec.comment), f"group: {spec.group}"]
    if spec.alias:
        lines.append(f"group_alias: {_q(spec.alias)}")
    lines.append("task:")
    lines += [f"  - {task}" for task in spec.tasks]
    lines += [
        "aggregate_metric_list:",
        "  - metric: estimate",
        "    aggregation: mean",
        "    weight_by_size: false",
        "metadata:",
        "  version: 1.0",
    ]
    return "\n".join(lines) + "\n"


def hooks_module() -> str:
    """Source of the generated ``microbench_hooks.py`` shim."""
    exported = [*PROCESSORS, *ESTIMATE_METRICS, *HELPERS]
    assignments = "\n".join(f"{name} = hooks.{name}" for name in exported)
    return f'''"""lm-eval hooks of the micro-benchmark tasks in this folder.

Generated by lmeval_microbench.harness.export; do not edit. The task YAMLs beside this file
name these functions as ``!function {HOOKS_MODULE}.<name>``; ``load_docs`` reads each task's
items from the data folders next to this file.
"""

from pathlib import Path

from lmeval_microbench.harness import hooks

HERE = Path(__file__).resolve().parent
hooks.quiet_custom_kwargs_advice(HERE)


def load_docs(**kwargs):
    """Documents of a task of this folder, checked against its bundle (``custom_dataset``)."""
    kwargs.pop("base_dir", None)
    return hooks.load_docs(base_dir=HERE, **kwargs)


{assignments}
'''


# ---------------------------------------------------------------------------- writing
def _comparable(bundle: Bundle) -> dict[str, Any]:
    payload = bundle.to_dict()
    payload["provenance"] = {k: v for k, v in payload["provenance"].items() if k != "created"}
    return payload


def _save_bundle_if_changed(bundle: Bundle, folder: Path) -> Bundle:
    """Write ``bundle`` unless the folder holds the same one (then keep its creation time)."""
    if (folder / BUNDLE_FILE).is_file():
        try:
            old = load_bundle(folder)
        except BundleError:
            old = None
        if old is not None and _comparable(old) == _comparable(bundle):
            return old
    save_bundle(bundle, folder, overwrite=True)
    return bundle


def write_task(
    suite: str | os.PathLike[str],
    spec: TaskSpec,
    bundle: Bundle,
    docs: Sequence[Mapping[str, Any]],
) -> Path:
    """Write one task (YAML + data folder) into ``suite``; returns the YAML path.

    ``docs`` must be exactly the bundle's items, each with the content hash the bundle
    records, and the bundle must estimate the metric the scoring hook reports.
    """
    suite = Path(suite)
    if bundle.metric.name != spec.estimated_metric:
        raise InputError(
            f"{spec.task}: bundle {bundle.name!r} estimates {bundle.metric.name!r}, but "
            f"{spec.process_results} reports {spec.estimated_metric!r}"
        )
    if bundle.metric.filter != spec.filter_name:
        raise InputError(
            f"{spec.task}: bundle {bundle.name!r} was fitted on filter {bundle.metric.filter!r}, "
            f"but the task scores filter {spec.filter_name!r}"
        )
    check_docs_match_bundle(bundle, docs, where=f"{spec.task} documents")
    position = {item: k for k, item in enumerate(bundle.item_ids)}
    ordered = sorted(docs, key=lambda doc: position[doc["item_id"]])
    folder = suite / spec.data_dir
    bundle = _save_bundle_if_changed(bundle, folder)
    write_docs(ordered, folder / ITEMS_JSONL)
    write_text_if_changed(suite / f"{HOOKS_MODULE}.py", hooks_module())
    yaml_path = suite / f"{spec.task}.yaml"
    write_text_if_changed(yaml_path, task_yaml(spec, bundle))
    return yaml_path


def write_group(suite: str | os.PathLike[str], spec: GroupSpec) -> Path:
    """Write a group YAML into ``suite``; returns its path."""
    path = Path(suite) / f"{spec.group}.yaml"
    write_text_if_changed(path, group_yaml(spec))
    return path
