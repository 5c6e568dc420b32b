"""JSON records with their place (``file:line``), field lookup, id text and item hashes.

Every reader of this package turns its input into :class:`Record` objects first, so that
every later error can quote the file and line (or row) it comes from.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._io import canonical_json
from .._json import parse_json
from .._text import preview as _preview
from ..errors import InputError

STRUCTURAL_KEYS = frozenset(
    {
        "doc_id",
        "doc",
        "target",
        "arguments",
        "resps",
        "filtered_resps",
        "filter",
        "metrics",
        "doc_hash",
        "prompt_hash",
        "target_hash",
    }
)
"""Keys lm-eval writes on every sample line; any other key of an old-format line is a metric."""


@dataclass(frozen=True)
class Record:
    """A sample line or dataset row; ``where`` ("file:line", "source row k") goes into errors."""

    where: str
    data: Mapping[str, Any]


# ---------------------------------------------------------------------------- text helpers
def preview(values: Iterable[Any], limit: int = 5) -> str:
    """The first ``limit`` values as plain text (file and field names read better unquoted)."""
    return _preview(values, limit, quote=False)


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders ``arc.9`` before ``arc.10`` (ids mix words and indices)."""
    parts = re.split(r"(\d+)", text)
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts if p != "")


def as_list(paths: Any) -> list[Any]:
    """One path or an iterable of paths, as a list."""
    return [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)


# ---------------------------------------------------------------------------- hashes
def content_hash(doc: Any) -> str:
    """sha256 (hex) of the canonical JSON of ``doc``: what ``items["content_hash"]`` holds.

    Canonical JSON = keys sorted at every level, no whitespace (``","`` and ``":"``
    separators), non-ASCII kept as UTF-8, values that JSON cannot hold written with
    ``str()``. The doc is the one lm-eval logs (after the task's ``process_docs``). Unlike
    lm-eval's own ``doc_hash`` (indented, key order as given), this does not change with
    key order or lm-eval version, so two runs of the same item agree.
    """
    try:
        payload = canonical_json(doc)
    except (TypeError, ValueError):
        payload = json.dumps(
            doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        ).encode()
    return hashlib.sha256(payload).hexdigest()


