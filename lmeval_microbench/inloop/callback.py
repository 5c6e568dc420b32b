"""A Hugging Face ``Trainer`` callback: micro task estimates every N steps, in the run's logs.

Usage::

    trainer = Trainer(model=model, args=args, train_dataset=train, processing_class=tokenizer)
    trainer.add_callback(MicrobenchCallback(trainer, ["microbench_mmlu"], every_n_steps=500))
    trainer.train()

Every ``every_n_steps`` optimizer steps (and/or at every checkpoint save, ``on_save=True``)
the main process evaluates the model in memory on the micro tasks and logs
``microbench/<task>/estimate`` (with its interval and the subset's raw score) to the
trainer's reporters, as ``trainer.log`` would: whatever the run reports to (TensorBoard,
Weights & Biases, the console, ``trainer.state.log_history``) receives them
at the training step they belong to. The other processes of a distributed run wait at a
barrier meanwhile, so no rank runs ahead into a collective the main one is not in.

Each evaluation after the first prints one line per task saying whether the estimate moved
beyond the noise of the subset since the previous evaluation: the paired sign-flip test of
:mod:`lmeval_microbench.curve.significance` on the items answered both times (the same items,
so most of the subset's error cancels; an interval overlap check would be far too blunt).
With ``output_dir`` each evaluation is also written as lm-eval writes a run, one folder per
step, which ``microbench curve output_dir/step-*`` turns into the checkpoint curve afterwards.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from transformers import TrainerCallback

from ..curve.series import TraceOptions, score_functions
from ..curve.significance import StepTest, paired_flip_test
from ..errors import BundleError, InputError
from ..harness.estimates import registered_bundle
from .evaluate import InLoopEstimate, InLoopResult, check_tasks, evaluate_model

logger = logging.getLogger(__name__)


class MicrobenchCallback(TrainerCallback):
    """Evaluate micro tasks during ``trainer.train()`` (see the module docstring).

    ``trainer``: the Trainer whose model is evaluated and whose ``log`` receives the
    estimates. ``tasks``: micro task names (shipped ones, or a user's in ``include_path``).
    ``every_n_steps`` / ``on_save``: when; by default at every checkpoint save only.
    ``tokenizer``: defaults to the trainer's ``processing_class``. ``level``: the change
    test's confidence level. ``report``: where the one-line summaries go (``print`` by
    default; ``None`` for none). ``progress``: show lm-eval's progress bars during each
    evaluation (off: they cut through the trainer's bar, :mod:`.quiet`).
    """

    def __init__(
        self,
        trainer: Any,
        tasks: Sequence[str],
        *,
        every_n_steps: int | None = None,
        on_save: bool | None = None,
        tokenizer: Any = None,
        output_dir: str | os.PathLike[str] | None = None,
        include_path: str | os.PathLike[str] | None = None,
        batch_size: int | str = 8,
        level: float = 0.9,
        prefix: str = "microbench",
        report: Callable[[str], Any] | None = print,
        progress: bool = False,
    ) -> None:
        if on_save is None:  # the default schedule: at every checkpoint the trainer saves
            on_save = every_n_steps is None
        if every_n_steps is None and not on_save:
            raise InputError("MicrobenchCallback: give every_n_steps, on_save=True, or both")
        if (
            every_n_steps is None
            and getattr(getattr(trainer, "args", None), "save_strategy", None) == "no"
        ):
            raise InputError(
                "MicrobenchCallback: the trainer saves no checkpoints (save_strategy='no'), so "
                "evaluating at every save never evaluates: give every_n_steps"
            )
        if _sharded(trainer):
            raise InputError(
                "MicrobenchCallback: FSDP / DeepSpeed ZeRO-3 training shards the weights over "
                "the ranks; in-loop evaluation needs one process holding the whole model"
            )
        if every_n_steps is not None and every_n_steps < 1:
            raise InputError(f"MicrobenchCallback: every_n_steps must be >= 1, got {every_n_steps}")
        self.trainer = trainer
        self.tokenizer = tokenizer or getattr(trainer, "processing_class", None)
        if self.tokenizer is None:
            raise InputError("MicrobenchCallback: the trainer has no tokenizer; pass tokenizer=")
        self.tasks = list(tasks)
        self.manager = check_tasks(self.tasks, include_path) if _is_main(trainer) else None
        self.every_n_steps = every_n_steps
        self.evaluate_on_save = on_save
        self.output_dir = output_dir
        self.include_path = include_path
        self.batch_size = batch_size
        self.level = level
        self.prefix = prefix
        self.report = report
        self.progress = progress
        self.results: list[InLoopResult] = []
        """Every evaluation of this run, in step order (main process only)."""
        self.failures: list[tuple[int, str]] = []
        """``(step, error)`` of each evaluation that failed (training went on)."""
        self._last_step: int | None = None

    # ------------------------------------------------------------------ Trainer events
    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.every_n_steps and state.global_step % self.every_n_steps == 0:
            self._evaluate(state, kwargs.get("model"))

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.evaluate_on_save:
            self._evaluate(state, kwargs.get("model"))

    # ------------------------------------------------------------------ one evaluation
    def _evaluate(self, state: Any, model: Any) -> None:
        step = int(state.global_step)
        if step == self._last_step:  # a save at a step already evaluated
            return
        self._last_step = step
        if _is_main(self.trainer):
            self._evaluate_here(step, model)
        _wait_for_everyone(self.trainer)

    def _evaluate_here(self, step: int, model: Any) -> None:
        """Evaluate, log and report on this process; a failure is reported, not raised: an
        evaluation must never end the training run it watches."""
        try:
            result = evaluate_model(
                model if model is not None else self.trainer.model,
                self.tokenizer,
                self.tasks,
                step=step,
                output_dir=self.output_dir,
                model_name=_model_name(self.trainer),
                batch_size=self.batch_size,
                include_path=self.include_path,
                manager=self.manager,
                progress=self.progress,
            )
        except Exception as error:  # reported below; the training goes on
            self.failures.append((step, repr(error)))
            logger.warning("step %d: in-loop evaluation failed, training goes on: %r", step, error)
            if self.report is not None:
                self.report(f"step {step}: in-loop evaluation failed ({error!r}); training goes on")
            return
        changes = self._changes(result)
        self.results.append(result)
        log_to_reporters(self.trainer, self._log_values(result, changes))
        if self.report is not None:
            for task, estimate in result.estimates.items():
                self.report(summary_line(step, estimate, changes.get(task), self.previous))

    @property
    def previous(self) -> int | None:
        """The step of the evaluation before the latest one."""
        return self.results[-2].step if len(self.results) > 1 else None

    def _changes(self, result: InLoopResult) -> dict[str, StepTest]:
        if not self.results:
            return {}
        before = self.results[-1].estimates
        return {
            task: change_test(before[task], estimate, self.level)
            for task, estimate in result.estimates.items()
            if task in before
        }

    def _log_values(self, result: InLoopResult, changes: dict[str, StepTest]) -> dict[str, float]:
        values: dict[str, float] = {f"{self.prefix}/seconds": result.seconds}
        for task, estimate in result.estimates.items():
            values.update(estimate.log_values(self.prefix))
            if task in changes and np.isfinite(changes[task].p_value):
                values[f"{self.prefix}/{task}/change_p_value"] = changes[task].p_value
        return values


def change_test(earlier: InLoopEstimate, later: InLoopEstimate, level: float) -> StepTest:
    """The paired sign-flip test of the estimate's change, on the items both runs scored
    (through the bundle's own estimator; the raw subset mean when no bundle is loaded)."""
    items = [item for item in earlier.scores if item in later.scores]
    pair = np.array([[earlier.scores[i] for i in items], [later.scores[i] for i in items]])
    try:
        bundle = registered_bundle(later.bundle)
    except BundleError:  # a task that is not a bundle's: its raw mean is still comparable
        bundle = None
    if bundle is not None and set(items) == set(bundle.item_ids):
        order = [items.index(i) for i in bundle.item_ids]
        score = score_functions(bundle, TraceOptions(level=level).filled())[0]["estimate"]
        return paired_flip_test(score, pair[0, order], pair[1, order], level=level)
    return paired_flip_test(_raw_mean, pair[0], pair[1], level=level)


def _raw_mean(values: np.ndarray) -> np.ndarray:
    return values.mean(axis=1)


def summary_line(
    step: int, estimate: InLoopEstimate, change: StepTest | None, previous: int | None
) -> str:
    """``step 400 microbench_mmlu: 41.2% [38.0, 44.5]; +2.1 points since step 200 (p=0.03)``."""
    line = (
        f"step {step} {estimate.task}: {100 * estimate.value:.1f}% "
        f"[{100 * estimate.lower:.1f}, {100 * estimate.upper:.1f}]"
    )
    if change is None or previous is None:
        return line
    verdict = "a change" if change.significant else "within the subset's noise"
    return (
        f"{line}; {100 * change.delta:+.1f} points since step {previous} "
        f"(p={change.p_value:.2g}, {verdict})"
    )


def log_to_reporters(trainer: Any, values: dict[str, float]) -> None:
    """What ``trainer.log`` does (history, then every reporter's ``on_log``), but on a copy of
    the trainer's control flags: ``trainer.log`` clears ``should_log``, which inside a step
    would drop that step's loss log on the main process alone, and the ranks' logging
    collectives would no longer match."""
    logs = dict(values)
    if trainer.state.epoch is not None:
        logs["epoch"] = trainer.state.epoch
    trainer.state.log_history.append({**logs, "step": trainer.state.global_step})
    control = copy.deepcopy(trainer.control)
    trainer.callback_handler.on_log(trainer.args, trainer.state, control, logs)


def _sharded(trainer: Any) -> bool:
    if getattr(trainer, "is_fsdp_enabled", False):
        return True
    plugin = getattr(getattr(getattr(trainer, "accelerator", None), "state", None),
                     "deepspeed_plugin", None)  # fmt: skip
    return getattr(plugin, "zero_stage", None) == 3


def _is_main(trainer: Any) -> bool:
    return bool(getattr(getattr(trainer, "state", None), "is_world_process_zero", True))


def _wait_for_everyone(trainer: Any) -> None:
    accelerator = getattr(trainer, "accelerator", None)
    if accelerator is not None and accelerator.num_processes > 1:
        accelerator.wait_for_everyone()


def _model_name(trainer: Any) -> str:
    config = getattr(getattr(trainer, "model", None), "config", None)
    name = getattr(config, "_name_or_path", "") or "model"
    return str(name).replace(",", "_").replace("=", "_")
