"""Reading and writing bundle folders, locally or from the Hugging Face Hub.

A bundle folder holds ``bundle.json`` (the checksummed payload) and, optionally,
``items.parquet`` (the item documents: ``item_id``, ``content_hash`` and any doc fields).
Other files in the folder (a Hub ``README.md``, ``.gitattributes``, ``.git/``) are ignored
when reading and left alone when writing.

Writes are all-or-nothing (:mod:`._commit`): a reader finds the old bundle or the new one,
and a write killed half-way leaves a state the next load explains and the next save finishes.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from .._io import sha256_file
from .._json import read_json
from .._text import preview as _preview
from .._types import ItemId, duplicate_ids
from ..errors import BundleError, InputError, ItemMismatchError
from ._commit import interrupted_hint, write_folder
from ._states import check_estimator_states
from .integrity import (
    BUNDLE_FILE,
    ITEMS_FILE,
    seal,
    verify_document,
    verify_side_files,
)
from .schema import Bundle, check_version

HF_PREFIX = "hf://"

_HF_LOCATION = re.compile(
    r"^hf://(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<revision>[^\s@]+))?/?$"
)

Location = str | os.PathLike[str]


# ---------------------------------------------------------------------------- saving
def save_bundle(
    bundle: Bundle,
    folder: Location,
    *,
    items: pd.DataFrame | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``bundle`` (and optionally its item documents) to ``folder``; return the folder.

    ``items`` is a frame with one row per subset item, keyed by an ``item_id`` column or
    index, holding any document fields; its ``content_hash`` column (added from the bundle
    when absent) must agree with the bundle. An existing folder is replaced only with
    ``overwrite=True`` and only if it is a bundle folder (or empty), so a typo cannot wipe
    an unrelated directory; even then only the bundle's own files are replaced.
    """
    target = Path(folder)
    frame = None if items is None else _items_frame(bundle, items)
    check_bundle_folder(target, overwrite)

    def write(into: Path) -> None:
        files: dict[str, str] = {}
        if frame is not None:
            _write_items(frame, into / ITEMS_FILE)
            files[ITEMS_FILE] = sha256_file(into / ITEMS_FILE)
        _write_document(seal(bundle.to_dict(), files), into / BUNDLE_FILE)

    try:
        write_folder(target, write)
    except OSError as exc:
        raise BundleError(f"{target}: cannot write the bundle ({exc})") from exc
    return target


def check_bundle_folder(target: Path, overwrite: bool) -> None:
    """Refuse a bundle folder that may not be written; ``build`` calls it before any work."""
    if not target.exists():
        return
    if not target.is_dir():
        raise BundleError(f"{target}: exists and is not a folder")
    if not overwrite:
        raise BundleError(
            f"{target}: already exists; pass overwrite=True (--overwrite) to replace it"
        )
    if any(target.iterdir()) and not (target / BUNDLE_FILE).is_file():
        raise BundleError(
            f"{target}: refusing to overwrite a non-empty folder that holds no {BUNDLE_FILE}"
        )


def _items_frame(bundle: Bundle, items: pd.DataFrame) -> pd.DataFrame:
    """``items`` as a frame with an ``item_id`` column, in subset order, hashes checked."""
    frame = items.copy()
    if "item_id" not in frame.columns:
        if frame.index.name != "item_id":
            raise BundleError("items: expected an 'item_id' column or an index named 'item_id'")
        frame = frame.reset_index()
    frame["item_id"] = frame["item_id"].astype(str)
    ids = frame["item_id"].tolist()
    dups = sorted(frame["item_id"][frame["item_id"].duplicated()].unique())
    wanted, present = set(bundle.item_ids), set(ids)
    missing = [i for i in bundle.item_ids if i not in present]
    extra = [i for i in ids if i not in wanted]
    if dups or missing or extra:
        problems = [
            f"duplicate ids {dups[:5]}" if dups else "",
            f"lacks subset items {missing[:5]} ({len(missing)} in all)" if missing else "",
            f"has items not in the subset {extra[:5]} ({len(extra)} in all)" if extra else "",
        ]
        raise BundleError("items: " + "; ".join(p for p in problems if p))
    frame = frame.set_index("item_id").loc[list(bundle.item_ids)]
    if "content_hash" not in frame.columns:
        frame["content_hash"] = [bundle.content_hashes[i] for i in frame.index]
    else:
        _check_frame_hashes(bundle, frame["content_hash"])
    return frame.reset_index()


