"""A real model through lm-eval, adaptively: the pool task's own requests, one batch per step.

The pool task is built by lm-eval itself (``TaskManager(include_path=...)``) from its YAML, so
its documents are checked against the pool bundle by the task's loader (ids and content
hashes). Each step asks the chosen documents through lm-eval's own path: the task's
``build_all_requests(samples=...)`` (exactly the requests a static run sends for those
documents), one call of ``lm.loglikelihood`` / ``lm.generate_until`` for the whole step, the
task's filters (``apply_filters``) and its ``process_results``. Nothing is re-implemented, so
a multiple-choice loglikelihood or a gsm8k generation + filter is scored as in the static task.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._io import canonical_json
from .._types import ItemId
from ..errors import InputError, MicrobenchError
from ..harness import lmeval_api
from ..harness.estimates import registered_bundle
from ..harness.hooks import GSM8K_ANSWER
from .engine import AdaptiveSession
from .pool import Pool, PoolEstimate, pool_state


@dataclass
class PoolTask:
    """An lm-eval task over a pool's documents, with the pool and each item's document index."""

    name: str
    task: Any
    pool: Pool
    doc_index: dict[ItemId, int]

    @property
    def metric(self) -> str:
        return self.pool.bundle.metric.name


@dataclass(frozen=True)
class Answer:
    """One asked item: its score and what lm-eval would log for it."""

    item: ItemId
    score: float
    unparsed: bool
    sample: dict[str, Any]


def load_pool_task(name: str, include_path: str | Path) -> PoolTask:
    """The task ``name`` from ``include_path``; refused unless its documents are one pool's."""
    task = _load_task(name, include_path)
    docs = list(task.eval_docs)
    names = {str(doc.get("bundle")) for doc in docs}
    if len(names) != 1:
        raise InputError(f"task {name!r}: documents of several bundles {sorted(names)[:3]}")
    bundle = registered_bundle(names.pop())  # the task's loader checked ids and hashes
    pool = pool_state(bundle)
    other = {str(doc.get("benchmark")) for doc in docs} - {bundle.benchmark}
    if other:
        raise InputError(
            f"task {name!r}: documents of benchmark {sorted(other)[0]!r} but pool "
            f"{bundle.name!r} is for {bundle.benchmark!r}"
        )
    index = {str(doc["item_id"]): k for k, doc in enumerate(docs)}
    missing = [item for item in pool.item_ids if item not in index]
    if missing:
        raise InputError(f"task {name!r} lacks pool items {missing[:5]} ({len(missing)} in all)")
    return PoolTask(name, task, pool, index)


def _load_task(name: str, include_path: str | Path) -> Any:
    """The lm-eval task from the pool folder only (indexing lm-eval's own tasks takes long)."""
    manager = lmeval_api.task_manager(include_path=str(include_path), include_defaults=False)
    if name not in manager.all_tasks:
        raise InputError(f"no pool task {name!r} in {include_path}")
    task = manager.load([name])["tasks"].get(name)
    if task is None:
        raise InputError(f"{name!r} is a group, not a pool task")
    return task


def ask_many(lm: Any, batches: Sequence[tuple[PoolTask, Sequence[ItemId]]]) -> list[list[Answer]]:
    """Ask several pool tasks at once: one model call per request type for all their items.

    A step of a run over several benchmarks is then one ``lm.loglikelihood`` (and at most one
    ``lm.generate_until``) call, so a GPU server gets every benchmark's prompts in one batch
    instead of one benchmark's few at a time. The answers are those that asking each task alone
    would give: the requests are the same and lm-eval returns responses in request order.
    """
    names = [pool_task.name for pool_task, _ in batches]
    if len(set(names)) != len(names):
        raise InputError(f"one step asks each pool task once, got {names}")
    wanted = [_build_requests(pool_task, items) for pool_task, items in batches]
    _send(lm, [req for pool_task, _ in batches for req in pool_task.task.instances])
    return [
        _answers(pool_task, items, docs)
        for (pool_task, items), docs in zip(batches, wanted, strict=True)
    ]


