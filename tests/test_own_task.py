"""``microbench build --task``: a micro version of a user's own lm-eval task.

The original tasks are written here as YAMLs over local JSON-lines files (no download): a
multiple-choice task with few-shot examples, one in winogrande's multiple-input form, and a
generative one with a filter and ``exact_match(ignore_case)``. The fast tests check that every
selected item of the micro task sends lm-eval exactly the requests a full run of the original
sends; the slow test runs a tiny random GPT-2 on the first and the last and checks the scores
against the original task's and the in-run estimate against a recomputation from the samples.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import test_harness
import yaml

from lmeval_microbench.bundle import load_bundle
from lmeval_microbench.cli.app import main
from lmeval_microbench.collect import collect_samples, content_hash
from lmeval_microbench.errors import InputError, ItemMismatchError
from lmeval_microbench.harness import clear_registry
from lmeval_microbench.harness.render import load_task, render_task, with_document_hashes
from lmeval_microbench.responses import ResponseMatrix

pytest.importorskip("lm_eval")
tiny_model = test_harness.tiny_model  # the fixture: a random GPT-2 built locally

N_ITEMS = 24
N_MODELS = 40
BUDGET = 8
WORDS = ["red", "blue", "green", "stone", "river", "cloud", "apple", "night"]


@pytest.fixture(autouse=True)
def _offline_and_fresh(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    clear_registry()
    yield
    clear_registry()


def mc_doc(k: int) -> dict[str, Any]:
    choices = [WORDS[(k + j) % len(WORDS)] for j in range(4)]
    return {"id": f"q{k}", "question": f"Which word is number {k}?", "choices": choices,
            "answer": k % 4}  # fmt: skip


def wino_doc(k: int) -> dict[str, Any]:
    """Winogrande's form: one context per option, a shared continuation, the answer index."""
    first, second = WORDS[k % len(WORDS)], WORDS[(k + 3) % len(WORDS)]
    return {"id": f"w{k}", "contexts": [f"The {first} was", f"The {second} was"],
            "continuation": f"bigger than item {k}.", "answer": k % 2}  # fmt: skip


def gen_doc(k: int) -> dict[str, Any]:
    return {"id": f"g{k}", "question": f"Say the word {WORDS[k % len(WORDS)]}.",
            "target": WORDS[k % len(WORDS)].upper()}  # fmt: skip


def write_jsonl(path: Path, docs: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(doc) + "\n" for doc in docs))
    return str(path)


LOCAL_DATA = """\
task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    train: {train}
    test: {test}
training_split: train
test_split: test
fewshot_split: train
"""
"""The head of both original task YAMLs: documents from local JSON-lines files."""

MC_YAML = """\
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
num_fewshot: 2
metric_list:
  - metric: acc
  - metric: acc_norm
"""

WINO_YAML = """\
output_type: multiple_choice
doc_to_text: answer
doc_to_choice: "{{{{contexts}}}}"
doc_to_target: continuation
num_fewshot: 2
metric_list:
  - metric: acc
"""

GEN_YAML = """\
output_type: generate_until
doc_to_text: "Q: {{{{question}}}}\\nA:"
doc_to_target: "{{{{target}}}}"
generation_kwargs:
  until: ["\\n"]
  do_sample: false
  max_gen_toks: 6
num_fewshot: 1
filter_list:
  - name: first-word
    filter:
      - function: regex
        regex_pattern: "(\\\\w+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
"""


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> dict[str, Any]:
    """The original task YAMLs, their documents, and a response matrix of each."""
    folder = tmp_path_factory.mktemp("original-tasks")
    found: dict[str, Any] = {"folder": folder}
    for name, make_doc, template in (
        ("toy_mc", mc_doc, MC_YAML),
        ("toy_wino", wino_doc, WINO_YAML),
        ("toy_gen", gen_doc, GEN_YAML),
    ):
        docs = [make_doc(k) for k in range(N_ITEMS)]
        train = write_jsonl(folder / f"{name}_train.jsonl", [make_doc(100 + k) for k in range(4)])
        test = write_jsonl(folder / f"{name}_test.jsonl", docs)
        text = (LOCAL_DATA + template).format(name=name, train=train, test=test)
        (folder / f"{name}.yaml").write_text(text)
        found[name] = {"yaml": folder / f"{name}.yaml", "docs": docs}
        found[name]["matrix"] = write_matrix(folder / f"{name}.parquet", docs)
    return found


