"""Functions lm-eval task YAMLs reference with ``!function``: load, score, estimate.

A shipped task folder holds a small generated module (``microbench_hooks.py``) that re-exports
these functions and passes its own folder to :func:`load_docs`; the YAMLs name that module, so
the tasks work with every lm-eval that resolves ``!function`` next to the YAML.

* :func:`load_docs` (``custom_dataset``) reads the folder's ``items.jsonl``, checks every
  document against the ``bundle.json`` beside it (ids and content hashes) and registers the
  bundle for the aggregations. No network, no Hugging Face dataset download.
* ``process_*`` (``process_results``) score one document exactly as the Open LLM Leaderboard's
  lm-eval did, and emit, besides the score, an :data:`~.estimates.ItemScore` tuple for each
  estimate metric.
* :func:`estimate`, :func:`estimate_lower`, :func:`estimate_upper` (``aggregation``) join those
  tuples to the bundle by item id and return the full-benchmark estimate and its interval.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..bundle import load_bundle
from ..errors import InputError
from . import leaderboard_tasks
from .docs import ITEMS_JSONL, check_docs_match_bundle, read_docs
from .estimates import EstimateOptions, estimate_run, logged_warnings, logger, register_bundle
from .leaderboard_tasks import ifeval_results

LMEVAL_TASK_LOGGER = "lm_eval.api.task"
"""The logger of lm-eval's ``Task`` classes (0.4.9 to 0.4.13)."""

ESTIMATE_METRICS = ("estimate", "estimate_lower", "estimate_upper")
"""Metric names under which every task reports its full-benchmark estimate and interval."""

GSM8K_ANSWER = re.compile(r"#### (\-?[0-9\.\,]+)")
"""The final-answer pattern of the leaderboard's gsm8k scoring (lm-eval commit b281b09)."""

PROCESSORS: dict[str, tuple[tuple[str, ...], str]] = {
    "process_acc": (("acc",), "acc"),
    "process_acc_norm": (("acc", "acc_norm"), "acc_norm"),
    "process_mc1": (("mc1",), "mc1"),
    "process_gsm8k": (("exact_match",), "exact_match"),
    "process_exact_match": (("exact_match",), "exact_match"),
    "process_ifeval": (
        (
            "prompt_level_strict_acc",
            "inst_level_strict_acc",
            "prompt_level_loose_acc",
            "inst_level_loose_acc",
        ),
        "prompt_level_strict_acc",
    ),
}
"""Each ``process_*`` hook: the per-item metrics it reports and the one its estimate uses."""

HELPERS = ("musr_doc_to_text", "agg_inst_level_acc")
"""Other functions task YAMLs name: lm-eval's own leaderboard code (:mod:`.leaderboard_tasks`)."""

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


# ---------------------------------------------------------------------------- loading
CUSTOM_KWARGS_ADVICE = ": Custom kwargs can be passed to `--metadata`"
"""How lm-eval's advice starts (after the task name) each time it calls a ``custom_dataset``."""


class _CustomKwargsAdvice(logging.Filter):
    """Drops lm-eval's "Custom kwargs" advice for the tasks of our suites, and only for them.

    lm-eval logs it once per task and run for every ``custom_dataset``, which is how our
    tasks load their items; it advertises options our tasks do not take (theirs are the
    ``microbench_*`` ones). No config avoids it: lm-eval's only other route, a task
    ``class``, does not receive ``--metadata`` on lm-eval 0.4.9.
    """

    def __init__(self) -> None:
        super().__init__()
        self.tasks: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        task, _, advice = record.getMessage().partition(":")
        return not (task in self.tasks and f":{advice}".startswith(CUSTOM_KWARGS_ADVICE))


_ADVICE_FILTER = _CustomKwargsAdvice()


def quiet_custom_kwargs_advice(suite: str | os.PathLike[str]) -> None:
    """Keep lm-eval's "Custom kwargs" advice out of the log for the tasks of ``suite``.

    Called by the suite's generated shim, which lm-eval imports before it loads any of the
    suite's tasks; a task is known by its YAML's file name (``<task>.yaml``, as
    :func:`.export.write_task` names it).
    """
    _ADVICE_FILTER.tasks.update(path.stem for path in Path(suite).glob("*.yaml"))
    logger = logging.getLogger(LMEVAL_TASK_LOGGER)
    if _ADVICE_FILTER not in logger.filters:
        logger.addFilter(_ADVICE_FILTER)


