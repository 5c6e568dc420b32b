"""Adaptive runs of several benchmarks at once: every step asks all of them in one batch.

One benchmark at a time, a 30-item run of six benchmarks is 180 model calls of 1-4 prompts
each: a GPU server waits on Python between them. Here each step proposes the next items of
every benchmark still running, sends all their requests in one call per request type
(:func:`.runner.ask_many`), and records each benchmark's answers in its own session and step
log. Each benchmark's selection depends only on its own answers, so the items asked and the
estimates are those of running the benchmarks one after another (tested); only the order of
the model calls changes.

The loop drives one model in one process. Under a multi-process launch (``accelerate
launch``, ``torchrun``) every rank would run the whole loop and write the same logs, so it is
refused (:func:`refuse_multi_process`); a large model is spread over GPUs within the one
process (``parallelize=True``, vLLM's ``tensor_parallel_size``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from .engine import AdaptiveSession
from .pool import estimate_pool
from .runlog import append_step, read_steps
from .runner import (
    Answer,
    PoolTask,
    RunOptions,
    TaskResult,
    ask_many,
    check_resumed_log,
    model_arg,
    resume_steps,
)
from .selection import make_selector
from .stopping import StoppingRule


def refuse_multi_process(environ: Mapping[str, str] = os.environ) -> None:
    """An :class:`InputError` under ``accelerate launch``/``torchrun`` with more than one rank."""
    world = environ.get("WORLD_SIZE", "1")
    if world.strip() not in ("", "1") or any(
        environ.get(name, "0").strip() not in ("", "0") for name in ("RANK", "LOCAL_RANK")
    ):
        raise InputError(
            f"adaptive runs drive one model in one process, but this is one of {world} "
            "processes (WORLD_SIZE/RANK set by accelerate launch or torchrun): every rank would "
            "run the same loop and write the same step logs. Run it as a single process; a "
            "model too large for one GPU is spread with --model_args parallelize=True (hf) or "
            "tensor_parallel_size=N (vllm)"
        )


def refuse_engine_per_call(model: str, model_args: str) -> None:
    """An :class:`InputError` for lm-eval's vLLM model with ``data_parallel_size`` above 1.

    That model starts its data-parallel engines anew inside every call (Ray actors, shut down
    after the call), and an adaptive run calls the model once per step: the weights would be
    loaded data_parallel_size times per step. One engine (``data_parallel_size=1``, with
    ``tensor_parallel_size`` to spread a large model) stays loaded for the whole run.
    """
    value = model_arg(model_args, "data_parallel_size")
    if model == "vllm" and value not in (None, "", "1"):
        raise InputError(
            f"--model vllm with data_parallel_size={value}: lm-eval's vLLM model "
            "starts its data-parallel engines anew in every call, and an adaptive run calls "
            "the model once per step, so the weights would load again at every step. Use "
            "data_parallel_size=1 (tensor_parallel_size=N spreads a large model over N "
            "GPUs), or run one adaptive run per GPU side by side (CUDA_VISIBLE_DEVICES)"
        )


@dataclass
class TaskRun:
    """One benchmark's run inside an interleaved run: its session, log and answers so far."""

    pool_task: PoolTask
    options: RunOptions
    log: Path
    identity: dict[str, Any] | None
    session: AdaptiveSession
    steps: list[dict[str, Any]]
    answers: list[Answer]
    resumed: int
    reason: str | None = None
    seconds: float = 0.0
    pending: list[Any] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        pool_task: PoolTask,
        options: RunOptions,
        log: Path,
        *,
        resume: bool,
        identity: dict[str, Any] | None,
    ) -> TaskRun:
        """A fresh run, or the logged steps of ``log`` recorded again (``resume``)."""
        pool = pool_task.pool
        session = AdaptiveSession(
            pool.params,
            selector=make_selector(options.selector, top=options.top),
            rule=StoppingRule(options.max_items, options.target_se),
            batch=options.batch,
            seed=options.seed,
            prior_mean=pool.state.prior_mean,
            prior_sd=pool.state.prior_sd,
        )
        steps = read_steps(log) if resume else []
        if steps and steps[0].get("options") != options.to_dict():
            raise InputError(
                f"{log}: logged with other options {steps[0].get('options')}; resume with the "
                "same options or start in another --output_path"
            )
        if not resume and log.exists():
            raise InputError(
                f"{log} exists: pass --resume to continue it, or another --output_path"
            )
        if identity is not None:
            check_resumed_log(log, steps, identity)
        answers = resume_steps(session, steps, log)
        run = cls(pool_task, options, log, identity, session, steps, answers, len(answers))
        run.reason = session.stop_reason()
        return run

    def next_items(self) -> list[str]:
        """Propose this step's items (kept until :meth:`record`)."""
        self.pending = list(self.session.propose()[0])
        return [self.pool_task.pool.params.item_ids[k] for k in self.pending]

    def record(self, batch: list[Answer]) -> dict[str, Any]:
        """Record the step's answers in the session and append the step to the log."""
        chosen = np.asarray(self.pending)
        self.session.record(chosen[None, :], np.array([[a.score for a in batch]]))
        theta, se = self.session.ability()
        record = {
            "step": self.session.steps,
            "items": [a.item for a in batch],
            "scores": [a.score for a in batch],
            "unparsed": [a.unparsed for a in batch],
            "theta": float(theta[0]),
            "se": float(se[0]),
            "samples": [a.sample for a in batch],
        }
        if self.session.steps == 1:
            record["options"] = self.options.to_dict()
            if self.identity is not None:
                record["run"] = self.identity
        append_step(self.log, record)
        self.steps.append(record)
        self.answers += batch
        self.reason = self.session.stop_reason()
        return record

    def result(self) -> TaskResult:
        pool = self.pool_task.pool
        estimate = estimate_pool(pool, {a.item: a.score for a in self.answers}, self.options.level)
        return TaskResult(
            self.pool_task.name,
            estimate,
            self.reason or "",
            self.answers,
            self.steps,
            self.seconds,
            self.resumed,
            len(pool.item_ids),
        )


