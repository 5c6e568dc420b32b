"""Open LLM Leaderboard "details" datasets -> a model x item matrix.

v1 rows (``full_prompt``/``example`` and a ``metrics`` dict) carry no item id: the item is
identified by the sha256 of its prompt text, which :func:`prompt_id_map` can map onto the
ids of an existing matrix. v2 rows are lm-eval sample lines and are read like
``--log_samples`` files.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from tqdm.auto import tqdm

from .._types import ItemId, ModelId
from ..errors import InputError
from ..responses import ResponseMatrix
from ._details_sources import details_model_id, details_rows, task_of_config
from ._records import Record, apply_prefix, as_list, format_id, preview, text_hash
from ._scores import SampleScores, ScoreOptions, build_run, scores_from_records
from .matrices import assemble_runs

logger = logging.getLogger(__name__)

DETAILS_TEXT_FIELDS: tuple[str, ...] = ("full_prompt", "example", "input", "prompt", "query")
"""Row fields of v1 leaderboard details whose text identifies an item, tried in order."""

# Keys of v1 details rows that are not metrics when a row has no ``metrics`` dict.
_NON_METRIC_KEYS = frozenset(
    {
        "example",
        "full_prompt",
        "input",
        "prompt",
        "query",
        "instruction",
        "predictions",
        "choices",
        "gold",
        "gold_index",
        "input_tokens",
        "cont_tokens",
        "truncated",
        "padded",
        "pred_logits",
        "num_effective_few_shots",
        "num_asked_few_shots",
        "specifics",
        "hashes",
        "metrics",
    }
)


def details_repo_id(model_id: ModelId, *, version: Literal[1, 2] = 1) -> str:
    """Hub dataset holding a model's Open LLM Leaderboard details.

    v1: ``open-llm-leaderboard/details_<org>__<model>``; v2:
    ``open-llm-leaderboard/<org>__<model>-details``.
    """
    if "/" not in model_id:
        raise InputError(f"model id {model_id!r} is not of the form org/name")
    flat = model_id.replace("/", "__")
    if version == 1:
        return f"open-llm-leaderboard/details_{flat}"
    if version == 2:
        return f"open-llm-leaderboard/{flat}-details"
    raise InputError(f"unknown leaderboard version {version!r} (use 1 or 2)")


def prompt_id_map(
    path: str | os.PathLike[str], *, id_column: str = "item", text_column: str = "prompt"
) -> dict[str, ItemId]:
    """``{text_hash(prompt): item id}`` from a CSV of item ids and prompt texts.

    Fits metabench's ``prompts/items-<bm>-<set>.csv`` (columns ``item``, ``prompt``) and
    maps v1 details rows (hashed ``full_prompt``) onto the ids of an existing matrix.
    """
    path = Path(path)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise InputError(f"{path}: not a readable CSV ({exc})") from exc
    missing = [c for c in (id_column, text_column) if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: missing columns {missing}; columns: {list(frame.columns)}")
    mapping: dict[str, ItemId] = {}
    for line, (item, text) in enumerate(
        zip(frame[id_column], frame[text_column], strict=True), start=2
    ):
        key = text_hash(text)
        if key in mapping and mapping[key] != item:
            raise InputError(
                f"{path}: items {mapping[key]!r} and {item!r} (row {line}) have the same prompt"
            )
        mapping[key] = item
    return mapping


# ---------------------------------------------------------------------------- v1 rows
def _v1_metric(record: Record, metric: str) -> tuple[bool, Any]:
    metrics = record.data.get("metrics")
    if isinstance(metrics, Mapping) and metric in metrics:
        return True, metrics[metric]
    for key in (metric, f"metrics.{metric}"):
        if key in record.data:
            return True, record.data[key]
    return False, None


def _v1_available_metrics(records: Sequence[Record]) -> list[str]:
    """Metric names of the first rows: ``metrics`` dict keys and numeric top-level columns."""
    found: dict[str, None] = {}
    for record in records[:50]:
        metrics = record.data.get("metrics")
        if isinstance(metrics, Mapping):
            found.update(dict.fromkeys(str(k) for k in metrics))
        found.update(
            dict.fromkeys(
                k.removeprefix("metrics.")
                for k, v in record.data.items()
                if k not in _NON_METRIC_KEYS and isinstance(v, (int, float, bool))
            )
        )
    return list(found)


def _v1_text_or_none(record: Record, text_field: str | None) -> str | None:
    """The prompt text of a v1 row: ``text_field``, else the first of DETAILS_TEXT_FIELDS."""
    fields = (text_field,) if text_field else DETAILS_TEXT_FIELDS
    return next((v for v in map(record.data.get, fields) if isinstance(v, str)), None)


def _v1_text(record: Record, text_field: str | None) -> str:
    text = _v1_text_or_none(record, text_field)
    if text is None:
        fields = (text_field,) if text_field else DETAILS_TEXT_FIELDS
        raise InputError(
            f"{record.where}: no text to identify the item (looked for {preview(fields)}); "
            f"fields present: {preview(sorted(record.data), 30)}; pass id_field= or text_field="
        )
    return text


def _v1_raw_id(
    record: Record, id_field: str | None, text_field: str | None
) -> tuple[str, str | None]:
    """The row's raw item id and its prompt text (None when absent and not asked for)."""
    if id_field is None:
        text = _v1_text(record, text_field)
        return text_hash(text), text
    if id_field not in record.data:
        raise InputError(
            f"{record.where}: id field {id_field!r} not found; available fields: "
            f"{preview(sorted(record.data), 30)}"
        )
    raw = format_id(record.data[id_field], id_field, record.where)
    text = _v1_text(record, text_field) if text_field else _v1_text_or_none(record, None)
    return raw, text