def _check_frame_hashes(bundle: Bundle, column: pd.Series, where: str = "items") -> None:
    differ = [
        item
        for item, value in column.items()
        if bundle.content_hashes[item] is not None
        and not pd.isna(value)
        and str(value) != bundle.content_hashes[item]
    ]
    if differ:
        raise BundleError(f"{where}: content_hash disagrees with the bundle for items {differ[:5]}")


def _write_items(frame: pd.DataFrame, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise BundleError(f"items: columns cannot be stored in parquet ({exc})") from exc
    pq.write_table(table, path)


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))


def _pretty_json(value: Any, level: int = 0) -> str:
    """Indented JSON that keeps arrays of numbers, and each record of an array, on one line.

    IRT parameters of thousands of items stay a few long lines instead of tens of thousands
    of one-number lines, and a diff of two bundles shows one line per changed item.
    """
    pad, end = "  " * (level + 1), "  " * level
    if isinstance(value, dict) and value:
        fields = (
            f"{pad}{_compact_json(k)}: {_pretty_json(v, level + 1)}" for k, v in value.items()
        )
        return "{\n" + ",\n".join(fields) + f"\n{end}}}"
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        return "[\n" + ",\n".join(pad + _compact_json(v) for v in value) + f"\n{end}]"
    return _compact_json(value)


def _write_document(document: Mapping[str, Any], path: Path) -> None:
    text = _pretty_json(dict(document)) + "\n"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


# ---------------------------------------------------------------------------- loading
def resolve_location(location: Location) -> Path:
    """The local ``bundle.json`` for a folder, a JSON path or ``hf://owner/name[@revision]``.

    Hub bundles are fetched with ``huggingface_hub.snapshot_download`` into its cache (offline
    mode, ``HF_HUB_OFFLINE=1``, serves them from that cache).
    """
    text = os.fspath(location)
    if text.startswith(HF_PREFIX):
        return _download(text) / BUNDLE_FILE
    path = Path(text)
    if path.is_dir():
        path = path / BUNDLE_FILE
    if not path.is_file():
        raise BundleError(
            f"{path}: no bundle found (expected a bundle folder or its {BUNDLE_FILE})"
        )
    return path


def parse_hf_location(location: str) -> tuple[str, str | None]:
    """``"hf://owner/name@rev"`` -> ``("owner/name", "rev")``."""
    match = _HF_LOCATION.match(location)
    if match is None:
        raise BundleError(f"{location}: expected hf://owner/name or hf://owner/name@revision")
    return match["repo"], match["revision"]


def _download(location: str) -> Path:
    repo_id, revision = parse_hf_location(location)
    import huggingface_hub

    try:
        folder = huggingface_hub.snapshot_download(repo_id, repo_type="dataset", revision=revision)
    except (OSError, ValueError) as exc:  # hub HTTP, offline and validation errors
        raise BundleError(
            f"{location}: cannot download the bundle ({type(exc).__name__}: {exc})"
        ) from exc
    return Path(folder)


def _read_document(path: Path) -> dict[str, Any]:
    """``bundle.json`` through the package's strict JSON reader (no NaN, no duplicate keys,
    bounded nesting, valid Unicode), its refusals as bundle errors."""
    try:
        document = read_json(path)
    except InputError as exc:
        raise BundleError(f"{exc}; not a readable bundle file") from exc
    if not isinstance(document, dict):
        raise BundleError(f"{path}: expected a JSON object at the top level")
    return document


def load_bundle(location: Location) -> Bundle:
    """Load and fully verify a bundle: version, checksums, side files, schema, estimator states.

    ``location`` is a bundle folder, a ``bundle.json`` path, or ``hf://owner/name[@revision]``.
    """
    return _load(resolve_location(location))[0]


