"""One round's lm-eval runs on a cluster: the commands written, and their outputs read back.

A planned run is an ordinary ``lm_eval`` command line (lm-eval's ``--samples`` takes the exact
document indices per task as JSON), so any scheduler can run it where the models are. What
comes back is lm-eval's own output folder (``results_<ts>.json`` + ``samples_<task>_<ts>.jsonl``),
read with :mod:`..collect.samples` and joined on document and item ids, never on line
positions: a run that stopped early, ran another model or other documents is refused with
what is wrong, so a model's scores are only ever the ones its plan asked for.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..collect._records import iter_json_records, preview
from ..collect._scores import ScoreOptions
from ..collect.samples import SamplesRun, find_samples_files, newest_runs
from ..errors import InputError
from .live import ALLOW_MISSING, TaskInfo

LM_EVAL = "lm_eval"
"""The lm-eval console script every planned line starts with (``lm-eval`` is the same)."""

StoredScores = dict[str, dict[str, list[Any]]]
"""``task -> document index (text) -> [item id, score]``: one model's scores as state.json
keeps them (JSON object keys are text)."""


def model_slugs(names: Sequence[str]) -> dict[str, str]:
    """A folder name per model: its name with path separators and odd characters as ``_``;
    names that would share a folder (also only by case) get a short hash of the name."""
    base = {
        name: re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")[:80] or "model" for name in names
    }
    seen: dict[str, int] = {}
    for slug in base.values():
        seen[slug.lower()] = seen.get(slug.lower(), 0) + 1
    return {
        name: slug
        if seen[slug.lower()] == 1
        else f"{slug}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
        for name, slug in base.items()
    }


def lm_eval_argv(
    *,
    model: str,
    model_args: str,
    docs: Mapping[str, Sequence[int]],
    include_path: str,
    output_path: Path,
    batch_size: str,
    device: str | None,
) -> list[str]:
    """The lm-eval command of one run: exactly ``docs`` (task -> document indices), samples
    logged, missing items allowed (the estimate lm-eval prints is then an imputed one).

    ``--device`` is written only when given and the model's arguments name none (lm-eval
    refuses both): else the node that runs the line picks its own (lm-eval's hf model takes
    the GPU when there is one), not the machine that plans.
    """
    argv = [LM_EVAL, "--model", model, "--model_args", model_args, "--tasks", ",".join(docs)]
    argv += ["--include_path", include_path]
    argv += ["--samples", json.dumps({t: list(d) for t, d in docs.items()}, separators=(",", ":"))]
    argv += ["--log_samples", "--output_path", str(output_path), "--batch_size", str(batch_size)]
    if device and "device" not in _args_dict(model_args):
        argv += ["--device", device]
    return [*argv, "--metadata", json.dumps(ALLOW_MISSING)]


def command_line(argv: Sequence[str]) -> str:
    """``argv`` as one POSIX shell line (every argument quoted where it needs to be)."""
    return " ".join(shlex.quote(arg) for arg in argv)


# ---------------------------------------------------------------------------- reading back
def _args_dict(value: Any) -> dict[str, str]:
    """``model_args`` as lm-eval logs them (a dict, or the ``k=v,k2=v2`` text) -> text values."""
    if isinstance(value, Mapping):
        return {str(k).strip(): str(v).strip() for k, v in value.items()}
    if isinstance(value, str):
        pairs = (part.partition("=") for part in value.split(",") if part.strip())
        return {k.strip(): v.strip() for k, _, v in pairs}
    return {}


def _same_value(logged: str | None, planned: str) -> bool:
    """lm-eval turns ``1`` into 1 and ``true`` into True when it parses ``--model_args``."""
    if logged is None:
        return False
    if logged == planned or logged.lower() == planned.lower():
        return True
    try:
        return float(logged) == float(planned)
    except ValueError:
        return False


def check_model(run: SamplesRun, model: str, model_args: str) -> None:
    """The run's results json names the planned model: every planned ``--model_args`` key
    with its value (lm-eval may add keys of its own), and the same ``--model``."""
    config = run.results_object("config")
    logged = _args_dict(config.get("model_args"))
    if not logged:
        raise InputError(
            f"{run.results_path}: names no model (no config.model_args): not the results of "
            "an lm_eval run"
        )
    planned = _args_dict(model_args)
    differ = [k for k, v in planned.items() if not _same_value(logged.get(k), v)]
    if differ or str(config.get("model", model)) != model:
        shown = config.get("model_args")
        raise InputError(
            f"{run.results_path}: the run is of --model {config.get('model')} --model_args "
            f"{shown!r}, the plan's is --model {model} --model_args {model_args!r}: another "
            "model's output"
        )


def _check_version(run: SamplesRun, info: TaskInfo) -> None:
    version = run.task_version
    if version is not None and str(version) != str(info.version):
        raise InputError(
            f"{run.results_path}: task {info.name!r} ran as version {version}, the ranking "
            f"uses version {info.version}: rank models on one task version"
        )


def _logged_docs(run: SamplesRun) -> dict[int, str | None]:
    """``document index -> item id`` of every line of the samples file."""
    logged: dict[int, str | None] = {}
    for record in iter_json_records(run.path):
        doc_id = record.data.get("doc_id")
        if isinstance(doc_id, bool) or not isinstance(doc_id, int):
            raise InputError(f"{record.where}: no integer doc_id: not an lm-eval samples line")
        doc = record.data.get("doc")
        item = doc.get("item_id") if isinstance(doc, Mapping) else None
        logged[doc_id] = None if item is None else str(item)
    return logged


def _check_docs(
    run: SamplesRun, info: TaskInfo, planned: Sequence[int], logged: Mapping[int, str | None]
) -> None:
    """The file holds exactly the planned documents, each the task's own item."""
    extra = sorted(set(logged) - set(planned))
    if extra:
        raise InputError(
            f"{run.path}: documents {preview(extra)} of task {info.name!r} are not in this "
            "round's plan: another round's or another selection's output"
        )
    missing = sorted(set(planned) - set(logged))
    if missing:
        raise InputError(
            f"{run.path}: {len(planned) - len(missing)} of the {len(planned)} planned documents "
            f"of task {info.name!r} (missing doc ids {preview(missing)}): the run is incomplete"
        )
    for doc_id in planned:
        expected = info.item_ids[doc_id] if doc_id < len(info.item_ids) else None
        if logged[doc_id] != expected:
            raise InputError(
                f"{run.path}: document {doc_id} of task {info.name!r} is item "
                f"{logged[doc_id]!r}, the task's is {expected!r}: other documents (was the "
                "task folder changed since the plan?)"
            )