def _build_requests(pool_task: PoolTask, items: Sequence[ItemId]) -> list[int]:
    """The task's own requests for ``items`` (lm-eval's path); their document indices."""
    wanted = sorted(pool_task.doc_index[item] for item in items)
    pool_task.task.build_all_requests(samples=wanted, rank=0, world_size=1)
    return wanted


def _send(lm: Any, instances: Sequence[Any]) -> None:
    """One call of the model per request type; each response appended to its request."""
    by_type: dict[str, list[Any]] = defaultdict(list)
    for instance in instances:
        by_type[instance.request_type].append(instance)
    for request_type, requests in by_type.items():
        cloned = [req for req in requests for _ in range(req.repeats)]
        for response, req in zip(getattr(lm, request_type)(cloned), cloned, strict=True):
            req.resps.append(response)


def _answers(pool_task: PoolTask, items: Sequence[ItemId], wanted: list[int]) -> list[Answer]:
    """The task's filters and ``process_results`` over the answered requests, by item."""
    task = pool_task.task
    task.apply_filters()
    by_doc: dict[int, list[Any]] = defaultdict(list)
    for instance in task.instances:
        by_doc[instance.doc_id].append(instance)
    filter_key = next(iter(task.instances[0].filtered_resps))
    answers = {}
    for position, doc_index in enumerate(wanted):
        requests = sorted(by_doc[position], key=lambda req: req.idx)
        doc = requests[0].doc
        answers[str(doc["item_id"])] = _score(task, doc, doc_index, requests, filter_key)
    return [answers[item] for item in items]


def _score(task: Any, doc: Any, doc_index: int, requests: list[Any], key: str) -> Answer:
    filtered = [req.filtered_resps[key] for req in requests]
    metrics = task.process_results(doc, filtered)
    metric = next(m for m in metrics if not m.startswith("estimate"))
    score = float(metrics[metric])
    unparsed = _unparsed(task, doc, filtered)
    target = task.doc_to_target(doc)
    sample = {
        "doc_id": doc_index,
        "doc": doc,
        "target": target,
        "arguments": [req.args for req in requests],
        "resps": [req.resps for req in requests],
        "filtered_resps": filtered,
        "filter": key,
        "metrics": list(metrics),
        **lmeval_api.sample_hashes(doc, requests[0].arguments[0], str(target)),
        **metrics,
    }
    return Answer(str(doc["item_id"]), score, unparsed, sample)


def _unparsed(task: Any, doc: Any, filtered: list[Any]) -> bool:
    """A generation with no final answer the leaderboard's rule can read (scored 0 anyway)."""
    if task.OUTPUT_TYPE != "generate_until" or not isinstance(doc.get("answer"), str):
        return False
    if GSM8K_ANSWER.search(doc["answer"]) is None:
        return False
    return GSM8K_ANSWER.search(str(filtered[0])) is None


def model_arg(model_args: str, key: str) -> str | None:
    """The value of ``key`` in a ``--model_args`` string (``k=v,k2=v2``), or None if absent."""
    for part in model_args.split(","):
        name, _, value = part.partition("=")
        if name.strip() == key:
            return value.strip()
    return None


