"""Micro tasks inside a training loop: ``evaluate_model`` and the ``Trainer`` callback.

The end-to-end tests train test_harness's tiny GPT-2 (built here) with a real
``transformers.Trainer`` and check that the logged estimates are the ones lm-eval's files of
the same evaluation give through ``collect`` + ``reconstruct``, that the model comes back in
training mode, and that ``microbench curve`` reads the per-step folders unchanged. A slow
test runs the same callback in a two-process ``torchrun`` (gloo, CPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import test_harness

from lmeval_microbench.errors import InputError
from lmeval_microbench.harness import register_bundle
from lmeval_microbench.inloop import InLoopEstimate, check_tasks, evaluate_model

tiny_model = test_harness.tiny_model
toy = test_harness.toy
toy_suite = test_harness.toy_suite
_fresh_registry = test_harness._fresh_registry
TASK = test_harness.TASK


def estimate(scores: dict[str, float], bundle: str = "", value: float = 0.5) -> InLoopEstimate:
    return InLoopEstimate(TASK, bundle, value, value - 0.1, value + 0.1, "acc", 0.5, scores)


# ---------------------------------------------------------------------------- no model
def test_unknown_task_is_refused_before_training():
    with pytest.raises(InputError, match="microbench_nope"):
        check_tasks(["microbench_mmlu", "microbench_nope"])
    with pytest.raises(InputError, match="no micro task"):
        check_tasks([])


def test_change_test_sees_a_real_change_and_not_noise(toy):
    from lmeval_microbench.inloop.callback import change_test, summary_line

    bundle, _ = toy
    register_bundle(bundle)
    ids = list(bundle.item_ids)
    before = estimate({i: 0.0 for i in ids}, bundle.name)
    after = estimate({i: 1.0 for i in ids}, bundle.name, value=0.9)
    moved = change_test(before, after, 0.9)
    assert moved.discordant == len(ids) and moved.delta > 0
    assert moved.significant  # 5 items all flipped: p = 2/32 under exact enumeration
    same = change_test(after, after, 0.9)
    assert not same.significant and same.discordant == 0
    line = summary_line(20, after, moved, 10)
    assert line.startswith(f"step 20 {TASK}: 90.0% [80.0, 100.0]") and "since step 10" in line
    assert "a change" in line
    # a task without a loaded bundle is compared on the raw subset mean of the shared items
    raw = change_test(estimate({"a": 0.0, "b": 1.0}), estimate({"a": 1.0, "b": 1.0, "c": 0.0}), 0.9)
    assert raw.delta == pytest.approx(0.5) and raw.discordant == 1


def test_callback_needs_a_schedule_and_a_tokenizer():
    pytest.importorskip("transformers")
    from lmeval_microbench.inloop.callback import MicrobenchCallback

    class Bare:  # no processing_class, no state
        pass

    with pytest.raises(InputError, match="every_n_steps"):
        MicrobenchCallback(Bare(), ["microbench_mmlu"], on_save=False, tokenizer=object())
    never_saves = Bare()
    never_saves.args = type("Args", (), {"save_strategy": "no"})()
    with pytest.raises(InputError, match="saves no checkpoints"):
        MicrobenchCallback(never_saves, ["microbench_mmlu"], tokenizer=object())
    sharded = Bare()
    sharded.is_fsdp_enabled = True
    with pytest.raises(InputError, match="FSDP"):
        MicrobenchCallback(sharded, ["microbench_mmlu"], every_n_steps=5, tokenizer=object())
    with pytest.raises(InputError, match=">= 1"):
        MicrobenchCallback(Bare(), ["microbench_mmlu"], every_n_steps=0, tokenizer=object())
    with pytest.raises(InputError, match="tokenizer"):
        MicrobenchCallback(Bare(), ["microbench_mmlu"], every_n_steps=5)


# ---------------------------------------------------------------------------- real training
def toy_dataset(tokenizer, docs):
    import torch

    text = [f"{d['context']} {d['options'][d['gold']]}" for d in docs]
    encoded = tokenizer(text, padding="max_length", max_length=32, truncation=True)

    class Texts(torch.utils.data.Dataset):
        def __len__(self):
            return len(text)

        def __getitem__(self, k):
            ids = torch.tensor(encoded["input_ids"][k])
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}

    return Texts()


def train_with_callback(folder: Path, docs, suite: Path, out: Path, steps: int = 4):
    transformers = pytest.importorskip("transformers")
    from lmeval_microbench.inloop.callback import MicrobenchCallback

    model = transformers.GPT2LMHeadModel.from_pretrained(folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    args = transformers.TrainingArguments(
        output_dir=str(out / "trainer"),
        max_steps=steps,
        per_device_train_batch_size=2,
        learning_rate=3e-3,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        use_cpu=True,
        seed=0,
    )
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=toy_dataset(tokenizer, docs),
        processing_class=tokenizer,
    )  # fmt: skip
    lines: list[str] = []
    callback = MicrobenchCallback(
        trainer, [TASK], every_n_steps=2, output_dir=out / "evals", include_path=suite,
        batch_size=4, report=lines.append,
    )  # fmt: skip
    trainer.add_callback(callback)
    trainer.train()
    return trainer, callback, lines


def test_trainer_logs_the_estimate_lm_eval_files_give(tiny_model, toy, toy_suite, tmp_path):
    from lmeval_microbench.cli.app import main

    bundle, docs = toy
    trainer, callback, lines = train_with_callback(tiny_model, docs, toy_suite, tmp_path)
    assert trainer.model.training  # handed back in training mode
    logged = [r for r in trainer.state.log_history if f"microbench/{TASK}/estimate" in r]
    assert [r["step"] for r in logged] == [2, 4]
    # the run's own loss log is untouched at the evaluated steps (trainer.log would drop it)
    assert [r["step"] for r in trainer.state.log_history if "loss" in r] == [1, 2, 3, 4]
    assert [r.step for r in callback.results] == [2, 4]
    for record, result in zip(logged, callback.results, strict=True):
        (samples,) = result.output.rglob(f"samples_{TASK}_*.jsonl")
        recomputed = test_harness.recomputed_estimate(samples, bundle, "acc")
        assert record[f"microbench/{TASK}/estimate"] == pytest.approx(
            recomputed["estimate_value"], abs=1e-12
        )
        assert record[f"microbench/{TASK}/estimate_lower"] <= record[f"microbench/{TASK}/estimate"]
        assert set(result.estimates[TASK].scores) == set(bundle.item_ids)
        (written,) = result.output.rglob("results_*.json")  # lm-eval's environment record too
        assert "pretty_env_info" in json.loads(written.read_text())
    assert "change_p_value" in " ".join(logged[1]) and len(lines) == 2
    assert "since step 2" in lines[1] and "since" not in lines[0]
    # the per-step folders are lm-eval runs that `microbench curve` orders by itself
    runs = sorted((tmp_path / "evals").glob("step-*"))
    curve = tmp_path / "curve"
    assert main(["curve", *map(str, runs), "--bundle", str(toy_suite), "--out", str(curve),
                 "--quiet"]) == 0  # fmt: skip
    points = json.loads((curve / "curve.json").read_text())["benchmarks"]["toy"]["points"]
    assert [p["step"] for p in points] == [2, 4]
    assert [p["estimate"] for p in points] == pytest.approx(
        [r[f"microbench/{TASK}/estimate"] for r in logged], abs=1e-12
    )


def test_evaluate_model_in_a_hand_written_loop(tiny_model, toy, toy_suite):
    transformers = pytest.importorskip("transformers")
    model = transformers.GPT2LMHeadModel.from_pretrained(tiny_model)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    tokenizer.pad_token = None  # lm-eval needs one: evaluation pads with a copy
    model.train()
    result = evaluate_model(model, tokenizer, [TASK], step=7, include_path=toy_suite)
    assert model.training and result.output is None and result.step == 7
    assert tokenizer.pad_token is None
    found = result.estimates[TASK]
    assert found.lower <= found.value <= found.upper
    assert found.subset_score == pytest.approx(np.mean(list(found.scores.values())))


DDP_SCRIPT = """
import json, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
import test_inloop
trainer, callback, lines = test_inloop.train_with_callback(
    Path({model!r}), json.loads(Path({docs!r}).read_text()), Path({suite!r}), Path({out!r}))
