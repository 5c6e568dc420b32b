"""``microbench curve`` on a real training run made here.

A tiny GPT-2 (test_harness's ``tiny_model``, built locally) is trained a few optimizer steps
on the toy task's text and saved at each checkpoint; each checkpoint is run through lm-eval
on the toy micro task and saved as its CLI does with ``--log_samples --output_path`` (its
``EvaluationTracker``); then the curve over the output folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import test_harness

from lmeval_microbench.cli.app import main

tiny_model = test_harness.tiny_model  # fixtures: the model, the toy bundle and its suite
toy = test_harness.toy
toy_suite = test_harness.toy_suite

STEPS = (0, 4, 8)


def train_checkpoints(start: Path, docs: list[dict], out: Path) -> list[Path]:
    """Checkpoints of ``start`` after each of STEPS AdamW steps on the documents' answers."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel.from_pretrained(start)
    tokenizer = transformers.AutoTokenizer.from_pretrained(start)
    text = "".join(f"{d['context']} {d['options'][d['gold']]}\n\n" for d in docs)
    batch = tokenizer(text, return_tensors="pt")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    folders, done = [], 0
    for step in STEPS:
        for _ in range(step - done):
            loss = model(**batch, labels=batch["input_ids"]).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        done = step
        folder = out / f"ckpt-step-{step}"
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders.append(folder)
    return folders


def lm_eval_run(checkpoint: Path, suite: Path, out: Path) -> None:
    """``lm-eval run --log_samples --output_path out`` in process: the same tracker writes
    the results json and samples file (lm-eval's CLI in a subprocess is minutes slower)."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    tracker = EvaluationTracker(output_path=str(out))
    results = lm_eval.simple_evaluate(
        model="hf",
        model_args=test_harness.model_args(checkpoint),
        tasks=[test_harness.TASK],
        task_manager=TaskManager(include_path=str(suite), include_defaults=False),
        log_samples=True,
        batch_size=4,
        evaluation_tracker=tracker,
    )
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for task in results["configs"]:
        tracker.save_results_samples(task_name=task, samples=samples[task])


@pytest.mark.slow
def test_curve_over_checkpoints_of_a_real_training_run(tiny_model, toy, toy_suite, tmp_path):
    _, docs = toy
    checkpoints = train_checkpoints(tiny_model, docs, tmp_path / "train")
    runs = []
    for folder in reversed(checkpoints):  # given out of order: the step regex orders them
        out = tmp_path / "runs" / folder.name
        lm_eval_run(folder, toy_suite, out)
        runs.append(out)
    curve_dir = tmp_path / "curve"
    args = ["curve", *map(str, runs), "--step-regex", r"step-(\d+)", "--bundle", str(toy_suite)]
    assert main([*args, "--out", str(curve_dir), "--quiet"]) == 0
    data = json.loads((curve_dir / "curve.json").read_text())
    assert [r["step"] for r in data["order"]["runs"]] == list(STEPS)
    curve = data["benchmarks"]["toy"]
    assert [p["step"] for p in curve["points"]] == list(STEPS)
    for point in curve["points"]:  # the curve's estimate is the one lm-eval printed
        (results,) = Path(point["run"]).rglob("results_*.json")
        in_run = json.loads(results.read_text())["results"][test_harness.TASK]
        assert point["estimate"] == pytest.approx(in_run["estimate,none"], abs=1e-12)
        assert point["raw"] == pytest.approx(in_run["acc,none"], abs=1e-12)
    assert len(curve["steps"]["estimate"]) == len(STEPS) - 1
    assert np.isfinite(curve["statistics"]["raw"]["total_variation"])
    assert (curve_dir / "curve_toy.png").read_bytes()[:4] == b"\x89PNG"
