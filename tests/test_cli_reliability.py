import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

import lmeval_microbench.reliability.evaluate as evaluate_module
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


def keep_pools(monkeypatch: pytest.MonkeyPatch) -> dict:
    """The pools the next run summarises (each target's truth, estimate and interval per
    repeat), by (protocol, method, estimator, budget)."""
    pools: dict = {}
    real_plan = evaluate_module.evaluate_plan

    def keep(*args, **kwargs):
        pools.update(real_plan(*args, **kwargs))
        return pools

    monkeypatch.setattr(evaluate_module, "evaluate_plan", keep)
    return pools


def check_recomputed(record: dict, pools: dict) -> None:
    """MAE, RMSE, Kendall tau and coverage of a written record, recomputed with numpy/scipy
    from its targets' truths, estimates and 90 % intervals (fractions; the record in points)."""
    key = (record["protocol"], record["method"], record["estimator"], record["budget"])
    repeats = pools[key].by_repeat()
    assert len(repeats) == record["repeats"]
    truth, value, lower, upper = (np.concatenate([r[k] for r in repeats]) for k in range(4))
    assert record["mae"] == pytest.approx(100 * np.mean(np.abs(value - truth)), abs=1e-9)
    assert record["rmse"] == pytest.approx(100 * np.sqrt(np.mean((value - truth) ** 2)), abs=1e-9)
    taus = [kendalltau(r[1], r[0]).statistic for r in repeats]
    assert record["kendall_tau"] == pytest.approx(np.mean(taus))
    if record["coverage90"] is not None:
        covered = (lower <= truth) & (truth <= upper)
        assert record["coverage90"] == pytest.approx(np.mean(covered))


def test_end_to_end_writes_json_markdown_and_plots(files, tmp_path, capsys, monkeypatch):
    out = tmp_path / "report.json"
    pools = keep_pools(monkeypatch)
    assert run(files, out) == 0
    records = json.loads(out.read_text())
    # 2 protocols x (2 methods x 2 estimators at budget 5 + 2 estimators at "all")
    assert len(records) == 12
    for record in records:
        assert REQUIRED <= set(record)
        assert record["protocol"] in ("random", "extrapolation")
        assert (record["budget"], record["method"] == "all") in ((5, False), ("all", True))
        assert record["repeats"] == 2 and record["n_targets"] == 32
        assert record["mae"] >= 0.0
        if record.get("interval_status") == "zero width":  # `all` + mean: the truth itself
            assert record["budget"] == "all" and record["coverage90"] is None
        else:
            assert 0.0 <= record["coverage90"] <= 1.0
        check_recomputed(record, pools)
        if (record["method"], record["estimator"]) == ("all", "mean"):
            # no --scores: the truth is each model's mean over every item, which "mean" on
            # every item returns exactly: no error, the true ranking
            assert record["mae"] == pytest.approx(0.0, abs=1e-9)
            assert record["kendall_tau"] == pytest.approx(1.0)
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


# ------------------------------------------------------------- --out DIR and leave-one-out
@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 20-model matrix without strata: what `--protocols loo` is for."""
    folder = tmp_path_factory.mktemp("small")
    matrix, _ = simulate_responses(random_item_params(30, seed=31), 20, seed=32)
    matrix.to_parquet(folder / "small.parquet")
    return folder / "small.parquet"


def run_small(small, out, *extra):
    return main(
        [
            "reliability",
            *("--responses", str(small), "--protocols", "loo", "--out", str(out)),
            *("--estimators", "mean", "--quiet", *extra),
        ]
    )


@pytest.mark.parametrize("spelling", ["{dir}/", "{dir}"])
def test_out_folder_gets_every_report_file(small, tmp_path, capsys, spelling):
    """The README's `--out DIR`: a folder (trailing slash or no suffix) gets reliability.*."""
    folder = tmp_path / "rel"
    assert run_small(small, spelling.format(dir=folder), "--methods", "random") == 0
    names = sorted(p.name for p in folder.iterdir())
    expected = ["reliability.json", "reliability.md"]
    if pytest.importorskip("matplotlib"):
        expected += ["reliability_mae.png", "reliability_mdad.png"]  # no DIoR: one repeat
    assert names == expected
    summary = json.loads(capsys.readouterr().out)
    assert summary["report"] == str(folder / "reliability.json")
    # the same folder again is refused, as any existing output
    assert run_small(small, folder, "--methods", "random") == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err


def test_loo_defaults_say_what_they_leave_out(small, tmp_path, capsys):
    """One repeat: no DIoR (n/a, null); no strata: no `stratified`; no --scores: no `all`."""
    out = tmp_path / "loo.json"
    assert run_small(small, out, "--budgets", "10") == 0
    records = json.loads(out.read_text())
    assert "stratified" not in {r["method"] for r in records}
    assert {r["method"] for r in records} >= {"random", "greedy"}
    for record in records:
        assert record["tau_dior"] is None and record["top10_dior"] is None
        assert record["dior_status"] == "one repeat" and record["kendall_tau"] is not None
    markdown = (tmp_path / "loo.md").read_text()
    assert "method `stratified` left out: the matrix has no strata" in markdown
    assert "| n/a | n/a |" in markdown and "Note: `tau DIoR`, `top-10 DIoR` n/a" in markdown
    err = capsys.readouterr().err
    assert err.count("fewer than 20") == 1 and "times)" in err  # one line, not 20
    # no --budgets and no --scores: `all` (the truth itself) is left out, and said so
    out = tmp_path / "default.json"
    assert run_small(small, out, "--methods", "random") == 0
    assert {r["budget"] for r in json.loads(out.read_text())} == {10, 25}
    assert "budget `all` left out" in (tmp_path / "default.md").read_text()


def test_loo_asked_for_all_and_stratified_is_marked(small, tmp_path):
    """Asked for explicitly, the rows stay, marked: zero-width coverage n/a, notes why."""
    out = tmp_path / "asked.json"
    assert run_small(small, out, "--methods", "random,stratified", "--budgets", "10,all") == 0
    records = json.loads(out.read_text())
    every = [r for r in records if r["budget"] == "all"]
    assert every and all(r["interval_status"] == "zero width" for r in every)
    assert all(r["coverage90"] is None and r["width90"] == 0.0 for r in every)
    assert not any(r.get("interval_status") for r in records if r["budget"] != "all")
    random, stratified = (
        {k: v for k, v in r.items() if k not in ("method", "seconds", "selection_seconds")}
        for r in records
        if r["budget"] == 10
    )
    assert random == stratified  # the same items: why the note is needed
    markdown = (tmp_path / "asked.md").read_text()
    assert "`stratified` rows equal `random`'s" in markdown
    assert "coverage n/a: the interval has width 0" in markdown
    assert "`all` rows: the truth is the mean over the matrix items" in markdown
    row = next(line for line in markdown.splitlines() if line.startswith("| all | mean | all"))
    assert row.count("n/a") == 2 + 1 + 4  # DIoRs, cov90 and the four third columns shown
