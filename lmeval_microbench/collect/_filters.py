"""Which filter each sample line belongs to, told from the line's content, not its position.

lm-eval >= 0.4.3 writes a ``filter`` key on every line. Older versions write none: a task
with several filters (gsm8k: ``strict-match``, ``flexible-extract``) lists every document
once per filter, and only the order of the lines said which line is which. A reordered file
(copied, merged, shuffled) then scores one filter's answers with the other's. So here:

* the lines of a document that agree on every metric need no filter: any split gives the
  same scores;
* the others are told apart by content: the task's filter definitions
  (``configs[task].filter_list`` in the run's results json) are applied to a line's
  ``resps``, and the filter that gives its ``filtered_resps`` is its filter (lm-eval's
  ``regex`` and ``take_first`` steps, the ones its generation tasks use, are understood);
* without usable definitions the order is trusted only when the file is laid out as lm-eval
  writes it (per process, every document of filter 0, then the same documents for filter 1,
  ...); a file in any other order is refused rather than split by guess.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InputError
from ._records import STRUCTURAL_KEYS, Record, content_hash, preview

REGEX_DEFAULT = r"#### (\-?[0-9\.\,]+)"
"""lm-eval's ``RegexFilter`` pattern when a ``regex`` step names none."""


@dataclass(frozen=True)
class TaskFilters:
    """A task's filters in order: names, and each one's steps when the run's config gives them."""

    names: tuple[str, ...]
    steps: tuple[tuple[Mapping[str, Any], ...], ...] | None = None
    """lm-eval filter steps (``{"function": "regex", ...}``) per filter; None when unknown."""


def task_filters(filter_list: Any, where: str) -> TaskFilters:
    """The filters of a ``configs[task].filter_list`` entry of a results json.

    A task without a ``filter_list`` has one filter, ``none``. ``where`` names the entry
    (file and key) in errors.
    """
    if not filter_list:
        return TaskFilters(("none",))
    if not isinstance(filter_list, list):
        raise InputError(f"{where} is a {type(filter_list).__name__}, expected a list of filters")
    names, steps = [], []
    for k, entry in enumerate(filter_list):
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not name:
            raise InputError(f"{where}[{k}]: expected a filter with a name, got {entry!r}")
        names.append(name)
        pipeline = entry.get("filter")
        steps.append(tuple(pipeline) if isinstance(pipeline, list) else ())
    return TaskFilters(tuple(names), tuple(steps))


# ---------------------------------------------------------------------------- lm-eval filters
def _regex(values: list[str], step: Mapping[str, Any]) -> list[str]:
    """lm-eval's ``RegexFilter`` on the repeats of one request."""
    pattern = re.compile(step.get("regex_pattern", REGEX_DEFAULT))
    group = int(step.get("group_select", 0))
    fallback = step.get("fallback", "[invalid]")
    out = []
    for text in values:
        found = pattern.findall(text)
        if not found:
            out.append(fallback)
            continue
        match = found[group]
        if isinstance(match, tuple):
            match = next((part for part in match if part), fallback)
        out.append(match.strip())
    return out


def _take_first(values: list[str], step: Mapping[str, Any]) -> str:
    return values[0]


_STEPS: dict[str, Callable[[Any, Mapping[str, Any]], Any]] = {
    "regex": _regex,
    "take_first": _take_first,
}


def _applicable(filters: TaskFilters | None, n: int) -> bool:
    """Whether the lines can be told apart by applying the filters: ``n`` of them, each made
    of steps this module understands."""
    if filters is None or filters.steps is None or len(filters.steps) != n:
        return False
    return all(
        steps and all(isinstance(s, Mapping) and s.get("function") in _STEPS for s in steps)
        for steps in filters.steps
    )


def _filtered(steps: Sequence[Mapping[str, Any]], resps: Any) -> Any:
    """What the filter makes of a line's ``resps`` (one entry per request), None if it cannot."""
    if not isinstance(resps, list):
        return None
    out = []
    try:
        for request in resps:
            value = request
            for step in steps:
                value = _STEPS[step["function"]](value, step)
            out.append(value)
    except (TypeError, ValueError, IndexError, AttributeError, re.error):
        return None
    return out


# ---------------------------------------------------------------------------- the split
def _doc_key(record: Record) -> Hashable:
    for key in ("doc_id", "doc_hash"):
        if key in record.data:
            return str(record.data[key])
    return content_hash(record.data.get("doc"))


def _metric_values(record: Record) -> dict[str, Any]:
    return {k: v for k, v in record.data.items() if k not in STRUCTURAL_KEYS}


