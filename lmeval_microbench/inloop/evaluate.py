"""One in-loop evaluation: micro tasks on a model in memory, through lm-eval's own API.

The model is evaluated as it is (no copy, no reload): put in eval mode, with gradients off,
and put back in the mode it was in. lm-eval's ``HFLM`` takes the model object and its
tokenizer; the tasks are found with the shipped task folders included (and ``include_path``,
for a user's own). The estimates are the ones lm-eval reports in its table (the micro tasks'
``estimate`` metrics), and the per-item answers of every task are kept for the change test of
:mod:`.callback`. With ``output_dir`` the run is written in lm-eval's own format into
``output_dir/step-{step}``, with ``revision=step{step}`` in its model arguments, so that
``microbench curve output_dir/step-*`` orders the steps by itself.
"""

from __future__ import annotations

import contextlib
import copy
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._types import ItemId
from ..errors import InputError
from .quiet import document_bar_off, in_memory_warnings_dropped, without_request_bars

ESTIMATE_KEYS = ("estimate,none", "estimate_lower,none", "estimate_upper,none")


@dataclass(frozen=True)
class InLoopEstimate:
    """One task's estimate at one step (fractions), and its subset metric."""

    task: str
    bundle: str
    """The bundle the task's estimate comes from (``registered_bundle(bundle)``)."""
    value: float
    lower: float
    upper: float
    subset_metric: str
    subset_score: float
    scores: dict[ItemId, float] = field(default_factory=dict)
    """The item-level scores of the estimated metric, by item id."""

    def log_values(self, prefix: str = "microbench") -> dict[str, float]:
        """Flat ``{name: value}`` for a training logger."""
        base = f"{prefix}/{self.task}"
        return {
            f"{base}/estimate": self.value,
            f"{base}/estimate_lower": self.lower,
            f"{base}/estimate_upper": self.upper,
            f"{base}/{self.subset_metric}": self.subset_score,
        }


@dataclass(frozen=True)
class InLoopResult:
    """Every task's estimate at one step, how long it took and where it was written."""

    step: int | None
    estimates: dict[str, InLoopEstimate]
    seconds: float
    output: Path | None = None


def task_manager(include_path: str | os.PathLike[str] | None = None) -> Any:
    """lm-eval's task index with the shipped micro tasks (and a user's folder)."""
    from ..harness import include_path as shipped
    from ..harness import lmeval_api

    paths = [str(shipped())] + ([str(include_path)] if include_path else [])
    # indexing lm-eval's own tasks takes seconds per call and none of them is a micro task
    return lmeval_api.task_manager(include_path=paths, include_defaults=False)


def check_tasks(tasks: Sequence[str], include_path: str | os.PathLike[str] | None = None) -> Any:
    """The task manager, once every task name is known to it; else an error naming them
    (a training script should fail before its first step, not at step N)."""
    if not tasks:
        raise InputError("no micro task named: give tasks such as ['microbench_mmlu']")
    manager = task_manager(include_path)
    known = set(manager.all_tasks)
    unknown = [t for t in tasks if t not in known]
    if unknown:
        raise InputError(
            f"unknown tasks {unknown}: not shipped micro tasks nor in {include_path or 'any'} "
            "include path (lm-eval's `lm-eval ls tasks` lists them)"
        )
    return manager


@contextlib.contextmanager
def evaluating(model: Any) -> Iterator[None]:
    """Eval mode and no gradients for the block; the model's own mode afterwards."""
    import torch

    was_training = bool(getattr(model, "training", False))
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        if was_training:
            model.train()


def evaluate_model(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[str],
    *,
    step: int | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    model_name: str = "model",
    batch_size: int | str = 8,
    include_path: str | os.PathLike[str] | None = None,
    manager: Any = None,
    progress: bool = False,
) -> InLoopResult:
    """Run ``tasks`` on ``model`` (a transformers model in memory) and return the estimates.

    For a hand-written training loop::

        from lmeval_microbench.inloop import evaluate_model

        for step, batch in enumerate(loader, 1):
            ...  # forward, backward, optimizer step
            if step % 200 == 0:
                result = evaluate_model(model, tokenizer, ["microbench_mmlu"], step=step,
                                        output_dir="evals")
                print(step, result.estimates["microbench_mmlu"].value)

    ``progress``: show lm-eval's progress bars (off by default: see :mod:`.quiet`).
    """
    from ..harness import lmeval_api

    manager = manager or check_tasks(tasks, include_path)
    tokenizer = with_pad_token(tokenizer)
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        stack.enter_context(evaluating(model))
        stack.enter_context(environment_collected_once())
        stack.enter_context(in_memory_warnings_dropped())
        if not progress:
            stack.enter_context(document_bar_off())
        lm = lmeval_api.hf_model(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)
        lm = lm if progress else without_request_bars(lm)
        tracker = _tracker(output_dir, step)
        results = lmeval_api.simple_evaluate(
            model=lm,
            tasks=list(tasks),
            task_manager=manager,
            log_samples=True,
            evaluation_tracker=tracker,
        )
    seconds = time.perf_counter() - started
    estimates = {task: _estimate(task, results) for task in tasks if task in results["results"]}
    folder = _save(tracker, results, model_name, step) if tracker is not None else None
    return InLoopResult(step, estimates, seconds, folder)


