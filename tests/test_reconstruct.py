"""Post-run reconstruction: lm-eval output folders -> estimates joined by id, checked, averaged.

The synthetic tests write lm-eval-shaped output folders (``results_<ts>.json`` +
``samples_<task>_<ts>.jsonl``) for toy bundles; the real-data test reconstructs the pythia-14m
``--log_samples`` output of metabench's tasks through ``microbench reconstruct`` and checks it
against an independent recomputation (``collect_samples`` + ``estimate_models``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import uuid
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lmeval_microbench._io import seal_json
from lmeval_microbench._types import Estimate
from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle import Bundle, MetricSpec, load_bundle
from lmeval_microbench.cli.app import main
from lmeval_microbench.collect import collect_samples, content_hash
from lmeval_microbench.errors import BundleError, InputError, ItemMismatchError
from lmeval_microbench.harness import TaskSpec, include_path, write_task
from lmeval_microbench.personfit import check_estimate
from lmeval_microbench.reconstruct import bundle_estimator, estimate_models
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.runs import (
    BenchmarkEstimate,
    ReconstructionWarning,
    average_estimate,
    natural_key,
    parse_task_map,
    reconstruct_runs,
    write_reconstruction,
)
from lmeval_microbench.synthetic import random_item_params, simulate_responses

N_ITEMS, N_MODELS, BUDGET = 24, 300, 6
TS = "2025-01-01T00-00-00.000001"


# ---------------------------------------------------------------------------- toy bundles
def toy_doc(item: str, k: int, bundle: str, benchmark: str) -> dict[str, Any]:
    return {
        "item_id": item,
        "bundle": bundle,
        "benchmark": benchmark,
        "context": f"Question ({benchmark}): which number comes after {k}?\nAnswer:",
        "options": [str(k + 1), str(k + 2), "a banana", str(k)],
        "gold": 0,
        "source": {"question": f"after {k}? ({benchmark})", "metabench_idx": k},
    }


def toy_source(benchmark: str, seed: int, name: str) -> tuple[ResponseMatrix, dict[str, dict]]:
    """Simulated source models of a toy benchmark (ids ``toya.0``...) and its documents."""
    matrix, _ = simulate_responses(random_item_params(N_ITEMS, seed=seed), N_MODELS, seed=seed)
    ids = [f"{benchmark}.{k}" for k in range(N_ITEMS)]
    docs = {item: toy_doc(item, k, name, benchmark) for k, item in enumerate(ids)}
    items = matrix.items.copy()
    items.index = ids
    items["content_hash"] = [content_hash(docs[i]) for i in ids]
    return ResponseMatrix(matrix.values, matrix.model_ids, ids, items=items), docs


def make_bundle(benchmark: str, seed: int) -> tuple[Bundle, dict[str, dict]]:
    """A bundle over simulated models (IRT-based default estimator) and its documents."""
    name = f"{benchmark}-{uuid.uuid4().hex[:6]}"
    source, docs = toy_source(benchmark, seed, name)
    bundle = build_bundle(
        source,
        source.mean_scores(),
        name=name,
        benchmark=benchmark,
        method="random",
        budget=BUDGET,
        seed=0,
        estimators=["mean", "irt"],
        default_estimator="irt",
        metric=MetricSpec(name="acc"),
    )
    return bundle, {item: docs[item] for item in bundle.item_ids}


SEEDS = {"toya": 3, "toyb": 5}


@pytest.fixture(scope="module")
def toys() -> dict[str, tuple[Bundle, dict[str, dict]]]:
    return {bm: make_bundle(bm, seed) for bm, seed in SEEDS.items()}


@pytest.fixture
def suite(tmp_path: Path, toys) -> Path:
    """The toy bundles as a task suite folder (YAMLs with version 1.0 beside the data)."""
    folder = tmp_path / "suite"
    for bm, (bundle, docs) in toys.items():
        spec = TaskSpec(
            task=f"microbench_{bm}",
            data_dir=bm,
            output_type="multiple_choice",
            process_results="process_acc",
        )
        write_task(folder, spec, bundle, list(docs.values()))
    return folder


def sample_line(k: int, doc: dict, score: float, metric: str = "acc") -> dict[str, Any]:
    line = {
        "doc_id": k,
        "doc": doc,
        "target": 0,
        "arguments": [],
        "resps": [],
        "filtered_resps": [],
        "filter": "none",
        "metrics": [metric, "estimate", "estimate_lower", "estimate_upper"],
        "doc_hash": "x",
        metric: score,
    }
    if "item_id" in doc:
        value = [doc["bundle"], doc["item_id"], metric, score]
        line.update(estimate=value, estimate_lower=value, estimate_upper=value)
    return line


def write_run(
    out: Path,
    model: str,
    task: str,
    docs: list[dict],
    scores: list[float],
    *,
    metadata: dict | None = None,
    version: float = 1.0,
    in_run: float | None = None,
    ts: str = TS,
    metric: str = "acc",
    prompts: list[str] | None = None,
) -> Path:
    """One lm-eval run folder: a samples file (lines shuffled) and its results json.

    ``prompts`` are the contexts logged as the lines' request arguments (default: none).
    """
    folder = out / model.replace("/", "__")
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        sample_line(k, d, s, metric) for k, (d, s) in enumerate(zip(docs, scores, strict=True))
    ]
    for line, prompt in zip(lines, prompts or [], strict=False):
        line["arguments"] = {"gen_args_0": {"arg_0": prompt, "arg_1": " 1"}}
    random.Random(len(lines)).shuffle(lines)
    path = folder / f"samples_{task}_{ts}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    results = {"results": {task: {f"{metric},none": float(np.mean(scores))}}}
    if in_run is not None:
        results["results"][task].update(
            {"estimate,none": in_run, "estimate_lower,none": 0.0, "estimate_upper,none": 1.0}
        )
    results["configs"] = {
        task: {
            "metric_list": [{"metric": metric}, {"metric": "estimate"}],
            "metadata": {"version": version, **(metadata or {})},
        }
    }
    results["versions"] = {task: version}
    results["n-samples"] = {task: {"original": len(docs), "effective": len(docs)}}
    results["config"] = {"model": "hf", "model_args": f"pretrained={model},dtype=float32"}
    (folder / f"results_{ts}.json").write_text(json.dumps(results))
    return path


def pattern(bundle: Bundle, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    return {item: float(rng.integers(0, 2)) for item in bundle.item_ids}


def run_of(out: Path, model: str, toy, seed: int, **kwargs: Any) -> dict[str, float]:
    bundle, docs = toy
    scores = pattern(bundle, seed)
    items = list(bundle.item_ids)
    write_run(
        out,
        model,
        f"microbench_{bundle.benchmark}",
        [docs[i] for i in items],
        [scores[i] for i in items],
        **kwargs,
    )
    return scores


def reconstruct(paths, **kwargs: Any):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReconstructionWarning)
        return reconstruct_runs(paths, progress=False, **kwargs)


# ---------------------------------------------------------------------------- own tasks
def test_estimates_join_logged_documents_by_id(tmp_path, suite, toys):
    bundle, _ = toys["toya"]
    scores = run_of(tmp_path / "out", "org/model", toys["toya"], seed=1)
    result = reconstruct(tmp_path / "out", bundles=[suite])
    (found,) = result.estimates
    expected = bundle_estimator(bundle).estimate(scores)
    assert (found.value, found.lower, found.upper) == pytest.approx(
        (expected.value, expected.lower, expected.upper), abs=1e-12
    )
    # the test can fail: the samples file is shuffled, a join by position gives another value
    shuffled = [json.loads(line) for line in next((tmp_path / "out").rglob("samples_*")).open()]
    by_position = dict(zip(bundle.item_ids, [line["acc"] for line in shuffled], strict=True))
    assert bundle_estimator(bundle).estimate(by_position).value != pytest.approx(expected.value)
    assert found.model == "org/model" and found.items_scored == BUDGET
    assert found.subset_mean == pytest.approx(np.mean(list(scores.values())))
    assert found.full_size is None  # not an Open LLM Leaderboard bundle


def test_checkpoints_sort_naturally_and_average_two_benchmarks(tmp_path, suite, toys):
    out = tmp_path / "out"
    for step in (10, 2, 1):
        for k, bm in enumerate(("toya", "toyb")):
            run_of(out, f"ckpt-{step}", toys[bm], seed=step * 7 + k)
    result = reconstruct(out, bundles=[suite])
    assert result.models == ["ckpt-1", "ckpt-2", "ckpt-10"]
    table = result.to_markdown()
    rows = [line.split(" | ")[0].strip("| ") for line in table.splitlines()[2:5]]
    assert rows == ["ckpt-1", "ckpt-2", "ckpt-10"]
    for model in result.models:
        average = result.average(model)
        pair = [result.get(model, bm) for bm in ("toya", "toyb")]
        assert average.value == pytest.approx(np.mean([e.value for e in pair]))
        # Bonferroni: each interval is taken at level 0.95, so the average's is wider
        assert average.lower <= np.mean([e.lower for e in pair]) + 1e-12
        assert average.upper >= np.mean([e.upper for e in pair]) - 1e-12
        assert not average.complete
    payload = result.to_dict()
    assert [m["model"] for m in payload["models"]] == result.models
    assert set(payload["models"][0]["benchmarks"]) == {"toya", "toyb"}


def test_changed_document_is_an_error_naming_the_item(tmp_path, suite, toys):
    bundle, docs = toys["toya"]
    edited = {**docs, bundle.item_ids[2]: {**docs[bundle.item_ids[2]], "gold": 1}}
    write_run(
        tmp_path / "out",
        "m",
        "microbench_toya",
        [edited[i] for i in bundle.item_ids],
        [1.0] * BUDGET,
    )
    with pytest.raises(ItemMismatchError, match=f"hash differs\\): {bundle.item_ids[2]!r}"):
        reconstruct(tmp_path / "out", bundles=[suite])


def test_missing_items_warn_and_give_nan_unless_allowed(tmp_path, suite, toys):
    bundle, docs = toys["toya"]
    kept = list(bundle.item_ids)[:4]
    write_run(tmp_path / "out", "m", "microbench_toya", [docs[i] for i in kept], [1.0, 0, 1, 0])
    with pytest.warns(ReconstructionWarning, match=f"2 of {BUDGET} items .*{bundle.item_ids[4]}"):
        result = reconstruct_runs(tmp_path / "out", bundles=[suite], progress=False)
    (found,) = result.estimates
    assert math.isnan(found.value) and found.missing == tuple(bundle.item_ids[4:])
    (hint,) = [note for note in result.notes if "estimate is NaN" in note]
    # both spellings a user can type: the command's flag and lm-eval's --metadata
    assert "--allow-missing" in hint
    assert """--metadata '{"microbench_allow_missing": true}'""" in hint
    allowed = reconstruct(tmp_path / "out", bundles=[suite], allow_missing=True)
    expected = bundle_estimator(bundle).estimate(
        dict(zip(kept, [1.0, 0, 1, 0], strict=True)), allow_missing=True
    )
    assert allowed.estimates[0].value == pytest.approx(expected.value, abs=1e-12)
    imputed = reconstruct(tmp_path / "out", bundles=[suite], allow_missing=True, estimator="mean")
    assert math.isfinite(imputed.estimates[0].value)


def test_run_options_from_metadata_are_followed(tmp_path, suite, toys):
    bundle, _ = toys["toya"]
    scores = run_of(
        tmp_path / "out",
        "m",
        toys["toya"],
        seed=2,
        metadata={"microbench_estimator": "mean", "microbench_level": 0.5},
    )
    (found,) = reconstruct(tmp_path / "out", bundles=[suite]).estimates
    expected = bundle_estimator(bundle, "mean").estimate(scores, level=0.5)
    assert found.estimator == "mean" and found.estimate.level == 0.5
    assert (found.lower, found.upper) == pytest.approx((expected.lower, expected.upper))


def test_metric_mismatch_is_an_error_and_version_mismatch_a_warning(tmp_path, suite, toys):
    run_of(tmp_path / "a", "m", toys["toya"], seed=1, metadata={"estimated_metric": "acc_norm"})
    with pytest.raises(ItemMismatchError, match=r"estimated metric 'acc_norm'.*estimates 'acc'"):
        reconstruct(tmp_path / "a", bundles=[suite])
    run_of(tmp_path / "b", "m", toys["toya"], seed=1, version=2.0)
    with pytest.warns(ReconstructionWarning, match=r"version 2.0, the installed task is .*1.0"):
        reconstruct_runs(tmp_path / "b", bundles=[suite], progress=False)


def test_in_run_estimate_is_compared(tmp_path, suite, toys):
    bundle, _ = toys["toya"]
    scores = run_of(tmp_path / "a", "m", toys["toya"], seed=4, in_run=0.123)
    with pytest.warns(ReconstructionWarning, match="reported estimate 0.123000"):
        reconstruct_runs(tmp_path / "a", bundles=[suite], progress=False)
    value = bundle_estimator(bundle).estimate(scores).value
    run_of(tmp_path / "b", "m", toys["toya"], seed=4, in_run=value)
    result = reconstruct(tmp_path / "b", bundles=[suite])
    assert not [n for n in result.notes if "reported estimate" in n]
    assert result.estimates[0].in_run["value"] == value


def test_unknown_bundle_and_duplicate_benchmark_are_errors(tmp_path, suite, toys):
    run_of(tmp_path / "a", "m", toys["toya"], seed=1)
    with pytest.raises(BundleError, match="neither shipped nor given with --bundle"):
        reconstruct(tmp_path / "a")
    run_of(tmp_path / "a", "m", toys["toya"], seed=1, ts="2025-01-02T00-00-00.000001")
    bundle, docs = toys["toya"]
    items = list(bundle.item_ids)
    write_run(tmp_path / "a", "m", "microbench_toya_copy", [docs[i] for i in items], [1.0] * 6)
    with pytest.raises(InputError, match="two runs of benchmark 'toya'"):
        reconstruct(tmp_path / "a", bundles=[suite])


# ---------------------------------------------------------------------------- foreign tasks
def foreign_docs(docs: dict[str, dict]) -> list[dict]:
    """The same items as another task logs them: no item_id/bundle, a metabench index."""
    return [
        {"question": d["source"]["question"], "metabench_idx": d["source"]["metabench_idx"]}
        for d in docs.values()
    ]


def test_foreign_task_is_matched_by_ids_or_by_the_task_map(tmp_path, suite, toys):
    bundle, docs = toys["toyb"]
    scores = pattern(bundle, 9)
    extra = {"question": "not in the bundle", "metabench_idx": 999}
    logged = [*foreign_docs(docs), extra]
    write_run(tmp_path / "a", "m", "other_toyb_task", logged, [*scores.values(), 1.0])
    result = reconstruct(tmp_path / "a", bundles=[suite], shipped=False)
    (found,) = result.estimates
    assert found.bundle == bundle.name and found.in_run is None
    checked, _, _ = check_estimate(bundle, scores, bundle_estimator(bundle).estimate(scores))
    assert found.value == pytest.approx(checked.value)  # after person fit, as every estimate
    mapped = reconstruct(
        tmp_path / "a", bundles=[suite], shipped=False, task_map={"other_toyb_task": "toyb"}
    )
    assert mapped.estimates[0].value == found.value


def test_foreign_task_with_other_questions_is_an_error(tmp_path, suite, toys):
    bundle, docs = toys["toyb"]
    logged = foreign_docs(docs)
    logged[1]["question"] = "a different question"
    write_run(tmp_path / "a", "m", "other_task", logged, [1.0] * BUDGET)
    with pytest.raises(ItemMismatchError, match=f"{bundle.item_ids[1]!r} \\(fields \\['question'"):
        reconstruct(tmp_path / "a", bundles=[suite], task_map={"other_task": "toyb"})


def test_unrelated_tasks_are_skipped_and_nothing_found_is_an_error(tmp_path, suite, toys):
    _, docs = toys["toyb"]
    logged = foreign_docs(docs)[:3]  # the bundle's ids, other questions: another task
    for k, doc in enumerate(logged):
        doc["question"] = f"an unrelated question {k}"
    write_run(tmp_path / "a", "m", "some_task", logged, [1.0] * 3)
    with pytest.raises(InputError, match="no micro-benchmark runs"):
        reconstruct(tmp_path / "a", bundles=[suite])
    run_of(tmp_path / "a", "m", toys["toya"], seed=1)
    result = reconstruct(tmp_path / "a", bundles=[suite])
    assert len(result.estimates) == 1 and "some_task" in result.skipped[0]


def test_partial_foreign_run_is_matched_and_reported_nan(tmp_path, suite, toys):
    """A metabench run cut short (or --limit) stays in the table, NaN, its missing items named."""
    bundle, docs = toys["toyb"]
    out = tmp_path / "out"
    run_of(out, "m", toys["toya"], seed=1)
    write_run(out, "m", "metabench_toyb_secondary", foreign_docs(docs)[:4], [1.0, 0, 1, 1])
    with pytest.warns(ReconstructionWarning, match=rf"2 of {BUDGET} items .*{bundle.item_ids[4]}"):
        result = reconstruct_runs(out, bundles=[suite], progress=False)
    found = result.get("m", "toyb")
    assert found is not None and found.task == "metabench_toyb_secondary"
    assert math.isnan(found.value) and found.items_scored == 4
    assert found.missing == tuple(bundle.item_ids[4:])
    assert result.average("m").benchmarks == ("toya", "toyb")
    assert math.isnan(result.average("m").value)
    row = next(line for line in result.to_markdown().splitlines() if line.startswith("| m |"))
    assert row.count("NaN") == 2  # toyb and the average


def test_document_sharing_only_its_id_is_not_verified(tmp_path, suite, toys):
    """Another benchmark's documents under the bundle's ids: the id alone proves nothing."""
    _, docs = toys["toyb"]
    logged = [
        {"query": f"another benchmark's text {k}", "metabench_idx": d["metabench_idx"]}
        for k, d in enumerate(foreign_docs(docs))
    ]
    write_run(tmp_path / "a", "m", "other_task", logged, [1.0] * BUDGET)
    with pytest.raises(ItemMismatchError, match=r"other_task.*share no field but the id"):
        reconstruct(tmp_path / "a", bundles=[suite], task_map={"other_task": "toyb"})
    with pytest.raises(InputError, match="no micro-benchmark runs"):  # not taken for toyb's
        reconstruct(tmp_path / "a", bundles=[suite])


def test_foreign_prompts_are_compared_with_the_bundles(tmp_path, suite, toys):
    bundle, docs = toys["toyb"]
    prompts = [doc["context"] for doc in docs.values()]
    write_run(
        tmp_path / "a", "m", "other_task", foreign_docs(docs), [1.0] * BUDGET, prompts=prompts
    )
    assert not [n for n in reconstruct(tmp_path / "a", bundles=[suite]).notes if "prompt" in n]
    prompts[2] = "Other few-shot examples\n\n" + prompts[2]
    write_run(
        tmp_path / "b", "m", "other_task", foreign_docs(docs), [1.0] * BUDGET, prompts=prompts
    )
    with pytest.warns(
        ReconstructionWarning,
        match=rf"1 of {BUDGET} documents were prompted otherwise than the bundle's items "
        rf".*{bundle.item_ids[2]!r}",
    ):
        reconstruct_runs(tmp_path / "b", bundles=[suite], progress=False)


def test_task_named_after_another_benchmark_is_noted(tmp_path, suite, toys):
    bundle, docs = toys["toyb"]
    write_run(tmp_path / "a", "m", "metabench_toya_secondary", foreign_docs(docs), [1.0] * BUDGET)
    with pytest.warns(
        ReconstructionWarning,
        match=rf"task 'metabench_toya_secondary' is named after toya, but its documents are the "
        rf"items of bundle '{bundle.name}': reported under toyb",
    ):
        result = reconstruct_runs(tmp_path / "a", bundles=[suite], progress=False)
    assert [e.benchmark for e in result.estimates] == ["toyb"]


def test_edited_bundle_documents_are_refused(tmp_path, suite, toys):
    """items.jsonl is checked against the bundle's hashes before it judges any run."""
    items = suite / "toyb" / "items.jsonl"
    edited = [json.loads(line) for line in items.read_text().splitlines()]
    edited[1]["source"]["question"] = "a drifted question"
    items.write_text("".join(json.dumps(doc) + "\n" for doc in edited))
    drifted = foreign_docs({doc["item_id"]: doc for doc in edited})
    write_run(tmp_path / "a", "m", "other_task", drifted, [1.0] * BUDGET)
    with pytest.raises(ItemMismatchError, match=rf"{items}: .*{edited[1]['item_id']!r}"):
        reconstruct(tmp_path / "a", bundles=[suite], task_map={"other_task": "toyb"})


