"""The item documents a shipped task runs on: one JSON object per line, checked against a bundle.

A task folder keeps its subset items as ``items.jsonl`` beside the bundle's ``bundle.json``.
Each line is the document lm-eval hands to the task (and logs with ``--log_samples``): it
carries its ``item_id`` and the name of its ``bundle``, so scores are joined to the bundle by
id, never by line order. The bundle stores the :func:`~lmeval_microbench.collect.content_hash`
of every document; reading the file recomputes them, so an edited or swapped file fails loudly
instead of quietly changing what the estimate means.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._io import atomic_path
from .._json import parse_json
from .._types import ItemId
from ..bundle import Bundle, verify_items
from ..collect import content_hash
from ..errors import InputError, ItemMismatchError

ITEMS_JSONL = "items.jsonl"
"""Name of the documents file in a task data folder (beside ``bundle.json``)."""

REQUIRED_FIELDS = ("item_id", "bundle")
"""Fields every document must carry: its id and the name of the bundle it belongs to."""


def write_docs(docs: Sequence[Mapping[str, Any]], path: str | os.PathLike[str]) -> Path:
    """Write ``docs`` as JSON lines (UTF-8, keys in the given order), atomically."""
    path = Path(path)
    lines = []
    for k, doc in enumerate(docs):
        _check_required(doc, f"docs[{k}]")
        lines.append(json.dumps(dict(doc), ensure_ascii=False, allow_nan=False))
    with atomic_path(path) as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def read_docs(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The documents of a JSON-lines file; errors name the file and line."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: item documents not found")
    docs = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        doc = parse_json(line, f"{path}:{number}")
        if not isinstance(doc, dict):
            raise InputError(f"{path}:{number}: expected a JSON object, got {type(doc).__name__}")
        _check_required(doc, f"{path}:{number}")
        docs.append(doc)
    if not docs:
        raise InputError(f"{path}: holds no documents")
    return docs


def _check_required(doc: Mapping[str, Any], where: str) -> None:
    for name in REQUIRED_FIELDS:
        value = doc.get(name)
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"{where}: field {name!r} must be a non-empty string, got {value!r}")


def check_docs_match_bundle(
    bundle: Bundle, docs: Iterable[Mapping[str, Any]], *, where: str
) -> None:
    """Raise unless ``docs`` are exactly the bundle's items, each with its recorded hash.

    ``docs`` should be the documents as lm-eval will see them (after any dataset round trip),
    so that the hashes checked are those a ``--log_samples`` file will show.
    """
    hashes: dict[ItemId, str] = {}
    for doc in docs:
        item = doc["item_id"]
        if doc["bundle"] != bundle.name:
            raise ItemMismatchError(
                f"{where}: item {item!r} names bundle {doc['bundle']!r}, "
                f"but the bundle beside it is {bundle.name!r}"
            )
        if item in hashes:
            raise ItemMismatchError(f"{where}: item {item!r} appears more than once")
        hashes[item] = content_hash(dict(doc))
    extra = [item for item in hashes if item not in bundle.content_hashes]
    if extra:
        raise ItemMismatchError(
            f"{where}: {len(extra)} documents are not items of bundle {bundle.name!r}: {extra[:5]}"
        )
    try:
        verify_items(bundle, hashes)
    except ItemMismatchError as exc:
        raise ItemMismatchError(f"{where}: {exc}") from exc
