"""lm-eval integration: scoring hooks, estimates joined by id, and real lm-eval runs.

The end-to-end tests run a tiny random GPT-2 (built here, nothing downloaded) through the
real lm-eval Python API and CLI on a 5-item task written with ``harness.export``, and check
that the estimate lm-eval prints equals the one recomputed from the ``--log_samples`` file
with ``collect`` + ``reconstruct``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from tiny_models import build_random_gpt2

from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle import Bundle, MetricSpec, load_bundle
from lmeval_microbench.collect import collect_samples, content_hash
from lmeval_microbench.errors import BundleError, InputError, ItemMismatchError
from lmeval_microbench.harness import (
    EstimateOptions,
    TaskSpec,
    clear_registry,
    estimate_run,
    hooks,
    register_bundle,
    write_task,
)
from lmeval_microbench.harness.docs import ITEMS_JSONL, read_docs
from lmeval_microbench.personfit import check_estimate
from lmeval_microbench.reconstruct import bundle_estimator, estimate_models
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.synthetic import random_item_params, simulate_responses

N_ITEMS, N_MODELS, BUDGET = 24, 300, 5
TASK = "microbench_toy"


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(autouse=True)
def _fresh_registry():
    yield
    clear_registry()


def toy_doc(item: str, k: int, bundle_name: str) -> dict[str, Any]:
    return {
        "item_id": item,
        "bundle": bundle_name,
        "benchmark": "toy",
        "context": f"Question: which number comes after {k}?\nAnswer:",
        "options": [str(k + 1), f"{k + 2} or so", "a banana", str(k)],
        "gold": 0,
    }


def toy_question(item: str, k: int, bundle_name: str) -> dict[str, Any]:
    return {
        "item_id": item,
        "bundle": bundle_name,
        "benchmark": "toy-math",
        "context": f"Question: what is {k} + 1?\nAnswer:",
        "answer": f"{k} + 1 = {k + 1}\n#### {k + 1}",
    }


def toy_bundle(
    name: str, *, estimators=("mean", "calibrated"), generate: bool = False
) -> tuple[Bundle, list[dict]]:
    """A bundle of BUDGET toy items fitted on simulated models, and its documents."""
    matrix, _ = simulate_responses(random_item_params(N_ITEMS, seed=3), N_MODELS, seed=4)
    make_doc = toy_question if generate else toy_doc
    docs = {item: make_doc(item, k, name) for k, item in enumerate(matrix.item_ids)}
    items = matrix.items.copy()
    items["content_hash"] = [content_hash(docs[i]) for i in matrix.item_ids]
    source = ResponseMatrix(matrix.values, matrix.model_ids, matrix.item_ids, items=items)
    bundle = build_bundle(
        source,
        source.mean_scores(),
        name=name,
        benchmark="toy",
        method="random",
        budget=BUDGET,
        seed=0,
        estimators=list(estimators),
        default_estimator=estimators[-1],
        metric=MetricSpec(name="exact_match" if generate else "acc"),
    )
    return bundle, [docs[item] for item in bundle.item_ids]


@pytest.fixture(scope="module")
def toy() -> tuple[Bundle, list[dict]]:
    return toy_bundle(f"toy-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def toy_suite(tmp_path: Path, toy) -> Path:
    bundle, docs = toy
    spec = TaskSpec(
        task=TASK, data_dir="toy", output_type="multiple_choice", process_results="process_acc"
    )
    write_task(tmp_path / "suite", spec, bundle, docs)
    return tmp_path / "suite"


def item_scores(bundle: Bundle, pattern: list[float]) -> list[tuple]:
    return [
        (bundle.name, item, "acc", score)
        for item, score in zip(bundle.item_ids, pattern, strict=True)
    ]


# ---------------------------------------------------------------------------- estimates
def test_estimate_joins_scores_by_id_whatever_their_order(toy):
    bundle, _ = toy
    register_bundle(bundle)
    values = item_scores(bundle, [1.0, 0.0, 1.0, 0.0, 0.0])
    direct = bundle_estimator(bundle).estimate({v[1]: v[3] for v in values})
    shuffled = [values[k] for k in (3, 0, 4, 2, 1)]
    # the test can fail: joining the shuffled scores by position gives another estimate
    by_position = dict(zip(bundle.item_ids, [v[3] for v in shuffled], strict=True))
    assert bundle_estimator(bundle).estimate(by_position).value != pytest.approx(direct.value)
    for order in (values, shuffled, list(reversed(values))):
        assert hooks.estimate(order) == pytest.approx(direct.value, abs=1e-12)
        assert hooks.estimate_lower(order) == pytest.approx(direct.lower, abs=1e-12)
        assert hooks.estimate_upper(order) == pytest.approx(direct.upper, abs=1e-12)
    assert direct.lower <= direct.value <= direct.upper


def test_estimate_accepts_lists_as_read_back_from_samples_json(toy):
    bundle, _ = toy
    register_bundle(bundle)
    values = item_scores(bundle, [1.0, 1.0, 0.0, 1.0, 0.0])
    assert hooks.estimate([list(v) for v in values]) == hooks.estimate(values)


def test_missing_items_give_nan_and_a_warning_naming_the_count(toy, caplog):
    bundle, _ = toy
    register_bundle(bundle)
    values = item_scores(bundle, [1.0, 0.0, 1.0, 0.0, 0.0])[:3]
    with caplog.at_level(logging.WARNING, logger="lmeval_microbench.harness"):
        result = estimate_run(values)
    assert math.isnan(result.value) and math.isnan(result.lower) and math.isnan(result.upper)
    assert (result.n_scored, result.n_items) == (3, BUDGET)
    assert "2 of 5 subset items have no score" in caplog.text
    assert "--limit" in caplog.text


def test_allow_missing_estimates_from_the_scored_items_and_says_so(toy, caplog):
    bundle, _ = toy
    register_bundle(bundle, EstimateOptions(allow_missing=True))
    values = item_scores(bundle, [1.0, 0.0, 1.0, 0.0, 0.0])[:3]
    with caplog.at_level(logging.WARNING, logger="lmeval_microbench.harness"):
        result = estimate_run(values)
    expected = bundle_estimator(bundle).estimate({v[1]: v[3] for v in values}, allow_missing=True)
    assert result.value == pytest.approx(expected.value, abs=1e-12)
    assert "from 3 of 5 subset items" in caplog.text
    assert "2 missing scores are imputed" in caplog.text


def test_allow_missing_imputes_for_every_estimator_but_needs_irt_parameters(toy):
    bundle, _ = toy
    register_bundle(bundle, EstimateOptions(estimator="mean", allow_missing=True))
    result = estimate_run(item_scores(bundle, [1.0, 0.0, 1.0, 0.0, 0.0])[:3])
    assert math.isfinite(result.value) and result.lower < result.value < result.upper
    clear_registry()
    without_irt = dataclasses.replace(bundle, irt=None)
    with pytest.raises(InputError, match=r"IRT parameters.*also stores \['calibrated'\]: pick"):
        register_bundle(without_irt, EstimateOptions(estimator="mean", allow_missing=True))


def test_options_pick_another_stored_estimator_and_level(toy):
    bundle, _ = toy
    scores = [1.0, 1.0, 0.0, 1.0, 0.0]
    register_bundle(bundle, EstimateOptions(estimator="mean", level=0.5))
    result = estimate_run(item_scores(bundle, scores))
    expected = bundle_estimator(bundle, "mean").estimate(
        dict(zip(bundle.item_ids, scores, strict=True)), level=0.5
    )
    assert result.estimator == "mean"
    assert (result.value, result.lower, result.upper) == pytest.approx(
        (expected.value, expected.lower, expected.upper)
    )
    with pytest.raises(BundleError, match="no estimator 'gpirt'"):
        register_bundle(bundle, EstimateOptions(estimator="gpirt"))


@pytest.mark.parametrize(
    ("mutate", "error", "match"),
    [
        (lambda v: [*v, v[0]], ItemMismatchError, "scored twice"),
        (lambda v: [*v, (v[0][0], "toy.unknown", "acc", 1.0)], ItemMismatchError, "not in"),
        (lambda v: [(b, i, "acc_norm", s) for b, i, _, s in v], ItemMismatchError, "metric"),
        (lambda v: [*v, ("other-bundle", "x", "acc", 1.0)], ItemMismatchError, "bundles"),
        (lambda v: [(b, i, m, 2.0) for b, i, m, _ in v], InputError, r"not in \[0, 1\]"),
        (lambda v: [v[0][:3]], InputError, "expected \\(bundle, item_id"),
        (lambda v: [], ItemMismatchError, "no item scores"),
    ],
)
def test_bad_item_scores_are_errors(toy, mutate, error, match):
    bundle, _ = toy
    register_bundle(bundle)
    with pytest.raises(error, match=match):
        estimate_run(mutate(item_scores(bundle, [1.0] * BUDGET)))


def test_unknown_bundle_and_name_clash_are_errors(toy):
    bundle, _ = toy
    with pytest.raises(BundleError, match="not loaded in this process"):
        hooks.estimate(item_scores(bundle, [1.0] * BUDGET))
    register_bundle(bundle)
    register_bundle(bundle)  # the same bundle again is fine
    other, _ = toy_bundle(bundle.name, estimators=("mean",))
    with pytest.raises(BundleError, match="two different bundles named"):
        register_bundle(other)


# ---------------------------------------------------------------------------- scoring hooks
def test_choice_hooks_score_like_lm_eval():
    doc = {"item_id": "t.1", "bundle": "b", "options": ["a", "bbbbbbbb", "cc"], "gold": 1}
    # raw loglikelihood prefers "a"; per character, "bbbbbbbb" wins
    results = [(-2.0, False), (-8.0, False), (-9.0, False)]
    out = hooks.process_acc_norm(doc, results)
    assert (out["acc"], out["acc_norm"]) == (0.0, 1.0)
    assert out["estimate"] == ("b", "t.1", "acc_norm", 1.0)
    assert hooks.process_acc(doc, results)["estimate_upper"] == ("b", "t.1", "acc", 0.0)
    assert hooks.process_mc1({**doc, "gold": 0}, results)["mc1"] == 1.0
    with pytest.raises(InputError, match="2 loglikelihoods for 3 choices"):
        hooks.process_acc(doc, results[:2])


def test_multiple_input_hook_scores_contexts():
    doc = {"item_id": "w.1", "bundle": "b", "contexts": ["x A", "x B"], "gold": 1}
    assert hooks.process_acc(doc, [(-3.0, False), (-1.0, False)])["acc"] == 1.0
    assert hooks.process_acc(doc, [(-1.0, False), (-3.0, False)])["acc"] == 0.0


@pytest.mark.parametrize(
    ("completion", "score"),
    [
        (" She pays 3 + 4 = 7 dollars.\n#### 1,234", 1.0),
        (" #### 1234", 1.0),
        (" #### 1234.", 0.0),  # the leaderboard rule keeps the trailing period
        (" The answer is 1234", 0.0),  # no '#### ': invalid, never correct
        (" #### 1235\n#### 1234", 0.0),  # the first final answer counts
    ],
)
def test_gsm8k_hook_applies_the_leaderboard_rule(completion, score):
    doc = {"item_id": "g.1", "bundle": "b", "answer": "2 + 2 = 4\n#### 1,234"}
    out = hooks.process_gsm8k(doc, [completion])
    assert out["exact_match"] == score
    assert out["estimate"] == ("b", "g.1", "exact_match", score)
    with pytest.raises(InputError, match="no '#### '"):
        hooks.process_gsm8k({**doc, "answer": "4"}, [completion])


# ---------------------------------------------------------------------------- loading
def test_load_docs_checks_documents_against_the_bundle(toy_suite, toy):
    bundle, docs = toy
    dataset = hooks.load_docs(base_dir=toy_suite, microbench_items="toy", pretrained="ignored")
    rows = list(dataset["test"])
    assert [row["item_id"] for row in rows] == list(bundle.item_ids)
    assert rows == docs
    values = [(bundle.name, r["item_id"], "acc", 1.0) for r in rows]
    assert math.isfinite(hooks.estimate(values))  # registered by the loader


def test_load_docs_refuses_an_edited_document(toy_suite):
    path = toy_suite / "toy" / ITEMS_JSONL
    docs = read_docs(path)
    docs[2]["context"] = docs[2]["context"].replace("after", "before")
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    with pytest.raises(ItemMismatchError, match=f"hash differs\\): {docs[2]['item_id']!r}"):
        hooks.load_docs(base_dir=toy_suite, microbench_items="toy")


def test_load_docs_refuses_missing_and_foreign_documents(toy_suite, toy):
    _, docs = toy
    path = toy_suite / "toy" / ITEMS_JSONL
    path.write_text("".join(json.dumps(d) + "\n" for d in docs[1:]), encoding="utf-8")
    with pytest.raises(ItemMismatchError, match="1 subset items are missing"):
        hooks.load_docs(base_dir=toy_suite, microbench_items="toy")
    stranger = {**docs[0], "bundle": "someone-else"}
    path.write_text("".join(json.dumps(d) + "\n" for d in [stranger, *docs[1:]]))
    with pytest.raises(ItemMismatchError, match="names bundle 'someone-else'"):
        hooks.load_docs(base_dir=toy_suite, microbench_items="toy")
    with pytest.raises(BundleError, match="no bundle found"):
        hooks.load_docs(base_dir=toy_suite, microbench_items="nowhere")
    with pytest.raises(InputError, match="microbench_allow_missing"):
        hooks.load_docs(
            base_dir=toy_suite, microbench_items="toy", microbench_allow_missing="perhaps"
        )


def test_write_task_refuses_a_bundle_of_another_metric(tmp_path, toy):
    bundle, docs = toy
    spec = TaskSpec(
        task="t", data_dir="t", output_type="multiple_choice", process_results="process_acc_norm"
    )
    with pytest.raises(InputError, match="estimates 'acc'"):
        write_task(tmp_path, spec, bundle, docs)


def test_write_task_is_idempotent(toy_suite, toy):
    bundle, docs = toy
    files = sorted(p for p in toy_suite.rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in files}
    spec = TaskSpec(
        task=TASK, data_dir="toy", output_type="multiple_choice", process_results="process_acc"
    )
    write_task(toy_suite, spec, bundle, list(reversed(docs)))
    assert {p: p.read_bytes() for p in files} == before


# ---------------------------------------------------------------------------- lm-eval runs
@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A random 2-layer GPT-2 with a byte-level tokenizer, saved locally (no download)."""
    pytest.importorskip("lm_eval")
    pytest.importorskip("accelerate", reason="lm-eval's hf model needs accelerate")
    for module in ("torch", "tokenizers", "transformers"):
        pytest.importorskip(module)
    return build_random_gpt2(tmp_path_factory.mktemp("tiny-gpt2"), seed=0)