def test_model_id_is_never_taken_from_another_runs_results(tmp_path, suite, toys, capsys):
    out = tmp_path / "out"
    run_of(out, "org/model", toys["toya"], seed=1)
    folder = out / "org__model"
    results = json.loads((folder / f"results_{TS}.json").read_text())
    results["config"]["model_args"] = "pretrained=some-other/model-7b"
    (folder / f"results_{TS}.json").unlink()
    other = folder / "results_2025-02-01T00-00-00.000001.json"
    other.write_text(json.dumps(results))
    with pytest.raises(InputError, match=rf"no results_{TS}\.json .*{other.name}.*--model-id"):
        reconstruct(out, bundles=[suite])
    argv = ["reconstruct", str(out), "--bundle", str(suite), "--quiet", "--format", "json"]
    assert main([*argv, "--model-id", "org/model"]) == 0
    assert [m["model"] for m in json.loads(capsys.readouterr().out)["models"]] == ["org/model"]
    other.unlink()
    with pytest.warns(ReconstructionWarning, match=r"model id 'org__model' is the name of"):
        result = reconstruct_runs(out, bundles=[suite], progress=False)
    assert result.models == ["org__model"]


def test_file_cut_at_a_line_boundary_and_bad_run_options_name_the_files(tmp_path, suite, toys):
    run_of(tmp_path / "a", "m", toys["toya"], seed=1)
    samples = next((tmp_path / "a").rglob("samples_*.jsonl"))
    samples.write_text("".join(samples.read_text().splitlines(keepends=True)[:5]))
    with pytest.raises(InputError, match=rf"{samples.name}: 5 documents, but results_{TS}"):
        reconstruct(tmp_path / "a", bundles=[suite])
    run_of(tmp_path / "b", "m", toys["toya"], seed=1, metadata={"microbench_level": "high"})
    with pytest.raises(InputError, match=rf"results_{TS}\.json: .*microbench_level.*'high'"):
        reconstruct(tmp_path / "b", bundles=[suite])


