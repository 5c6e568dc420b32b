"""lm-eval without its chatter inside a training loop.

Every in-loop evaluation made lm-eval print two warnings about the model being passed as an
object and three progress bars (documents, tokenizing, requests) that cut through the
trainer's own bar: seven lines of lm-eval per evaluation around the callback's one. The two
warnings say nothing wrong here: evaluating the model in memory is the point, and under
distributed training only the main process evaluates (:mod:`.callback`). So they are dropped,
and the bars are off unless ``progress=True`` (a long evaluation on a CPU, say). Everything
else lm-eval logs, its errors and other warnings, still reaches the user.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator
from typing import Any

IN_MEMORY_WARNINGS = (
    "`pretrained` model kwarg is not of type `str`",
    "Passed an already-initialized model through `pretrained`",
)
"""The starts of the two warnings lm-eval's ``HFLM`` gives for a model passed as an object."""
REQUEST_METHODS = ("loglikelihood", "loglikelihood_rolling", "generate_until")


class _InMemoryWarnings(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(IN_MEMORY_WARNINGS)


@contextlib.contextmanager
def in_memory_warnings_dropped() -> Iterator[None]:
    """The block's ``HFLM`` warnings about a model object dropped (those two only)."""
    logger = logging.getLogger("lm_eval.models.huggingface")
    dropped = _InMemoryWarnings()
    logger.addFilter(dropped)
    try:
        yield
    finally:
        logger.removeFilter(dropped)


def without_request_bars(lm: Any) -> Any:
    """``lm`` whose request methods run without their bars (lm-eval's own ``disable_tqdm``)."""
    for name in REQUEST_METHODS:
        method = getattr(lm, name, None)
        if method is not None:
            setattr(lm, name, functools.partial(method, disable_tqdm=True))
    return lm


@contextlib.contextmanager
def document_bar_off() -> Iterator[None]:
    """lm-eval's tasks build their requests under a bar it offers no switch for: the task
    module's ``tqdm`` is a disabled one for the block (and left alone if lm-eval renames it)."""
    from ..harness import lmeval_api

    module = lmeval_api.task_module()
    bar = getattr(module, "tqdm", None)
    if bar is None:
        yield
        return
    module.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        module.tqdm = bar
