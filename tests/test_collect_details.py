"""collect: Open LLM Leaderboard details and matrix files -> ResponseMatrix."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from collect_support import (
    ARC,
    line,
    pythia,
    read_lines,
    run_file,
    toy,
    write_lines,
)

from lmeval_microbench.collect import (
    collect_leaderboard_details,
    collect_samples,
    combine_models,
    content_hash,
    details_repo_id,
    prompt_id_map,
    text_hash,
    write_matrix,
)
from lmeval_microbench.errors import InputError
from lmeval_microbench.responses import ResponseMatrix

__all__ = ["pythia", "toy"]  # fixtures, used by name


# ---------------------------------------------------------------------------- leaderboard details
def v1_details_rows(
    prompts: pd.DataFrame, row: dict[str, float], seed: int
) -> list[dict[str, Any]]:
    """Rows shaped like v1 details (full_prompt, example, predictions, metrics dict), shuffled."""
    order = np.random.default_rng(seed).permutation(len(prompts))
    rows = []
    for k in order:
        item, prompt = prompts["item"].iloc[k], prompts["prompt"].iloc[k]
        score = row.get(item)
        rows.append(
            {
                "example": prompt.rsplit("\n\n", 1)[-1],
                "full_prompt": prompt,
                "predictions": [-1.0, -2.0],
                "metrics": {"acc": 0.0, "acc_norm": 0.0 if score is None else float(score)},
            }
        )
    return rows


def test_v1_details_map_onto_leaderboard_matrix(shared_data, tmp_path):
    """Details rows of three real models, keyed by prompt hash, land on the matrix ids."""
    root = shared_data / "openllm_v1"
    reference = ResponseMatrix.read(root / "responses" / "arc_B.parquet")
    prompts = pd.read_csv(root / "prompts" / "items-arc-B.csv")
    models = [m for m in reference.model_ids if "/" in m][:3]
    sources = []
    for k, model in enumerate(models):
        folder = tmp_path / details_repo_id(model).split("/")[1]
        folder.mkdir()
        rows = v1_details_rows(prompts, reference.row(model), seed=k)
        pq.write_table(pa.Table.from_pylist(rows), folder / "harness_arc_challenge_25.parquet")
        sources.append(folder)
    matrix = collect_leaderboard_details(
        sources,
        "harness_arc_challenge_25",
        metric="acc_norm",
        id_map=prompt_id_map(root / "prompts" / "items-arc-B.csv"),
        progress=False,
    )
    assert matrix.model_ids == tuple(sorted(models))
    expected = reference.select_models(matrix.model_ids).select_items(matrix.item_ids)
    np.testing.assert_array_equal(np.nan_to_num(expected.values), matrix.values)
    assert set(matrix.item_ids) == set(reference.item_ids)
    assert set(matrix.items["benchmark"]) == {"arc_challenge"}
    by_prompt = collect_leaderboard_details(
        sources[:1], "harness_arc_challenge_25", metric="acc_norm", progress=False
    )
    assert set(by_prompt.item_ids) == {text_hash(p) for p in prompts["prompt"]}


def test_v1_details_variants(tmp_path):
    folder = tmp_path / "details_org__model"
    rows = [{"full_prompt": f"p{k}", "acc": float(k % 2), "subject_col": "s"} for k in range(4)]
    write_lines(folder / "harness_hendrycksTest_anatomy_5" / "part-0.jsonl", rows)
    matrix = collect_leaderboard_details(
        folder, "harness_hendrycksTest_anatomy_5", metric="acc", progress=False
    )
    assert matrix.model_ids == ("org/model",)
    assert set(matrix.items["benchmark"]) == {"mmlu"}
    assert set(matrix.items["stratum"]) == {"anatomy"}
    assert matrix.row("org/model") == {text_hash(f"p{k}"): float(k % 2) for k in range(4)}
    with pytest.raises(InputError, match=r"unknown metric 'mc2'; available metrics: acc"):
        collect_leaderboard_details(
            folder, "harness_hendrycksTest_anatomy_5", metric="mc2", progress=False
        )
    with pytest.raises(
        InputError,
        match=r"no data for config 'harness_gsm8k_5'.*"
        r"harness_hendrycksTest_anatomy_5/part-0\.jsonl",
    ):
        collect_leaderboard_details(folder, "harness_gsm8k_5", metric="acc", progress=False)
    write_lines(folder / "harness_winogrande_5.jsonl", [{"prompt_text": "x", "acc": 1.0}])
    with pytest.raises(
        InputError,
        match=r"harness_winogrande_5\.jsonl:1: no text to identify the item .*prompt_text",
    ):
        collect_leaderboard_details(folder, "harness_winogrande_5", metric="acc", progress=False)
    flat = tmp_path / "flat" / "details_org__flat"
    pq.write_table(
        pa.Table.from_pylist(
            [{"example": "e1", "metrics.acc": 1.0}, {"example": "e2", "metrics.acc": 0.0}]
        ),
        _mk(flat / "harness_winogrande_5.parquet"),
    )
    assert collect_leaderboard_details(
        flat, "harness_winogrande_5", metric="acc", progress=False
    ).row("org/flat") == {text_hash("e1"): 1.0, text_hash("e2"): 0.0}


def _mk(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_v2_details_are_read_like_samples(pythia, tmp_path):
    folder = tmp_path / "EleutherAI__pythia-14m-details"
    write_lines(
        folder / "EleutherAI__pythia-14m__leaderboard_arc" / "samples.jsonl",
        read_lines(pythia / ARC),
    )
    matrix = collect_leaderboard_details(
        folder, "leaderboard_arc", metric="acc_norm", id_prefix="arc.", progress=False
    )
    samples = collect_samples(
        pythia,
        metric="acc_norm",
        tasks=["metabench_arc_secondary"],
        id_prefix="arc.",
        progress=False,
    )
    assert matrix.model_ids == ("EleutherAI/pythia-14m",)
    assert matrix.row("EleutherAI/pythia-14m") == samples.row("pythia-14m")
    with pytest.raises(InputError, match="id_map applies to v1 rows only"):
        collect_leaderboard_details(
            folder, "leaderboard_arc", metric="acc_norm", id_map={}, progress=False
        )


def test_details_snapshot_folder_goes_through_datasets(tmp_path):
    """A folder in Hub layout (README with configs, timestamped split files) loads via datasets."""
    snapshot = tmp_path / "snapshot"
    stamp = "2024_01_01T00_00_00.000000"
    data = _mk(snapshot / "2024-01-01T00-00-00.000000" / "details_harness_winogrande_5.parquet")
    pq.write_table(
        pa.Table.from_pylist(
            [
                {"full_prompt": "A", "metrics": {"acc": 1.0}},
                {"full_prompt": "B", "metrics": {"acc": 0.0}},
            ]
        ),
        data,
    )
    (snapshot / "README.md").write_text(
        "---\nconfigs:\n- config_name: harness_winogrande_5\n  data_files:\n"
        f"  - split: '{stamp}'\n    path: ['**/details_harness_winogrande_5.parquet']\n"
        "  - split: latest\n    path: ['**/details_harness_winogrande_5.parquet']\n---\n"
    )
    matrix = collect_leaderboard_details(
        snapshot,
        "harness_winogrande_5",
        metric="acc",
        model_ids=["org/m"],
        cache_dir=tmp_path / "cache",
        progress=False,
    )
    assert matrix.row("org/m") == {text_hash("A"): 1.0, text_hash("B"): 0.0}


def test_hub_details_offline_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(
        InputError,
        match=r"open-llm-leaderboard/no__such-details "
        r"\[config 'no__such__leaderboard_bbh'.*HF_HUB_OFFLINE",
    ):
        collect_leaderboard_details(
            "open-llm-leaderboard/no__such-details",
            "leaderboard_bbh",
            metric="acc_norm",
            progress=False,
        )
    with pytest.raises(InputError, match="not a file, a folder or a Hub dataset id"):
        collect_leaderboard_details("no such thing", "x", metric="acc", progress=False)


def test_details_repo_ids():
    assert (
        details_repo_id("meta-llama/Llama-2-7b-hf")
        == "open-llm-leaderboard/details_meta-llama__Llama-2-7b-hf"
    )
    assert (
        details_repo_id("Qwen/Qwen2-7B", version=2) == "open-llm-leaderboard/Qwen__Qwen2-7B-details"
    )
    with pytest.raises(InputError, match="org/name"):
        details_repo_id("gpt2")


def test_prompt_id_map_rejects_shared_prompts(tmp_path):
    path = tmp_path / "prompts.csv"
    pd.DataFrame({"item": ["a.1", "a.2"], "prompt": ["same", "same"]}).to_csv(path, index=False)
    with pytest.raises(InputError, match=r"'a\.1' and 'a\.2' \(row 3\) have the same prompt"):
        prompt_id_map(path)


# ---------------------------------------------------------------------------- matrices
def test_combine_models_and_write(toy, tmp_path):
    first = collect_samples(toy, metric="acc", model_id="a", progress=False)
    write_lines(run_file(tmp_path / "b"), [line(0, 10, 1.0), line(1, 99, 0.0)])
    second = collect_samples(tmp_path / "b", metric="acc", model_id="b", progress=False)
    both = combine_models([first, second])
    assert both.model_ids == ("a", "b")
    assert both.row("b") == {"10": 1.0, "99": 0.0}
    assert np.isnan(both.values[1, both.item_positions(["11"])[0]])
    with pytest.raises(InputError, match="model 'a' is in both"):
        combine_models([first, first])
    out = write_matrix(both, tmp_path / "m.parquet")
    again = ResponseMatrix.read(out)
    assert again.fingerprint() == both.fingerprint()
    assert list(again.items["content_hash"]) == list(both.items["content_hash"])
    csv = ResponseMatrix.read(write_matrix(both, tmp_path / "m.csv"))
    np.testing.assert_array_equal(csv.values, both.values)
    with pytest.raises(InputError, match="unknown matrix file type"):
        write_matrix(both, tmp_path / "m.txt")


def test_write_matrix_leaves_nothing_half_written(toy, tmp_path, monkeypatch):
    matrix = collect_samples(toy, metric="acc", model_id="a", progress=False)

    def broken(self, path, *args, **kwargs):
        Path(path).write_text("model,partial")
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken)
    with pytest.raises(OSError, match="disk full"):
        write_matrix(matrix, tmp_path / "out" / "m.csv")
    assert list((tmp_path / "out").iterdir()) == []


def test_hash_helpers():
    assert content_hash({"b": 1, "a": [1, "é"]}) == content_hash({"a": [1, "é"], "b": 1})
    assert content_hash({"a": 1}) != content_hash({"a": 2})
    # sha256("abc"), the FIPS 180-2 test vector
    assert text_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_copying_real_folder_keeps_results(shared_data, tmp_path):
    """A run folder copied elsewhere (results json beside samples) keeps its model id."""
    source = shared_data / "lm_eval_samples" / "smollm2-135m"
    target = tmp_path / "copy"
    shutil.copytree(source, target)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = collect_samples(source, metric="acc", id_prefix="mmlu.", progress=False)
        b = collect_samples(target, metric="acc", id_prefix="mmlu.", progress=False)
    assert a.fingerprint() == b.fingerprint()


def test_combine_models_refuses_one_id_with_two_contents():
    def one(model: str, digest: str) -> ResponseMatrix:
        items = pd.DataFrame({"content_hash": [digest]}, index=["arc.1"])
        return ResponseMatrix(np.array([[1.0]]), [model], ["arc.1"], items=items, source=model)

    with pytest.raises(InputError, match=r"item 'arc.1' has different content in a and b"):
        combine_models([one("a", "h1"), one("b", "h2")])
    merged = combine_models([one("a", "h1"), one("b", "h2")], check_content=False)
    assert merged.items.loc["arc.1", "content_hash"] == "h1"
