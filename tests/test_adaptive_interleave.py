"""Adaptive runs of several benchmarks at once (issue 23): one model call per request type per
step, the same items and estimates as one benchmark after another, one process only.

The model is a counting stand-in for lm-eval's model class: ``loglikelihood`` and
``generate_until`` answer every request deterministically from its text (so two runs that send
the same requests get the same answers, whatever the batching) and record each call's size.
The pool tasks are the shipped ones, loaded by lm-eval itself.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from lmeval_microbench.adaptive.interleave import refuse_multi_process, run_task, run_tasks
from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
from lmeval_microbench.adaptive.runner import RunOptions, load_pool_task
from lmeval_microbench.errors import InputError

TASKS = ("microbench_pool_mmlu", "microbench_pool_winogrande", "microbench_pool_gsm8k")


class CountingModel:
    """Answers from a hash of each request; ``calls`` holds (request type, requests) per call."""

    def __init__(self, fail_at_call: int | None = None) -> None:
        self.calls: list[tuple[str, int]] = []
        self.fail_at_call = fail_at_call

    def _count(self, kind: str, requests: list[Any]) -> None:
        self.calls.append((kind, len(requests)))
        if self.fail_at_call is not None and len(self.calls) == self.fail_at_call:
            raise RuntimeError("CUDA out of memory")

    @staticmethod
    def _unit(request: Any) -> float:
        digest = hashlib.sha256(json.dumps(request.args, default=str).encode()).digest()
        return int.from_bytes(digest[:4], "big") / 2**32

    def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
        self._count("loglikelihood", requests)
        return [(-10.0 * self._unit(r), False) for r in requests]

    def generate_until(self, requests: list[Any]) -> list[str]:
        self._count("generate_until", requests)
        return [f"The answer is {int(100 * self._unit(r))}." for r in requests]


@pytest.fixture(scope="module")
def pool_tasks() -> list[Any]:
    return [load_pool_task(name, SHIPPED_POOLS / "openllm_v1") for name in TASKS]


def _runs(pool_tasks: list[Any], folder: Path) -> list[tuple[Any, Path, None]]:
    folder.mkdir(parents=True, exist_ok=True)
    return [(task, folder / f"{task.name}.jsonl", None) for task in pool_tasks]


def test_each_step_asks_every_benchmark_in_one_call_per_request_type(pool_tasks, tmp_path):
    model = CountingModel()
    options = RunOptions(max_items=6)
    results = run_tasks(model, _runs(pool_tasks, tmp_path), options)
    assert [len(r.answers) for r in results] == [6, 6, 6]
    # 6 steps, each one loglikelihood call (mmlu + winogrande) and one generate_until (gsm8k)
    assert [kind for kind, _ in model.calls] == ["loglikelihood", "generate_until"] * 6
    per_item = {"mmlu": 4, "winogrande": 2}  # requests per document: options / contexts
    assert {n for kind, n in model.calls if kind == "loglikelihood"} == {sum(per_item.values())}


def test_the_items_and_estimates_are_those_of_one_benchmark_after_another(pool_tasks, tmp_path):
    options = RunOptions(max_items=5, batch=2)
    together = run_tasks(CountingModel(), _runs(pool_tasks, tmp_path / "together"), options)
    alone_model = CountingModel()
    alone = [
        run_task(alone_model, task, options, tmp_path / f"alone-{task.name}.jsonl")
        for task in pool_tasks
    ]
    for joint, single in zip(together, alone, strict=True):
        assert [a.item for a in joint.answers] == [a.item for a in single.answers]
        assert [a.score for a in joint.answers] == [a.score for a in single.answers]
        assert joint.estimate.value == single.estimate.value
        assert joint.estimate.person_fit == single.estimate.person_fit
    assert len(alone_model.calls) == 3 * 3  # three steps (2 + 2 + 1 items) per benchmark


def test_a_model_failing_mid_run_keeps_the_steps_and_resume_finishes_the_same(pool_tasks, tmp_path):
    options = RunOptions(max_items=4)
    expected = run_tasks(CountingModel(), _runs(pool_tasks, tmp_path / "whole"), options)
    runs = _runs(pool_tasks, tmp_path / "cut")
    with pytest.raises(InputError, match=r"the model failed mid-run .*CUDA out of memory") as err:
        run_tasks(CountingModel(fail_at_call=5), runs, options)  # step 3's first call
    assert "--resume" in str(err.value) and str(runs[0][1]) in str(err.value)
    assert all(len(log.read_text().splitlines()) == 2 for _, log, _ in runs)
    resumed = run_tasks(CountingModel(), runs, options, resume=True)
    for again, first in zip(resumed, expected, strict=True):
        assert [a.item for a in again.answers] == [a.item for a in first.answers]
        assert again.estimate.value == first.estimate.value and again.resumed_items == 2


@pytest.mark.parametrize(
    ("environ", "refused"),
    [
        ({}, False),
        ({"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0"}, False),
        ({"WORLD_SIZE": "2", "RANK": "0"}, True),
        ({"RANK": "1"}, True),
        ({"LOCAL_RANK": "3"}, True),
    ],
)
def test_a_multi_process_launch_is_refused(environ, refused):
    if not refused:
        refuse_multi_process(environ)
        return
    with pytest.raises(InputError, match="one model in one process"):
        refuse_multi_process(environ)


class ChatModel(CountingModel):
    """As lm-eval's chat-completion API models: generations only, no log-likelihoods."""

    def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
        raise NotImplementedError("Loglikelihood is not supported for chat completions.")


def test_a_backend_without_log_likelihoods_is_refused_for_multiple_choice(pool_tasks, tmp_path):
    with pytest.raises(InputError, match="multiple-choice pools need log-likelihoods") as err:
        run_tasks(ChatModel(), _runs(pool_tasks, tmp_path / "chat"), RunOptions(max_items=2))
    assert "microbench_pool_mmlu" in str(err.value) and "--resume" not in str(err.value)
    (gsm8k,) = [task for task in pool_tasks if task.name.endswith("gsm8k")]
    done = run_task(ChatModel(), gsm8k, RunOptions(max_items=2), tmp_path / "gsm8k.jsonl")
    assert len(done.answers) == 2  # a generative pool runs with it


@pytest.mark.parametrize(
    ("model", "model_args", "refused"),
    [
        ("vllm", "pretrained=m,data_parallel_size=2", True),
        ("vllm", "pretrained=m, data_parallel_size = 4 ,dtype=auto", True),
        ("vllm", "pretrained=m,data_parallel_size=1,tensor_parallel_size=4", False),
        ("vllm", "pretrained=m", False),
        ("hf", "pretrained=m,data_parallel_size=2", False),  # not vLLM's per-call engines
    ],
)
def test_vllm_data_parallel_is_refused_for_adaptive_runs(model, model_args, refused):
    from lmeval_microbench.adaptive.interleave import refuse_engine_per_call

    if not refused:
        refuse_engine_per_call(model, model_args)
        return
    with pytest.raises(InputError, match="engines anew in every call") as err:
        refuse_engine_per_call(model, model_args)
    assert "tensor_parallel_size" in str(err.value)


def test_the_adaptive_command_refuses_vllm_data_parallel_before_loading(tmp_path, capsys):
    from lmeval_microbench.cli.app import main

    argv = ["adaptive", "--model", "vllm", "--model_args", "pretrained=m,data_parallel_size=2"]
    argv += ["--tasks", "microbench_pool_mmlu", "--output_path", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "data_parallel_size=2" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()