def write_matrix(path: Path, docs: list[dict[str, Any]], hashes: list[str] | None = None) -> Path:
    """A 1PL-like matrix over the documents, ids as ``collect`` gives them (the ``id`` field)."""
    rng = np.random.default_rng(0)
    ability = rng.normal(size=(N_MODELS, 1))
    difficulty = rng.normal(size=(1, len(docs)))
    values = (rng.random((N_MODELS, len(docs))) < 1 / (1 + np.exp(difficulty - ability))) * 1.0
    ids = [doc["id"] for doc in docs]
    matrix = ResponseMatrix(values, [f"model-{m}" for m in range(N_MODELS)], ids)
    matrix.items["content_hash"] = hashes or [content_hash(doc) for doc in docs]
    matrix.to_parquet(path)
    return path


def build(originals, task: str, out: Path, *extra: str) -> int:
    return main(
        ["build", "--responses", str(originals[task]["matrix"]),
         "--task", str(originals[task]["yaml"]),
         "--method", "random", "--budget", str(BUDGET), "--estimators", "calibrated,mean",
         "--out", str(out), *extra]
    )  # fmt: skip


def requests_by_item(task_obj: Any, field: str) -> dict[str, list[tuple]]:
    task_obj.build_all_requests(rank=0, world_size=1)
    found: dict[str, list[tuple]] = {}
    for instance in task_obj.instances:
        found.setdefault(instance.doc[field], []).append(tuple(instance.arguments))
    return found


@pytest.mark.slow
@pytest.mark.parametrize(
    ("task", "metric"), [("toy_mc", "acc_norm"), ("toy_wino", "acc"), ("toy_gen", None)]
)
def test_micro_task_sends_exactly_the_original_requests(originals, tmp_path, capsys, task, metric):
    out = tmp_path / "micro"
    extra = ["--metric", metric] if metric else ["--filter", "first-word"]
    assert build(originals, task, out, *extra) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["task"] == f"micro_{task}" and summary["items"] == BUDGET
    assert f"--include_path {out} --tasks micro_{task}" in summary["run"]
    bundle = load_bundle(out / task)
    assert bundle.metric.name == (metric or "exact_match")
    assert bundle.dataset is not None and bundle.dataset.path == "json"
    micro = load_task(f"micro_{task}", include_path=out)
    original = load_task(str(originals[task]["yaml"]))
    sent = requests_by_item(micro, "item_id")
    expected = requests_by_item(original, "id")
    assert set(sent) == set(bundle.item_ids)
    assert len(set(sent) | set(expected)) == N_ITEMS  # the micro items are original items
    for item, arguments in sent.items():
        assert arguments == expected[item], item  # same contexts, continuations, gen kwargs
    assert any("\n\n" in args[0] for args in sent[next(iter(sent))])  # few-shot included
    config = yaml.safe_load((out / f"micro_{task}.yaml").read_text().replace("!function", ""))
    if task == "toy_gen":
        assert [f["name"] for f in config["filter_list"]] == ["first-word"]


def test_rebuilding_needs_overwrite(originals, tmp_path, capsys):
    out = tmp_path / "micro"
    assert build(originals, "toy_mc", out) == 0
    assert build(originals, "toy_mc", out) == 2
    assert "already holds task 'micro_toy_mc'; pass --overwrite" in capsys.readouterr().err
    assert build(originals, "toy_mc", out, "--overwrite") == 0


def test_changed_documents_stop_the_build_naming_the_items(originals, tmp_path):
    docs = originals["toy_mc"]["docs"]
    hashes = [content_hash(doc) for doc in docs]
    hashes[3] = content_hash({**docs[3], "question": "an older wording"})
    matrix = write_matrix(tmp_path / "old.parquet", docs, hashes)
    task_obj = load_task(str(originals["toy_mc"]["yaml"]))
    rendered = render_task(task_obj, metric="acc")
    with pytest.raises(ItemMismatchError, match=r"1 items of task 'toy_mc' differ.*\['q3'\]"):
        with_document_hashes(ResponseMatrix.read(matrix), rendered, "b")


def test_ids_the_task_does_not_have_are_named(originals, tmp_path, capsys):
    code = build(originals, "toy_mc", tmp_path / "micro", "--id-prefix", "mc.")
    assert code == 2
    err = capsys.readouterr().err
    assert "no document with item ids ['q0'" in err and "--id-field/--id-prefix" in err


@pytest.mark.parametrize(
    ("task", "extra", "match"),
    [
        ("toy_mc", ["--metric", "exact_match"], "cannot score metric 'exact_match'"),
        ("toy_gen", ["--filter", "strict"], "has no filter 'strict'; its filters: \\['first-word'"),
        ("toy_gen", ["--metric", "bleu"], "does not report 'bleu'"),
    ],
)
def test_unsupported_scoring_is_refused(originals, tmp_path, capsys, task, extra, match):
    assert build(originals, task, tmp_path / "micro", *extra) == 2
    assert re.search(match, capsys.readouterr().err)