def with_pad_token(tokenizer: Any) -> Any:
    """The tokenizer, or a copy of it padding with its end-of-text token: lm-eval batches
    requests and needs a pad token, and the training's own tokenizer is not changed."""
    if getattr(tokenizer, "pad_token", None) is not None:
        return tokenizer
    if getattr(tokenizer, "eos_token", None) is None:
        raise InputError("the tokenizer has neither a pad token nor an end-of-text token to pad")
    padded = copy.deepcopy(tokenizer)
    padded.pad_token = padded.eos_token
    return padded


_ENVIRONMENT: dict[str, Any] = {}


@contextlib.contextmanager
def environment_collected_once() -> Iterator[None]:
    """lm-eval describes the environment in every result (``pip list`` and more in
    subprocesses: 1.6 s of a 5 s evaluation of a tiny model); a training run's environment
    does not change between evaluations, so it is collected on the first and copied after."""
    from ..harness import lmeval_api

    evaluator = lmeval_api.evaluator_module()
    collect = evaluator.add_env_info

    def copied(results: dict[str, Any]) -> None:
        if not _ENVIRONMENT:
            fresh: dict[str, Any] = {}
            collect(fresh)
            _ENVIRONMENT.update(fresh)
        results.update(copy.deepcopy(_ENVIRONMENT))

    evaluator.add_env_info = copied
    try:
        yield
    finally:
        evaluator.add_env_info = collect


def _tracker(output_dir: str | os.PathLike[str] | None, step: int | None) -> Any:
    if output_dir is None:
        return None
    from ..harness import lmeval_api

    folder = Path(output_dir) / (f"step-{step}" if step is not None else "final")
    return lmeval_api.evaluation_tracker(str(folder))


def _estimate(task: str, results: dict[str, Any]) -> InLoopEstimate:
    """The task's estimate, and the item scores of the metric its bundle estimates."""
    found = results["results"][task]
    value, lower, upper = (float(found.get(key, float("nan"))) for key in ESTIMATE_KEYS)
    samples = results.get("samples", {}).get(task, [])
    bundle = next((str(s["doc"]["bundle"]) for s in samples if "bundle" in s.get("doc", {})), "")
    metric = _bundle_metric(bundle) or _first_metric(found)
    scores = {
        s["doc"]["item_id"]: float(s[metric])
        for s in samples
        if s.get("doc", {}).get("item_id") is not None
        and isinstance(s.get(metric), (int, float, bool))
    }
    subset = float(found.get(f"{metric},none", float("nan")))
    return InLoopEstimate(task, bundle, value, lower, upper, metric, subset, scores)


def _bundle_metric(bundle: str) -> str | None:
    from ..errors import BundleError
    from ..harness.estimates import registered_bundle

    try:
        return registered_bundle(bundle).metric.name
    except BundleError:
        return None


def _first_metric(found: dict[str, Any]) -> str:
    names = (
        k.split(",")[0]
        for k in found
        if k.endswith(",none") and k not in ESTIMATE_KEYS and "_stderr" not in k
    )
    return next(names, "score")


def _save(tracker: Any, results: dict[str, Any], model_name: str, step: int | None) -> Path:
    """lm-eval's own files, named so that ``microbench curve`` knows the model and step."""
    args = f"pretrained={model_name}" + (f",revision=step{step}" if step is not None else "")
    results["config"]["model_args"] = args
    tracker.general_config_tracker.model_name = model_name
    tracker.general_config_tracker.model_name_sanitized = ""  # files straight into the folder
    samples = results.pop("samples", {})
    tracker.save_results_aggregated(results=results, samples=samples)
    for task in results["configs"]:
        if task in samples:
            tracker.save_results_samples(task_name=task, samples=samples[task])
    results["samples"] = samples
    return Path(tracker.output_path)
