"""``microbench eval`` (lm-eval with every argument passed through) and ``microbench tasks-dir``.

The end-to-end test runs a tiny random GPT-2 (the fixture of test_harness: built locally,
nothing downloaded) through ``microbench eval`` on the shipped truthfulqa task and checks
that the estimates it prints equal those lm-eval wrote in its results json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import test_harness

from lmeval_microbench.bundle import load_bundle
from lmeval_microbench.cli import eval as eval_command
from lmeval_microbench.cli.app import main, make_parser
from lmeval_microbench.harness import OPENLLM_V1_GROUP, include_path

INCLUDE = "/tasks"
tiny_model = test_harness.tiny_model  # the fixture: a random GPT-2 built locally


def call(*args: str) -> eval_command.LmEvalCall:
    return eval_command.lm_eval_call(list(args), INCLUDE)


# ---------------------------------------------------------------------------- arguments
def test_lm_eval_arguments_pass_through_the_microbench_parser():
    args = ["eval", "--model", "hf", "--tasks", "x", "-h", "--model_args", "a=b,c=d"]
    parsed = make_parser().parse_args(args)
    assert parsed.lm_eval_args == args[1:]
    assert make_parser().parse_args(["eval"]).lm_eval_args == []


def test_defaults_are_added_only_when_absent():
    plain = call("--model", "hf", "--model_args", "pretrained=m")
    assert plain.added == ("--include_path", INCLUDE, "--tasks", OPENLLM_V1_GROUP)
    assert plain.command[:4] == [sys.executable, "-m", "lm_eval", "run"]
    assert plain.command[4:] == ["--model", "hf", "--model_args", "pretrained=m", *plain.added]
    assert plain.output_path is None
    given = call("run", "--tasks=microbench_mmlu", "--include_path", "/mine", "-o", "out/")
    assert given.args[:4] == ("--tasks=microbench_mmlu", "--include_path", "/mine", "-o")
    assert given.added == ("--log_samples",) and given.output_path == Path("out")
    assert call("-t", "microbench_arc", "-s", "--output_path=o.json").added == (
        "--include_path",
        INCLUDE,
    )
    assert call("--output_path=res/o.json", "--tasks", "x").output_path == Path("res")
    assert "--tasks" not in call("--config", "run.yaml").added  # the config may name tasks


def test_tasks_dir_prints_a_folder_lm_eval_finds_the_tasks_in(capsys):
    assert main(["tasks-dir"]) == 0
    printed = capsys.readouterr().out.strip()
    assert Path(printed) == include_path()
    pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_path=printed, include_defaults=False)
    assert {"microbench_mmlu", OPENLLM_V1_GROUP} <= set(manager.all_tasks)


# ---------------------------------------------------------------------------- real run
@pytest.mark.slow
def test_eval_runs_lm_eval_and_prints_the_estimates(tiny_model, tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    out = tmp_path / "out"
    code = main(
        [
            "eval",
            "--model",
            "hf",
            "--model_args",
            test_harness.model_args(tiny_model, device=False),
            "--device",
            "cpu",
            "--tasks",
            "microbench_truthfulqa",
            "--batch_size",
            "8",
            "--output_path",
            str(out),
        ]
    )
    captured = capfd.readouterr()
    assert code == 0, captured.err[-3000:]
    assert "adding --include_path" in captured.err and "--log_samples" in captured.err
    (results_file,) = out.rglob("results_*.json")
    in_run = json.loads(results_file.read_text())["results"]["microbench_truthfulqa"]
    ours = captured.out.split("micro-benchmark estimates (recomputed")[-1]
    (row,) = [line for line in ours.splitlines() if line.startswith("| ")][1:]
    # "12.3 [4.5, 20.1]" in percent, with " †" when person fit flags the (random-weights) model
    printed = row.split(" | ")[1].removesuffix(" †")
    value, interval = printed.split(" [")
    lower, upper = interval.rstrip("]").split(", ")
    expected = [100 * in_run[f"{k},none"] for k in ("estimate", "estimate_lower", "estimate_upper")]
    assert [float(value), float(lower), float(upper)] == pytest.approx(expected, abs=0.051)
    budget = load_bundle(include_path() / "openllm_v1" / "truthfulqa").budget
    assert f"truthfulqa {budget} of 817" in captured.out
    assert "the run reported estimate" not in captured.err  # recomputed = in-run


@pytest.mark.parametrize(
    ("code", "status", "said"),
    [
        (-9, 137, "ran out of memory: try a smaller --batch_size"),
        (-15, 143, "signal 15 (SIGTERM)"),
        (3, 3, "lm-eval exited with status 3"),
    ],
)
def test_a_failed_lm_eval_says_why(monkeypatch, capsys, code, status, said):
    monkeypatch.setattr(eval_command.subprocess, "call", lambda command: code)
    argv = ["eval", "--model", "hf", "--model_args", "pretrained=x", "--batch_size", "auto"]
    assert main(argv) == status
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
