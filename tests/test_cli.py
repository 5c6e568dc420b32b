import json

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
    assert main(["fit", str(matrix_file), "--model", "2pl", "--out", str(out)]) == 0
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
                str(matrix_file),
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
