"""Bundles for reading lm-eval runs: found on disk with their documents and task versions.

The first step of reconstructing estimates from lm-eval output (:mod:`.reconstruct`): which bundles
exist (the shipped suite and the folders a user names), the ``items.jsonl`` documents shipped
beside each (checked against the bundle's content hashes before they judge any run) and the
version of the task YAML that runs them; plus the ``--task-map`` syntax.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .._types import ItemId
from ..bundle import BUNDLE_FILE, Bundle, load_bundle
from ..collect import preview
from ..errors import BundleError, InputError, ReconstructionWarning


# ---------------------------------------------------------------------------- bundles
@dataclass(frozen=True)
class BundleRef:
    """A bundle found on disk, with the documents and task version shipped beside it."""

    bundle: Bundle
    folder: Path
    docs: Mapping[ItemId, Mapping[str, Any]] | None = None
    """``items.jsonl`` beside ``bundle.json`` by item id (None when absent)."""
    task_version: str | None = None
    """``metadata.version`` of the task YAML running this folder (None when not found)."""


class _TolerantLoader(yaml.SafeLoader):
    """Reads lm-eval YAMLs without resolving tags such as ``!function``."""


_TolerantLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def version_text(value: Any) -> str | None:
    """A task version as text (``1`` and ``1.0`` are the same version)."""
    if value is None:
        return None
    try:
        return str(float(value))
    except (TypeError, ValueError):
        return str(value)


def _task_versions(suite: Path) -> dict[str, str | None]:
    """Data folder name -> task version, from the task YAMLs of a suite folder."""
    versions: dict[str, str | None] = {}
    for path in sorted(suite.glob("*.yaml")):
        try:
            config = yaml.load(path.read_text(encoding="utf-8"), Loader=_TolerantLoader)
        except (OSError, yaml.YAMLError):
            continue
        if not isinstance(config, dict):
            continue
        folder = (config.get("dataset_kwargs") or {}).get("microbench_items")
        if isinstance(folder, str):
            versions[folder] = version_text((config.get("metadata") or {}).get("version"))
    return versions


def _read_item_docs(folder: Path, bundle: Bundle) -> dict[ItemId, dict[str, Any]] | None:
    """``items.jsonl`` by item id, None when absent; an edited copy is refused.

    The documents decide whether a foreign run holds the bundle's questions, so a copy that
    drifted from the bundle's content hashes would pass a drifted run and fail the genuine one.
    """
    from ..harness.docs import ITEMS_JSONL, check_docs_match_bundle, read_docs

    path = folder / ITEMS_JSONL
    if not path.is_file():
        return None
    docs = read_docs(path)
    check_docs_match_bundle(bundle, docs, where=str(path))
    return {doc["item_id"]: doc for doc in docs}


def load_bundle_ref(
    folder: str | os.PathLike[str], versions: Mapping[str, str | None] | None = None
) -> BundleRef:
    """A bundle folder with its shipped documents and the version of the task running it.

    ``versions`` is :func:`_task_versions` of the parent folder when already read.
    """
    folder = Path(folder)
    if folder.name == BUNDLE_FILE:
        folder = folder.parent
    bundle = load_bundle(folder)
    if versions is None:
        versions = _task_versions(folder.parent)
    return BundleRef(bundle, folder, _read_item_docs(folder, bundle), versions.get(folder.name))


class BundleIndex:
    """Bundles by name: the shipped suite plus the folders the user names."""

    def __init__(self, refs: Iterable[BundleRef]) -> None:
        self.by_name: dict[str, BundleRef] = {}
        for ref in refs:
            known = self.by_name.get(ref.bundle.name)
            if known is not None and known.bundle != ref.bundle:
                raise BundleError(
                    f"two different bundles are named {ref.bundle.name!r}: {known.folder} and "
                    f"{ref.folder}; bundle names must be unique"
                )
            if known is None:
                self.by_name[ref.bundle.name] = ref

    @classmethod
    def discover(
        cls, locations: Sequence[str | os.PathLike[str]] = (), *, shipped: bool = True
    ) -> BundleIndex:
        """Every bundle under ``locations`` (bundle folders or folders of them) and shipped.

        User bundles come first, so a user's copy of a shipped bundle (same name, same
        content) is the one whose documents are used.
        """
        folders: list[Path] = []
        for location in locations:
            path = Path(location)
            if (path / BUNDLE_FILE).is_file() or path.name == BUNDLE_FILE:
                folders.append(path if path.is_dir() else path.parent)
            elif path.is_dir():
                found = sorted(p.parent for p in path.rglob(BUNDLE_FILE))
                if not found:
                    raise BundleError(f"{path}: no {BUNDLE_FILE} in this folder or below")
                folders += found
            else:
                raise BundleError(f"{path}: no such bundle folder")
        if shipped:
            from ..harness import include_path

            folders += sorted(p.parent for p in include_path().rglob(BUNDLE_FILE))
        suites = {folder.parent: _task_versions(folder.parent) for folder in folders}
        return cls(load_bundle_ref(folder, suites[folder.parent]) for folder in folders)

    def named(self, name: str, *, task: str, where: str) -> BundleRef:
        """The bundle our own task's documents name; ``where`` (the samples file) is the
        run whose documents name it, so that an unknown name points at the file."""
        try:
            return self.by_name[name]
        except KeyError:
            raise BundleError(
                f"{where}: task {task!r}: its documents belong to bundle {name!r}, which is "
                f"neither shipped nor given with --bundle; known bundles: "
                f"{preview(sorted(self.by_name))}"
            ) from None

    def for_target(self, target: str, *, task: str, where: str) -> BundleRef:
        """The bundle a ``--task-map`` entry names: a bundle name or a benchmark name.

        ``where`` (the samples file of the task) goes into errors."""
        if target in self.by_name:
            return self.by_name[target]
        matches = [ref for ref in self.by_name.values() if ref.bundle.benchmark == target]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise BundleError(
                f"{where}: task map {task}={target}: no bundle or benchmark named {target!r}; "
                f"bundles: {preview(sorted(self.by_name))}"
            )
        names = sorted(ref.bundle.name for ref in matches)
        raise BundleError(
            f"{where}: task map {task}={target}: several bundles of benchmark {target!r} "
            f"({preview(names)}); name the bundle instead"
        )


def parse_task_map(text: str | Sequence[str] | None) -> dict[str, str]:
    """``"a=arc,b=mmlu"`` (or a list of such texts) -> ``{"a": "arc", "b": "mmlu"}``."""
    parts: list[str] = []
    for chunk in [text] if isinstance(text, str) else list(text or []):
        parts += [p.strip() for p in chunk.split(",") if p.strip()]
    mapping: dict[str, str] = {}
    for part in parts:
        task, sep, target = (s.strip() for s in part.partition("="))
        if not sep or not task or not target:
            raise InputError(f"task map entry {part!r}: expected TASK=BENCHMARK_OR_BUNDLE")
        if task in mapping and mapping[task] != target:
            raise InputError(f"task map: task {task!r} mapped twice ({mapping[task]}, {target})")
        mapping[task] = target
    return mapping


def note(message: str, stacklevel: int = 3) -> None:
    """A :class:`ReconstructionWarning`: the reconstruction keeps it in its notes."""
    warnings.warn(message, ReconstructionWarning, stacklevel=stacklevel)
