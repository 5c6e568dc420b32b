"""The one door to lm-eval for code that runs models: task index, models, evaluation, logging.

Everything else in the package talks to lm-eval through these functions, so what we rely on
of its API (checked on lm-eval 0.4.13) is listed in one place. Each imports lm-eval when it is
called, not when this module is imported: ``import lmeval_microbench`` and ``microbench
--help`` stay cheap, and a test that patches ``lm_eval.simple_evaluate`` or a class in
``lm_eval.tasks`` is seen here, because the name is looked up at call time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def task_manager(**options: Any) -> Any:
    """``lm_eval.tasks.TaskManager(**options)`` (``include_path``, ``include_defaults``...)."""
    from lm_eval.tasks import TaskManager

    return TaskManager(**options)


def task_dict(names: Sequence[str], manager: Any) -> dict[Any, Any]:
    """``lm_eval.tasks.get_task_dict``: the (possibly nested) tasks of ``names``."""
    from lm_eval.tasks import get_task_dict

    return get_task_dict(list(names), manager)


def simple_evaluate(**options: Any) -> dict[str, Any] | None:
    """``lm_eval.simple_evaluate(**options)``."""
    import lm_eval

    return lm_eval.simple_evaluate(**options)


def model_from_args(model: str, model_args: str, extra: dict[str, Any]) -> Any:
    """A registered lm-eval model built as ``lm-eval run`` builds it from its options."""
    from lm_eval.api.registry import get_model

    return get_model(model).create_from_arg_string(model_args, extra)


def hf_model(**options: Any) -> Any:
    """``lm_eval.models.huggingface.HFLM(**options)`` (needs torch and transformers)."""
    from lm_eval.models.huggingface import HFLM

    return HFLM(**options)


def evaluation_tracker(output_path: str) -> Any:
    """``lm_eval.loggers.EvaluationTracker`` writing results and samples under ``output_path``."""
    from lm_eval.loggers import EvaluationTracker

    return EvaluationTracker(output_path=output_path)


def evaluator_module() -> Any:
    """``lm_eval.evaluator`` itself, for the in-loop evaluator's environment-info patch."""
    import lm_eval.evaluator as evaluator

    return evaluator


def task_module() -> Any:
    """``lm_eval.api.task`` itself, for the in-loop evaluator's quiet document bar."""
    import lm_eval.api.task as task

    return task


def sample_hashes(doc: Any, prompt: str, target: str) -> dict[str, str]:
    """The ``doc_hash``, ``prompt_hash`` and ``target_hash`` lm-eval writes in a samples line."""
    from lm_eval.utils import handle_non_serializable, hash_string

    return {
        "doc_hash": hash_string(
            json.dumps(doc, indent=2, default=handle_non_serializable, ensure_ascii=False)
        ),
        "prompt_hash": hash_string(prompt),
        "target_hash": hash_string(target),
    }