if trainer.state.is_world_process_zero:
    Path({out!r}, "main.json").write_text(json.dumps(trainer.state.log_history))
# as PyTorch asks of every distributed program: without it, gloo's worker threads can abort
# the process at interpreter exit (SIGABRT, "terminate called without an active exception").
# Even with it, CI saw that abort once in interpreter finalization (pytorch/pytorch#179291
# describes the race), after every output was written; so the script leaves without
# finalizing, once both ranks are past their last collective.
import os, torch.distributed
if torch.distributed.is_initialized():
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""


@pytest.mark.slow
def test_two_process_training_evaluates_on_the_main_process_only(
    tiny_model, toy, toy_suite, tmp_path
):
    pytest.importorskip("torch.distributed")
    _, docs = toy
    (tmp_path / "docs.json").write_text(json.dumps(docs))
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT.format(
        tests=str(Path(__file__).parent), model=str(tiny_model), docs=str(tmp_path / "docs.json"),
        suite=str(toy_suite), out=str(tmp_path),
    ))  # fmt: skip
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", str(script)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    history = json.loads((tmp_path / "main.json").read_text())
    assert [r["step"] for r in history if f"microbench/{TASK}/estimate" in r] == [2, 4]
    assert sorted(p.name for p in (tmp_path / "evals").iterdir()) == ["step-2", "step-4"]


