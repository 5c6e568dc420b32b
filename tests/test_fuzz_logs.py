"""Fuzz tests of the adaptive step log reader (issue 21.4): ``runlog.read_steps`` and the
resume path (``runner.check_resumed_log``, ``runner.resume_steps``) on byte- and
field-mutated logs. Property 1 of ``fuzz_support``: a resumed log gives the answers it
holds or a ``MicrobenchError`` naming the log, never a traceback; property 3: a valid log
resumes to exactly the answers and ability that were logged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fuzz_support import (
    N_LOG_BYTES,
    N_LOG_JSON,
    byte_ops,
    case_dir,
    fuzz_settings,
    json_ops,
    mutate_bytes,
    mutate_fields,
    mutate_json,
    read_clean,
    targeted_ops,
)
from hypothesis import given
from hypothesis import strategies as st

from lmeval_microbench.adaptive import AdaptiveSession, MaxInfoSelector, StoppingRule
from lmeval_microbench.adaptive.runlog import append_step, read_steps
from lmeval_microbench.adaptive.runner import check_resumed_log, resume_steps
from lmeval_microbench.synthetic import random_item_params

PARAMS = random_item_params(12, seed=4)
IDENTITY = {
    "model": "hf",
    "model_args": "pretrained=x",
    "task": "t",
    "pool": "p",
    "pool_sha256": "0",
}
STEP_FIELDS = (
    "items", "items.0", "scores", "scores.0", "unparsed", "samples", "samples.0", "run",
    "run.model", "options",
)  # fmt: skip


def session() -> AdaptiveSession:
    return AdaptiveSession(PARAMS, selector=MaxInfoSelector(), rule=StoppingRule(12))


def logged_steps(n_steps: int, seed: int) -> list[dict[str, Any]]:
    """A valid log of ``n_steps`` steps of two items each, as ``run_task`` writes it."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(PARAMS.n_items)[: 2 * n_steps]
    steps = []
    for k in range(n_steps):
        items = [PARAMS.item_ids[j] for j in order[2 * k : 2 * k + 2]]
        scores = [float(x) for x in rng.integers(0, 2, 2)]
        step = {"step": k + 1, "items": items, "scores": scores, "unparsed": [False, False],
                "theta": 0.0, "se": 1.0, "samples": [{"doc_id": i} for i in items]}  # fmt: skip
        if k == 0:
            step["options"] = {"max_items": 12}
            step["run"] = dict(IDENTITY)
        steps.append(step)
    return steps


def write_log(path: Path, steps: list[dict[str, Any]]) -> Path:
    for step in steps:
        append_step(path, step)
    return path


def resume(path: Path) -> list[Any]:
    steps = read_steps(path)
    check_resumed_log(path, steps, IDENTITY)
    return resume_steps(session(), steps, path)


def test_a_valid_log_resumes_to_its_answers(tmp_path: Path) -> None:
    steps = logged_steps(4, seed=1)
    answers = resume(write_log(tmp_path / "adaptive_t.jsonl", steps))
    assert [a.item for a in answers] == [i for s in steps for i in s["items"]]
    assert [a.score for a in answers] == [x for s in steps for x in s["scores"]]
    direct = session()
    for step in steps:
        direct.record_items(step["items"], step["scores"])
    again = session()
    resume_steps(again, steps, tmp_path / "x")
    assert np.allclose(again.ability()[0], direct.ability()[0])


def test_an_impossible_score_names_the_log_and_the_step(tmp_path: Path) -> None:
    """Issue 21: ``--resume`` on a log with an impossible score named neither file nor item."""
    steps = logged_steps(3, seed=2)
    steps[1]["scores"][0] = 7.0
    path = write_log(tmp_path / "adaptive_t.jsonl", steps)
    with pytest.raises(Exception, match=r"adaptive_t\.jsonl: step 2") as found:
        resume(path)
    assert "[0, 1]" in str(found.value)


@fuzz_settings(N_LOG_BYTES)
@given(n_steps=st.integers(1, 5), seed=st.integers(0, 99), ops=byte_ops)
def test_log_byte_mutations(n_steps: int, seed: int, ops: list) -> None:
    """Property 1 for a byte-mutated step log read for ``--resume``."""
    with case_dir() as tmp:
        path = write_log(tmp / "adaptive_t.jsonl", logged_steps(n_steps, seed))
        path.write_bytes(mutate_bytes(path.read_bytes(), ops))
        read_clean(lambda: resume(path), path.name, case=(n_steps, seed, ops))


@fuzz_settings(N_LOG_JSON)
@given(
    n_steps=st.integers(1, 4),
    seed=st.integers(0, 99),
    line=st.integers(0, 3),
    ops=json_ops,
    fields=targeted_ops(STEP_FIELDS),
)
def test_log_json_mutations(n_steps: int, seed: int, line: int, ops: list, fields: list) -> None:
    """Property 1 for field-level mutations of one step of the log."""
    steps = logged_steps(n_steps, seed)
    k = line % len(steps)
    steps[k] = mutate_fields(mutate_json(steps[k], ops), fields)
    with case_dir() as tmp:
        path = tmp / "adaptive_t.jsonl"
        path.write_text("".join(json.dumps(s) + "\n" for s in steps))
        read_clean(lambda: resume(path), path.name, case=(steps[k], ops, fields))