def _load(path: Path) -> tuple[Bundle, dict[str, str]]:
    """The verified bundle of ``path`` and the side files its checksums list."""
    try:
        document = _read_document(path)
        check_version(document.get("schema_version"), str(path), warn=False)  # before checksums
        files = verify_document(document, str(path))
        verify_side_files(path.parent, files, path)
    except BundleError as exc:
        hint = interrupted_hint(path.parent)
        if not hint:
            raise
        raise BundleError(f"{exc}{hint}") from exc
    bundle = Bundle.from_dict(document, source=str(path))
    check_estimator_states(bundle, str(path))
    return bundle, files


def load_items(location: Location) -> pd.DataFrame | None:
    """The bundle's item documents indexed by ``item_id`` (None if it stores none), verified."""
    path = resolve_location(location)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # version warnings were shown by load_bundle already
        bundle, files = _load(path)
    if ITEMS_FILE not in files:
        return None  # an items.parquet that is there but not listed was refused above
    return _read_items(path.parent / ITEMS_FILE, bundle)


def _read_items(path: Path, bundle: Bundle) -> pd.DataFrame:
    """``items.parquet`` checked against the bundle, indexed by item id in subset order."""
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise BundleError(f"{path}: not a readable parquet file ({exc})") from exc
    if "item_id" not in frame.columns:
        raise BundleError(f"{path}: no 'item_id' column (columns: {list(frame.columns)})")
    ids = frame["item_id"].astype(str)
    present = set(ids)
    missing = [item for item in bundle.item_ids if item not in present]
    dups = duplicate_ids(ids)
    if missing or dups:
        what = f"lacks subset items {_preview(missing)}" if missing else ""
        what += ("; " if what else "") + (f"duplicate item ids {_preview(dups)}" if dups else "")
        raise BundleError(f"{path}: {what}")
    frame = frame.assign(item_id=ids).set_index("item_id").loc[list(bundle.item_ids)]
    if "content_hash" in frame.columns:
        _check_frame_hashes(bundle, frame["content_hash"], where=str(path))
    return frame


# ---------------------------------------------------------------------------- verification
def verify_items(bundle: Bundle, docs: Mapping[ItemId, str | None]) -> tuple[ItemId, ...]:
    """Check a run's documents (item id -> content hash) against the bundle's items.

    Raises :class:`ItemMismatchError` naming subset items the run lacks and items whose
    content hash changed. Items with an unknown hash on either side cannot be checked: they
    are returned (and a warning says how many). Extra documents in the run are fine.
    """
    missing = [item for item in bundle.item_ids if item not in docs]
    changed = [
        item
        for item in bundle.item_ids
        if item in docs
        and bundle.content_hashes[item] is not None
        and docs[item] is not None
        and docs[item] != bundle.content_hashes[item]
    ]
    if missing or changed:
        raise ItemMismatchError(_mismatch_message(bundle, docs, missing, changed))
    unchecked = tuple(
        item
        for item in bundle.item_ids
        if bundle.content_hashes[item] is None or docs[item] is None
    )
    if unchecked:
        warnings.warn(
            f"bundle {bundle.name!r}: {len(unchecked)} of {bundle.budget} items have no content "
            f"hash, their text was not verified (e.g. {list(unchecked[:3])})",
            UserWarning,
            stacklevel=2,
        )
    return unchecked


def _mismatch_message(
    bundle: Bundle, docs: Mapping[ItemId, str | None], missing: list[ItemId], changed: list[ItemId]
) -> str:
    parts = [f"bundle {bundle.name!r} does not match the documents of this run"]
    if missing:
        parts.append(f"{len(missing)} subset items are missing: {_names(missing)}")
    if changed:
        shown = ", ".join(
            f"{item!r} (bundle {bundle.content_hashes[item]}, run {docs[item]})"
            for item in changed[:10]
        )
        more = f", ... ({len(changed)} in all)" if len(changed) > 10 else ""
        parts.append(f"{len(changed)} items changed content (hash differs): {shown}{more}")
    return "; ".join(parts)


def _names(items: list[ItemId], limit: int = 20) -> str:
    shown = ", ".join(repr(i) for i in items[:limit])
    return shown + (f", ... ({len(items)} in all)" if len(items) > limit else "")