def test_legend_counts_the_items_scored(tmp_path, suite, toys):
    bundle, docs = toys["toya"]
    kept = list(bundle.item_ids)[:4]
    write_run(tmp_path / "out", "m", "microbench_toya", [docs[i] for i in kept], [1.0, 0, 1, 0])
    legend = reconstruct(tmp_path / "out", bundles=[suite]).to_markdown()
    assert f"toya 4 (2 of its {BUDGET} subset items unscored)" in legend


def test_parse_task_map():
    assert parse_task_map(["a=arc,b = mmlu", "c=x"]) == {"a": "arc", "b": "mmlu", "c": "x"}
    for bad in ("a", "=arc", "a="):
        with pytest.raises(InputError, match="TASK=BENCHMARK"):
            parse_task_map(bad)
    with pytest.raises(InputError, match="mapped twice"):
        parse_task_map("a=arc,a=mmlu")


# ---------------------------------------------------------------------------- joint
@pytest.fixture(scope="module")
def joint_state(toys) -> dict[str, Any]:
    """A joint estimator fitted on the toy bundles' subsets and source models."""
    from lmeval_microbench.estimators.joint import JointEstimator

    sources = {bm: toy_source(bm, seed, "x")[0] for bm, seed in SEEDS.items()}
    estimator = JointEstimator(n_folds=3).fit(
        sources,
        {bm: toys[bm][0].subset for bm in SEEDS},
        {bm: sources[bm].mean_scores() for bm in SEEDS},
    )
    return estimator.state_dict()