def step_line(run: TaskRun, record: Mapping[str, Any]) -> str:
    """'TASK: step k of at most N, m of at most M items asked, ability se s'."""
    options = run.options
    most = -(-options.max_items // options.batch)  # ceil: the steps the item budget allows
    target = "" if options.target_se is None else f" (stops at {options.target_se:g})"
    return (
        f"{run.pool_task.name}: step {record['step']} of at most {most}, {len(run.answers)} of "
        f"at most {options.max_items} items asked, ability se {record['se']:.2f}{target}"
    )


def run_tasks(
    lm: Any,
    tasks: Sequence[tuple[PoolTask, Path, dict[str, Any] | None]],
    options: RunOptions,
    *,
    resume: bool = False,
    report: Callable[[str], None] | None = None,
) -> list[TaskResult]:
    """Run every ``(pool task, step log, identity)`` adaptively, all benchmarks in each step.

    ``identity`` (:func:`.runner.run_identity`) is written into each log's first step and
    checked on resume. ``report`` gets a line per benchmark per step. A model that raises
    leaves every finished step in the logs: the error names them and ``--resume`` goes on.
    A task's ``seconds`` is the wall time from the start until it stopped.
    """
    refuse_multi_process()
    runs = [
        TaskRun.start(task, options, log, resume=resume, identity=identity)
        for task, log, identity in tasks
    ]
    started = time.perf_counter()
    while active := [run for run in runs if run.reason is None]:
        batches = [(run.pool_task, run.next_items()) for run in active]
        try:
            answered = ask_many(lm, batches)
        except NotImplementedError as exc:  # e.g. a chat API asked for log-likelihoods
            raise InputError(
                f"the model cannot answer the requests of {', '.join(t.name for t, _ in batches)}"
                f" ({str(exc).strip()[:200] or 'not implemented'}): multiple-choice pools need "
                "log-likelihoods, which chat-completion APIs do not give; run the generative "
                "pools (gsm8k, ifeval) with it, or use a backend with log-likelihoods"
            ) from exc
        except Exception as exc:  # the model raised: what was logged stays, say how to go on
            if isinstance(exc, InputError):
                raise
            logs = ", ".join(str(run.log) for run in runs)
            raise InputError(
                f"{', '.join(run.pool_task.name for run in active)}: the model failed mid-run "
                f"({type(exc).__name__}: {str(exc).strip()[:300]}); the finished steps are in "
                f"{logs}: rerun with --resume to continue"
            ) from exc
        for run, batch in zip(active, answered, strict=True):
            record = run.record(batch)
            run.seconds = time.perf_counter() - started
            if report is not None:
                report(step_line(run, record))
    return [run.result() for run in runs]


def run_task(
    lm: Any,
    pool_task: PoolTask,
    options: RunOptions,
    log: Path,
    *,
    resume: bool = False,
    identity: dict[str, Any] | None = None,
    report: Callable[[str], None] | None = None,
) -> TaskResult:
    """One pool task alone (:func:`run_tasks` with one task)."""
    return run_tasks(lm, [(pool_task, log, identity)], options, resume=resume, report=report)[0]
