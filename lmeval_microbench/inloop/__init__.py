"""Micro tasks inside a training loop: evaluate the model being trained every N steps.

``evaluate_model`` runs chosen micro tasks (shipped, adaptive pools' static tasks, a user's
own) on an in-memory model through lm-eval (``HFLM(pretrained=model, tokenizer=...)``) and
returns each task's estimate with its interval; with ``output_dir`` it also writes the run as
lm-eval would (``results_*.json``, ``samples_*.jsonl``), which ``microbench curve`` reads
unchanged. :class:`~.callback.MicrobenchCallback` calls it from a Hugging Face ``Trainer``
and logs through the trainer's own logging (so TensorBoard, Weights & Biases or whatever the
user configured get the estimates). The two modules: :mod:`.evaluate` (one evaluation) and
:mod:`.callback` (when, where to log, what changed since the last one).
"""

from __future__ import annotations

from .evaluate import InLoopEstimate, InLoopResult, check_tasks, evaluate_model

__all__ = ["InLoopEstimate", "InLoopResult", "check_tasks", "evaluate_model"]


def __getattr__(name: str):  # the callback needs transformers: imported on first use
    if name == "MicrobenchCallback":
        from .callback import MicrobenchCallback

        return MicrobenchCallback
    raise AttributeError(name)