def test_joint_average_comes_from_the_suites_joint_estimator(tmp_path, suite, toys, joint_state):
    from lmeval_microbench.estimators.joint import JointEstimator

    (suite / "joint.json").write_text(json.dumps(seal_json(joint_state)))
    out = tmp_path / "out"
    union: dict[str, float] = {}
    for k, bm in enumerate(("toya", "toyb")):
        union.update(run_of(out, "full", toys[bm], seed=20 + k))
    run_of(out, "half", toys["toya"], seed=30)
    with warnings.catch_warnings(record=True) as caught:  # found beside the bundles: quiet
        warnings.simplefilter("always")
        result = reconstruct_runs(out, bundles=[suite], progress=False)
    assert not [w for w in caught if "no joint estimate" in str(w.message)]
    with pytest.warns(ReconstructionWarning, match=r"'half': no joint estimate \(benchmarks"):
        named = reconstruct_runs(out, bundles=[suite], joint=suite / "joint.json", progress=False)
    assert set(named.joint) == {"full"}
    expected = JointEstimator.from_state(joint_state).estimate(union)
    assert set(result.joint) == {"full"}
    for output in ("toya", "toyb", "average"):
        assert result.joint["full"][output].value == pytest.approx(expected[output].value)
    assert "average (joint)" in result.to_markdown()
    assert result.to_dict()["models"][0]["joint"]["average"]["level"] == 0.9
    fitted = joint_state["subsets"]["toya"]
    outside = next(f"toya.{k}" for k in range(N_ITEMS) if f"toya.{k}" not in fitted["item_ids"])
    shifted = {**fitted, "item_ids": [outside, *fitted["item_ids"][1:]]}
    state = {**joint_state, "subsets": {**joint_state["subsets"], "toya": shifted}}
    (suite / "joint.json").write_text(json.dumps(seal_json(state)))
    with pytest.raises(InputError, match=r"joint.json: joint: estimator state is unusable"):
        reconstruct(out, bundles=[suite])


