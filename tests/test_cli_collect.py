"""``microbench collect``: samples folders, matrix files and details -> a matrix file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from lmeval_microbench.cli.app import main
from lmeval_microbench.collect import text_hash
from lmeval_microbench.responses import ResponseMatrix

TS = "2024-11-26T10-50-23.349203"
ARC_TASK = "metabench_arc_secondary"


# ---------------------------------------------------------------------------- helpers
def write_lines(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def sample(doc_id: int, idx: int, acc: float) -> dict[str, Any]:
    """One lm-eval (>= 0.4.3) sample line; the doc depends on ``idx`` only."""
    subject = "s1" if idx < 12 else "s2"
    return {
        "doc_id": doc_id,
        "doc": {"question": f"question {idx}", "metabench_idx": idx, "subject": subject},
        "target": "0",
        "filter": "none",
        "metrics": ["acc"],
        "acc": acc,
    }


def run_ok(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """Run the CLI, expect success, return the printed JSON summary."""
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def run_fails(argv: list[str], capsys: pytest.CaptureFixture[str], match: str) -> str:
    """Run the CLI, expect exit code 2 and one error line (warnings aside) matching ``match``."""
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = [s for s in captured.err.strip().splitlines() if not s.startswith("warning: ")]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("microbench collect: error: ")
    assert re.search(match, lines[0]), lines[0]
    return lines[0]


def assert_nothing_written(out: Path) -> None:
    assert not out.exists()
    if out.parent.exists():
        assert list(out.parent.iterdir()) == []


@pytest.fixture
def pythia(shared_data: Path) -> Path:
    folder = shared_data / "lm_eval_samples" / "pythia-14m"
    if not folder.is_dir():
        pytest.skip(f"{folder} not found: real-data test")
    return folder


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """Two model folders as lm-eval writes them; model a named by its results json."""
    root = tmp_path / "runs"
    write_lines(
        root / "org__a" / f"samples_toy_{TS}.jsonl",
        [sample(k, 10 + k, float(k % 2)) for k in range(4)],
    )
    (root / "org__a" / f"results_{TS}.json").write_text(
        json.dumps({"config": {"model_args": "pretrained=org/a,dtype=float32"}})
    )
    write_lines(root / "b" / f"samples_toy_{TS}.jsonl", [sample(0, 10, 1.0), sample(1, 13, 0.0)])
    return root


def write_csv(path: Path, frame: dict[str, dict[str, float]]) -> Path:
    """A wide CSV matrix: {model: {item: score}}."""
    table = pd.DataFrame.from_dict(frame, orient="index")
    table.index.name = "model"
    table.to_csv(path)
    return path


# ---------------------------------------------------------------------------- real samples
def arc_scores(pythia: Path) -> dict[str, float]:
    """acc_norm per matrix id, read straight from pythia's arc samples file."""
    lines = read_lines(next(pythia.glob(f"samples_{ARC_TASK}_*.jsonl")))
    return {f"arc.{rec['doc']['metabench_idx']}": float(rec["acc_norm"]) for rec in lines}


def test_pythia_samples_folder(pythia, shared_data, tmp_path, capsys):
    out = tmp_path / "arc.parquet"
    argv = ["collect", str(pythia), "--metric", "acc_norm", "--tasks", ARC_TASK]
    summary = run_ok(
        [*argv, "--id-field", "metabench_idx", "--id-prefix", "arc.", "--out", str(out)], capsys
    )
    matrix = ResponseMatrix.read(out)
    expected = arc_scores(pythia)
    assert matrix.model_ids == ("pythia-14m",)
    assert matrix.row("pythia-14m") == expected
    reference = ResponseMatrix.read(shared_data / "openllm_v1" / "responses" / "arc_B.parquet")
    assert set(matrix.item_ids) == set(reference.item_ids)
    assert summary == {
        "out": str(out),
        "models": 1,
        "items": len(expected),
        "missing_entries": 0,
        "benchmarks": [ARC_TASK],
    }


def test_pythia_added_to_leaderboard_matrix(pythia, shared_data, tmp_path, capsys):
    arc = shared_data / "openllm_v1" / "responses" / "arc_B.parquet"
    out = tmp_path / "arc_all.csv"
    summary = run_ok(
        ["collect", str(arc), str(pythia), "--metric", "acc_norm", "--tasks", ARC_TASK,
         "--id-prefix", "arc.", "--out", str(out)],
        capsys,
    )  # fmt: skip
    reference = ResponseMatrix.read(arc)
    combined = ResponseMatrix.read(out)
    assert combined.shape == (reference.n_models + 1, reference.n_items)
    assert summary["models"] == reference.n_models + 1
    assert combined.row("pythia-14m") == arc_scores(pythia)
    first = reference.model_ids[0]
    aligned = combined.select_models([first]).select_items(reference.item_ids)
    np.testing.assert_array_equal(aligned.values[0], reference.select_models([first]).values[0])