def model_args(folder: Path, *, device: bool = True) -> str:
    return f"pretrained={folder},dtype=float32" + (",device=cpu" if device else "")


def recomputed_estimate(samples: Path, bundle: Bundle, metric: str) -> dict[str, Any]:
    """The estimate from a samples file: collect by item id, then reconstruct."""
    matrix = collect_samples(
        samples, metric=metric, id_field="item_id", model_id="tiny", progress=False
    )
    (record,) = estimate_models(bundle, matrix)
    return record


def assert_same_estimate(task_results: dict[str, Any], record: dict[str, Any]) -> None:
    assert task_results["estimate,none"] == pytest.approx(record["estimate_value"], abs=1e-12)
    assert task_results["estimate_lower,none"] == pytest.approx(record["estimate_lower"], abs=1e-12)
    assert task_results["estimate_upper,none"] == pytest.approx(record["estimate_upper"], abs=1e-12)


def test_simple_evaluate_estimate_equals_recomputation_from_samples(
    tiny_model, toy_suite, toy, tmp_path
):
    import lm_eval
    from lm_eval.tasks import TaskManager

    bundle, docs = toy
    # documents in another order than the bundle's items: only a join by id gets this right
    shuffled = [docs[k] for k in (2, 4, 0, 3, 1)]
    (toy_suite / "toy" / ITEMS_JSONL).write_text("".join(json.dumps(d) + "\n" for d in shuffled))
    results = lm_eval.simple_evaluate(
        model="hf",
        model_args=model_args(tiny_model),
        tasks=[TASK],
        task_manager=TaskManager(include_path=str(toy_suite), include_defaults=False),
        log_samples=True,
        batch_size=4,
    )
    samples = results["samples"][TASK]
    assert [s["doc"]["item_id"] for s in samples] != list(bundle.item_ids)
    path = tmp_path / f"samples_{TASK}_2025-01-01T00-00-00.jsonl"
    path.write_text("".join(json.dumps(s, default=str) + "\n" for s in samples))
    task_results = results["results"][TASK]
    assert task_results["acc,none"] == pytest.approx(np.mean([s["acc"] for s in samples]))
    record = recomputed_estimate(path, load_bundle(toy_suite / "toy"), "acc")
    assert record["items_scored"] == BUDGET
    assert_same_estimate(task_results, record)
    assert task_results["estimate_lower,none"] <= task_results["estimate,none"]
    assert task_results["estimate,none"] <= task_results["estimate_upper,none"]
    assert task_results["estimate_stderr,none"] == "N/A"  # no bootstrap of the estimator


