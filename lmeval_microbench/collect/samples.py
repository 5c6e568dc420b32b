"""lm-eval ``--log_samples`` output -> scores per item id, and run folders -> a matrix.

lm-eval writes ``OUTPUT/<model_name_sanitized>/`` with one ``samples_{task}_{timestamp}.jsonl``
per task and run and a ``results_{timestamp}.json`` beside them; the results json names the
model (``config.model_args``) and the filters of each task (``configs[task].filter_list``),
which old-format samples files do not record themselves.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from tqdm.auto import tqdm

from .._types import ModelId
from ..errors import InputError
from ..responses import ResponseMatrix
from ._records import as_list, iter_json_records, preview
from ._scores import SampleScores, ScoreOptions, scores_from_records
from .matrices import assemble_runs

_TIMESTAMP = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
_SAMPLES_NAME = re.compile(rf"^samples_(?P<task>.+)_(?P<ts>{_TIMESTAMP})\.jsonl?$")
_RESULTS_NAME = re.compile(rf"^results_(?P<ts>{_TIMESTAMP})\.json$")
_MODEL_ARG_KEYS = ("pretrained", "model", "path")


# ---------------------------------------------------------------------------- results json
def _load_results_json(path: Path) -> dict[str, Any]:
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: malformed results JSON ({exc})") from exc
    if not isinstance(payload, dict):
        raise InputError(f"{path}: expected a JSON object")
    return payload


def _results_for(samples_path: Path, task: str, timestamp: str | None) -> dict[str, Any] | None:
    """The results json of the same run: same timestamp, else the newest naming the task."""
    folder = samples_path.parent
    if timestamp is not None:
        same = folder / f"results_{timestamp}.json"
        if same.is_file():
            return _load_results_json(same)
    candidates = sorted(
        (p for p in folder.glob("results_*.json") if _RESULTS_NAME.match(p.name)), reverse=True
    )
    for path in candidates:
        payload = _load_results_json(path)
        if task in (payload.get("configs") or {}) or task in (payload.get("results") or {}):
            return payload
    return None


def _filter_names_from_results(results: Mapping[str, Any] | None, task: str) -> list[str] | None:
    """The task's filter names, in order, from ``configs[task].filter_list`` of a results json."""
    if results is None:
        return None
    config = (results.get("configs") or {}).get(task)
    if not isinstance(config, Mapping):
        return None
    filter_list = config.get("filter_list")
    if not filter_list:
        return ["none"]
    names = [f.get("name") for f in filter_list if isinstance(f, Mapping)]
    return [str(n) for n in names] if len(names) == len(filter_list) and all(names) else None


def _pretrained_from_model_args(model_args: Any) -> str | None:
    """``pretrained`` from lm-eval's ``model_args`` (a dict, or ``"pretrained=x,dtype=y"``)."""
    if isinstance(model_args, Mapping):
        value = next((model_args[k] for k in _MODEL_ARG_KEYS if model_args.get(k)), None)
        return str(value) if value else None
    if isinstance(model_args, str):
        for part in model_args.split(","):
            key, _, value = part.partition("=")
            if key.strip() in _MODEL_ARG_KEYS and value.strip():
                return value.strip()
    return None


# ---------------------------------------------------------------------------- one run
@dataclass
class SamplesRun:
    """A samples file with what its name and its results json say about the run."""

    path: Path

    @cached_property
    def _name_parts(self) -> tuple[str, str | None]:
        match = _SAMPLES_NAME.match(self.path.name)
        if match:
            return match["task"], match["ts"]
        stem = self.path.name.split(".", 1)[0]
        return stem.removeprefix("samples_"), None

    @property
    def task(self) -> str:
        return self._name_parts[0]

    @property
    def timestamp(self) -> str | None:
        return self._name_parts[1]

    @cached_property
    def results(self) -> dict[str, Any] | None:
        """Read on first use only: a file read alone may not need it."""
        return _results_for(self.path, self.task, self.timestamp)

    @property
    def filter_names(self) -> list[str] | None:
        return _filter_names_from_results(self.results, self.task)

    @property
    def model_id(self) -> ModelId:
        """``pretrained`` of ``model_args``, else ``model_name``, else the folder name."""
        if self.results is not None:
            config = self.results.get("config") or {}
            pretrained = _pretrained_from_model_args(config.get("model_args"))
            if pretrained:
                return pretrained
            if self.results.get("model_name"):
                return str(self.results["model_name"])
        return self.path.parent.name

    def read(
        self, options: ScoreOptions, filter_names: Sequence[str] | None = None
    ) -> SampleScores:
        return scores_from_records(
            list(iter_json_records(self.path)),
            options,
            source=str(self.path),
            task=self.task,
            filter_names=self.filter_names if filter_names is None else filter_names,
        )