def _newest(name: str, task: str, runs: Sequence[SamplesRun], folder: Path) -> SamplesRun:
    """The newest run of ``task`` in the folder (a warning names older ones)."""
    mine = [run for run in runs if run.task == task]
    if not mine:
        found = sorted({run.task for run in runs})
        raise InputError(
            f"no samples file of task {task!r} in {folder} (found: {preview(found) or 'none'}): "
            "the run has not finished, or ran other tasks"
        )
    ((_, run),) = newest_runs([(name, run) for run in mine], "newest")
    if run.results is None:
        raise InputError(
            f"{run.path}: no results json of the same run beside it: the run did not finish"
        )
    return run


def read_run(
    folder: Path,
    *,
    name: str,
    model: str,
    model_args: str,
    docs: Mapping[str, Sequence[int]],
    tasks: Mapping[str, TaskInfo],
) -> StoredScores:
    """The scores one planned run wrote into ``folder``, by task and document index.

    Anything but the planned documents of the planned model, complete and of the ranking's
    task versions, is an :class:`InputError` saying what is wrong (the caller adds which
    model and folder).
    """
    if not folder.is_dir():
        raise InputError("no output folder: its command has not run yet, or wrote elsewhere")
    runs = [SamplesRun(path) for path in find_samples_files(folder)]
    if not runs:
        raise InputError(
            "no samples_*.jsonl in it: its command has not finished (or ran without --log_samples)"
        )
    stored: StoredScores = {}
    for task, planned in docs.items():
        info = tasks[task]
        run = _newest(name, task, runs, folder)
        check_model(run, model, model_args)
        _check_version(run, info)
        logged = _logged_docs(run)
        _check_docs(run, info, planned, logged)
        options = ScoreOptions(info.bundle.metric.name, id_field="item_id")
        scores = run.read(options).scores
        unscored = [d for d in planned if logged[d] not in scores]
        if unscored:
            raise InputError(
                f"{run.path}: no {options.metric} score read for documents {preview(unscored)}"
            )
        stored[task] = {str(d): [logged[d], float(scores[logged[d]])] for d in sorted(planned)}
    return stored
