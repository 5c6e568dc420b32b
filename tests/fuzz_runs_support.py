"""Shared by the fuzz tests of the samples and results readers and of the run reader: the
fields their targeted mutations aim at, a results json in lm-eval's shape, and the real
samples files they read (skipped when ``../shared/data`` is missing)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

SAMPLE_FIELDS = (
    "doc_id",
    "doc",
    "doc.id",
    "doc.item_id",
    "doc.bundle",
    "doc.metabench_idx",
    "doc.mb_sub_idx",
    "filter",
    "metrics",
    "metrics.0",
    "acc",
    "doc_hash",
)


def results_fields(task: str) -> tuple[str, ...]:
    return (
        "results",
        f"results.{task}",
        f"results.{task}.estimate,none",
        "configs",
        f"configs.{task}",
        f"configs.{task}.filter_list",
        f"configs.{task}.metric_list",
        f"configs.{task}.metadata",
        f"configs.{task}.metadata.bundle",
        f"configs.{task}.metadata.microbench_level",
        "config",
        "config.model_args",
        "config.model_args.pretrained",
        "model_name",
        "versions",
        f"versions.{task}",
    )


def sample_lines(run: dict[str, Any]) -> list[dict[str, Any]]:
    lines = []
    for k, (item, score) in enumerate(run["scores"].items()):
        line: dict[str, Any] = {
            "doc_id": k,
            "doc": {"id": item, "question": f"Q {item}?", "choices": ["a", "b"], "answer": 0},
            "target": "a",
            "arguments": [["Q?", " a"], ["Q?", " b"]],
            "resps": [[["-1.0", "False"]], [["-2.0", "False"]]],
            "filtered_resps": [["-1.0", "False"], ["-2.0", "False"]],
            "doc_hash": hashlib.sha256(item.encode()).hexdigest(),
        }
        if run["new_format"]:
            line.update({"filter": "none", "metrics": ["acc"]})
        line["acc"] = score
        lines.append(line)
    return lines


def results_json(task: str, model: str) -> dict[str, Any]:
    return {
        "results": {task: {"alias": task, "acc,none": 0.5, "acc_stderr,none": 0.1}},
        "configs": {
            task: {
                "task": task,
                "metric_list": [{"metric": "acc", "aggregation": "mean"}],
                "metadata": {"version": 1.0},
            }
        },
        "versions": {task: 1.0},
        "config": {"model": "hf", "model_args": {"pretrained": model}},
        "model_name": model,
    }


REAL_FILES = {
    "smollm2": (
        "smollm2-135m",
        "samples_mb_mmlu_local_2026-11-21T04-46-29.870854.jsonl",
        "mb_sub_idx",
    ),
    "pythia-winogrande": (
        "pythia-14m",
        "samples_metabench_winogrande_secondary_2024-11-26T10-50-23.349203.jsonl",
        "metabench_idx",
    ),
    "pythia-arc": (
        "pythia-14m",
        "samples_metabench_arc_secondary_2024-11-26T10-50-23.349203.jsonl",
        "metabench_idx",
    ),
}


def real_lines(shared: Path, which: str) -> tuple[str, list[str], str]:
    folder, name, field = REAL_FILES[which]
    path = shared / "lm_eval_samples" / folder / name
    if not path.is_file():
        pytest.skip(f"real samples file {path} not found: real-data test")
    return name, path.read_text(encoding="utf-8").splitlines(), field


@pytest.fixture(scope="module")
def real_samples(shared_data: Path) -> dict[str, tuple[str, list[str], str]]:
    return {which: real_lines(shared_data, which) for which in REAL_FILES}
