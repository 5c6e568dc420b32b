"""File helpers shared by writers: nothing is ever left half-written."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _current_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def default_file_mode() -> int:
    """Mode a plain ``open(path, "w")`` would give a new file under the current umask."""
    return 0o666 & ~_current_umask()


def default_dir_mode() -> int:
    """Mode a plain ``mkdir`` would give a new folder (``mkdtemp`` makes 0700)."""
    return 0o777 & ~_current_umask()


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; move it into place only if the block succeeds."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, default_file_mode())  # mkstemp makes 0600; give the usual umask mode
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextmanager
def staging_folder(parent: Path, prefix: str) -> Iterator[Path]:
    """A new hidden folder in ``parent`` (usual mode) to assemble a folder in before renaming
    it into place; removed at the end unless it was moved away."""
    staging = Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=parent))
    try:
        os.chmod(staging, default_dir_mode())  # mkdtemp makes 0700
        yield staging
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def write_json_atomic(path: str | os.PathLike[str], payload: Any) -> None:
    """Write ``payload`` as indented UTF-8 JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n", encoding="utf-8")


def write_text_if_changed(path: str | os.PathLike[str], text: str) -> None:
    """Write UTF-8 ``text`` atomically unless the file already holds it.

    Generated files (task YAMLs, READMEs) are rewritten on every build; leaving equal ones
    untouched keeps their times and gives clean diffs.
    """
    path = Path(path)
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def canonical_json(payload: Any) -> bytes:
    """Deterministic JSON bytes (sorted keys, no whitespace) for hashing."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


SEAL_KEY = "checksums"
"""Key under which a sealed JSON document keeps the checksum of the rest."""


def json_checksum(payload: Mapping[str, Any], *, without: str = SEAL_KEY) -> str:
    """sha256 of the canonical JSON of ``payload`` less its ``without`` key (where it is kept)."""
    return sha256_bytes(canonical_json({k: v for k, v in payload.items() if k != without}))


def seal_json(payload: Mapping[str, Any]) -> dict[str, Any]:
    """``payload`` with a sha256 of its content under :data:`SEAL_KEY`.

    A checksum turns a hand edit or corruption of a stored state (one changed number moves
    every estimate it makes) into an error when it is read; see :func:`seal_holds`.
    """
    checksum = json_checksum(payload)
    return {**payload, SEAL_KEY: {"algorithm": "sha256", "payload": checksum}}


def seal_holds(document: Mapping[str, Any]) -> bool | None:
    """Whether a document sealed by :func:`seal_json` is unchanged; None if it has no seal."""
    if SEAL_KEY not in document:
        return None
    seal = document[SEAL_KEY]
    try:
        return isinstance(seal, Mapping) and seal.get("payload") == json_checksum(document)
    except UnicodeEncodeError:  # a lone surrogate: not text any sealed document held
        return False