def text_hash(text: str) -> str:
    """sha256 (hex) of the UTF-8 bytes of ``text``, unchanged (no stripping)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------- values
def format_id(value: Any, field: str, where: str) -> str:
    """Turn a doc field into id text: integers (also ``3.0`` from parquet) print as ``3``."""
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list, tuple)):
        raise InputError(f"{where}: id field {field!r} holds {value!r}, not a string or integer")
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value) or not float(value).is_integer():
            raise InputError(f"{where}: id field {field!r} holds {value!r}, not an integer")
        return str(int(value))
    text = str(value)
    if text.strip() == "":
        raise InputError(f"{where}: id field {field!r} is empty")
    return text


def apply_prefix(prefix: str, raw_id: str, *, task: str, benchmark: str) -> str:
    """``prefix + raw_id``; ``{task}`` and ``{benchmark}`` in the prefix are filled in."""
    if "{" in prefix:
        try:
            prefix = prefix.format(task=task, benchmark=benchmark)
        except (KeyError, IndexError, ValueError) as exc:
            raise InputError(
                f"id_prefix {prefix!r}: only {{task}} and {{benchmark}} can be filled in ({exc})"
            ) from exc
    return prefix + raw_id


def as_score(value: Any, *, metric: str, where: str) -> float:
    """A metric value as float (None -> NaN, checked later); lists and text are an error."""
    if value is None:
        return math.nan
    if isinstance(value, (bool, np.bool_, int, float, np.integer, np.floating)):
        try:
            return float(value)
        except OverflowError:
            raise InputError(
                f"{where}: metric {metric!r} holds an integer too large for a number"
            ) from None
    raise InputError(
        f"{where}: metric {metric!r} holds {value!r} ({type(value).__name__}), not a number: "
        "per-item scores must be one number in [0, 1] (pick a per-item metric such as acc)"
    )


# ---------------------------------------------------------------------------- reading
def iter_json_records(path: Path) -> Iterator[Record]:
    """Records of a JSON-lines file (or of a JSON array, as lm-eval 0.4.0 wrote).

    Errors name the line; a last line that fails to parse and lacks its newline is reported
    as a truncated file, because that is what a run cut off mid-write leaves.
    """
    raw = path.read_bytes()
    if raw.lstrip()[:1] == b"[":
        yield from _iter_json_array(path, raw)
        return
    lines = raw.split(b"\n")
    last_content = max((k for k, line in enumerate(lines) if line.strip()), default=-1)
    truncated_tail = not raw.endswith(b"\n")
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        where = f"{path}:{k + 1}"
        try:
            record = parse_json(line, where, allow_nan=True)
        except InputError as exc:
            syntax = _syntax_error(line)
            if syntax is None:
                raise
            hint = (
                " (the last line is incomplete: the file looks truncated; was the run cut off?)"
                if k == last_content and truncated_tail
                else ""
            )
            raise InputError(
                f"{where}: malformed JSON ({syntax.msg} at column {syntax.colno}){hint}"
            ) from exc
        if not isinstance(record, dict):
            raise InputError(
                f"{where}: expected a JSON object per line, got {type(record).__name__}"
            )
        yield Record(where, record)


def _syntax_error(data: bytes) -> json.JSONDecodeError | None:
    """The syntax error of UTF-8 ``data`` that the strict parser refused, None when its
    refusal was about something else (duplicate keys, nesting, huge numbers, encoding).

    Only called on the error path: syntax errors keep their "malformed JSON ... at column"
    wording (and the truncation hint), the strict parser's other refusals their own.
    """
    try:
        json.loads(data.decode("utf-8"))
    except json.JSONDecodeError as exc:
        return exc
    except (UnicodeDecodeError, RecursionError):
        return None
    return None


def _iter_json_array(path: Path, raw: bytes) -> Iterator[Record]:
    try:
        records = parse_json(raw, str(path), allow_nan=True)
    except InputError as exc:
        syntax = _syntax_error(raw)
        if syntax is None:
            raise
        raise InputError(
            f"{path}: malformed JSON array ({syntax}); the file may be truncated"
        ) from exc
    if not isinstance(records, list):
        raise InputError(f"{path}: expected a JSON array of sample records")
    for k, record in enumerate(records):
        where = f"{path} record {k}"
        if not isinstance(record, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(record).__name__}")
        yield Record(where, record)


# ---------------------------------------------------------------------------- lm-eval fields
def doc_of(record: Record) -> Mapping[str, Any]:
    """The ``doc`` of an lm-eval sample line (empty when the line has none)."""
    doc = record.data.get("doc")
    return doc if isinstance(doc, Mapping) else {}


def lookup(record: Record, field: str) -> tuple[bool, Any]:
    """A field of the doc, else of the line itself (``doc_hash``, ``doc_id``); dots walk dicts."""
    doc = doc_of(record)
    if field in doc:
        return True, doc[field]
    if field in record.data:
        return True, record.data[field]
    for root in (record.data, doc):
        node: Any = root
        for part in field.split("."):
            if not isinstance(node, Mapping) or part not in node:
                break
            node = node[part]
        else:
            return True, node
    return False, None


def available_fields(record: Record) -> list[str]:
    """Fields an id can come from, named as ``lookup`` accepts them (for error messages)."""
    fields = [f"doc.{k}" for k in doc_of(record)]
    fields += [k for k in ("doc_id", "doc_hash") if k in record.data]
    return fields


def record_content_hash(record: Record) -> str | None:
    """:func:`content_hash` of the line's doc, else lm-eval's ``doc_hash``, else None."""
    if "doc" in record.data:
        return content_hash(record.data["doc"])
    doc_hash = record.data.get("doc_hash")
    return str(doc_hash) if doc_hash is not None else None