def _v1_scores(
    records: Sequence[Record],
    options: ScoreOptions,
    *,
    source: str,
    task: str,
    stratum: str | None,
    text_field: str | None,
    id_map: Mapping[str, ItemId] | None,
) -> SampleScores:
    """v1 details rows: metric from the ``metrics`` dict, id from a field or the prompt hash."""
    metric, bench = options.metric, str(options.benchmark)
    available = _v1_available_metrics(records)
    if metric not in available:
        raise InputError(
            f"{source}: unknown metric {metric!r}; available metrics: {preview(available, 20)}"
        )
    ids: list[str] = []
    kept: list[Record] = []
    hashes: list[str | None] = []
    for record in records:
        raw, text = _v1_raw_id(record, options.id_field, text_field)
        if id_map is not None:
            if raw not in id_map:
                continue
            raw = str(id_map[raw])
        ids.append(apply_prefix(options.id_prefix, raw, task=task, benchmark=bench))
        kept.append(record)
        hashes.append(text_hash(text) if text is not None else None)
    if id_map is not None:
        logger.info("%s: %d of %d rows matched id_map", source, len(kept), len(records))
        if not kept:
            raise InputError(
                f"{source}: no row matched id_map ({len(id_map)} ids); wrong text_field?"
            )

    def metric_value(record: Record) -> Any:
        found, value = _v1_metric(record, metric)
        if not found:
            raise InputError(
                f"{record.where}: metric {metric!r} missing; "
                f"available metrics: {preview(available, 20)}"
            )
        return value

    field = options.stratum_field
    return build_run(
        kept,
        ids,
        value_of=metric_value,
        source=source,
        task=task,
        metric=metric,
        filter="none",
        id_field=options.id_field or f"sha256({text_field or 'prompt text'})",
        benchmark=bench,
        strata=[
            str(r.data[field]) if field and r.data.get(field) is not None else stratum for r in kept
        ],
        hashes=hashes,
    )


# ---------------------------------------------------------------------------- sources
def _read_details(
    source: str,
    config: str,
    options: ScoreOptions,
    *,
    split: str,
    cache_dir: str | None,
    text_field: str | None,
    id_map: Mapping[str, ItemId] | None,
) -> SampleScores:
    records, label, resolved = details_rows(source, config, split, cache_dir)
    if not records:
        raise InputError(f"{label}: no rows")
    task_bench, task_stratum = task_of_config(resolved)
    if options.benchmark is None:
        options = dataclasses.replace(options, benchmark=task_bench)
    if isinstance(records[0].data.get("doc"), Mapping):
        if id_map is not None:
            raise InputError(f"{label}: id_map applies to v1 rows only; use id_field/id_prefix")
        return scores_from_records(records, options, source=label, task=config, filters=None)
    return _v1_scores(
        records,
        options,
        source=label,
        task=config,
        stratum=task_stratum,
        text_field=text_field,
        id_map=id_map,
    )


