"""Which bundle the documents of a samples file are, decided and checked by their content.

The second step of reading lm-eval runs (:mod:`.reconstruct`). Our own tasks name their bundle in
every document (and the bundle's content hashes check them). Documents of other tasks over
the same items (metabench's ``metabench_arc_secondary``, ...) carry an index instead
(``metabench_idx``, ``mb_sub_idx``), and an index alone proves nothing: every metabench file
numbers its documents, so the arc file holds "items" of every bundle. A foreign file is
therefore read as a bundle's run only when its documents under the bundle's ids hold the
bundle's questions: the fields they share with the bundle's shipped documents (other than
the index fields) are compared, and the prompts the run sent (few-shot examples included)
are compared with the bundle's. A run cut short (or run with ``--limit``) is matched like a
complete one; its missing items are reported, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._io import canonical_json
from .._types import ItemId
from ..collect import (
    DEFAULT_ID_FIELDS,
    Record,
    SamplesRun,
    doc_of,
    format_id,
    iter_json_records,
    lookup,
    preview,
)
from ..errors import InputError, ItemMismatchError
from .bundles import BundleIndex, BundleRef, note

FOREIGN_ID_FIELDS = ("mb_sub_idx", "metabench_idx", *DEFAULT_ID_FIELDS)
"""Doc fields tried, in order, as the item id of a foreign task's documents. Being ids, they
are never taken as evidence that two documents hold the same question."""

OWN_FIELDS = ("item_id", "bundle")
SCORING_FIELDS = ("benchmark", "options", "gold", "context", "contexts", "continuation")
"""Fields our documents add for our scoring hooks, never part of the original dataset."""
RECORD_ID_FIELD = "doc_id"
"""lm-eval's own number of a document (its row in the dataset split), logged beside it: the
ids of the leaderboard v2 matrices (``ifeval.{doc_id}``, ``musr.{subtask}.{doc_id}``)."""


@dataclass(frozen=True)
class RunMatch:
    """How the documents of one samples file are read as items of one bundle."""

    ref: BundleRef
    id_field: str
    id_prefix: str
    own: bool
    """True for our own tasks (documents carry ``item_id`` and ``bundle``)."""


class LoggedSamples:
    """A samples file of one run, parsed once: its records, first document, lines by id."""

    def __init__(self, run: SamplesRun) -> None:
        self.run = run
        self.path: Path = run.path
        self.records: list[Record] = list(iter_json_records(run.path))
        if not self.records:
            raise InputError(f"{run.path}: no sample records")
        self._ids: dict[tuple[str, str], dict[ItemId, Record]] = {}

    @property
    def task(self) -> str:
        return self.run.task

    @property
    def first_doc(self) -> Mapping[str, Any]:
        return doc_of(self.records[0])

    def records_by_id(self, field: str, prefix: str) -> dict[ItemId, Record]:
        """The first line of every document by ``prefix + doc[field]`` (one per filter)."""
        key = (field, prefix)
        if key not in self._ids:
            lines: dict[ItemId, Record] = {}
            for record in self.records:
                found, value = lookup(record, field)
                if found:
                    lines.setdefault(prefix + format_id(value, field, record.where), record)
            self._ids[key] = lines
        return self._ids[key]

    def docs_by_id(self, field: str, prefix: str) -> dict[ItemId, Mapping[str, Any]]:
        """Every document by ``prefix + doc[field]``."""
        return {item: doc_of(r) for item, r in self.records_by_id(field, prefix).items()}


# ---------------------------------------------------------------------------- content
@dataclass(frozen=True)
class ContentCheck:
    """A run's documents under a bundle's ids, compared with the bundle's shipped ones."""

    verified: tuple[ItemId, ...]
    """Items whose shared fields (one at least, ids aside) are all equal."""
    differing: tuple[str, ...]
    """``"'arc.3' (fields ['question'])"`` for items with a shared field that differs."""
    unverifiable: tuple[ItemId, ...]
    """Items whose documents share no field but the id with the bundle's."""

    @property
    def identified(self) -> bool:
        """The documents are the bundle's items: more verified than differing, one at least."""
        return len(self.verified) > len(self.differing)


def _same_field(shipped: Any, logged: Any) -> bool:
    """Equal values; a logged text may add a prefix (metabench puts winogrande's few-shot
    examples in front of the sentence), the shipped text must then end it. Keys whose value is
    None do not count: a dataset's rows carry every key any row has (IFEval's ``kwargs``), so
    the same document read from more or fewer rows gains or loses empty keys."""
    if isinstance(shipped, str) and isinstance(logged, str):
        return logged == shipped or logged.endswith("\n\n" + shipped)
    return canonical_json(_without_none(shipped)) == canonical_json(_without_none(logged))


