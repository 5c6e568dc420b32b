"""Shared by the reconstruction tests: toy bundles of two benchmarks with their documents,
lm-eval-shaped output folders written for them, and a quiet ``reconstruct``."""

from __future__ import annotations

import json
import random
import uuid
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle import Bundle, MetricSpec
from lmeval_microbench.collect import content_hash
from lmeval_microbench.harness import TaskSpec, write_task
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.runs import (
    ReconstructionWarning,
    reconstruct_runs,
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
