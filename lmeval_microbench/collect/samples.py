"""lm-eval ``--log_samples`` output -> scores per item id, and run folders -> a matrix.

lm-eval writes ``OUTPUT/<model_name_sanitized>/`` with one ``samples_{task}_{timestamp}.jsonl``
per task and run and a ``results_{timestamp}.json`` beside them; the results json names the
model (``config.model_args``) and the filters of each task (``configs[task].filter_list``),
which old-format samples files do not record themselves.
"""

from __future__ import annotations

import os
import re
import warnings
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from tqdm.auto import tqdm

from .._json import read_json
from .._types import ModelId
from ..errors import BundleError, InputError, ItemMismatchError
from ..responses import ResponseMatrix
from ._filters import TaskFilters, task_filters
from ._records import as_list, iter_json_records, preview
from ._scores import SampleScores, ScoreOptions, scores_from_records
from .matrices import assemble_runs

_TIMESTAMP = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
_SAMPLES_NAME = re.compile(rf"^samples_(?P<task>.+)_(?P<ts>{_TIMESTAMP})\.jsonl?$")
_RESULTS_NAME = re.compile(rf"^results_(?P<ts>{_TIMESTAMP})\.json$")
_MODEL_ARG_KEYS = ("pretrained", "model", "path")


# ---------------------------------------------------------------------------- results json
def _load_results_json(path: Path) -> dict[str, Any]:
    """The results json, parsed strictly (lm-eval writes NaN for a metric it could not
    compute); every error names the file."""
    payload = read_json(path, allow_nan=True)
    if not isinstance(payload, dict):
        raise InputError(f"{path}: expected a JSON object")
    return payload


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
    """A samples file with what its name and its run's results json say about the run.

    Only the results json of the same run (``results_<timestamp>.json`` with the file's
    timestamp) is read: another run's, even of the same task, may be another model's or
    configuration's. Errors about its content name that file.
    """

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
    def results_path(self) -> Path | None:
        """``results_<timestamp>.json`` of the same run beside the file, None when absent."""
        if self.timestamp is None:
            return None
        path = self.path.parent / f"results_{self.timestamp}.json"
        return path if path.is_file() else None

    @cached_property
    def results(self) -> dict[str, Any] | None:
        """Read on first use only: a file read alone may not need it."""
        return None if self.results_path is None else _load_results_json(self.results_path)

    def results_object(self, *keys: str) -> Mapping[str, Any]:
        """``results[k1][k2]...`` ({} when absent); anything but an object is an error."""
        node: Any = self.results or {}
        for depth, key in enumerate(keys, start=1):
            node = node.get(key)
            if node is None:
                return {}
            if not isinstance(node, Mapping):
                name = ".".join(keys[:depth])
                raise InputError(
                    f"{self.results_path}: {name!r} is a {type(node).__name__}, expected an object"
                )
        return node

    @property
    def task_config(self) -> Mapping[str, Any]:
        """``configs[task]`` of the results json ({} when unknown)."""
        return self.results_object("configs", self.task)

    @property
    def task_results(self) -> Mapping[str, Any]:
        """``results[task]`` of the results json: the metrics the run reported."""
        return self.results_object("results", self.task)

    @property
    def task_version(self) -> Any:
        return self.results_object("versions").get(self.task)

    @property
    def filters(self) -> TaskFilters | None:
        """The task's filters from ``configs[task].filter_list`` (None without a config)."""
        config = self.task_config
        if not config:
            return None
        return task_filters(
            config.get("filter_list"), f"{self.results_path}: configs.{self.task}.filter_list"
        )

    @property
    def n_samples(self) -> int | None:
        """Documents the run evaluated (``n-samples[task].effective``), None when unknown."""
        count = self.results_object("n-samples", self.task).get("effective")
        if count is None:
            return None
        if isinstance(count, bool) or not isinstance(count, int):
            raise InputError(
                f"{self.results_path}: n-samples.{self.task}.effective is {count!r}, "
                "expected an integer"
            )
        return count

    def check_count(self, n_docs: int) -> None:
        """A file cut at a line boundary parses fine: compare with the run's own count."""
        expected = self.n_samples
        if expected is not None and expected != n_docs:
            raise InputError(
                f"{self.path}: {n_docs} documents, but {self.results_path.name} reports "
                f"n-samples {expected} for task {self.task!r}: the file looks cut short or "
                "edited; use the file the run wrote"
            )

    @cached_property
    def _model(self) -> tuple[ModelId, bool]:
        config = self.results_object("config")
        pretrained = _pretrained_from_model_args(config.get("model_args"))
        if pretrained:
            return pretrained, False
        if self.results and self.results.get("model_name"):
            return str(self.results["model_name"]), False
        if self.results is None:
            folder = self.path.parent
            others = sorted(p.name for p in folder.iterdir() if _RESULTS_NAME.match(p.name))
            if others:
                expected = (
                    f"results_{self.timestamp}.json"
                    if self.timestamp
                    else "results json (its name has no timestamp)"
                )
                raise InputError(
                    f"{self.path}: no {expected} of the same run beside it, and the results "
                    f"of other runs there ({preview(others)}) may be another model's: restore "
                    "the run's results json, or give the model id (model_id= in Python, "
                    "--model-id on the command line)"
                )
        return self.path.parent.name, True

    @property
    def model_id(self) -> ModelId:
        """``pretrained`` of ``model_args``, else ``model_name``, of the run's results json;
        else the folder's name when no results json is beside the file (see
        :attr:`named_by_folder`); refused when only other runs' results are there."""
        return self._model[0]

    @property
    def named_by_folder(self) -> bool:
        """True when :attr:`model_id` is only the folder's name: callers say so."""
        return self._model[1]

    def read(self, options: ScoreOptions, filters: TaskFilters | None = None) -> SampleScores:
        """Scores of the file; ``filters`` override the results json's (names only)."""
        with self.named_in_errors():
            scores = scores_from_records(
                list(iter_json_records(self.path)),
                options,
                source=str(self.path),
                task=self.task,
                filters=self.filters if filters is None else filters,
            )
            self.check_count(len(scores.scores))
        return scores

    @contextmanager
    def named_in_errors(self) -> Iterator[None]:
        """Errors raised inside name this run: one of ours whose message names neither the
        samples file nor its results json gets the samples file put in front."""
        try:
            yield
        except (InputError, BundleError, ItemMismatchError) as exc:
            text = str(exc)
            named = [str(self.path)]
            if self.results_path is not None:
                named.append(str(self.results_path))
            if any(name in text for name in named):
                raise
            raise type(exc)(f"{self.path}: {text}") from exc


