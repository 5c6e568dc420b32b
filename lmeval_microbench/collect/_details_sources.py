"""Where leaderboard details rows come from: the Hub (via ``datasets``) or a local copy.

Names follow the Open LLM Leaderboard: v1 repos ``open-llm-leaderboard/details_<org>__<model>``
with configs such as ``harness_hendrycksTest_<subject>_5``; v2 repos
``open-llm-leaderboard/<org>__<model>-details`` whose configs carry the model in front
(``<org>__<model>__leaderboard_mmlu_pro``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._types import ModelId
from ..errors import InputError
from ._records import Record, iter_json_records, preview

_DATA_SUFFIXES = (".parquet", ".jsonl", ".json")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_V2_SUFFIX = "-details"


# ---------------------------------------------------------------------------- names
def model_from_details_name(name: str) -> ModelId:
    """``details_org__model`` / ``org__model-details`` (repo or folder name) -> ``org/model``."""
    base = name.rsplit("/", 1)[-1]
    if base.startswith("details_"):
        base = base.removeprefix("details_")
    else:
        base = base.removesuffix(_V2_SUFFIX)
    return base.replace("__", "/", 1) if "__" in base else base


def details_model_id(source: str) -> ModelId:
    """The model of a details source: from the repo id, the folder, or a file's folder."""
    path = Path(source)
    if path.is_file():
        return model_from_details_name(path.parent.name)
    return model_from_details_name(path.name if path.is_dir() else source)


def _config_for_repo(repo_id: str, config: str) -> str:
    """v2 configs carry the model in front (``org__model__leaderboard_mmlu_pro``): add it."""
    if repo_id.endswith(_V2_SUFFIX) and "__" not in config:
        return f"{repo_id.rsplit('/', 1)[-1].removesuffix(_V2_SUFFIX)}__{config}"
    return config


def task_of_config(config: str) -> tuple[str, str | None]:
    """Benchmark and stratum of a leaderboard config name.

    ``harness_hendrycksTest_<subject>_5`` -> ``("mmlu", subject)``;
    ``harness_arc_challenge_25`` -> ``("arc_challenge", None)``; v2
    ``org__model__leaderboard_mmlu_pro`` -> ``("leaderboard_mmlu_pro", None)``.
    """
    name = config.rsplit("__", 1)[-1]
    match = re.match(r"^harness_hendrycksTest_(?P<subject>.+)_\d+$", name)
    if match:
        return "mmlu", match["subject"]
    match = re.match(r"^harness_(?P<task>.+?)(?:_\d+)?$", name)
    if match:
        return match["task"], None
    return name, None


# ---------------------------------------------------------------------------- loading
def _load_hub_rows(
    repo_id: str, config: str, split: str, cache_dir: str | None
) -> list[Mapping[str, Any]]:
    """Rows of a Hub dataset split via ``datasets`` (obeys ``HF_HUB_OFFLINE``).

    ``repo_id`` may also be a local folder in Hub layout (a ``README.md`` whose YAML header
    lists the configs and their split files, as a snapshot download of a details repo has).
    """
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - datasets is a dependency
        raise InputError("reading Hub details needs the 'datasets' package") from exc
    try:
        dataset = datasets.load_dataset(repo_id, name=config, split=split, cache_dir=cache_dir)
    except Exception as exc:
        offline = any(
            os.environ.get(name, "") not in ("", "0")
            for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
        )
        hint = (
            " (HF_HUB_OFFLINE is set: only datasets already in the local cache can load)"
            if offline
            else ""
        )
        raise InputError(
            f"{repo_id} [config {config!r}, split {split!r}]: could not load "
            f"({type(exc).__name__}: {exc}){hint}"
        ) from exc
    return list(dataset)


def _config_files(folder: Path, config: str) -> list[Path]:
    """Data files of ``config`` in a local copy: ``<folder>/<config>/*`` or ``<config>.*``."""
    sub = folder / config
    if sub.is_dir():
        return sorted(p for p in sub.rglob("*") if p.suffix in _DATA_SUFFIXES and p.is_file())
    return sorted(p for p in folder.glob(f"{config}.*") if p.suffix in _DATA_SUFFIXES)


def _no_config_error(folder: Path, config: str) -> InputError:
    present = sorted(
        p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.suffix in _DATA_SUFFIXES
    )
    return InputError(
        f"{folder}: no data for config {config!r}: expected {config}/*.parquet|jsonl or "
        f"{config}.parquet|jsonl; found {preview(present, 10) or 'no data files'}"
    )


def _read_local_rows(path: Path) -> list[Record]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except (OSError, ValueError) as exc:
            raise InputError(f"{path}: not a readable parquet file ({exc})") from exc
        return [Record(f"{path} row {k}", row) for k, row in enumerate(rows)]
    return list(iter_json_records(path))


def details_rows(
    source: str, config: str, split: str, cache_dir: str | None
) -> tuple[list[Record], str, str]:
    """Rows of one details source; returns (rows, label for errors, config as resolved).

    A file is read as it is; a folder holding ``<config>/`` or ``<config>.*`` (the config
    as given, or with the v2 model prefix) is read locally; a folder with a ``README.md``
    (Hub layout) or a Hub id goes through ``datasets``.
    """
    path = Path(source)
    if path.is_file():
        return _read_local_rows(path), str(path), config
    if path.is_dir():
        for resolved in dict.fromkeys((config, _config_for_repo(path.name, config))):
            files = _config_files(path, resolved)
            if not files and (path / resolved).is_dir():
                raise _no_config_error(path, resolved)
            if files:
                rows = [r for f in files for r in _read_local_rows(f)]
                return rows, f"{path} [{resolved}]", resolved
        if not (path / "README.md").is_file():
            raise _no_config_error(path, config)
    elif not _HUB_ID.match(source):
        raise InputError(f"{source}: not a file, a folder or a Hub dataset id (org/name)")
    resolved = _config_for_repo(path.name if path.is_dir() else source, config)
    label = f"{source} [{resolved}/{split}]"
    rows = _load_hub_rows(source, resolved, split, cache_dir)
    return [Record(f"{label} row {k}", row) for k, row in enumerate(rows)], label, resolved