def load_docs(
    *,
    base_dir: str | os.PathLike[str],
    microbench_items: str,
    microbench_estimator: str | None = None,
    microbench_level: float | str = 0.9,
    microbench_allow_missing: bool | str = False,
    **_ignored: Any,
) -> Any:
    """The task's documents as a ``datasets.DatasetDict`` with one ``test`` split.

    ``microbench_items`` is the data folder (``bundle.json`` + ``items.jsonl``), relative to
    ``base_dir`` (the folder of the task YAML). The other ``microbench_*`` options come from
    lm-eval ``--metadata``; lm-eval also passes the task metadata and model arguments, which
    are ignored.
    """
    import datasets

    options = EstimateOptions(
        estimator=microbench_estimator or None,
        level=_as_float(microbench_level, "microbench_level"),
        allow_missing=_as_bool(microbench_allow_missing, "microbench_allow_missing"),
        model=str(_ignored["pretrained"]) if _ignored.get("pretrained") else None,
    )
    folder = Path(base_dir) / microbench_items
    items_path = folder / ITEMS_JSONL
    with logged_warnings():  # e.g. an old bundle format: one line in lm-eval's log
        _check_leaderboard_code(_ignored, microbench_items)
        bundle = load_bundle(folder)
        dataset = datasets.Dataset.from_list(read_docs(items_path))
        # check the documents as lm-eval will see (and log) them, after the Arrow round trip
        check_docs_match_bundle(bundle, list(dataset), where=str(items_path))
        register_bundle(bundle, options)
    return datasets.DatasetDict({"test": dataset})


def _check_leaderboard_code(metadata: Mapping[str, Any], where: str) -> None:
    """Warn when lm-eval's leaderboard task code differs from what the task was built with.

    A task derived from lm-eval's own leaderboard task records it (``leaderboard_task``) and
    the sha256 of its defining files (``leaderboard_sha256``) in its metadata, which lm-eval
    passes here with the dataset options.
    """
    name = metadata.get("leaderboard_task")
    if not name:
        return
    recorded = metadata.get("leaderboard_sha256")
    found = leaderboard_tasks.check_definitions(
        str(name), recorded if isinstance(recorded, Mapping) else None, f"microbench_{where}"
    )
    if found:
        warnings.warn(found, stacklevel=2)


def _as_float(value: float | str, name: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name}: expected a number, got {value!r}") from None


