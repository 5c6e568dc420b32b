"""Shared by the collect tests: sample lines in lm-eval's shape, run files, the real pythia-14m
run and a small valid run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

TS = "2024-11-26T10-50-23.349203"
GSM8K = f"samples_metabench_gsm8k_secondary_{TS}.jsonl"
ARC = f"samples_metabench_arc_secondary_{TS}.jsonl"

# (task, id field, matrix prefix, metric of the leaderboard matrix, matrix file)
PYTHIA_TASKS = [
    ("metabench_arc_secondary", "metabench_idx", "arc.", "acc_norm", "arc"),
    ("metabench_hellaswag_secondary", "metabench_idx", "hellaswag.", "acc_norm", "hellaswag"),
    ("metabench_mmlu_secondary", "mb_sub_idx", "mmlu.", "acc", "mmlu"),
    ("metabench_truthfulqa_secondary", "metabench_idx", "truthfulqa.", "acc", "truthfulqa"),
    ("metabench_winogrande_secondary", "metabench_idx", "winogrande.", "acc", "winogrande"),
]


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def write_lines(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def line(
    doc_id: int, idx: Any, score: Any, *, metric: str = "acc", new: bool = True, **doc: Any
) -> dict:
    """A sample line in lm-eval's shape (new format unless ``new=False``)."""
    body = {"question": f"question {idx}", "metabench_idx": idx, "subject": "algebra", **doc}
    record: dict[str, Any] = {
        "doc_id": doc_id,
        "doc": body,
        "target": "0",
        "arguments": {"gen_args_0": {"arg_0": "prompt", "arg_1": " A"}},
        "resps": [[["-1.0", "False"]]],
        "filtered_resps": [["-1.0", "False"]],
        "doc_hash": hashlib.sha256(json.dumps(body).encode()).hexdigest(),
        "prompt_hash": "p",
        "target_hash": "t",
    }
    if new:
        record["filter"] = "none"
        record["metrics"] = [metric]
    record[metric] = score
    return record


def run_file(folder: Path, task: str = "toy", ts: str = TS) -> Path:
    return folder / f"samples_{task}_{ts}.jsonl"


@pytest.fixture
def pythia(shared_data: Path) -> Path:
    return shared_data / "lm_eval_samples" / "pythia-14m"


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """A valid new-format run with 6 items (ids 10..15)."""
    records = [line(k, 10 + k, float(k % 2)) for k in range(6)]
    return write_lines(run_file(tmp_path / "run"), records)
