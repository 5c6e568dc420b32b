import json

import numpy as np
import pandas as pd
import pytest

from lmeval_microbench.cli.app import main
from lmeval_microbench.synthetic import random_item_params, simulate_responses

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
REQUIRED = {
    "method",
    "estimator",
    "budget",
    "protocol",
    "mae",
    "rmse",
    "max_error",
    "kendall_tau",
    "mdad",
    "coverage90",
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A 160-model matrix, a 40-model holdout matrix and true scores (mean + noise) of both."""
    folder = tmp_path_factory.mktemp("reliability")
    params = random_item_params(30, seed=21)
    matrix, _ = simulate_responses(params, 200, seed=22)
    main_matrix = matrix.select_models(matrix.model_ids[:160])
    holdout = matrix.select_models(matrix.model_ids[160:])
    main_matrix.to_parquet(folder / "main.parquet")
    holdout.to_parquet(folder / "holdout.parquet")
    noise = np.random.default_rng(23).normal(0, 2, matrix.n_models)
    full = np.clip(matrix.mean_scores() * 100 + noise, 0, 100)
    scores = pd.DataFrame({"model": matrix.model_ids, "full": full})
    scores.iloc[:160].to_csv(folder / "scores.csv", index=False)
    scores.iloc[160:].to_csv(folder / "holdout_scores.csv", index=False)
    return folder


def run(files, out, *extra):
    return main(
        [
            "reliability",
            "--responses",
            str(files / "main.parquet"),
            "--methods",
            "random,anchor_points",
            "--estimators",
            "mean,irt",
            "--budgets",
            "5,all",
            "--repeats",
            "2",
            "--out",
            str(out),
            *extra,
        ]
    )


def test_end_to_end_writes_json_markdown_and_plots(files, tmp_path, capsys):
    out = tmp_path / "report.json"
    assert run(files, out) == 0
    records = json.loads(out.read_text())
    # 2 protocols x (2 methods x 2 estimators at budget 5 + 2 estimators at "all")
    assert len(records) == 12
    for record in records:
        assert REQUIRED <= set(record)
        assert record["protocol"] in ("random", "extrapolation")
        assert (record["budget"], record["method"] == "all") in ((5, False), ("all", True))
        assert record["repeats"] == 2 and record["n_targets"] == 32
        assert 0.0 <= record["coverage90"] <= 1.0 and record["mae"] >= 0.0
    combos = {(r["method"], r["estimator"]) for r in records}
    assert combos == {
        ("random", "mean"),
        ("random", "irt"),
        ("anchor_points", "mean"),
        ("anchor_points", "irt"),
        ("all", "mean"),
        ("all", "irt"),
    }
    markdown = (tmp_path / "report.md").read_text()
    assert "| method | estimator | budget | MAE |" in markdown
    for name in ("report_mae.png", "report_mdad.png", "report_dior.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(PNG_SIGNATURE)
        image = pytest.importorskip("matplotlib.image").imread(tmp_path / name)
        assert image.shape[0] > 100 and image.shape[1] > 100
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 12 and summary["irt_fits"] == 3  # 2 random + 1 extrapolation


def test_holdout_protocol_with_scores(files, tmp_path):
    out = tmp_path / "holdout.json"
    code = run(
        files,
        out,
        "--scores",
        str(files / "scores.csv"),
        "--score-column",
        "full",
        "--holdout-responses",
        str(files / "holdout.parquet"),
        "--holdout-scores",
        str(files / "holdout_scores.csv"),
        "--protocols",
        "holdout",
        "--no-plots",
    )
    assert code == 0
    records = json.loads(out.read_text())
    assert {r["protocol"] for r in records} == {"holdout"}
    assert all(r["n_targets"] == 40 and r["n_sources"] == 160 for r in records)
    assert not list(tmp_path.glob("*.png"))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--budgets", "31"], "budget 31 exceeds the 30 items"),
        (["--methods", "nope"], "unknown selection method 'nope'"),
        (["--estimators", "nope"], "unknown estimator 'nope'"),
        (["--scores", "{scores}", "--score-column", "missing"], "no column 'missing'"),
        (
            ["--scores", "{scores}", "--score-column", "full", "--holdout-responses", "{hold}"],
            "needs --holdout-scores",
        ),
        (["--protocols", "holdout"], "needs a holdout matrix"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(files, tmp_path, capsys, extra, message):
    extra = [e.format(scores=files / "scores.csv", hold=files / "holdout.parquet") for e in extra]
    out = tmp_path / "out" / "report.json"
    # later options win in argparse, so the bad value overrides run()'s good default
    assert run(files, out, *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.parent.exists() or not any(out.parent.iterdir())


def test_out_must_be_json(files, tmp_path, capsys):
    assert run(files, tmp_path / "report.txt") == 2
    assert "--out must name a .json file" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