def _as_bool(value: bool | str, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise InputError(f"{name}: expected true or false, got {value!r}")


# ---------------------------------------------------------------------------- scoring
def _estimate_values(doc: Mapping[str, Any], metric: str, score: float) -> dict[str, Any]:
    """The :data:`~.estimates.ItemScore` tuple under each estimate metric."""
    value = (doc["bundle"], doc["item_id"], metric, score)
    return dict.fromkeys(ESTIMATE_METRICS, value)


def _loglikelihoods(doc: Mapping[str, Any], results: Sequence[Any], n_choices: int) -> np.ndarray:
    if len(results) != n_choices:
        raise InputError(
            f"item {doc.get('item_id')!r}: {len(results)} loglikelihoods for {n_choices} choices"
        )
    return np.array([float(result[0]) for result in results])


def choice_accuracy(doc: Mapping[str, Any], results: Sequence[Any]) -> float:
    """1.0 when the choice with the highest loglikelihood is the gold one (lm-eval ``acc``).

    Multiple-input documents (winogrande: one context per option) list their contexts under
    ``contexts``; the others their continuations under ``options``.
    """
    choices = doc["contexts"] if "contexts" in doc else doc["options"]
    lls = _loglikelihoods(doc, results, len(choices))
    return float(int(np.argmax(lls)) == int(doc["gold"]))


def normalised_choice_accuracy(doc: Mapping[str, Any], results: Sequence[Any]) -> float:
    """lm-eval ``acc_norm``: loglikelihood divided by the character length of each option."""
    options = doc["options"]
    lls = _loglikelihoods(doc, results, len(options))
    lengths = np.array([float(len(option)) for option in options])
    return float(int(np.argmax(lls / lengths)) == int(doc["gold"]))


def gsm8k_final_answer(text: str) -> str | None:
    """The number after the first ``#### `` without thousands commas; None when absent.

    This is the leaderboard's rule (lm-eval commit b281b09): unlike lm-eval 0.4's
    ``strict-match`` it keeps a trailing period, so ``#### 18.`` does not match ``18``.
    """
    match = GSM8K_ANSWER.search(text)
    return None if match is None else match.group(1).strip().replace(",", "")


def gsm8k_exact_match(doc: Mapping[str, Any], completion: str) -> float:
    gold = gsm8k_final_answer(doc["answer"])
    if gold is None:
        raise InputError(f"item {doc.get('item_id')!r}: the reference answer has no '#### '")
    return float(gsm8k_final_answer(completion) == gold)


def process_acc(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    """``acc`` (mmlu, winogrande) plus the estimate tuples."""
    acc = choice_accuracy(doc, results)
    return {"acc": acc, **_estimate_values(doc, "acc", acc)}


def process_acc_norm(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    """``acc`` and ``acc_norm`` (arc, hellaswag); the estimate uses ``acc_norm``."""
    acc_norm = normalised_choice_accuracy(doc, results)
    return {
        "acc": choice_accuracy(doc, results),
        "acc_norm": acc_norm,
        **_estimate_values(doc, "acc_norm", acc_norm),
    }


def process_mc1(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    """``mc1`` (truthfulqa: the single true answer gets the highest loglikelihood)."""
    mc1 = choice_accuracy(doc, results)
    return {"mc1": mc1, **_estimate_values(doc, "mc1", mc1)}


def process_gsm8k(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    """``exact_match`` of the final answer (leaderboard rule, see :func:`gsm8k_final_answer`)."""
    score = gsm8k_exact_match(doc, str(results[0]))
    return {"exact_match": score, **_estimate_values(doc, "exact_match", score)}


def process_ifeval(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    """lm-eval's ``leaderboard_ifeval`` scores; the estimate uses ``prompt_level_strict_acc``.

    A response lm-eval's checks cannot score (they raise) is reported as missing, never as a
    failure: NaN for lm-eval's metrics and no estimate tuple, so the estimate is NaN (or
    imputed with ``microbench_allow_missing``) with a warning naming the item.
    """
    try:
        scores = ifeval_results(doc, results)
    except Exception as exc:  # lm-eval's checks raise for some responses (langdetect, ...)
        logger.warning(
            "item %r (bundle %r): lm-eval's IFEval checks could not score the response "
            "(%s: %s); the item counts as missing",
            doc.get("item_id"),
            doc.get("bundle"),
            type(exc).__name__,
            str(exc).splitlines()[0][:200] if str(exc) else "",
        )
        return dict.fromkeys(PROCESSORS["process_ifeval"][0], float("nan"))
    strict = float(scores["prompt_level_strict_acc"])
    return {**scores, **_estimate_values(doc, "prompt_level_strict_acc", strict)}


def musr_doc_to_text(doc: Mapping[str, Any]) -> str:
    """lm-eval's ``leaderboard_musr`` prompt (``doc_to_text``)."""
    return leaderboard_tasks.musr_doc_to_text(doc)


def agg_inst_level_acc(items: Sequence[Any]) -> float:
    """lm-eval's aggregation of IFEval's instruction-level accuracies."""
    return leaderboard_tasks.agg_inst_level_acc(items)


def process_exact_match(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    """lm-eval's own ``exact_match`` of the (filtered) generation against ``doc["answer"]``.

    Micro versions of a user's generative task use it; the original metric's keyword
    arguments (``ignore_case``, ``regexes_to_ignore``, ...) travel in ``exact_match_kwargs``.
    """
    from lm_eval.api.metrics import exact_match_hf_evaluate

    kwargs = doc.get("exact_match_kwargs") or {}
    found = exact_match_hf_evaluate(
        predictions=[str(results[0])], references=[str(doc["answer"])], **kwargs
    )
    score = float(found["exact_match"])
    return {"exact_match": score, **_estimate_values(doc, "exact_match", score)}


# ---------------------------------------------------------------------------- aggregation
def estimate(values: Sequence[Any]) -> float:
    """Estimated full-benchmark score (NaN, with a warning, when subset items are missing)."""
    return estimate_run(values).value


def estimate_lower(values: Sequence[Any]) -> float:
    """Lower end of the estimate's conformal interval (nominal level: 0.9 unless set)."""
    return estimate_run(values).lower


def estimate_upper(values: Sequence[Any]) -> float:
    """Upper end of the estimate's conformal interval."""
    return estimate_run(values).upper