def default_device(model: str, device: str | None, model_args: str = "") -> str | None:
    """``device``, else for lm-eval's ``hf`` model the GPU when there is one, else the CPU.

    lm-eval's ``hf`` model defaults to ``cuda`` even where torch has none, and then fails
    for every model ("Torch not compiled with CUDA enabled"); a user without a GPU should not
    have to know to pass ``--device cpu``. A device named in ``model_args`` is left alone
    (lm-eval refuses it given twice).
    """
    named = model_arg(model_args, "device") is not None
    if device is not None or named or model not in ("hf", "hf-auto", "huggingface"):
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def make_lm(model: str, model_args: str, *, device: str | None, batch_size: str | None) -> Any:
    """The lm-eval model as ``lm-eval run`` makes it from the same four options."""
    extra = {"batch_size": batch_size, "device": default_device(model, device, model_args)}
    try:
        return lmeval_api.model_from_args(
            model, model_args, {k: v for k, v in extra.items() if v is not None}
        )
    except (OSError, ValueError, RuntimeError, AssertionError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(
            f"lm-eval could not load model {model!r} with --model_args {model_args!r}: "
            f"{type(exc).__name__}: {first[:300]}"
        ) from exc


# ---------------------------------------------------------------------------- the loop
@dataclass(frozen=True)
class RunOptions:
    """How a run picks, batches and stops (``seed`` seeds randomised selection)."""

    selector: str = "maxinfo"
    top: int = 5
    batch: int = 1
    max_items: int = 30
    target_se: float | None = None
    seed: int = 0
    level: float = 0.9

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class TaskResult:
    """What one task's adaptive run gave."""

    task: str
    estimate: PoolEstimate
    stop_reason: str
    answers: list[Answer]
    steps: list[dict[str, Any]]
    seconds: float
    resumed_items: int
    pool_items: int

    @property
    def unparsed(self) -> list[ItemId]:
        return [a.item for a in self.answers if a.unparsed]


def run_identity(model: str, model_args: str | None, pool_task: PoolTask) -> dict[str, Any]:
    """What a step log belongs to: the model (type and arguments) and the pool (task, bundle
    and the sha256 of its canonical JSON, so a rebuilt pool of the same name differs)."""
    bundle = pool_task.pool.bundle
    digest = hashlib.sha256(canonical_json(bundle.to_dict())).hexdigest()
    return {
        "model": model,
        "model_args": model_args or "",
        "task": pool_task.name,
        "pool": bundle.name,
        "pool_sha256": digest,
    }


def check_resumed_log(log: Path, steps: list[dict[str, Any]], identity: dict[str, Any]) -> None:
    """A log of another model or pool is refused, naming both; a log written before logs
    named their run (no ``run`` record) is resumed as before."""
    logged = steps[0].get("run") if steps else None
    if logged is None or logged == identity:
        return
    if not isinstance(logged, dict):
        raise InputError(f"{log}: step 1: 'run' must be an object naming the model and pool")
    differs = sorted(key for key in identity if logged.get(key) != identity[key])
    mine = {key: identity[key] for key in differs}
    theirs = {key: logged.get(key) for key in differs}
    raise InputError(
        f"{log}: the step log is of another run ({theirs}); this run is {mine}: resume it with "
        "the same model and pool, or start in another --output_path"
    )


def resume_steps(session: AdaptiveSession, steps: list[dict[str, Any]], log: Path) -> list[Answer]:
    """Record the logged ``steps`` in ``session`` and return their answers; a step whose
    fields are not lists of one length (items of the pool, scores in [0, 1], flags, sample
    records) is refused naming the log and the step, never half-recorded."""
    answers: list[Answer] = []
    for number, step in enumerate(steps, start=1):
        fields = [step.get(key) for key in ("items", "scores", "unparsed", "samples")]
        if not all(isinstance(f, list) for f in fields) or len({len(f) for f in fields}) != 1:
            raise InputError(
                f"{log}: step {number}: items, scores, unparsed and samples must be lists of "
                "one length"
            )
        items, scores, unparsed, samples = fields
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in scores):
            raise InputError(f"{log}: step {number}: scores must be numbers, got {scores[:5]}")
        try:
            session.record_items([str(i) for i in items], [float(x) for x in scores])
        except MicrobenchError as exc:
            raise InputError(f"{log}: step {number}: {exc}") from None
        answers += [
            Answer(str(i), float(x), bool(u), dict(d) if isinstance(d, dict) else {})
            for i, x, u, d in zip(items, scores, unparsed, samples, strict=True)
        ]
    return answers