def folder_model_notes(runs: Iterable[SamplesRun]) -> list[str]:
    """One note per folder whose samples files are named after the folder, not a results json."""
    folders = sorted({run.path.parent for run in runs if run.named_by_folder})
    return [
        f"{folder}: model id {folder.name!r} is the name of the folder (no results json "
        "beside its samples files names the model)"
        for folder in folders
    ]


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
        has one filter. Old-format files take names from ``filter_names``, else from
        ``configs[task].filter_list`` of the run's ``results_<timestamp>.json``, else
        positions only; see :mod:`._filters` for how their lines are told apart.
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
    names = TaskFilters(tuple(filter_names)) if filter_names is not None else None
    return SamplesRun(path).read(options, names)


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
                p  # a folder named like a samples file is not one (its files are still found)
                for p in path.rglob("samples_*.json*")
                if p.suffix in (".jsonl", ".json") and p.is_file()
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
    the folder name with a warning; a file whose run's results json is missing while other
    runs' are there is refused (their model may be another). Several runs of one task for
    one model: the newest is used with a warning (``on_duplicate="error"`` raises instead).
    ``tasks`` keeps only those tasks (each must be found). Items are sorted by id; a model
    without an item gets NaN there.

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
    if model_id is None:
        for note in folder_model_notes(run for _, run in kept):
            warnings.warn(note, UserWarning, stacklevel=2)
    options = ScoreOptions(metric, filter, id_field, id_prefix, benchmark, stratum_field)
    per_model: dict[ModelId, list[SampleScores]] = defaultdict(list)
    for model, run in tqdm(kept, desc="reading samples", unit="file", disable=not progress):
        per_model[model].append(run.read(options))
    source = f"collect_samples({preview(str(p) for p in as_list(paths))})"
    return assemble_runs(per_model, source=source, check_content=check_content)
