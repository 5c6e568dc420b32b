"""Scores of one run from lm-eval-shaped records: filter, item id, metric, checks.

Two lm-eval samples formats exist. lm-eval >= 0.4.3 writes ``filter`` and ``metrics`` keys
on each line, one line per document and filter. Older versions write neither: a task with
several filters (gsm8k: ``strict-match``, ``flexible-extract``) lists every document once
per filter, and :mod:`._filters` tells the lines apart by their content.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._types import ItemId
from ..errors import InputError
from ._filters import TaskFilters, split_by_filter
from ._records import (
    STRUCTURAL_KEYS,
    Record,
    apply_prefix,
    as_score,
    available_fields,
    doc_of,
    format_id,
    lookup,
    preview,
    record_content_hash,
)

DEFAULT_ID_FIELDS: tuple[str, ...] = (
    "item_id",
    "mb_sub_idx",
    "metabench_idx",
    "orig_idx",
    "question_id",
    "id",
    "idx",
)
"""Doc fields tried in order when no ``id_field`` is given; ``doc_hash`` comes after them.

``mb_sub_idx`` (``"<subject>.<index>"``) precedes ``metabench_idx`` because metabench's MMLU
index restarts in every subject.
"""

CONTENT_HASH_ID = "content_hash"
"""``id_field`` value that makes the item id the :func:`content_hash` of the doc."""


@dataclass(frozen=True)
class ScoreOptions:
    """The reading options every collector passes down unchanged (see ``read_samples_file``)."""

    metric: str
    filter: str | None = None
    id_field: str | None = None
    id_prefix: str = ""
    benchmark: str | None = None
    stratum_field: str | None = None


@dataclass(frozen=True)
class SampleScores:
    """One run of one task: a score per item id, with item metadata.

    ``items`` is indexed by item id with columns ``benchmark``, ``stratum`` and
    ``content_hash`` (see :func:`content_hash`); ``where`` gives the file line (or row) of
    each item, for error messages further down.
    """

    source: str
    task: str
    metric: str
    filter: str
    id_field: str
    scores: dict[ItemId, float]
    items: pd.DataFrame
    where: dict[ItemId, str]


# ---------------------------------------------------------------------------- checks
def _check_unique(ids: Sequence[str], where: Sequence[str], source: str) -> None:
    """One id per document: a clash names both places, since a wrong id_field is the usual cause."""
    counts = Counter(ids)
    dups = [i for i, n in counts.items() if n > 1]
    if not dups:
        return
    places = defaultdict(list)
    for item_id, place in zip(ids, where, strict=True):
        if counts[item_id] > 1:
            places[item_id].append(place)
    raise InputError(
        f"{source}: duplicate item ids in one run: "
        + preview(f"{i!r} (at {' and '.join(places[i][:3])})" for i in dups)
        + " (choose an id_field that is unique per document)"
    )


def _check_scores(
    ids: Sequence[str], values: np.ndarray, where: Sequence[str], source: str, metric: str
) -> None:
    """Vectorised checks of one run: no missing value, everything in [0, 1]."""
    missing = np.flatnonzero(np.isnan(values))
    if missing.size:
        raise InputError(
            f"{source}: metric {metric!r} is None/NaN for {missing.size} items: "
            + preview(f"{ids[k]!r} ({where[k]})" for k in missing)
        )
    outside = np.flatnonzero((values < 0) | (values > 1))
    if outside.size:
        raise InputError(
            f"{source}: metric {metric!r} outside [0, 1] for {outside.size} items: "
            + preview(f"{ids[k]!r} = {float(values[k])!r} ({where[k]})" for k in outside)
            + " (per-item scores must be fractions; is this a per-item metric?)"
        )


def build_run(
    records: Sequence[Record],
    ids: Sequence[ItemId],
    *,
    value_of: Callable[[Record], Any],
    source: str,
    task: str,
    metric: str,
    filter: str,
    id_field: str,
    benchmark: str,
    strata: Sequence[str | None],
    hashes: Sequence[str | None],
) -> SampleScores:
    """Check ids and scores of one run's records and wrap them with their item metadata."""
    where = [r.where for r in records]
    _check_unique(ids, where, source)
    values = np.array(
        [as_score(value_of(r), metric=metric, where=r.where) for r in records], dtype=np.float64
    )
    _check_scores(ids, values, where, source, metric)
    items = pd.DataFrame(
        {
            "benchmark": [benchmark] * len(ids),
            "stratum": list(strata),
            "content_hash": list(hashes),
        },
        index=pd.Index(list(ids), name="item_id"),
    )
    return SampleScores(
        source=source,
        task=task,
        metric=metric,
        filter=filter,
        id_field=id_field,
        scores=dict(zip(ids, values.tolist(), strict=True)),
        items=items,
        where=dict(zip(ids, where, strict=True)),
    )


