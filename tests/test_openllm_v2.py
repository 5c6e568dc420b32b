"""The Open LLM Leaderboard v2 micro tasks (IFEval, MuSR) and the benchmark registry."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

from lmeval_microbench import benchmarks
from lmeval_microbench.benchmarks import BENCHMARKS, SUITES, Benchmark, Suite, settings_warning
from lmeval_microbench.bundle import load_bundle
from lmeval_microbench.harness import hooks, include_path
from lmeval_microbench.harness.docs import ITEMS_JSONL, check_docs_match_bundle, read_docs
from lmeval_microbench.harness.leaderboard_tasks import (
    check_definitions,
    definition_hashes,
    musr_doc_to_text,
)
from lmeval_microbench.runs import full_size_of, reconstruct_runs

SUITE = include_path() / "openllm_v2"
REPO = Path(__file__).resolve().parents[1]


def task_yaml(name: str) -> dict:
    text = (SUITE / f"microbench_{name}.yaml").read_text()
    return yaml.load(text, Loader=_Loader)  # our own files; !function tags kept as text


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: f"!function {node.value}")


# ---------------------------------------------------------------------------- registry
def test_every_shipped_benchmark_is_registered_and_its_bundle_agrees():
    for suite in SUITES.values():
        for name in suite.benchmarks:
            found = BENCHMARKS[name]
            bundle = load_bundle(include_path() / suite.folder / name)
            assert bundle.name.startswith(suite.bundle_prefix) and bundle.benchmark == name
            assert bundle.metric.name == found.metric
            assert full_size_of(bundle) == found.full_size
            assert (include_path() / suite.folder / f"{found.micro_task}.yaml").is_file()
        assert (include_path() / suite.folder / f"{suite.group}.yaml").is_file()


def test_a_new_benchmark_is_one_entry(monkeypatch, tmp_path):
    """A dummy benchmark registered in a dummy suite: reconstruction knows its full size,
    orders it and averages it with its suite, from the registry entry alone."""
    entry = Benchmark("toy", "toys", 1234, "acc", "toy_task", 0.5, "toys/toy.parquet")
    other = Benchmark("toy2", "toys", 99, "acc", "toy2_task", 0.5, "toys/toy2.parquet")
    monkeypatch.setitem(benchmarks.BENCHMARKS, "toy", entry)
    monkeypatch.setitem(benchmarks.BENCHMARKS, "toy2", other)
    monkeypatch.setitem(
        benchmarks.SUITES,
        "toys",
        Suite("toys", "Toys", "toys", "microbench_toys", "toys-v1-", ("toy2", "toy")),
    )

    class Named:
        def __init__(self, name, benchmark):
            self.name, self.benchmark = name, benchmark

    assert full_size_of(Named("toys-v1-toy-10-random", "toy")) == 1234
    assert full_size_of(Named("mine-toy-10-random", "toy")) is None  # not the suite's bundle
    assert benchmarks.column_order(["toy", "mmlu", "toy2", "zzz"]) == ["mmlu", "toy2", "toy", "zzz"]


def test_settings_warnings_follow_the_sources():
    v1, v2 = BENCHMARKS["mmlu"], BENCHMARKS["ifeval"]
    assert "with chat template" in settings_warning(
        v1, chat_template=True, fewshot_as_multiturn=False
    )
    assert settings_warning(v1, chat_template=False, fewshot_as_multiturn=False) is None
    # lm-eval records few-shot as multi-turn as on by default; without a chat template it is a no-op
    assert settings_warning(v1, chat_template=False, fewshot_as_multiturn=True) is None
    assert settings_warning(v2, chat_template=True, fewshot_as_multiturn=True) is None
    assert settings_warning(v2, chat_template=False, fewshot_as_multiturn=False) is None


# ---------------------------------------------------------------------------- shipped files
@pytest.mark.parametrize("name", ["ifeval", "musr"])
def test_shipped_documents_bundle_and_yaml_agree(name):
    bundle = load_bundle(SUITE / name)
    docs = read_docs(SUITE / name / ITEMS_JSONL)
    check_docs_match_bundle(bundle, docs, where=name)
    assert bundle.budget <= 50 and bundle.license in ("apache-2.0", "cc-by-4.0")
    config = task_yaml(name)
    assert config["metadata"]["bundle"] == bundle.name
    assert config["metadata"]["leaderboard_sha256"] == definition_hashes(name)
    prefix = "ifeval." if name == "ifeval" else "musr."
    assert all(item.startswith(prefix) for item in bundle.item_ids)  # the matrix ids


def test_musr_documents_render_through_lm_evals_own_prompt():
    doc = read_docs(SUITE / "musr" / ITEMS_JSONL)[0]
    text = musr_doc_to_text(doc)
    assert text.startswith(doc["narrative"]) and text.endswith("Answer:")
    assert all(f"{k + 1} - {option}" in text for k, option in enumerate(doc["options"]))


def test_ifeval_scores_come_from_lm_evals_checks_offline():
    doc = next(d for d in read_docs(SUITE / "ifeval" / ITEMS_JSONL)
               if d["instruction_id_list"] == ["punctuation:no_comma"])  # fmt: skip
    right = hooks.process_ifeval(doc, ["A reply without any comma at all."])
    wrong = hooks.process_ifeval(doc, ["A reply, with commas, everywhere."])
    assert right["prompt_level_strict_acc"] is True or right["prompt_level_strict_acc"] == 1
    assert not wrong["prompt_level_strict_acc"]
    assert right["estimate"] == (doc["bundle"], doc["item_id"], "prompt_level_strict_acc", 1.0)


def test_a_response_the_checks_cannot_score_is_missing_not_wrong(monkeypatch, caplog):
    doc = read_docs(SUITE / "ifeval" / ITEMS_JSONL)[0]

    def broken(doc, results):
        raise ValueError("cannot detect language")

    monkeypatch.setattr(hooks, "ifeval_results", broken)
    with caplog.at_level(logging.WARNING, logger="lmeval_microbench.harness"):
        out = hooks.process_ifeval(doc, ["???"])
    assert "estimate" not in out and all(v != v for v in out.values())  # NaN, no estimate tuple
    assert doc["item_id"] in caplog.text and "counts as missing" in caplog.text


def test_changed_lm_eval_code_is_reported():
    recorded = {**definition_hashes("musr"), "utils.py": "0" * 64}
    found = check_definitions("musr", recorded, "microbench_musr")
    assert "['utils.py'] differ" in found
    assert check_definitions("musr", definition_hashes("musr"), "microbench_musr") is None


# ---------------------------------------------------------------------------- lm-eval runs
@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """Plain ``lm-eval run`` of both tasks on a random-weights GPT-2, offline."""
    from tiny_models import build_random_gpt2

    root = tmp_path_factory.mktemp("v2")
    model = build_random_gpt2(root / "gpt2")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    command = [
        sys.executable, "-m", "lm_eval", "run", "--model", "hf",
        "--model_args", f"pretrained={model},dtype=float32",
        "--tasks", "microbench_openllm_v2", "--gen_kwargs", "max_gen_toks=16",
        "--batch_size", "8", "--log_samples", "--output_path", str(root / "out"),
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return root / "out", done.stdout + done.stderr


@pytest.mark.slow
def test_plain_lm_eval_runs_both_tasks_and_reports_estimates(tiny_run):
    out, _ = tiny_run
    (results_file,) = out.rglob("results_*.json")
    results = json.loads(results_file.read_text())["results"]
    for task in ("microbench_ifeval", "microbench_musr"):
        found = results[task]
        assert 0 <= found["estimate_lower,none"] <= found["estimate,none"] <= 1
        assert found["estimate_upper,none"] >= found["estimate,none"]
    assert 0 <= results["microbench_ifeval"]["prompt_level_strict_acc,none"] <= 1
    assert "microbench_openllm_v2" in results


@pytest.mark.slow
def test_reconstruct_recomputes_the_in_run_estimates_and_the_suite_average(tiny_run):
    out, _ = tiny_run
    result = reconstruct_runs(out, progress=False)
    assert {e.benchmark for e in result.estimates} == {"ifeval", "musr"}
    for found in result.estimates:
        assert found.in_run is not None
        assert found.value == pytest.approx(found.in_run["value"], abs=1e-9)
        assert found.full_size == BENCHMARKS[found.benchmark].full_size
    (average,) = result.averages
    assert average.suite == "openllm_v2" and average.complete
    assert result.joint  # the suite's joint.json served the model


ITEM_SWAPS = 2
"""Items a rebuild on another CPU may swap (see the test below)."""


def _item_records(path: Path) -> dict[str, str]:
    """Each line of an ``items.jsonl`` keyed by its item id, as written."""
    lines = path.read_text().splitlines()
    return {json.loads(line)["item_id"]: line for line in lines}


@pytest.mark.slow
def test_build_tool_reproduces_the_shipped_suite(tmp_path, shared_data):
    """The shipped folder is what the tool writes (recipe, items, hashes, YAMLs).

    Up to floating point across CPUs. tinyBenchmarks' two-item clusters once swapped an item
    where the BLAS kernels differed (IFEval rebuilt on an AMD EPYC: 49 of the 50 shipped
    items): both members are equally close to the cluster's centre, and rounding picked one.
    The first row now wins such ties (``selection.anchor_points.medoid_indices``) and the
    folder was rebuilt so, but a near tie in the k-means assignment itself can still fall
    either way. So the items must agree in method and budget and in all but
    :data:`ITEM_SWAPS` items, and every item both hold must be written the same way."""
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1764115200"}
    command = [
        sys.executable,
        str(REPO / "tools" / "build_openllm_v2.py"),
        "--data",
        str(shared_data / "openllm_v2"),
        "--out",
        str(tmp_path),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("microbench_ifeval.yaml", "microbench_musr.yaml", "microbench_openllm_v2.yaml"):
        assert (tmp_path / name).read_text() == (SUITE / name).read_text(), name
    for name in ("ifeval", "musr"):
        rebuilt, shipped = (
            _item_records(folder / name / "items.jsonl") for folder in (tmp_path, SUITE)
        )
        shared = rebuilt.keys() & shipped.keys()
        assert len(shipped) - len(shared) <= ITEM_SWAPS, name
        assert all(rebuilt[item] == shipped[item] for item in shared), name
        rebuilt_bundle, shipped_bundle = load_bundle(tmp_path / name), load_bundle(SUITE / name)
        assert rebuilt_bundle.subset.method == shipped_bundle.subset.method
        assert rebuilt_bundle.budget == shipped_bundle.budget


def _refreshed_person_fit(command: list[str], shipped: Path, copy: Path) -> None:
    """Run a tool's person-fit refresh on a copy of ``shipped`` and check that it gives the
    shipped blocks: the shipped misfit checks are the current rule's, from the data."""
    shutil.copytree(shipped, copy)
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1764115200"}
    done = subprocess.run(
        [sys.executable, *command, "--out", str(copy)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("ifeval", "musr"):
        rebuilt, kept = (load_bundle(folder / name).person_fit for folder in (copy, shipped))
        assert rebuilt.lz_rule == kept.lz_rule, name
        assert rebuilt.lz_threshold == pytest.approx(kept.lz_threshold, abs=1e-6), name
        assert rebuilt.chance_score == pytest.approx(kept.chance_score, abs=1e-9), name


def test_the_shipped_bundles_misfit_checks_are_the_tools(tmp_path, shared_data):
    tool = str(REPO / "tools" / "build_openllm_v2.py")
    data = str(shared_data / "openllm_v2")
    _refreshed_person_fit([tool, "--person-fit", "--data", data], SUITE, tmp_path / "suite")


def test_the_shipped_pools_misfit_checks_are_the_tools(tmp_path, shared_data):
    from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS

    tool = str(REPO / "tools" / "build_pools.py")
    data = str(shared_data / "openllm_v2")
    command = [tool, "--suite", "openllm_v2", "--person-fit", "--data", data]
    _refreshed_person_fit(command, SHIPPED_POOLS / "openllm_v2", tmp_path / "pools")


@pytest.mark.parametrize("suite", ["openllm_v1", "openllm_v2"])
def test_every_shipped_misfit_check_scores_sources_as_new_models(suite):
    """One rule everywhere (``personfit.held_out_lz``): no shipped bundle or pool keeps a
    threshold from its sources scored by the IRT fitted on them."""
    from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS

    folders = [*(include_path() / suite).glob("*/"), *(SHIPPED_POOLS / suite).glob("*/")]
    bundles = [load_bundle(f) for f in folders if (f / "bundle.json").is_file()]
    assert len(bundles) == 2 * len(SUITES[suite].benchmarks)
    for bundle in bundles:
        assert bundle.person_fit.lz_rule.endswith("each scored by an IRT fitted without it")


@pytest.mark.parametrize(
    ("suite", "name", "chat", "warns"),
    [("openllm_v1", "mmlu", True, True), ("openllm_v1", "mmlu", False, False),
     ("openllm_v2", "ifeval", True, False), ("openllm_v2", "musr", False, False)],
)  # fmt: skip
def test_a_run_with_a_chat_template_no_source_used_is_told(suite, name, chat, warns):
    from types import SimpleNamespace

    from lmeval_microbench.runs import ReconstructionWarning
    from lmeval_microbench.runs.scores import _check_settings

    bundle = load_bundle(include_path() / suite / name)
    run = SimpleNamespace(results={"chat_template": "{{ messages }}" if chat else None,
                                   "fewshot_as_multiturn": chat})  # fmt: skip
    match = SimpleNamespace(ref=SimpleNamespace(bundle=bundle))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _check_settings(run, match, "out/samples.jsonl")
    found = [w for w in caught if issubclass(w.category, ReconstructionWarning)]
    assert bool(found) == warns
    if warns:
        assert "with chat template" in str(found[0].message) and "out/samples" in str(
            found[0].message
        )


def test_shipped_v2_pools_load_and_match_their_documents():
    from lmeval_microbench.adaptive import pool_state
    from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS, shipped_pool_tasks

    assert shipped_pool_tasks("openllm_v2") == ["microbench_pool_ifeval", "microbench_pool_musr"]
    for name in ("ifeval", "musr"):
        folder = SHIPPED_POOLS / "openllm_v2" / name
        bundle = load_bundle(folder)
        docs = read_docs(folder / ITEMS_JSONL)
        check_docs_match_bundle(bundle, docs, where=str(folder))
        assert len(pool_state(bundle).item_ids) == len(docs) == BENCHMARKS[name].full_size


@pytest.mark.slow
def test_adaptive_run_of_both_v2_pools_through_lm_eval(tmp_path, capsys):
    from tiny_models import build_random_gpt2

    from lmeval_microbench.cli.app import main

    model = build_random_gpt2(tmp_path / "gpt2", n_positions=2048)  # IFEval: 1,280 new tokens
    argv = [
        "adaptive", "--model", "hf", "--model_args", f"pretrained={model},dtype=float32,device=cpu",
        "--tasks", "microbench_musr,microbench_ifeval", "--max-items", "4",
        "--batch_size", "4", "--output_path", str(tmp_path / "out"),
    ]  # fmt: skip
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "musr" in out and "ifeval" in out
    logs = sorted(p.name for p in (tmp_path / "out").rglob("adaptive_*.jsonl"))
    assert len(logs) == 2, logs


# ---------------------------------------------------------------------------- leaderboard runs
def leaderboard_run(
    out: Path,
    shared: Path,
    name: str,
    model_row: int,
    *,
    skip_subtask: str | None = None,
    edit: str | None = None,
) -> Path:
    """lm-eval-shaped output of lm-eval's own leaderboard task (every item of the benchmark),
    with the answers of one real model of the matrix: what a user's full run would log."""
    import numpy as np
    import pandas as pd

    matrix = pd.read_parquet(shared / "openllm_v2" / "responses" / f"{name}.parquet")
    items = pd.read_parquet(shared / "openllm_v2" / "items" / f"{name}.parquet")
    items = items.set_index("item_id")
    model = matrix.index[model_row]
    folder = out / model.replace("/", "__")
    folder.mkdir(parents=True, exist_ok=True)
    stamp = "2026-11-26T00-00-00.000000"
    files: dict[str, list[dict]] = {}
    for item, score in matrix.iloc[model_row].items():
        parts = item.split(".")
        task = "leaderboard_ifeval" if name == "ifeval" else f"leaderboard_musr_{parts[1]}"
        if name == "musr" and parts[1] == skip_subtask:
            continue
        row = items.loc[item]
        if name == "ifeval":
            doc = {"key": int(row["key"]), "prompt": row["prompt"],
                   "instruction_id_list": json.loads(row["instruction_id_list"]),
                   "kwargs": json.loads(row["kwargs"])}  # fmt: skip
            metric = "prompt_level_strict_acc"
        else:
            doc = {
                k: (int(row[k]) if k == "answer_index" else str(row[k]))
                for k in ("narrative", "question", "choices", "answer_index", "answer_choice")
            }
            metric = "acc_norm"
        if edit == item:
            doc["question"] = "another question?"
        files.setdefault(task, []).append({
            "doc_id": int(parts[-1]), "doc": doc, "target": 0, "arguments": [], "resps": [],
            "filtered_resps": [], "filter": "none", "metrics": [metric], "doc_hash": "x",
            metric: float(score),
        })  # fmt: skip
    results = {"results": {}, "configs": {}, "versions": {}, "n-samples": {},
               "config": {"model": "hf", "model_args": f"pretrained={model}"},
               "chat_template": None, "fewshot_as_multiturn": False}  # fmt: skip
    for task, lines in files.items():
        np.random.default_rng(0).shuffle(lines)  # logged in no useful order
        (folder / f"samples_{task}_{stamp}.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in lines)
        )
        results["results"][task] = {}
        results["versions"][task] = 1.0
        results["n-samples"][task] = {"original": len(lines), "effective": len(lines)}
    (folder / f"results_{stamp}.json").write_text(json.dumps(results))
    return folder


def expected(name: str, shared: Path, model_row: int):
    import pandas as pd

    from lmeval_microbench.reconstruct import bundle_estimator

    bundle = load_bundle(SUITE / name)
    row = pd.read_parquet(shared / "openllm_v2" / "responses" / f"{name}.parquet").iloc[model_row]
    return bundle_estimator(bundle).estimate({i: float(row[i]) for i in bundle.item_ids})


def test_a_whole_leaderboard_ifeval_run_is_read_for_the_bundles_items(tmp_path, shared_data):
    folder = leaderboard_run(tmp_path, shared_data, "ifeval", 7)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = reconstruct_runs(folder, progress=False)
    (found,) = result.estimates
    assert found.benchmark == "ifeval" and found.items_scored == 50
    assert found.value == pytest.approx(expected("ifeval", shared_data, 7).value, abs=1e-12)
    notes = " ".join(str(w.message) for w in caught)
    assert "read the 50 of its 541 documents that are items of bundle" in notes


def test_the_three_musr_subtask_files_are_one_run_and_a_missing_one_is_named(tmp_path, shared_data):
    whole = leaderboard_run(tmp_path / "whole", shared_data, "musr", 11)
    result = reconstruct_runs(whole, progress=False)
    (found,) = result.estimates
    assert found.items_scored == 50 and not found.missing
    assert found.value == pytest.approx(expected("musr", shared_data, 11).value, abs=1e-12)
    part = leaderboard_run(
        tmp_path / "part", shared_data, "musr", 11, skip_subtask="team_allocation"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = reconstruct_runs(part, progress=False)
    (found,) = result.estimates
    assert found.missing and all(".team_allocation." in item for item in found.missing)
    assert found.value != found.value  # NaN: items missing, allow_missing off
    notes = " ".join(str(w.message) for w in caught)
    assert "in none of them (a subtask not run?)" in notes and found.missing[0] in notes


def test_a_musr_document_that_differs_from_the_bundles_is_an_error(tmp_path, shared_data):
    from lmeval_microbench.errors import MicrobenchError

    item = load_bundle(SUITE / "musr").item_ids[0]
    folder = leaderboard_run(tmp_path, shared_data, "musr", 3, edit=item)
    with pytest.raises(MicrobenchError, match=rf"{item!r} \(fields \['question'\]\)"):
        reconstruct_runs(folder, progress=False)
