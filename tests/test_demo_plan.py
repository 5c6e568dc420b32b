"""The demo's announced time (issue 22): forward passes counted as lm-eval makes them, a
speed model fitted on two timed passes, the plan's lines. The announced time against the
real one, idle and loaded, is measured by ``tools/bench_demo_time.py``."""

from __future__ import annotations

import json

import pytest

from lmeval_microbench.cli.demo_plan import (
    GENERATED_TOKENS,
    SpeedModel,
    TaskCost,
    _passes_of_doc,
    minutes,
    plan_lines,
    task_cost,
)
from lmeval_microbench.harness import include_path


def encode(text: str) -> list[int]:
    """One token per word: enough to count passes and lengths."""
    return [hash(word) % 1000 for word in text.split()]


def test_single_token_options_of_one_context_share_a_pass():
    letters = {"context": "q1 q2 q3", "options": ["A", "B", "C", "D"]}
    assert _passes_of_doc(letters, encode) == [4]  # lm-eval scores the four in one pass
    sentences = {"context": "q1 q2", "options": ["one two", "three four five"]}
    assert sorted(_passes_of_doc(sentences, encode)) == [4, 5]
    winogrande = {"contexts": ["a b", "a c d"], "continuation": "e f"}
    assert sorted(_passes_of_doc(winogrande, encode)) == [4, 5]
    assert _passes_of_doc({"context": "w " * 7}, encode) == [7]  # generation: the prompt


def test_a_shipped_task_is_counted_from_its_documents():
    folder = include_path() / "openllm_v1"
    lines = (folder / "truthfulqa" / "items.jsonl").read_text().splitlines()
    docs = [json.loads(line) for line in lines]
    cost = task_cost("truthfulqa", folder / "truthfulqa", encode, max_length=10**6)
    assert cost.items == len(docs) and cost.generated == 0
    assert len(cost.lengths) == sum(len(_passes_of_doc(d, encode)) for d in docs)
    capped = task_cost("truthfulqa", folder / "truthfulqa", encode, max_length=50)
    assert max(capped.lengths) == 50  # lm-eval truncates to the model's length
    gsm8k = task_cost("gsm8k", folder / "gsm8k", encode, max_length=10**6)
    assert gsm8k.generated == GENERATED_TOKENS * gsm8k.items


def test_the_speed_model_and_the_plan():
    speed = SpeedModel(
        overhead=0.1, seconds_per_flop=1e-11, parameters=10**8, layers=30, hidden=576
    )
    one = speed.seconds(TaskCost("a", 1, (512,)))
    assert one == pytest.approx(0.1 + 1e-11 * (2e8 * 512 + 4 * 30 * 576 * 512**2))
    costs = [TaskCost("slow", 10, (2048,) * 40), TaskCost("fast", 10, (128,) * 10)]
    lines, expected = plan_lines(costs, speed)
    assert expected["slow"] > expected["fast"]
    assert lines[0].startswith("plan: slow 10 items, 40 forward passes of 2,048 tokens")
    assert f"expected evaluation time: about {minutes(sum(expected.values()))}" in lines[2]
    assert lines[3].startswith("shorter: --tasks fast")  # the slowest task is the one to drop
    assert minutes(45) == "45 s" and minutes(150) == "2.5 min"