# ---------------------------------------------------------------------------- filters
def _pick_filter(
    groups: dict[str, list[Record]], requested: str | None, source: str, positional: bool
) -> str:
    names = list(groups)
    shown = ", ".join(f"{n!r} (position {k})" for k, n in enumerate(names))
    if requested is None:
        if len(names) == 1:
            return names[0]
        hint = (
            " This file is in the old lm-eval format (no 'filter' key: each document appears "
            "once per filter) and no results_*.json beside it names the filters, so pass the "
            "filter by position: '0' for the first occurrence of each document, '1' for the "
            "second, ..."
            if positional
            else ""
        )
        raise InputError(f"{source}: several filters; choose one with filter=: {shown}.{hint}")
    if requested in groups:
        return requested
    if requested.isdigit() and int(requested) < len(names):
        return names[int(requested)]
    hint = (
        " No results_*.json beside the file names the filters of this old-format file: "
        "pass the filter by position ('0', '1', ...)."
        if positional
        else ""
    )
    raise InputError(f"{source}: unknown filter {requested!r}; available filters: {shown}.{hint}")


# ---------------------------------------------------------------------------- ids and metrics
def _choose_id_field(record: Record, id_field: str | None) -> str:
    """The user's field, else the first of :data:`DEFAULT_ID_FIELDS`, else ``doc_hash``."""
    if id_field is not None:
        return id_field
    doc = doc_of(record)
    for field in DEFAULT_ID_FIELDS:
        if field in doc:
            return field
    return "doc_hash" if "doc_hash" in record.data else CONTENT_HASH_ID


def item_ids_of_docs(
    docs: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    task: str,
    id_field: str | None = None,
    id_prefix: str = "",
    benchmark: str | None = None,
) -> list[str]:
    """The item id ``collect`` gives each ``(doc_hash, doc)`` of a run of ``task``.

    ``doc_hash`` is lm-eval's (what ``--log_samples`` writes). Building a task from a matrix
    must name the documents exactly as collecting the matrix did, so this applies the same
    field choice, id text and prefix to documents that have no sample line yet.
    """
    records = [
        Record(f"{task} document {k}", {"doc": doc, "doc_hash": doc_hash})
        for k, (doc_hash, doc) in enumerate(docs)
    ]
    if not records:
        return []
    field = _choose_id_field(records[0], id_field)
    bench = benchmark if benchmark is not None else task
    return [
        apply_prefix(id_prefix, _raw_item_id(r, field), task=task, benchmark=bench) for r in records
    ]


def _raw_item_id(record: Record, field: str) -> str:
    found, value = lookup(record, field)
    if field == CONTENT_HASH_ID and not found:
        hashed = record_content_hash(record)
        if hashed is None:
            raise InputError(f"{record.where}: no doc to hash for the item id")
        return hashed
    if not found:
        raise InputError(
            f"{record.where}: id field {field!r} not found; available fields: "
            f"{preview(available_fields(record), limit=30)}"
        )
    return format_id(value, field, record.where)


def _available_metrics(records: Sequence[Record]) -> list[str]:
    found: dict[str, None] = {}
    for record in records:
        listed = record.data.get("metrics")
        if isinstance(listed, list):
            found.update(dict.fromkeys(str(m) for m in listed))
        else:
            found.update(dict.fromkeys(k for k in record.data if k not in STRUCTURAL_KEYS))
    return list(found)


def _stratum(record: Record, field: str | None) -> str | None:
    if field is None:
        return None
    found, value = lookup(record, field)
    return None if not found or value is None else str(value)


def scores_from_records(
    records: Sequence[Record],
    options: ScoreOptions,
    *,
    source: str,
    task: str,
    filters: TaskFilters | None,
) -> SampleScores:
    """The core of every lm-eval-shaped source (samples files, v2 details): filter, id, metric.

    ``filters`` are the task's, from the run's results json, when known (old-format files
    need them to name their filters and to tell them apart by content).
    """
    if not records:
        raise InputError(f"{source}: no sample records")
    groups, positional = split_by_filter(records, source, filters)
    chosen = _pick_filter(groups, options.filter, source, positional)
    selected = groups[chosen]
    metric = options.metric
    available = _available_metrics(selected)
    if metric not in available:
        raise InputError(
            f"{source}: unknown metric {metric!r} for filter {chosen!r}; available metrics: "
            f"{preview(available, limit=20)}"
        )

    def metric_value(record: Record) -> Any:
        if metric not in record.data:
            raise InputError(
                f"{record.where}: metric {metric!r} missing on this line; "
                f"available metrics: {preview(available, limit=20)}"
            )
        return record.data[metric]

    field = _choose_id_field(selected[0], options.id_field)
    bench = options.benchmark if options.benchmark is not None else task
    ids = [
        apply_prefix(options.id_prefix, _raw_item_id(r, field), task=task, benchmark=bench)
        for r in selected
    ]
    return build_run(
        selected,
        ids,
        value_of=metric_value,
        source=source,
        task=task,
        metric=metric,
        filter=chosen,
        id_field=field,
        benchmark=bench,
        strata=[_stratum(r, options.stratum_field) for r in selected],
        hashes=[record_content_hash(r) for r in selected],
    )
