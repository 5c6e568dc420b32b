"""What a published repository holds, and how it is assembled from a local bundle or task folder.

A Hub user gets three ways in, so the repository carries all three:

* ``bundle.json`` and its side files at the top, byte for byte: ``load_bundle("hf://o/n")``
  and ``microbench estimate hf://o/n`` read them, checksums and all;
* :data:`DATA_FILE`, one row per subset item (id, content hash, weight and the documents
  where the bundle has them) that the card's ``configs`` entry hands to
  ``datasets.load_dataset("o/n")``;
* where the bundle was exported as an lm-eval task (``microbench build --task``, or a shipped
  suite), that task: its YAML unchanged, a freshly generated ``microbench_hooks.py`` shim and
  its data folder (bundle + ``items.jsonl``), laid out as :mod:`..harness.export` writes a
  suite, so the downloaded folder is an ``--include_path``.

The repository is always assembled in a folder of its own (:func:`write_repository`) and
checked there; uploading sends that folder and ``to_folder`` moves it into place, so what a
user downloads is what was checked.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .._io import staging_folder
from .._json import read_json
from ..bundle import BUNDLE_FILE, Bundle, load_bundle, load_items
from ..errors import BundleError, InputError
from ..harness.docs import ITEMS_JSONL, check_docs_match_bundle, read_docs
from ..harness.export import HOOKS_MODULE, hooks_module

CARD_FILE = "README.md"
DATA_FILE = "data/items.parquet"
"""The items as a dataset: what ``datasets.load_dataset`` reads (the card's ``configs``)."""
DATA_SPLIT = "test"
"""Split name of :data:`DATA_FILE`: the items are test items, as in the lm-eval task."""
ITEM_COLUMNS = ("item_id", "content_hash", "weight")
"""Columns every row of :data:`DATA_FILE` has, from the bundle; document fields follow."""

_FUNCTION_TAG = re.compile(r"!function\s+([\w.]+)\.\w+")


class _TaskYamlLoader(yaml.SafeLoader):
    """Reads task YAMLs without resolving their ``!function`` tags (the hooks need lm-eval)."""


_TaskYamlLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


@dataclass(frozen=True)
class TaskSource:
    """An lm-eval task that runs the bundle: its YAML and its data folder beside it."""

    name: str
    yaml: Path
    data_dir: str

    @property
    def folder(self) -> Path:
        return self.yaml.parent / self.data_dir


@dataclass(frozen=True)
class Source:
    """A verified bundle, the files that make it up, and the task (with documents) if any."""

    folder: Path
    bundle: Bundle
    bundle_files: tuple[str, ...]
    task: TaskSource | None
    rows: tuple[dict[str, Any], ...]
    """The rows of :data:`DATA_FILE` (:func:`item_rows`)."""

    @property
    def document_fields(self) -> list[str]:
        """Columns of :data:`DATA_FILE` after :data:`ITEM_COLUMNS`: the documents' fields."""
        return [k for k in self.rows[0] if k not in ITEM_COLUMNS]

    def files(self) -> tuple[str, ...]:
        """Every file of the repository, as paths relative to its root."""
        task: tuple[str, ...] = ()
        if self.task is not None:
            data = (*bundle_files(self.task.folder), ITEMS_JSONL)
            task = (
                self.task.yaml.name,
                f"{HOOKS_MODULE}.py",
                *(f"{self.task.data_dir}/{name}" for name in data),
            )
        return (*self.bundle_files, DATA_FILE, *task, CARD_FILE)


# ---------------------------------------------------------------------------- reading
def bundle_files(folder: Path) -> tuple[str, ...]:
    """``bundle.json`` and the side files its checksums list (other files are not the bundle's)."""
    document = read_json(folder / BUNDLE_FILE)
    return (BUNDLE_FILE, *sorted(document.get("checksums", {}).get("files", {})))


def _tasks_in(suite: Path) -> list[TaskSource]:
    """Tasks of the YAMLs in ``suite`` that read a data folder holding a bundle."""
    found = []
    for path in sorted(suite.glob("*.yaml")):
        try:
            config = yaml.load(path.read_text(encoding="utf-8"), Loader=_TaskYamlLoader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if not isinstance(config, dict):
            continue
        data_dir = (config.get("dataset_kwargs") or {}).get("microbench_items")
        if isinstance(data_dir, str) and (suite / data_dir / BUNDLE_FILE).is_file():
            found.append(TaskSource(str(config.get("task") or path.stem), path, data_dir))
    return found


def _candidates(folder: Path) -> list[TaskSource]:
    """Tasks ``folder`` can mean: those of its own YAMLs, and the one whose data folder it is."""
    found = _tasks_in(folder)
    if (folder / BUNDLE_FILE).is_file():
        found += [t for t in _tasks_in(folder.parent) if t.folder.resolve() == folder.resolve()]
    return found


def _pick_task(folder: Path, task: str | None) -> TaskSource | None:
    candidates = _candidates(folder)
    if (folder / BUNDLE_FILE).is_file():  # a bundle folder: only tasks running this bundle
        bundle = load_bundle(folder)
        candidates = [t for t in candidates if load_bundle(t.folder) == bundle]
    names = sorted({t.name for t in candidates})
    if task is not None:
        chosen = [t for t in candidates if t.name == task]
        if not chosen:
            raise InputError(
                f"{folder}: no micro-benchmark task {task!r} here (tasks: {names or 'none'})"
            )
        return chosen[0]
    if len(names) > 1:
        raise InputError(f"{folder}: holds several tasks {names}; pass --task NAME to pick one")
    if not candidates and not (folder / BUNDLE_FILE).is_file():
        raise BundleError(
            f"{folder}: no {BUNDLE_FILE} and no micro-benchmark task YAML here "
            "(expected a bundle folder, or a task folder written by microbench build --task)"
        )
    return candidates[0] if candidates else None


def _check_task_yaml(task: TaskSource) -> None:
    """Refuse a YAML that needs files publishing does not carry (other modules, includes)."""
    text = task.yaml.read_text(encoding="utf-8")
    modules = sorted(set(_FUNCTION_TAG.findall(text)) - {HOOKS_MODULE})
    config = yaml.load(text, Loader=_TaskYamlLoader)
    if modules or "include" in config:
        what = f"functions of {modules}" if modules else f"the YAML {config['include']!r}"
        raise InputError(
            f"{task.yaml}: the task uses {what}, which a published repository would not "
            f"carry; only tasks whose functions are {HOOKS_MODULE}'s can be published"
        )


def read_source(folder: str | os.PathLike[str], task: str | None = None) -> Source:
    """The bundle (and its task) in ``folder``: a bundle folder, a task's data folder, a
    folder written by ``microbench build --task``, or an earlier publication.

    Everything is verified as lm-eval would: the bundle's checksums, and the task documents
    against the bundle's content hashes.
    """
    folder = Path(folder)
    chosen = _pick_task(folder, task)
    if chosen is None:
        bundle = load_bundle(folder)
        rows = item_rows(bundle, folder, None)
        return Source(folder, bundle, bundle_files(folder), None, tuple(rows))
    _check_task_yaml(chosen)
    bundle_folder = folder if (folder / BUNDLE_FILE).is_file() else chosen.folder
    bundle = load_bundle(bundle_folder)
    docs = read_docs(chosen.folder / ITEMS_JSONL)
    check_docs_match_bundle(bundle, docs, where=str(chosen.folder / ITEMS_JSONL))
    rows = item_rows(bundle, bundle_folder, docs)
    return Source(bundle_folder, bundle, bundle_files(bundle_folder), chosen, tuple(rows))


# ---------------------------------------------------------------------------- the items
def item_rows(
    bundle: Bundle, folder: Path, task_docs: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """One row per subset item, in subset order: id, hash, weight, then its document fields.

    The documents are the task's (the prompts lm-eval sends) when there is a task, else
    those the bundle stores in ``folder`` (``items.parquet``), else none.
    """
    if task_docs is not None:
        docs = {doc["item_id"]: doc for doc in task_docs}
    else:
        frame = load_items(folder)
        docs = {} if frame is None else frame.to_dict("index")
    rows = []
    for item in bundle.item_ids:
        fields = {k: v for k, v in docs.get(item, {}).items() if k not in ITEM_COLUMNS[:2]}
        if "weight" in fields:
            raise InputError(
                f"item {item!r}: its document has a field 'weight', which the items dataset "
                "uses for the bundle's item weight"
            )
        base = {"item_id": item, "content_hash": bundle.content_hashes[item]}
        rows.append({**base, "weight": bundle.weights[item], **fields})
    return rows


def _write_items(rows: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pa.Table.from_pylist(rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InputError(f"{DATA_FILE}: the documents cannot be stored in parquet ({exc})") from exc
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


# ---------------------------------------------------------------------------- writing
def write_repository(source: Source, card: str, into: Path) -> None:
    """Write the repository into the empty folder ``into``, then check what was written."""
    for name in source.bundle_files:
        shutil.copy2(source.folder / name, into / name)
    _write_items(list(source.rows), into / DATA_FILE)
    if source.task is not None:
        data = into / source.task.data_dir
        data.mkdir()
        for name in bundle_files(source.task.folder):
            shutil.copy2(source.task.folder / name, data / name)
        shutil.copy2(source.task.folder / ITEMS_JSONL, data / ITEMS_JSONL)
        shutil.copy2(source.task.yaml, into / source.task.yaml.name)
        (into / f"{HOOKS_MODULE}.py").write_text(hooks_module(), encoding="utf-8")
    (into / CARD_FILE).write_text(card, encoding="utf-8")
    _verify(source, into)


def _verify(source: Source, into: Path) -> None:
    """The written repository holds the bundle, intact, wherever a reader will look for it."""
    if load_bundle(into) != source.bundle:
        raise BundleError(f"{into}: the copied bundle differs from {source.folder}")
    if source.task is not None:
        data = into / source.task.data_dir
        if load_bundle(data) != source.bundle:
            raise BundleError(f"{data}: the task's bundle differs from {source.folder}")
        check_docs_match_bundle(source.bundle, read_docs(data / ITEMS_JSONL), where=str(data))
    written = sorted(str(p.relative_to(into)) for p in into.rglob("*") if p.is_file())
    if written != sorted(source.files()):
        raise BundleError(f"{into}: wrote {written}, expected {sorted(source.files())}")


def _check_target(target: Path, overwrite: bool) -> None:
    if not target.exists():
        return
    if not target.is_dir():
        raise InputError(f"{target}: exists and is not a folder")
    if not any(target.iterdir()):
        return
    if not overwrite:
        raise InputError(f"{target}: exists and is not empty; pass --overwrite to replace it")
    if not ((target / BUNDLE_FILE).is_file() and (target / CARD_FILE).is_file()):
        raise InputError(
            f"{target}: refusing to replace a folder that is not an earlier publication "
            f"(no {BUNDLE_FILE} and {CARD_FILE})"
        )


def write_to_folder(
    source: Source, card: str, target: str | os.PathLike[str], *, overwrite: bool = False
) -> Path:
    """Write the repository to ``target``: assembled beside it, then renamed into place.

    An existing non-empty ``target`` is refused unless ``overwrite``, and even then only an
    earlier publication (``bundle.json`` and ``README.md``) is replaced, so a mistyped path
    cannot wipe an unrelated folder. A failure leaves ``target`` as it was.
    """
    target = Path(target)
    _check_target(target, overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    with staging_folder(target.parent, f".{target.name}.") as staging:
        write_repository(source, card, staging)
        if target.exists():
            old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
            os.rename(target, old)
            try:
                os.rename(staging, target)
            except OSError:
                os.rename(old, target)
                raise
            shutil.rmtree(old)
        else:
            os.rename(staging, target)
    return target