# ---------------------------------------------------------------------------- small files
def test_samples_folders_with_options(runs, tmp_path, capsys):
    out = tmp_path / "m.parquet"
    summary = run_ok(
        ["collect", str(runs), "--metric", "acc", "--id-prefix", "{task}.",
         "--stratum-field", "subject", "--benchmark", "bench", "--out", str(out)],
        capsys,
    )  # fmt: skip
    matrix = ResponseMatrix.read(out)
    assert matrix.model_ids == ("b", "org/a")
    assert matrix.row("org/a") == {"toy.10": 0.0, "toy.11": 1.0, "toy.12": 0.0, "toy.13": 1.0}
    assert matrix.row("b") == {"toy.10": 1.0, "toy.13": 0.0}
    assert matrix.items.loc["toy.12", "stratum"] == "s2"
    assert set(matrix.items["benchmark"]) == {"bench"}
    assert list(matrix.items["content_hash"].isna()) == [False] * 4
    assert summary["missing_entries"] == 2
    assert summary["benchmarks"] == ["bench"]
    single = tmp_path / "single.csv"
    run_ok(
        ["collect", str(runs / "b"), "--metric", "acc", "--model-id", "me/b", "--out", str(single)],
        capsys,
    )
    assert ResponseMatrix.read(single).row("me/b") == {"10": 1.0, "13": 0.0}


def test_content_check_and_opt_out(runs, tmp_path, capsys):
    changed = sample(0, 10, 1.0)
    changed["doc"]["question"] = "another question"
    write_lines(next((runs / "b").glob("samples_*.jsonl")), [changed])
    out = tmp_path / "out" / "m.parquet"
    run_fails(
        ["collect", str(runs), "--metric", "acc", "--out", str(out)],
        capsys,
        r"item '10' has different content in .*--no-check-content",
    )
    assert_nothing_written(out)
    run_ok(
        ["collect", str(runs), "--metric", "acc", "--no-check-content", "--out", str(out)], capsys
    )
    assert ResponseMatrix.read(out).row("b") == {"10": 1.0}


def test_matrix_files_rows_and_items(tmp_path, capsys):
    a = write_csv(
        tmp_path / "a.csv", {"m1": {"x.1": 1.0, "x.2": 0.0}, "m2": {"x.1": 0.0, "x.2": 1.0}}
    )
    b = write_csv(tmp_path / "b.csv", {"m3": {"x.2": 1.0, "x.3": 1.0}})
    c = write_csv(tmp_path / "c.csv", {"m1": {"y.1": 1.0}, "m2": {"y.1": 0.0}})
    rows = tmp_path / "rows.parquet"
    summary = run_ok(["collect", str(a), str(b), "--out", str(rows)], capsys)
    stacked = ResponseMatrix.read(rows)
    assert stacked.model_ids == ("m1", "m2", "m3")
    assert stacked.row("m3") == {"x.2": 1.0, "x.3": 1.0}
    assert summary["missing_entries"] == 3  # m1, m2 lack x.3; m3 lacks x.1
    side = tmp_path / "side.parquet"
    run_ok(["collect", str(a), str(c), "--out", str(side)], capsys)  # auto: shared models
    joined = ResponseMatrix.read(side)
    assert joined.item_ids == ("x.1", "x.2", "y.1")
    assert joined.row("m2") == {"x.1": 0.0, "x.2": 1.0, "y.1": 0.0}
    explicit = tmp_path / "explicit.parquet"
    run_ok(["collect", str(a), str(c), "--combine", "items", "--out", str(explicit)], capsys)
    assert ResponseMatrix.read(explicit).fingerprint() == joined.fingerprint()
    bad = tmp_path / "bad" / "m.parquet"
    run_fails(
        ["collect", str(a), str(c), "--combine", "rows", "--out", str(bad)],
        capsys,
        "model 'm1' is in both",
    )
    run_fails(
        ["collect", str(a), str(a), "--out", str(bad)],
        capsys,
        r"share models \('m1', 'm2'\) and items",
    )
    assert_nothing_written(bad)


def test_leaderboard_details_with_id_map(tmp_path, capsys):
    folder = tmp_path / "details_org__model"
    rows = [{"full_prompt": f"prompt {k}", "metrics": {"acc": float(k % 2)}} for k in range(5)]
    write_lines(folder / "harness_arc_challenge_25.jsonl", rows)
    id_map = tmp_path / "prompts.csv"
    pd.DataFrame(
        {"item": [f"arc.{k}" for k in range(4)], "prompt": [f"prompt {k}" for k in range(4)]}
    ).to_csv(id_map, index=False)
    out = tmp_path / "details.parquet"
    summary = run_ok(
        ["collect", str(folder), "--details", "harness_arc_challenge_25", "--metric", "acc",
         "--id-map", str(id_map), "--out", str(out)],
        capsys,
    )  # fmt: skip
    matrix = ResponseMatrix.read(out)
    assert matrix.model_ids == ("org/model",)
    assert matrix.row("org/model") == {"arc.0": 0.0, "arc.1": 1.0, "arc.2": 0.0, "arc.3": 1.0}
    assert summary["benchmarks"] == ["arc_challenge"]
    hashed = tmp_path / "hashed.csv"
    run_ok(
        ["collect", str(folder), "--details", "harness_arc_challenge_25", "--metric", "acc",
         "--model-id", "me/renamed", "--out", str(hashed)],
        capsys,
    )  # fmt: skip
    assert ResponseMatrix.read(hashed).row("me/renamed") == {
        text_hash(f"prompt {k}"): float(k % 2) for k in range(5)
    }