def read_samples_file(
    path: str | os.PathLike[str],
    *,
    metric: str,
    filter: str | None = None,
    id_field: str | None = None,
    id_prefix: str = "",
    benchmark: str | None = None,
    stratum_field: str | None = None,
    filter_names: Sequence[str] | None = None,
) -> SampleScores:
    """Scores of one ``samples_{task}_{timestamp}.jsonl`` file, keyed by item id.

    Parameters
    ----------
    metric
        Per-item metric key (``acc``, ``acc_norm``, ``exact_match``...); an unknown one is an
        error listing those present.
    filter
        Filter name (``strict-match``) or position (``"0"``); may be left out when the task
        has one filter. Old-format files take names from ``configs[task].filter_list`` of the
        ``results_*.json`` beside them, else ``filter_names``, else positions only.
    id_field
        Doc field that identifies the item (``metabench_idx``, ``mb_sub_idx``, ``doc_hash``,
        a dotted path into the doc, or ``"content_hash"``); default: the first of
        :data:`DEFAULT_ID_FIELDS` present, else lm-eval's ``doc_hash``.
    id_prefix
        Text put before each id (``"arc."``); ``{task}``/``{benchmark}`` are filled in.
    benchmark
        ``items["benchmark"]``; default: the task name.
    stratum_field
        Doc field copied to ``items["stratum"]`` (e.g. ``subject``), None where absent.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: samples file not found")
    options = ScoreOptions(metric, filter, id_field, id_prefix, benchmark, stratum_field)
    return SamplesRun(path).read(options, filter_names)


# ---------------------------------------------------------------------------- run folders
def find_samples_files(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
) -> list[Path]:
    """Every ``samples_*.jsonl`` (or ``.json``) under the given files and folders, sorted."""
    found: set[Path] = set()
    for entry in as_list(paths):
        path = Path(entry)
        if path.is_file():
            found.add(path)
        elif path.is_dir():
            found.update(
                p for p in path.rglob("samples_*.json*") if p.suffix in (".jsonl", ".json")
            )
        else:
            raise InputError(f"{path}: no such file or folder")
    return sorted(found)


def newest_runs(
    runs: Sequence[tuple[ModelId, SamplesRun]], on_duplicate: Literal["newest", "error"]
) -> list[tuple[ModelId, SamplesRun]]:
    """One run per (model, task): the newest timestamp (then mtime); warn or raise on others."""
    by_key: dict[tuple[ModelId, str], list[SamplesRun]] = defaultdict(list)
    for model_id, run in runs:
        by_key[(model_id, run.task)].append(run)
    kept: list[tuple[ModelId, SamplesRun]] = []
    for (model_id, task), group in by_key.items():
        group = sorted(
            group, key=lambda r: (r.timestamp or "", r.path.stat().st_mtime, str(r.path))
        )
        newest, older = group[-1], group[:-1]
        if older:
            message = (
                f"model {model_id!r}, task {task!r}: {len(group)} runs found; "
                f"using the newest {newest.path}, ignoring {preview(str(r.path) for r in older)}"
            )
            if on_duplicate == "error":
                raise InputError(message + " (remove the old runs or pass on_duplicate='newest')")
            warnings.warn(message, stacklevel=3)
        kept.append((model_id, newest))
    return kept


def collect_samples(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    metric: str,
    filter: str | None = None,
    id_field: str | None = None,
    id_prefix: str = "",
    benchmark: str | None = None,
    stratum_field: str | None = None,
    tasks: Sequence[str] | None = None,
    model_id: ModelId | None = None,
    on_duplicate: Literal["newest", "error"] = "newest",
    check_content: bool = True,
    progress: bool = True,
) -> ResponseMatrix:
    """A model x item matrix from folders of lm-eval ``--log_samples`` output.

    ``paths`` are samples files, run folders or trees of them (lm-eval writes
    ``OUTPUT/<model_name_sanitized>/results_*.json`` + ``samples_*.jsonl``). The model id of
    a file is ``model_id`` when given (one model only), else ``pretrained`` from
    ``config.model_args`` of the results json of the same run, else its ``model_name``, else
    the folder name. Several runs of one task for one model: the newest is used with a
    warning (``on_duplicate="error"`` raises instead). ``tasks`` keeps only those tasks (each
    must be found). Items are sorted by id; a model without an item gets NaN there.

    With ``check_content`` an item id whose doc differs between runs (different
    :func:`content_hash`) is an error: the same id would stand for two questions.
    The other arguments are those of :func:`read_samples_file`.
    """
    files = find_samples_files(paths)
    if not files:
        raise InputError(f"no samples_*.jsonl files under {preview(as_list(paths))}")
    runs = [SamplesRun(path) for path in files]
    if tasks is not None:
        found = {r.task for r in runs}
        missing = [t for t in tasks if t not in found]
        if missing:
            raise InputError(
                f"tasks not found: {preview(missing)}; found: {preview(sorted(found), 20)}"
            )
        runs = [r for r in runs if r.task in set(tasks)]
    folders = {str(r.path.parent) for r in runs}
    if model_id is not None and len(folders) > 1:
        raise InputError(
            f"model_id={model_id!r} given but the samples come from several folders "
            f"({preview(sorted(folders))}): leave model_id out"
        )
    kept = newest_runs([(model_id or r.model_id, r) for r in runs], on_duplicate)
    options = ScoreOptions(metric, filter, id_field, id_prefix, benchmark, stratum_field)
    per_model: dict[ModelId, list[SampleScores]] = defaultdict(list)
    for model, run in tqdm(kept, desc="reading samples", unit="file", disable=not progress):
        per_model[model].append(run.read(options))
    source = f"collect_samples({preview(str(p) for p in as_list(paths))})"
    return assemble_runs(per_model, source=source, check_content=check_content)
