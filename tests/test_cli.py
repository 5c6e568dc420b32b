import json
import re
from pathlib import Path

import numpy as np
import pytest

from lmeval_microbench.bundle import load_bundle
from lmeval_microbench.cli.app import main
from lmeval_microbench.synthetic import random_item_params, simulate_responses


@pytest.fixture(scope="module")
def matrix_file(tmp_path_factory):
    params = random_item_params(40, seed=3)
    matrix, _ = simulate_responses(params, 250, seed=4)
    path = tmp_path_factory.mktemp("cli") / "matrix.parquet"
    matrix.to_parquet(path)
    return path


def test_help_lists_subcommands(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in ("fit", "build", "estimate", "publish"):
        assert command in out


def test_fit_writes_params(matrix_file, tmp_path, capsys):
    out = tmp_path / "irt.json"
    assert (
        main(["fit", "--responses", str(matrix_file), "--irt-model", "2pl", "--out", str(out)]) == 0
    )
    payload = json.loads(out.read_text())
    assert payload["params"]["model"] == "2pl"
    assert len(payload["params"]["item_ids"]) == 40
    assert len(payload["abilities"]) == 250
    assert json.loads(capsys.readouterr().out)["converged"] is True


def test_build_estimate_publish_dry_run(matrix_file, tmp_path, capsys):
    folder = tmp_path / "bundle"
    code = main(
        [
            "build",
            "--responses",
            str(matrix_file),
            "--method",
            "stratified",
            "--budget",
            "12",
            "--benchmark",
            "toy",
            "--estimators",
            "anchor,calibrated",
            "--out",
            str(folder),
        ]
    )
    assert code == 0
    bundle = load_bundle(folder)
    assert bundle.budget == 12 and bundle.default_estimator == "calibrated"
    capsys.readouterr()
    assert main(["estimate", str(folder), "--responses", str(matrix_file), "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == 250
    assert all(r["estimate_lower"] <= r["estimate_value"] <= r["estimate_upper"] for r in records)
    assert main(["publish", str(folder), "me/toy-micro", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "bundle.json" in out and "README.md" in out


def test_errors_are_one_line_and_write_nothing(matrix_file, tmp_path, capsys):
    folder = tmp_path / "never"
    code = main(
        [
            "build",
            "--responses",
            str(matrix_file),
            "--method",
            "nope",
            "--budget",
            "5",
            "--benchmark",
            "t",
            "--out",
            str(folder),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unknown selection method 'nope'" in err
    assert not folder.exists()
    code = main(["estimate", str(tmp_path / "missing"), "--responses", str(matrix_file)])
    assert code == 2
    assert "missing" in capsys.readouterr().err


def test_build_uses_scores_file(matrix_file, tmp_path):
    import pandas as pd

    from lmeval_microbench.responses import ResponseMatrix

    matrix = ResponseMatrix.read(matrix_file)
    scores = tmp_path / "scores.csv"
    truth = np.clip(matrix.mean_scores() * 100 + 5, 0, 100)
    pd.DataFrame({"model": matrix.model_ids, "full": truth}).to_csv(scores, index=False)
    folder = tmp_path / "b"
    assert (
        main(
            [
                "build",
                "--responses",
                str(matrix_file),
                "--method",
                "random",
                "--budget",
                "10",
                "--benchmark",
                "toy",
                "--scores",
                str(scores),
                "--score-column",
                "full",
                "--estimators",
                "calibrated",
                "--out",
                str(folder),
            ]
        )
        == 0
    )
    assert load_bundle(folder).provenance.n_source_models == 250


# ---------------------------------------------------------------------------- issue 8
def build_args(matrix, out, *extra):
    return [
        "build",
        "--responses",
        str(matrix),
        "--method",
        "random",
        "--budget",
        "8",
        "--benchmark",
        "toy",
        "--estimators",
        "anchor",
        "--out",
        str(out),
        *extra,
    ]


@pytest.fixture(scope="module")
def small_bundle(matrix_file, tmp_path_factory):
    folder = tmp_path_factory.mktemp("small") / "bundle"
    assert main(build_args(matrix_file, folder)) == 0
    return folder


def bad_matrices(folder):
    """Matrices each command must refuse with a one-line message naming the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    header = folder / "header_only.csv"
    header.write_text("model,arc.1,arc.2\n")
    twice = folder / "twice.csv"
    twice.write_text("model,arc.914,arc.2,arc.914\na,1,0,1\nb,0,1,0\n")
    meta = folder / "bad_meta.parquet"
    table = pa.table({"model": ["a", "b"], "arc.1": [1.0, 0.0]})
    pq.write_table(table.replace_schema_metadata({b"lmeval_microbench": b"{not json"}), meta)
    return {header: "has no models", twice: "duplicate item ids: 'arc.914'", meta: "metadata"}


def test_bad_matrices_are_one_line_messages_in_build_fit_estimate(small_bundle, tmp_path, capsys):
    capsys.readouterr()
    for path, reason in bad_matrices(tmp_path).items():
        commands = [
            build_args(path, tmp_path / "never"),
            ["fit", "--responses", str(path), "--out", str(tmp_path / "never.json")],
            ["estimate", str(small_bundle), "--responses", str(path)],
        ]
        for argv in commands:
            assert main(argv) == 2, (argv, path)
            err = capsys.readouterr().err.strip()
            assert err.count("\n") == 0 and path.name in err and reason in err, err
    assert not (tmp_path / "never").exists() and not (tmp_path / "never.json").exists()


def test_ctrl_c_in_build_is_one_line_exit_130_and_writes_nothing(
    matrix_file, tmp_path, capsys, monkeypatch
):
    import lmeval_microbench.build
    from lmeval_microbench.bundle import io as bundle_io

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    for module, name in ((lmeval_microbench.build, "build_bundle"), (bundle_io, "_write_document")):
        with monkeypatch.context() as patch:
            patch.setattr(module, name, interrupted)
            out = tmp_path / "out" / "bundle"
            assert main(build_args(matrix_file, out)) == 130
        err = capsys.readouterr().err  # after any progress bar: one line, no traceback
        assert err.strip().splitlines()[-1] == "microbench build: interrupted"
        assert "Traceback" not in err
        assert not out.exists()
        assert not out.parent.exists() or list(out.parent.iterdir()) == []


def test_builds_with_source_date_epoch_are_byte_identical(matrix_file, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    folders = [tmp_path / "first", tmp_path / "second"]
    for folder in folders:
        assert main(build_args(matrix_file, folder)) == 0
    files = [sorted(p.relative_to(f) for p in f.rglob("*")) for f in folders]
    assert files[0] == files[1] == [Path("bundle.json")]
    assert (folders[0] / "bundle.json").read_bytes() == (folders[1] / "bundle.json").read_bytes()
    assert load_bundle(folders[0]).provenance.created == "2023-11-14T22:13:20Z"


def test_build_overwrite_replaces_only_the_bundle(matrix_file, tmp_path):
    folder = tmp_path / "bundle"
    assert main(build_args(matrix_file, folder)) == 0
    (folder / "README.md").write_text("notes")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert main(build_args(matrix_file, folder, "--name", "again", "--overwrite")) == 0
    assert load_bundle(folder).name == "again"
    assert (folder / "README.md").read_text() == "notes"
    assert (folder / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"


def test_build_refuses_scores_of_unclear_scale(matrix_file, tmp_path, capsys):
    import pandas as pd

    from lmeval_microbench.responses import ResponseMatrix

    matrix = ResponseMatrix.read(matrix_file)
    scores = tmp_path / "scores.csv"
    pd.DataFrame({"model": matrix.model_ids, "full": matrix.mean_scores() / 10}).to_csv(
        scores, index=False
    )  # a tenth of the row means: neither fractions nor percent
    argv = build_args(
        matrix_file, tmp_path / "b", "--scores", str(scores), "--score-column", "full"
    )
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "scores.csv" in err and "--score-scale" in err
    assert main([*argv, "--score-scale", "fraction"]) == 0


def test_json_output_is_strict_json_with_null_for_nan(capsys):
    from lmeval_microbench.cli._options import print_json

    print_json([{"estimate_se": float("nan"), "value": 0.5, "nested": {"x": float("inf")}}])
    text = capsys.readouterr().out
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == [{"estimate_se": None, "value": 0.5, "nested": {"x": None}}]


def test_build_help_names_source_date_epoch(capsys):
    with pytest.raises(SystemExit):
        main(["build", "--help"])
    assert "SOURCE_DATE_EPOCH" in capsys.readouterr().out


def test_estimate_from_runs_says_why_a_bundle_without_task_matches_none(
    matrix_file, tmp_path, capsys
):
    """A bundle built without --task has no lm-eval task: the README's old `estimate BUNDLE
    --responses out/` met a bare "no run"; the one line now names the bundle, says why and
    what works instead."""
    folder = tmp_path / "toy-12"
    assert (
        main(
            [
                *("build", "--responses", str(matrix_file), "--method", "random"),
                *("--budget", "12", "--benchmark", "toy", "--estimators", "mean"),
                *("--out", str(folder)),
            ]
        )
        == 0
    )
    runs = tmp_path / "out"
    runs.mkdir()
    line = {"doc_id": 0, "doc": {"question": "2+2?"}, "target": 0, "filter": "none"}
    lines = [json.dumps({**line, "doc_id": k, "metrics": ["acc"], "acc": 1.0}) for k in range(3)]
    (runs / "samples_arc_easy_2025-01-01T00-00-00.jsonl").write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["estimate", str(folder), "--responses", str(runs), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    name = load_bundle(folder).name
    assert f"no run of bundle {name!r}" in err[0]
    assert "was built without --task" in err[0] and "estimate from a response matrix" in err[0]
    assert "Traceback" not in err[0]


def test_build_quiet_hides_every_progress_bar(matrix_file, tmp_path, capsys):
    """``--quiet`` silences the bars of the automatic choice, the person-fit folds and the
    estimator fits (a build in a CI log); the choice's table and the summary stay."""
    argv = ["build", "--responses", str(matrix_file), "--benchmark", "toy", "--budget", "10"]
    argv += ["--default-estimator", "anchor", "--estimators", "anchor"]
    bars = ("auto", "person-fit folds", "fitting estimators")
    assert main([*argv, "--out", str(tmp_path / "loud")]) == 0
    loud = capsys.readouterr()
    assert all(re.search(rf"{bar}:\s+\d+%\|", loud.err) for bar in bars)
    assert main([*argv, "--out", str(tmp_path / "quiet"), "--quiet"]) == 0
    quiet = capsys.readouterr()
    assert "%|" not in quiet.err  # tqdm's bar
    assert "| candidate |" in quiet.err and json.loads(quiet.out)["items"] == 10