def collect_leaderboard_details(
    sources: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    config: str | Sequence[str],
    *,
    metric: str,
    split: str = "latest",
    cache_dir: str | os.PathLike[str] | None = None,
    filter: str | None = None,
    id_field: str | None = None,
    id_prefix: str = "",
    benchmark: str | None = None,
    stratum_field: str | None = None,
    text_field: str | None = None,
    id_map: Mapping[str, ItemId] | None = None,
    model_ids: Sequence[ModelId] | None = None,
    check_content: bool = True,
    progress: bool = True,
) -> ResponseMatrix:
    """A model x item matrix from Open LLM Leaderboard details datasets.

    Each source is a Hub dataset id (``open-llm-leaderboard/details_<org>__<model>`` for v1,
    ``open-llm-leaderboard/<org>__<model>-details`` for v2), loaded with
    ``datasets.load_dataset(source, name=config, split=split, cache_dir=cache_dir)``
    (``HF_HUB_OFFLINE=1`` limits this to the local cache); or a local copy: a parquet/JSONL
    file; a folder holding ``<config>.parquet``/``.jsonl`` or ``<config>/*.parquet|jsonl``
    (e.g. written by ``load_dataset(...).to_parquet``); or a folder in Hub layout (a snapshot
    download with its ``README.md``), read by ``load_dataset`` like the Hub. For v2 sources a
    config without ``__`` gets the model in front (``leaderboard_mmlu_pro`` ->
    ``<org>__<model>__leaderboard_mmlu_pro``).

    The model id is ``model_ids[k]`` when given, else read from the repo or folder name
    (``details_org__model`` -> ``org/model``; for a file, its folder's name).

    Rows with a ``doc`` (v2, lm-eval samples) are read like ``read_samples_file``. v1
    rows take the metric from their ``metrics`` dict (or a top-level/``metrics.<m>``
    column); the item id is ``id_field`` when given, else the sha256 (``text_hash``) of
    the first text of :data:`DETAILS_TEXT_FIELDS` (or ``text_field``), which is also the
    content hash. ``id_map`` renames raw ids (e.g. prompt hashes -> matrix ids, see
    :func:`prompt_id_map`); rows whose raw id it lacks are left out. Several ``config``
    names (e.g. the 57 ``harness_hendrycksTest_*_5``) join into one matrix. Benchmark and
    stratum default to what the config name says (``mmlu`` and the subject for MMLU).
    """
    source_list = [str(s) for s in as_list(sources)]
    configs = [config] if isinstance(config, str) else list(config)
    if not source_list or not configs:
        raise InputError("collect_leaderboard_details: give at least one source and one config")
    if model_ids is not None and len(model_ids) != len(source_list):
        raise InputError(f"model_ids has {len(model_ids)} entries for {len(source_list)} sources")
    options = ScoreOptions(metric, filter, id_field, id_prefix, benchmark, stratum_field)
    per_model: dict[ModelId, list[SampleScores]] = defaultdict(list)
    jobs = [(k, s, c) for k, s in enumerate(source_list) for c in configs]
    for k, source, name in tqdm(jobs, desc="reading details", unit="config", disable=not progress):
        model = model_ids[k] if model_ids is not None else details_model_id(source)
        if any(run.task == name for run in per_model.get(model, ())):
            raise InputError(
                f"model {model!r} is given twice for config {name!r} (second: {source})"
            )
        per_model[model].append(
            _read_details(
                source,
                name,
                options,
                split=split,
                cache_dir=None if cache_dir is None else str(cache_dir),
                text_field=text_field,
                id_map=id_map,
            )
        )
    label = f"collect_leaderboard_details({preview(source_list)}; {preview(configs)})"
    return assemble_runs(per_model, source=label, check_content=check_content)