def test_documents_of_another_benchmark_are_refused(pythia, tmp_path, capsys):
    """hellaswag's documents in an arc-named file do not become arc items."""
    hellaswag = next(pythia.glob("samples_metabench_hellaswag_secondary_*.jsonl"))
    renamed = tmp_path / "runs" / "pythia-14m" / f"samples_{ARC_TASK}_{TS}.jsonl"
    renamed.parent.mkdir(parents=True)
    renamed.write_bytes(hellaswag.read_bytes())
    out = tmp_path / "arc.parquet"
    argv = ["collect", str(renamed.parent), "--metric", "acc_norm", "--tasks", ARC_TASK]
    run_fails(
        [*argv, "--id-prefix", "arc.", "--out", str(out)],
        capsys,
        rf"{renamed.name}: its documents are hellaswag items \(25 checked against the "
        r"shipped bundle openllm-v1-hellaswag-25-greedy.*but the task name and --id-prefix "
        r"say arc",
    )
    assert not out.exists()
    argv[1] = str(pythia)
    assert run_ok([*argv, "--id-prefix", "arc.", "--out", str(out)], capsys)["items"] == 100


# ---------------------------------------------------------------------------- bad input
def test_unknown_metric_is_one_line_and_writes_nothing(runs, tmp_path, capsys):
    out = tmp_path / "out" / "m.parquet"
    run_fails(
        ["collect", str(runs), "--metric", "acc_norm", "--out", str(out)],
        capsys,
        r"unknown metric 'acc_norm'.*available metrics: acc",
    )
    assert_nothing_written(out)


def test_malformed_line_names_file_and_line(runs, tmp_path, capsys):
    path = next((runs / "b").glob("samples_*.jsonl"))
    text = path.read_text().splitlines()
    path.write_text(text[0] + "\n" + text[1][:30] + "\n")
    out = tmp_path / "out" / "m.csv"
    run_fails(
        ["collect", str(runs), "--metric", "acc", "--out", str(out)],
        capsys,
        rf"{path.name}:2: malformed JSON",
    )
    assert_nothing_written(out)


def test_conflicting_and_missing_flags(runs, tmp_path, capsys):
    matrix = write_csv(tmp_path / "a.csv", {"m1": {"x.1": 1.0}})
    out = tmp_path / "out" / "m.parquet"
    cases = [
        (["collect", str(runs), "--out", str(out)], "--metric is required"),
        (["collect", str(runs), "--metric", "acc", "--split", "train", "--out", str(out)],
         "--split: for leaderboard details only"),
        (["collect", str(matrix), "--metric", "acc", "--out", str(out)],
         "--metric: for lm-eval samples or details only; every PATH here is a matrix file"),
        (["collect", str(runs), "--details", "harness_x_5", "--tasks", "toy", "--metric", "acc",
          "--out", str(out)], "--tasks: for lm-eval samples folders only"),
        (["collect", str(runs), "--metric", "acc", "--model-id", "a", "--model-id", "b",
          "--out", str(out)], "--model-id is given 2 times"),
        (["collect", str(runs), "--metric", "acc", "--out", str(tmp_path / "out" / "m.txt")],
         "unknown matrix file type"),
        (["collect", str(tmp_path / "absent"), "--metric", "acc", "--out", str(out)],
         "absent: no such file or folder"),
    ]  # fmt: skip
    for argv, match in cases:
        run_fails(argv, capsys, match)
    assert_nothing_written(out)


def test_existing_output_needs_overwrite(runs, tmp_path, capsys):
    out = tmp_path / "m.csv"
    out.write_text("keep me")
    run_fails(
        ["collect", str(runs), "--metric", "acc", "--out", str(out)],
        capsys,
        "exists; pass --overwrite",
    )
    assert out.read_text() == "keep me"
    run_ok(["collect", str(runs), "--metric", "acc", "--out", str(out), "--overwrite"], capsys)
    assert ResponseMatrix.read(out).model_ids == ("b", "org/a")


def test_model_named_by_its_folder_is_said_once_per_folder(runs, tmp_path, capsys):
    code = main(["collect", str(runs), "--metric", "acc", "--out", str(tmp_path / "m.csv")])
    err = capsys.readouterr().err.splitlines()
    assert code == 0
    (said,) = [line for line in err if "name of the folder" in line]
    assert said.startswith("warning: ") and "model id 'b' is the name of the folder" in said
    assert str(runs / "b") in said


def test_help_has_an_example(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["collect", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text
    assert "microbench collect " in text.split("examples:", 1)[1]