def readme_example() -> str:
    """The first Python block of the README's "Evaluating while training" section."""
    text = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    section = text.split("## Evaluating while training", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_readme_example_runs_a_shipped_task_at_every_save(tiny_model, toy, tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    _, docs = toy
    monkeypatch.chdir(tmp_path)
    tokenizer = padded(transformers.AutoTokenizer.from_pretrained(tiny_model))
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "checkpoints"), max_steps=4, save_steps=2,
        per_device_train_batch_size=2, report_to=[], use_cpu=True, seed=0,
    )  # fmt: skip
    namespace = {
        "model": transformers.GPT2LMHeadModel.from_pretrained(tiny_model),
        "tokenizer": tokenizer,
        "args": args,
        "train_dataset": toy_dataset(tokenizer, docs),
    }
    exec(readme_example(), namespace)
    history = namespace["trainer"].state.log_history
    task = "microbench_winogrande"
    assert [r["step"] for r in history if f"microbench/{task}/estimate" in r] == [2, 4]
    assert sorted(p.name for p in Path("evals").iterdir()) == ["step-2", "step-4"]


def padded(tokenizer):
    from lmeval_microbench.inloop.evaluate import with_pad_token

    return with_pad_token(tokenizer)


def test_a_failing_evaluation_is_reported_and_training_goes_on(
    tiny_model, toy, toy_suite, tmp_path, monkeypatch
):
    from lmeval_microbench.inloop import callback as module

    calls = []
    real = module.evaluate_model

    def fails_once(*args, **kwargs):  # the first evaluation runs out of memory, say
        calls.append(kwargs["step"])
        if len(calls) == 1:
            raise RuntimeError("CUDA out of memory (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "evaluate_model", fails_once)
    _, docs = toy
    trainer, callback, lines = train_with_callback(tiny_model, docs, toy_suite, tmp_path)
    assert trainer.state.global_step == 4 and trainer.model.training
    assert callback.failures == [(2, repr(RuntimeError("CUDA out of memory (simulated)")))]
    assert [r.step for r in callback.results] == [4]
    assert "step 2: in-loop evaluation failed" in lines[0] and "training goes on" in lines[0]


def test_an_evaluation_is_quiet_unless_asked_for_progress(tiny_model, toy, toy_suite, capfd):
    import logging

    import lm_eval.api.task as lmeval_task

    transformers = pytest.importorskip("transformers")
    model = transformers.GPT2LMHeadModel.from_pretrained(tiny_model)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    bar = lmeval_task.tqdm
    capfd.readouterr()
    quiet = evaluate_model(model, tokenizer, [TASK], include_path=toy_suite)
    said = capfd.readouterr().err
    assert "Running loglikelihood requests" not in said and "Tokenizing inputs" not in said
    assert "not of type `str`" not in said and "already-initialized model" not in said
    assert "%|" not in said  # no bar at all, the documents' one included
    assert lmeval_task.tqdm is bar  # lm-eval's module is left as it was
    assert not logging.getLogger("lm_eval.models.huggingface").filters
    loud = evaluate_model(model, tokenizer, [TASK], include_path=toy_suite, progress=True)
    assert "Running loglikelihood requests" in capfd.readouterr().err
    assert loud.estimates[TASK].value == quiet.estimates[TASK].value


def test_only_the_two_in_memory_warnings_are_dropped(caplog):
    import logging

    from lmeval_microbench.inloop.quiet import IN_MEMORY_WARNINGS, in_memory_warnings_dropped

    logger = logging.getLogger("lm_eval.models.huggingface")
    with caplog.at_level(logging.WARNING, logger=logger.name), in_memory_warnings_dropped():
        for start in IN_MEMORY_WARNINGS:
            logger.warning(start + " and the rest of lm-eval's sentence")
        logger.warning("something else went wrong")
    assert [r.getMessage() for r in caplog.records] == ["something else went wrong"]