def test_a_custom_process_results_is_refused(originals, tmp_path):
    (tmp_path / "custom_hooks.py").write_text("def score(doc, results):\n    return {'acc': 1}\n")
    text = originals["toy_mc"]["yaml"].read_text().replace("task: toy_mc", "task: toy_custom")
    (tmp_path / "toy_custom.yaml").write_text(
        text + "process_results: !function custom_hooks.score\n"
    )
    task_obj = load_task(str(tmp_path / "toy_custom.yaml"))
    with pytest.raises(InputError, match="scores with its own process_results"):
        render_task(task_obj, metric="acc")


def test_an_id_field_shared_by_several_documents_is_refused(originals):
    task_obj = load_task(str(originals["toy_mc"]["yaml"]))
    with pytest.raises(InputError, match=r"item ids \['0', '1', '2', '3'\] name more than one"):
        render_task(task_obj, metric="acc", id_field="answer")


def test_mutual_information_requests_are_not_taken_for_choices(originals, tmp_path):
    text = originals["toy_mc"]["yaml"].read_text().replace("task: toy_mc", "task: toy_mi")
    (tmp_path / "toy_mi.yaml").write_text(text + "  - metric: acc_mutual_info\n")
    rendered = render_task(load_task(str(tmp_path / "toy_mi.yaml")), metric="acc")
    plain = render_task(load_task(str(originals["toy_mc"]["yaml"])), metric="acc")
    for item, doc in rendered.docs.items():
        assert doc["context"] == plain.docs[item]["context"] and len(doc["options"]) == 4


@pytest.mark.slow  # 12-20 s: the default run stays under 15 minutes
def test_unknown_task_and_groups_are_clear_errors(tmp_path):
    with pytest.raises(InputError, match="task YAML not found"):
        load_task(str(tmp_path / "nope.yaml"))
    with pytest.raises(InputError, match="lm-eval does not know task 'no_such_task_xyz'"):
        load_task("no_such_task_xyz", include_path=tmp_path)


# ---------------------------------------------------------------------------- tiny model
@pytest.mark.slow
def test_tiny_model_scores_micro_items_like_the_original_task(originals, tiny_model, tmp_path):
    import lm_eval
    from lm_eval.tasks import TaskManager

    out = tmp_path / "micro"
    # the multiple-choice bundle reads its items with `similar` (model-similarity AIPW), the
    # generation one with the default estimator: both printed inside the lm-eval run
    similar = ("--estimators", "calibrated,similar", "--default-estimator", "similar")
    assert build(originals, "toy_mc", out, "--metric", "acc_norm", *similar) == 0
    assert build(originals, "toy_gen", out, "--filter", "first-word") == 0
    assert load_bundle(out / "toy_mc").default_estimator == "similar"
    manager = TaskManager(include_path=[str(out), str(originals["folder"])])
    results = lm_eval.simple_evaluate(
        model="hf",
        model_args=test_harness.model_args(tiny_model),
        tasks=["micro_toy_mc", "micro_toy_gen", "toy_mc", "toy_gen"],
        task_manager=manager,
        log_samples=True,
        batch_size=4,
    )
    for task, metric, key in (
        ("toy_mc", "acc_norm", "acc_norm,none"),
        ("toy_gen", "exact_match", "exact_match,first-word"),
    ):
        # collecting the original run names and hashes items as the build expects
        runs = tmp_path / "runs" / task
        runs.mkdir(parents=True)
        (runs / f"samples_{task}_2026-01-01T00-00-00.jsonl").write_text(
            "".join(json.dumps(s, default=str) + "\n" for s in results["samples"][task])
        )
        collected = collect_samples(runs, metric=metric, model_id="tiny", progress=False)
        rendered = render_task(load_task(str(originals[task]["yaml"])), metric=metric,
                               filter=key.split(",")[1])  # fmt: skip
        with_document_hashes(collected, rendered, "any-name")  # no changed document
        assert set(collected.item_ids) == {doc["id"] for doc in originals[task]["docs"]}
        micro = results["samples"][f"micro_{task}"]
        original = {s["doc"]["id"]: s for s in results["samples"][task]}
        assert len(micro) == BUDGET
        for sample in micro:  # the same item, scored the same way, by the same model
            twin = original[sample["doc"]["item_id"]]
            assert sample[metric] == twin[metric], sample["doc"]["item_id"]
            assert sample["filtered_resps"] == twin["filtered_resps"]
        path = tmp_path / f"samples_micro_{task}_2026-01-01T00-00-00.jsonl"
        path.write_text("".join(json.dumps(s, default=str) + "\n" for s in micro))
        bundle = load_bundle(out / task)
        record = test_harness.recomputed_estimate(path, bundle, metric)
        in_run = results["results"][f"micro_{task}"]
        estimate_key = key.replace(metric, "estimate")
        assert in_run[estimate_key] == pytest.approx(record["estimate_value"], abs=1e-12)
        assert math.isfinite(in_run[estimate_key])