def _lm_eval_layout(keys: Sequence[Hashable], n_filters: int) -> bool:
    """True when the lines are in lm-eval's order: per process rank, a block of distinct
    documents repeated once per filter (``a b c a b c | d e d e``)."""
    start = 0
    while start < len(keys):
        seen: set[Hashable] = set()
        end = start
        while end < len(keys) and keys[end] not in seen:
            seen.add(keys[end])
            end += 1
        block = list(keys[start:end])
        size = end - start
        for k in range(1, n_filters):
            if list(keys[start + k * size : start + (k + 1) * size]) != block:
                return False
        start += n_filters * size
    return True


def _by_content(records: Sequence[Record], lines: Sequence[int], filters: TaskFilters) -> list[int]:
    """The filter of each of one document's lines: the one that gives its ``filtered_resps``."""
    free = list(lines)
    slots = {}
    for k, pipeline in enumerate(filters.steps or ()):
        fits = [
            i
            for i in free
            if _filtered(pipeline, records[i].data.get("resps"))
            == records[i].data.get("filtered_resps")
        ]
        if not fits:
            first = records[lines[0]]
            raise InputError(
                f"{first.where}: filter {filters.names[k]!r} of the task's filter_list gives "
                f"none of this document's lines ({preview(records[i].where for i in lines)}) "
                "from its resps: the lines do not come from the filters the run's results "
                "json names"
            )
        slots[fits[0]] = k
        free.remove(fits[0])
    return [slots[i] for i in lines]


def _slots(
    records: Sequence[Record],
    by_doc: Mapping[Hashable, list[int]],
    n: int,
    source: str,
    filters: TaskFilters | None,
) -> list[int]:
    """The filter position of every line; see the module docstring for the rules."""
    slots = [0] * len(records)
    contested = []
    for key, lines in by_doc.items():
        for k, i in enumerate(lines):
            slots[i] = k
        first = _metric_values(records[lines[0]])
        if any(_metric_values(records[i]) != first for i in lines[1:]):
            contested.append(key)
    if not contested:
        return slots
    if _applicable(filters, n):
        for key in contested:
            lines = by_doc[key]
            for i, k in zip(lines, _by_content(records, lines, filters), strict=True):
                slots[i] = k
        return slots
    if not _lm_eval_layout([_doc_key(r) for r in records], n):
        example = records[by_doc[contested[0]][0]].where
        raise InputError(
            f"{source}: each document appears once per filter ({n} filters) and the lines are "
            f"not in the order lm-eval writes them, while the filters' lines of "
            f"{len(contested)} documents differ in their scores (e.g. the document at "
            f"{example}): which line belongs to which filter cannot be told. Use the file as "
            "lm-eval wrote it, beside its results_<timestamp>.json (whose filter_list tells "
            "the filters apart by content)"
        )
    return slots


def _names(filters: TaskFilters | None, n: int, source: str) -> tuple[list[str], bool]:
    """Filter names for ``n`` filters, and whether they are positions only."""
    if filters is not None and len(filters.names) == n:
        return list(filters.names), False
    if filters is not None:
        warnings.warn(
            f"{source}: the task's filter_list names {len(filters.names)} filters "
            f"({preview(filters.names)}) but documents appear {n} times; "
            "naming filters by position",
            stacklevel=5,
        )
    if n == 1:
        return ["none"], False
    return [str(k) for k in range(n)], True


def split_by_filter(
    records: Sequence[Record], source: str, filters: TaskFilters | None
) -> tuple[dict[str, list[Record]], bool]:
    """Sample lines grouped by filter; the flag says whether the names are positions only.

    New format: the ``filter`` key. Old format: see the module docstring.
    """
    if any("filter" in r.data for r in records):
        groups: dict[str, list[Record]] = defaultdict(list)
        for record in records:
            if "filter" not in record.data:
                raise InputError(f"{record.where}: line has no 'filter' key while others have one")
            groups[str(record.data["filter"])].append(record)
        return dict(groups), False
    by_doc: dict[Hashable, list[int]] = defaultdict(list)
    for i, record in enumerate(records):
        by_doc[_doc_key(record)].append(i)
    counts = Counter(len(lines) for lines in by_doc.values())
    if len(counts) > 1:
        usual = counts.most_common(1)[0][0]
        odd = [k for k, lines in by_doc.items() if len(lines) != usual]
        raise InputError(
            f"{source}: documents appear a different number of times (most {usual} times, one "
            f"per filter; doc {odd[0]!r} {len(by_doc[odd[0]])} times; {len(odd)} such docs): "
            "the file looks truncated or concatenated from several runs"
        )
    n = next(iter(counts)) if counts else 1
    names, positional = _names(filters, n, source)
    groups = {name: [] for name in names}
    for record, k in zip(records, _slots(records, by_doc, n, source, filters), strict=True):
        groups[names[k]].append(record)
    return groups, positional