# ---------------------------------------------------------------------------- averages
def test_average_interval_is_the_mean_of_bonferroni_intervals():
    def record(bm: str, value: float) -> BenchmarkEstimate:
        estimate = Estimate(value, value - 0.05, value + 0.05, 0.9)
        return BenchmarkEstimate("m", bm, bm, bm, "irt", "acc", 6, 6, None, value, estimate)

    found = {"arc": record("arc", 0.4), "mmlu": record("mmlu", 0.6)}
    wide = {"arc": Estimate(0.4, 0.3, 0.52, 0.95), "mmlu": Estimate(0.6, 0.5, 0.66, 0.95)}
    average = average_estimate("m", found, wide, 0.9)
    assert (average.value, average.lower, average.upper) == pytest.approx((0.5, 0.4, 0.59))
    assert "0.9500" in average.method
    missing = average_estimate("m", found, {**wide, "mmlu": None}, 0.9)
    assert math.isnan(missing.lower) and missing.value == pytest.approx(0.5)


def test_natural_key_orders_checkpoints():
    names = ["step-100", "step-20", "step-3", "base"]
    assert sorted(names, key=natural_key) == ["base", "step-3", "step-20", "step-100"]


# ---------------------------------------------------------------------------- CLI
def test_cli_writes_json_and_markdown(tmp_path, suite, toys, capsys):
    run_of(tmp_path / "out", "m", toys["toya"], seed=1)
    target = tmp_path / "est.json"
    code = main(
        [
            *("reconstruct", str(tmp_path / "out"), "--bundle", str(suite), "--quiet"),
            *("--out", str(target), "--format", "json"),
        ]
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(target.read_text())
    assert printed["models"][0]["benchmarks"]["toya"]["items_scored"] == BUDGET
    assert "| m |" in target.with_suffix(".md").read_text()
    assert main(["reconstruct", str(tmp_path / "nowhere"), "--quiet"]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_cli_out_replaces_files_only_with_overwrite(tmp_path, suite, toys, capsys):
    run_of(tmp_path / "out", "m", toys["toya"], seed=1)
    argv = ["reconstruct", str(tmp_path / "out"), "--bundle", str(suite), "--quiet", "--out"]
    matrix = tmp_path / "m.parquet"
    matrix.write_bytes(b"PAR1 a matrix")
    assert main([*argv, str(matrix)]) == 2
    assert f"{matrix} exists; pass --overwrite" in capsys.readouterr().err
    assert matrix.read_bytes() == b"PAR1 a matrix"
    (tmp_path / "est.md").write_text("an older table")
    assert main([*argv, str(tmp_path / "est.json")]) == 2
    assert f"{tmp_path / 'est.md'} exists; pass --overwrite" in capsys.readouterr().err
    assert not (tmp_path / "est.json").exists()
    assert main([*argv, str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path} is a folder" in err and "Traceback" not in err
    assert main([*argv, str(tmp_path / "est.json"), "--overwrite"]) == 0
    assert "| m |" in (tmp_path / "est.md").read_text()


def test_markdown_names_the_json_it_was_written_with(tmp_path, suite, toys, monkeypatch, capsys):
    """A kill between the two renames leaves a table whose named checksum is not the JSON's."""
    run_of(tmp_path / "a", "first", toys["toya"], seed=1)
    run_of(tmp_path / "b", "second", toys["toya"], seed=2)
    target = tmp_path / "est.json"
    write_reconstruction(reconstruct(tmp_path / "a", bundles=[suite]), target)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    assert f"sha256 {digest}" in target.with_suffix(".md").read_text()
    replace = os.replace

    def killed_before_the_json(src, dst):
        if Path(dst) == target:
            raise KeyboardInterrupt
        replace(src, dst)

    monkeypatch.setattr(os, "replace", killed_before_the_json)
    with pytest.raises(KeyboardInterrupt):
        write_reconstruction(reconstruct(tmp_path / "b", bundles=[suite]), target, overwrite=True)
    table = target.with_suffix(".md").read_text()
    assert "| second |" in table and f"sha256 {digest}" not in table
    assert hashlib.sha256(target.read_bytes()).hexdigest() == digest  # the old JSON, whole
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    monkeypatch.setattr(os, "replace", replace)
    # the reader of the pair says so, naming both files; either file of the pair is checked
    for given in (target, target.with_suffix(".md")):
        assert main(["verify", str(given)]) == 2
        err = capsys.readouterr().err
        assert f"{target.with_suffix('.md')} and {target} do not match" in err
    write_reconstruction(reconstruct(tmp_path / "b", bundles=[suite]), target, overwrite=True)
    assert main(["verify", str(target)]) == 0
    assert capsys.readouterr().out == f"ok: {target.with_suffix('.md')} shows {target}\n"


# ---------------------------------------------------------------------------- real data
PYTHIA = "lm_eval_samples/pythia-14m"
ID_FIELDS = {"mmlu": "mb_sub_idx"}
METRICS = {"arc": "acc_norm", "hellaswag": "acc_norm", "truthfulqa": "acc", "gsm8k": "exact_match"}


def test_pythia_14m_metabench_run_reconstructs_through_the_cli(shared_data, capsys):
    folder = shared_data / PYTHIA
    assert main(["reconstruct", str(folder), "--format", "json", "--quiet"]) == 0
    payload = json.loads(capsys.readouterr().out)
    (model,) = payload["models"]
    assert model["model"] == "pythia-14m"
    assert list(model["benchmarks"]) == [
        "arc",
        "hellaswag",
        "mmlu",
        "truthfulqa",
        "winogrande",
        "gsm8k",
    ]
    assert any("metabench_mmlu_permute" in s for s in payload["skipped"])  # other items
    for bm, found in model["benchmarks"].items():
        bundle = load_bundle(include_path() / "openllm_v1" / bm)
        assert found["items_scored"] == bundle.budget and found["missing_items"] == []
        assert found["lower"] <= found["estimate"] <= found["upper"]
        # independent recomputation: collect the matrix by metabench index, estimate
        samples = next(folder.glob(f"samples_metabench_{bm}_secondary_*.jsonl"))
        matrix = collect_samples(
            samples,
            metric=METRICS.get(bm, "acc"),
            filter="0",
            id_field=ID_FIELDS.get(bm, "metabench_idx"),
            id_prefix=f"{bm}.",
            model_id="pythia-14m",
            progress=False,
        )
        (record,) = estimate_models(bundle, matrix)
        assert found["estimate"] == pytest.approx(record["estimate_value"], abs=1e-12)
        assert found["upper"] == pytest.approx(record["estimate_upper"], abs=1e-12)
    average = model["average"]
    assert average["complete"] and average["suite"] == "openllm_v1"
    assert average["lower"] <= average["estimate"]
    values = [found["estimate"] for found in model["benchmarks"].values()]
    assert average["estimate"] == pytest.approx(np.mean(values))


def test_pythia_14m_task_map_gives_the_same_estimates(shared_data):
    folder = shared_data / PYTHIA
    mapping = {f"metabench_{bm}_secondary": bm for bm in ("arc", "mmlu", "gsm8k")}
    mapped = reconstruct(folder, task_map=mapping)
    detected = reconstruct(folder)
    for bm in ("arc", "mmlu", "gsm8k"):
        assert mapped.get("pythia-14m", bm).value == detected.get("pythia-14m", bm).value
    with pytest.raises(BundleError, match="no bundle or benchmark named 'arcc'"):
        reconstruct(folder, task_map={"metabench_arc_secondary": "arcc"})
