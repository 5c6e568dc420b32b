"""``microbench adaptive`` end to end: a tiny random GPT-2 through lm-eval's own model API.

A pool task over synthetic toy items (multiple choice, and generative with the gsm8k rule) is
written with the same writer as the shipped tasks; the runs check that each step sends the
static task's exact requests, that the outputs reproduce the printed estimate, and that bad
input and a crashing model give one-line errors with the finished steps kept.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import test_harness
from test_harness import model_args, toy_doc, toy_question

from lmeval_microbench.adaptive import build_pool, pool_state
from lmeval_microbench.adaptive.pool import estimate_pool
from lmeval_microbench.bundle import MetricSpec, load_bundle
from lmeval_microbench.cli.app import main
from lmeval_microbench.collect import content_hash
from lmeval_microbench.harness import TaskSpec, write_task
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.synthetic import random_item_params, simulate_responses

pytestmark = pytest.mark.slow
_fresh_registry = test_harness._fresh_registry
tiny_model = test_harness.tiny_model


def write_pool(folder: Path, *, generate: bool = False, name: str = "toypool") -> Path:
    matrix, _ = simulate_responses(random_item_params(16, seed=3), 300, seed=4)
    make_doc = toy_question if generate else toy_doc
    docs = {item: make_doc(item, k, name) for k, item in enumerate(matrix.item_ids)}
    for doc in docs.values():
        doc["benchmark"] = "toy"
    items = matrix.items.copy()
    items["content_hash"] = [content_hash(docs[i]) for i in matrix.item_ids]
    source = ResponseMatrix(matrix.values, matrix.model_ids, matrix.item_ids, items=items)
    metric = "exact_match" if generate else "acc"
    bundle = build_pool(
        source,
        source.mean_scores(),
        name=name,
        benchmark="toy",
        metric=MetricSpec(name=metric),
        estimator="ridge",
    )
    spec = TaskSpec(
        task="microbench_pool_toy",
        data_dir="toy",
        output_type="generate_until" if generate else "multiple_choice",
        process_results="process_gsm8k" if generate else "process_acc",
        generation_kwargs={"until": ["\n\n"], "do_sample": False, "max_gen_toks": 8}
        if generate
        else None,
    )
    write_task(folder, spec, bundle, [docs[i] for i in bundle.item_ids])
    return folder


def run_cli(suite: Path, out: Path, model: Path, *extra: str) -> int:
    return main(
        [
            "adaptive",
            "--model",
            "hf",
            "--model_args",
            model_args(model),
            "--batch_size",
            "4",
            "--tasks",
            "microbench_pool_toy",
            "--include_path",
            str(suite),
            "--output_path",
            str(out),
            *extra,
        ]
    )


def read_outputs(out: Path) -> tuple[dict, list[dict]]:
    (results,) = out.glob("results_*.json")
    (samples,) = out.glob("samples_microbench_pool_toy_*.jsonl")
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    return json.loads(results.read_text()), lines


def test_multiple_choice_run_sends_the_static_requests_and_reproduces_its_estimate(
    tiny_model, tmp_path, capsys
):
    import lm_eval
    from lm_eval.tasks import TaskManager

    suite = write_pool(tmp_path / "suite")
    assert (
        run_cli(suite, tmp_path / "out", tiny_model, "--max-items", "6", "--items-per-step", "2")
        == 0
    )
    results, samples = read_outputs(tmp_path / "out")
    run = results["adaptive"]["microbench_pool_toy"]
    assert run["n_items"] == 6 and run["steps"] == 3 and run["stop_reason"] == "max_items"
    assert [s["doc"]["item_id"] for s in samples] == run["order"]
    assert [s["adaptive"]["position"] for s in samples] == list(range(1, 7))
    pool = pool_state(load_bundle(suite / "toy"))
    again = estimate_pool(pool, {s["doc"]["item_id"]: s["acc"] for s in samples})
    assert results["results"]["microbench_pool_toy"]["estimate,none"] == pytest.approx(again.value)
    printed = capsys.readouterr()
    assert "estimate" in printed.out
    steps = [line for line in printed.err.splitlines() if "microbench_pool_toy: step" in line]
    assert [line.split(",")[0] for line in steps] == [
        f"microbench_pool_toy: step {k} of at most 3" for k in (1, 2, 3)
    ]
    assert "6 of at most 6 items asked" in steps[-1]
    static = lm_eval.simple_evaluate(
        model="hf",
        model_args=model_args(tiny_model),
        tasks=["microbench_pool_toy"],
        task_manager=TaskManager(include_path=str(suite), include_defaults=False),
        log_samples=True,
        batch_size=4,
    )["samples"]["microbench_pool_toy"]
    by_item = {s["doc"]["item_id"]: s for s in static}
    for sample in samples:
        twin = by_item[sample["doc"]["item_id"]]
        assert sample["arguments"] == json.loads(json.dumps(twin["arguments"]))
        assert sample["acc"] == twin["acc"]
        np.testing.assert_allclose(
            [r[0][0] for r in sample["resps"]], [r[0][0] for r in twin["resps"]], atol=1e-4
        )


def test_generative_run_counts_and_names_unparsable_answers(tiny_model, tmp_path, capsys):
    suite = write_pool(tmp_path / "suite", generate=True)
    assert run_cli(suite, tmp_path / "out", tiny_model, "--max-items", "2") == 0
    results, samples = read_outputs(tmp_path / "out")
    run = results["adaptive"]["microbench_pool_toy"]
    assert len(samples) == 2 and all(s["exact_match"] == 0 for s in samples)
    assert run["unparsed"] == [s["doc"]["item_id"] for s in samples]
    assert "no parsable answer" in capsys.readouterr().err


def test_a_model_raising_mid_run_keeps_its_steps_and_resume_finishes(
    tiny_model, tmp_path, monkeypatch, capsys
):
    from lmeval_microbench.adaptive import runner

    suite = write_pool(tmp_path / "suite")
    real = runner.make_lm

    def failing(*args, **kwargs):
        lm, calls = real(*args, **kwargs), []
        original = lm.loglikelihood

        def loglikelihood(requests, **kw):
            calls.append(1)
            if len(calls) == 3:
                raise RuntimeError("GPU fell off the bus")
            return original(requests, **kw)

        lm.loglikelihood = loglikelihood
        return lm

    monkeypatch.setattr(runner, "make_lm", failing)
    assert (
        run_cli(suite, tmp_path / "out", tiny_model, "--max-items", "5", "--items-per-step", "1")
        == 2
    )
    last = capsys.readouterr().err.strip().splitlines()[-1]  # above it: lm-eval's progress bars
    assert "GPU fell off the bus" in last and "--resume" in last
    log = tmp_path / "out" / "adaptive_microbench_pool_toy.jsonl"
    assert len(log.read_text().splitlines()) == 2
    assert (
        run_cli(suite, tmp_path / "out", tiny_model, "--max-items", "5", "--items-per-step", "1")
        == 2
    )  # no --resume
    assert "--resume" in capsys.readouterr().err
    monkeypatch.setattr(runner, "make_lm", real)
    assert (
        run_cli(
            suite,
            tmp_path / "out",
            tiny_model,
            "--max-items",
            "5",
            "--items-per-step",
            "1",
            "--resume",
        )
        == 0
    )
    results, samples = read_outputs(tmp_path / "out")
    assert results["adaptive"]["microbench_pool_toy"]["resumed_items"] == 2
    assert len(samples) == 5 and len({s["doc"]["item_id"] for s in samples}) == 5


def test_edited_documents_and_a_foreign_pool_are_refused(tiny_model, tmp_path, capsys):
    suite = write_pool(tmp_path / "suite")
    items = suite / "toy" / "items.jsonl"
    docs = [json.loads(line) for line in items.read_text().splitlines()]
    docs[0]["context"] += " (edited)"
    items.write_text("".join(json.dumps(d) + "\n" for d in docs))
    assert run_cli(suite, tmp_path / "out", tiny_model) == 2
    assert "changed content" in capsys.readouterr().err
    other = write_pool(tmp_path / "other", name="toypool2")
    docs = [json.loads(line) for line in (other / "toy" / "items.jsonl").read_text().splitlines()]
    for doc in docs:
        doc["benchmark"] = "mmlu"
    (other / "toy" / "items.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    assert run_cli(other, tmp_path / "out2", tiny_model) == 2
    err = capsys.readouterr().err
    assert "benchmark 'mmlu'" in err or "changed content" in err


def test_demo_adaptive_runs_the_shipped_pool_and_prints_items_and_time(
    tiny_model, monkeypatch, capsys
):
    import argparse

    from lm_eval.models.huggingface import HFLM

    from lmeval_microbench.cli import demo

    monkeypatch.setattr(
        demo, "load_smollm2", lambda batch_size=1: HFLM(pretrained=str(tiny_model), device="cpu")
    )
    args = argparse.Namespace(tasks="truthfulqa", gsm8k=False, batch_size=1, max_items=2)
    demo.run_adaptive(args)
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| truthfulqa"))
    assert "| 2 |" in row and " s |" in row


@pytest.mark.parametrize(("benchmark", "chance"), [("winogrande", 0.5), ("hellaswag", 0.25)])
def test_a_random_weights_model_on_a_shipped_pool_is_checked_and_reaches_chance(
    tiny_model, tmp_path, capsys, benchmark, chance
):
    """Issue 21: a random GPT-2 on the winogrande pool got 79.8 [72.7, 87.0], no warning."""
    from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS

    out = tmp_path / "out"
    command = [
        "adaptive",
        "--model",
        "hf",
        "--model_args",
        model_args(tiny_model),
        "--tasks",
        f"microbench_pool_{benchmark}",
        "--include_path",
        str(SHIPPED_POOLS / "openllm_v1"),
        "--output_path",
        str(out),
        "--max-items",
        "12",
    ]
    assert main(command) == 0
    (results,) = out.glob("results_*.json")
    payload = json.loads(results.read_text())
    task = f"microbench_pool_{benchmark}"
    found, fit = payload["results"][task], payload["adaptive"][task]["person_fit"]
    assert fit["checked"] and fit["chance_score"] == pytest.approx(chance, abs=0.01)
    assert found["estimate_lower,none"] <= fit["chance_score"] <= found["estimate_upper,none"]
    assert abs(found["estimate,none"] - fit["chance_score"]) < 0.1
    printed = capsys.readouterr()
    assert fit["guessing"] and "person fit" in printed.err
    place = payload["adaptive"][task]["placement"]  # the run's ability against the sources
    assert set(place) == {"side", "p_above", "p_below"} and place["side"] in ("", "below")
    assert (place["side"] == "below") == ("↓" in printed.out)