def test_limit_reports_nan_unless_missing_items_are_allowed(tiny_model, toy_suite, caplog):
    import lm_eval
    from lm_eval.tasks import TaskManager

    with caplog.at_level(logging.WARNING, logger="lmeval_microbench.harness"):
        results = lm_eval.simple_evaluate(
            model="hf",
            model_args=model_args(tiny_model),
            tasks=[TASK],
            task_manager=TaskManager(include_path=str(toy_suite), include_defaults=False),
            limit=3,
        )
    assert math.isnan(results["results"][TASK]["estimate,none"])
    assert "2 of 5 subset items have no score" in caplog.text
    # opting in through lm-eval's --metadata reaches the loader
    manager = TaskManager(
        include_path=str(toy_suite),
        include_defaults=False,
        metadata={"microbench_allow_missing": True},
    )
    with caplog.at_level(logging.WARNING, logger="lmeval_microbench.harness"):
        results = lm_eval.simple_evaluate(
            model="hf",
            model_args=model_args(tiny_model),
            tasks=[TASK],
            task_manager=manager,
            limit=3,
        )
    assert math.isfinite(results["results"][TASK]["estimate,none"])
    assert "from 3 of 5 subset items" in caplog.text
    assert "2 missing scores are imputed" in caplog.text


def test_generate_until_task_scores_completions_and_estimates(tiny_model, tmp_path):
    import lm_eval
    from lm_eval.tasks import TaskManager

    bundle, docs = toy_bundle(f"toy-math-{uuid.uuid4().hex[:8]}", generate=True)
    spec = TaskSpec(
        task="microbench_toy_math",
        data_dir="toy_math",
        output_type="generate_until",
        process_results="process_gsm8k",
        generation_kwargs={"until": [":", "Question:"], "do_sample": False, "max_gen_toks": 8},
    )
    write_task(tmp_path, spec, bundle, docs)
    results = lm_eval.simple_evaluate(
        model="hf",
        model_args=model_args(tiny_model),
        tasks=[spec.task],
        task_manager=TaskManager(include_path=str(tmp_path), include_defaults=False),
        log_samples=True,
    )
    samples = results["samples"][spec.task]
    for sample in samples:  # our hook scored the filtered completion lm-eval logged
        completion = sample["filtered_resps"][0]
        assert isinstance(completion, str) and ":" not in completion
        assert sample["exact_match"] == hooks.gsm8k_exact_match(sample["doc"], completion)
    scores = {s["doc"]["item_id"]: s["exact_match"] for s in samples}
    raw = bundle_estimator(bundle).estimate(scores)
    expected = check_estimate(bundle, scores, raw)[0]  # after person fit, as every estimate
    assert results["results"][spec.task]["estimate,none"] == pytest.approx(expected.value)


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    cli = Path(sys.executable).with_name("lm-eval")
    if not cli.exists():
        pytest.skip(f"lm-eval CLI not found beside {sys.executable}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    args = [*args, "--device", "cpu"]
    done = subprocess.run(
        [str(cli), "run", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def cli_outputs(out: Path, task: str) -> tuple[dict[str, Any], Path]:
    (results_file,) = out.rglob("results_*.json")
    (samples_file,) = out.rglob(f"samples_{task}_*.jsonl")
    return json.loads(results_file.read_text())["results"][task], samples_file


@pytest.mark.slow
def test_cli_estimate_equals_recomputation_from_samples_file(tiny_model, toy_suite, tmp_path):
    out = tmp_path / "out"
    done = run_cli(
        [
            "--model",
            "hf",
            "--model_args",
            model_args(tiny_model, device=False),
            "--tasks",
            TASK,
            "--include_path",
            str(toy_suite),
            "--log_samples",
            "--output_path",
            str(out),
            "--batch_size",
            "4",
        ],
        tmp_path,
    )
    assert "estimate_lower" in done.stdout and "estimate_upper" in done.stdout
    task_results, samples = cli_outputs(out, TASK)
    record = recomputed_estimate(samples, load_bundle(toy_suite / "toy"), "acc")
    assert_same_estimate(task_results, record)


@pytest.mark.slow
def test_cli_shipped_truthfulqa_estimate_equals_recomputation(tiny_model, tmp_path):
    from lmeval_microbench.harness import include_path

    task = "microbench_truthfulqa"
    out = tmp_path / "out"
    run_cli(
        [
            "--model",
            "hf",
            "--model_args",
            model_args(tiny_model, device=False),
            "--tasks",
            task,
            "--include_path",
            str(include_path()),
            "--log_samples",
            "--output_path",
            str(out),
            "--batch_size",
            "8",
        ],
        tmp_path,
    )
    task_results, samples = cli_outputs(out, task)
    bundle = load_bundle(include_path() / "openllm_v1" / "truthfulqa")
    record = recomputed_estimate(samples, bundle, "mc1")
    assert record["items_scored"] == bundle.budget
    assert_same_estimate(task_results, record)
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    logged = {line["doc"]["item_id"]: content_hash(line["doc"]) for line in lines}
    assert logged == dict(bundle.content_hashes)  # the logged docs are the shipped ones
    assert pd.Series([line["mc1"] for line in lines]).mean() == pytest.approx(
        task_results["mc1,none"]
    )