def _without_none(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def compare_content(logged: LoggedSamples, match: RunMatch) -> ContentCheck | None:
    """Field by field comparison with the bundle's ``items.jsonl`` (None when it has none)."""
    shipped = match.ref.docs
    if shipped is None:
        return None
    docs = logged.docs_by_id(match.id_field, match.id_prefix)
    verified: list[ItemId] = []
    differing: list[str] = []
    unverifiable: list[ItemId] = []
    ids = {*FOREIGN_ID_FIELDS, match.id_field}
    for item in match.ref.bundle.item_ids:
        if item not in docs:
            continue
        source = shipped[item].get("source") or _original_fields(shipped[item])
        shared = [key for key in source if key in docs[item] and key not in ids]
        changed = [key for key in shared if not _same_field(source[key], docs[item][key])]
        if changed:
            differing.append(f"{item!r} (fields {changed})")
        elif shared:
            verified.append(item)
        else:
            unverifiable.append(item)
    return ContentCheck(tuple(verified), tuple(differing), tuple(unverifiable))


def _original_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A shipped document's fields of the original dataset: the documents of tasks that run
    lm-eval's own task code (the leaderboard v2 tasks) keep them at the top level."""
    return {k: v for k, v in doc.items() if k not in (*OWN_FIELDS, *SCORING_FIELDS)}


def _logged_prompts(record: Record) -> set[str] | None:
    """The contexts a line's requests sent (``arguments``: ``{"gen_args_0": {"arg_0": ...}}``
    since lm-eval 0.4.3, ``[[context, continuation], ...]`` before); None when not logged."""
    arguments = record.data.get("arguments")
    if isinstance(arguments, Mapping):
        requests = list(arguments.values())
    elif isinstance(arguments, list):
        requests = arguments
    else:
        return None
    prompts = set()
    for request in requests:
        if isinstance(request, Mapping) and isinstance(request.get("arg_0"), str):
            prompts.add(request["arg_0"])
        elif isinstance(request, list) and request and isinstance(request[0], str):
            prompts.add(request[0])
    return prompts or None


def _shipped_prompts(doc: Mapping[str, Any]) -> set[str] | None:
    """The contexts the bundle's task sends for a document (one, or one per option)."""
    if isinstance(doc.get("contexts"), list):
        return {str(c) for c in doc["contexts"]}
    if isinstance(doc.get("context"), str):
        return {doc["context"]}
    return None


def _note_prompts(logged: LoggedSamples, match: RunMatch, where: str) -> None:
    """The estimate assumes the bundle's prompts: say which documents were prompted otherwise."""
    lines = logged.records_by_id(match.id_field, match.id_prefix)
    compared: list[ItemId] = []
    other: list[ItemId] = []
    for item in match.ref.bundle.item_ids:
        sent = _logged_prompts(lines[item]) if item in lines else None
        expected = _shipped_prompts(match.ref.docs[item]) if match.ref.docs else None
        if sent is None or expected is None:
            continue
        compared.append(item)
        if sent != expected:
            other.append(item)
    if other:
        note(
            f"{where}: {len(other)} of {len(compared)} documents were prompted otherwise than "
            f"the bundle's items (other few-shot examples, template or spacing): "
            f"{preview(repr(i) for i in other)}; bundle {match.ref.bundle.name!r} was fitted on "
            "its own prompts, so their scores may not mean the same",
            stacklevel=4,
        )


def check_foreign_content(logged: LoggedSamples, match: RunMatch, where: str) -> None:
    """A foreign run's documents must be the bundle's questions: differing fields are an
    error, and so is a run none of whose documents can be compared (ids prove nothing)."""
    bundle = match.ref.bundle
    check = compare_content(logged, match)
    if check is None:
        note(
            f"{where}: bundle {bundle.name!r} has no items.jsonl to compare the documents of this "
            "foreign task with; their content was not verified",
            stacklevel=4,
        )
        return
    if check.differing:
        raise ItemMismatchError(
            f"{where}: {len(check.differing)} documents differ from bundle {bundle.name!r}'s "
            f"items: {preview(check.differing)}"
        )
    if check.unverifiable and not check.verified:
        raise ItemMismatchError(
            f"{where}: the documents of task {logged.task!r} share no field but the id with "
            f"bundle {bundle.name!r}'s items ({preview(repr(i) for i in check.unverifiable)}): "
            "nothing shows they hold the same questions (another benchmark's documents?)"
        )
    if check.unverifiable:
        note(
            f"{where}: {len(check.unverifiable)} documents share no field but the id with "
            f"bundle {bundle.name!r}'s items and were not verified: "
            f"{preview(repr(i) for i in check.unverifiable)}",
            stacklevel=4,
        )
    _note_prompts(logged, match, where)


# ---------------------------------------------------------------------------- matching
def _coverage_match(logged: LoggedSamples, ref: BundleRef) -> tuple[RunMatch, int] | None:
    """The id field and prefix under which most of the bundle's items are in the file.

    Fields are the documents' id fields, then lm-eval's ``doc_id``; prefixes none, the
    benchmark's (``ifeval.``) and the benchmark's with the rest of the task name after it
    (``musr.murder_mysteries.`` for ``leaderboard_musr_murder_mysteries``).
    """
    best: tuple[RunMatch, int] | None = None
    fields = [f for f in FOREIGN_ID_FIELDS if f in logged.first_doc]
    if RECORD_ID_FIELD in logged.records[0].data:
        fields.append(RECORD_ID_FIELD)
    for id_field in fields:
        for prefix in _prefixes(ref.bundle.benchmark, logged.task):
            ids = logged.records_by_id(id_field, prefix)
            found = sum(item in ids for item in ref.bundle.item_ids)
            if found and (best is None or found > best[1]):
                best = (RunMatch(ref, id_field, prefix, own=False), found)
    return best


def _prefixes(benchmark: str, task: str) -> list[str]:
    prefixes = ["", f"{benchmark}."]
    _, found, rest = task.partition(f"{benchmark}_")
    if found and rest:
        prefixes.append(f"{benchmark}.{rest}.")
    return prefixes


def tokens(text: str) -> set[str]:
    """The words of a task or prefix name (``metabench_arc_secondary`` -> arc, ...)."""
    return {t for t in text.lower().replace("-", "_").replace(".", "_").split("_") if t}


def identify(logged: LoggedSamples, index: BundleIndex) -> list[tuple[RunMatch, ContentCheck]]:
    """Every bundle whose items the file's documents are, by content (bundles with
    ``items.jsonl`` only), with the comparison that shows it."""
    found = []
    for ref in index.by_name.values():
        covered = _coverage_match(logged, ref)
        check = None if covered is None else compare_content(logged, covered[0])
        if check is not None and check.identified:
            found.append((covered[0], check))
    return found


def _detected(logged: LoggedSamples, ref: BundleRef) -> tuple[RunMatch, bool] | None:
    """A bundle the foreign file is a run of, and whether it holds every item of it.

    With shipped documents, content decides (a run cut short is matched too); without,
    only a file holding every item of the bundle is taken, as ids are all there is.
    """
    covered = _coverage_match(logged, ref)
    if covered is None:
        return None
    match, count = covered
    complete = count == ref.bundle.budget
    check = compare_content(logged, match)
    identified = complete if check is None else check.identified
    return (match, complete) if identified else None


def _note_task_name(logged: LoggedSamples, match: RunMatch, index: BundleIndex) -> None:
    """A file named after one benchmark that holds another's documents is worth a word."""
    words = tokens(logged.task)
    benchmark = match.ref.bundle.benchmark
    named = sorted(words & {ref.bundle.benchmark for ref in index.by_name.values()})
    if named and benchmark not in words:
        note(
            f"{logged.path}: task {logged.task!r} is named after {', '.join(named)}, but its "
            f"documents are the items of bundle {match.ref.bundle.name!r}: reported under "
            f"{benchmark}",
            stacklevel=4,
        )


def match_run(
    logged: LoggedSamples, index: BundleIndex, task_map: Mapping[str, str]
) -> RunMatch | None:
    """The bundle a samples file's documents belong to, or None for an unrelated task.

    Own tasks name their bundle in every document. A task of ``task_map`` takes the named
    bundle. Others are matched to the bundle whose items their documents are (see
    :func:`_detected`); of several, those holding every item come first, then the one whose
    benchmark is a word of the task name; still several is an error.
    """
    doc, task, path = logged.first_doc, logged.task, logged.path
    if all(isinstance(doc.get(name), str) for name in OWN_FIELDS):
        ref = index.named(doc["bundle"], task=task, where=str(path))
        return RunMatch(ref, "item_id", "", own=True)
    if task in task_map:
        ref = index.for_target(task_map[task], task=task, where=str(path))
        found = _coverage_match(logged, ref)
        if found is None:
            raise ItemMismatchError(
                f"{path}: task {task!r} is mapped to bundle {ref.bundle.name!r}, but none of its "
                f"items is among the documents (ids tried from doc fields "
                f"{[f for f in FOREIGN_ID_FIELDS if f in doc]}, e.g. {ref.bundle.item_ids[0]!r})"
            )
        return found[0]
    detected = [d for ref in index.by_name.values() if (d := _detected(logged, ref))]
    matches = [m for m, complete in detected if complete] or [m for m, _ in detected]
    if len(matches) > 1:
        named = [m for m in matches if m.ref.bundle.benchmark in tokens(task)]
        matches = named if len(named) == 1 else matches
    if len(matches) > 1:
        names = sorted(m.ref.bundle.name for m in matches)
        raise ItemMismatchError(
            f"{path}: task {task!r} holds items of several bundles ({preview(names)}); "
            f"choose one with --task-map {task}=BUNDLE"
        )
    if not matches:
        return None
    _note_task_name(logged, matches[0], index)
    return matches[0]
