"""Checksums of a bundle file and its side files, and what each schema version seals.

What a checksum covers decides which hand edit gets past it, so the rules live here:

* ``checksums.payload`` (every version): sha256 of the canonical JSON of the document
  without its ``checksums`` section.
* ``checksums.document`` (schema 1.1 on): sha256 of the whole document but this one field,
  so the list of side files (``checksums.files``) is sealed too. In 1.0 it was not: an entry
  could be deleted and its file then edited.
* A bundle side file (``items.parquet``) present in the folder must be listed, in every
  version. That also closes the deleted-entry edit for bundles written as 1.0, which stay
  readable.

Checksums guard against corruption and hand edits, not forgery: anyone can recompute a
sha256. Nesting, NaN, duplicate keys and invalid Unicode are refused when the file is read
(:mod:`lmeval_microbench._json`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._io import canonical_json, json_checksum, sha256_bytes, sha256_file
from ..errors import BundleError
from .schema import parse_version

BUNDLE_FILE = "bundle.json"
ITEMS_FILE = "items.parquet"
SIDE_FILES = (ITEMS_FILE,)
"""Files a bundle may list beside ``bundle.json``; the only ones a save writes or removes."""

ALGORITHM = "sha256"

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SEALS_FILES = (1, 1)
"""First schema version whose ``checksums.document`` seals the side-file list."""


def payload_checksum(document: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of ``document`` without its ``checksums`` section."""
    return json_checksum(document, without="checksums")


def document_checksum(document: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of ``document`` without ``checksums.document``."""
    checksums = {k: v for k, v in document["checksums"].items() if k != "document"}
    return sha256_bytes(canonical_json({**document, "checksums": checksums}))


def seal(payload: Mapping[str, Any], files: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``payload`` with a ``checksums`` section sealing it and the side-file hashes ``files``."""
    document = dict(payload)
    document["checksums"] = {
        "algorithm": ALGORITHM,
        "payload": payload_checksum(payload),
        "files": dict(sorted((files or {}).items())),
    }
    document["checksums"]["document"] = document_checksum(document)
    return document


def verify_document(document: Mapping[str, Any], where: str) -> dict[str, str]:
    """Check the checksums of a parsed ``document``; return the side-file hashes it lists."""
    checksums = document.get("checksums")
    if not isinstance(checksums, Mapping):
        raise BundleError(f"{where}: missing checksums section")
    algorithm = checksums.get("algorithm", ALGORITHM)
    if algorithm != ALGORITHM:
        raise BundleError(f"{where}: unknown checksum algorithm {algorithm!r} (expected 'sha256')")
    sealed = parse_version(document.get("schema_version"), where) >= _SEALS_FILES
    try:
        _compare(where, checksums.get("payload"), payload_checksum(document))
        if sealed:
            _compare(where, checksums.get("document"), document_checksum(document))
    except UnicodeEncodeError as exc:  # a lone surrogate escape, e.g. "\ud800"
        raise BundleError(f"{where}: text that is not valid Unicode ({exc.reason})") from exc
    files = checksums.get("files", {})
    if not isinstance(files, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and _SHA256.match(v) for k, v in files.items()
    ):
        raise BundleError(f"{where}: checksums.files must map file names to sha256 hex digests")
    return dict(files)


def _compare(where: str, recorded: Any, actual: str) -> None:
    if recorded != actual:
        raise BundleError(
            f"{where}: checksum mismatch: the bundle was edited or corrupted after it was "
            f"written (recorded {recorded!r}, content hashes to {actual!r})"
        )


def verify_side_files(folder: Path, files: Mapping[str, str], where: Path) -> None:
    """Every listed file exists with its hash; a bundle side file that is not listed is refused."""
    for name, expected in files.items():
        if Path(name).name != name:
            raise BundleError(f"{where}: side file name {name!r} must be a plain file name")
        path = folder / name
        if not path.is_file():
            raise BundleError(f"{path}: missing; {where.name} lists it in its checksums")
        if sha256_file(path) != expected:
            raise BundleError(
                f"{path}: checksum mismatch: the file was changed after the bundle was written"
            )
    for name in SIDE_FILES:
        if name not in files and (folder / name).exists():
            raise BundleError(
                f"{folder / name}: present but not listed in the checksums of {where.name}; "
                "it is not this bundle's (remove it, or save the bundle again with its items)"
            )
