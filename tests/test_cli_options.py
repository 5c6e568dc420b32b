"""One CLI (issue 13): every subcommand's options follow the rules of ``cli/_options.py``.

The parsers are read in-process from ``make_parser`` (fast, no lm-eval run); the old
spellings (gone: each is refused in one line naming its command) and ``estimate`` on lm-eval
output run for real on toy data.
"""

from __future__ import annotations

import argparse
import json
import math
import warnings

import numpy as np
import pytest
import reconstruct_support
from reconstruct_support import BUDGET, run_of

from lmeval_microbench.cli import _options
from lmeval_microbench.cli.app import main, make_parser
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.runs import ReconstructionWarning

toys = reconstruct_support.toys  # fixtures: two toy bundles and their task suite
suite = reconstruct_support.suite

PASS_THROUGH = {"eval"}
"""Commands whose arguments are all lm-eval's (parsed by lm-eval itself)."""

CANONICAL = {
    "responses": "--responses",
    "irt_model": "--irt-model",
    "model_id": "--model-id",
    "out": "--out",
    "overwrite": "--overwrite",
    "seed": "--seed",
    "level": "--level",
    "estimator": "--estimator",
    "estimators": "--estimators",
    "method": "--method",
    "methods": "--methods",
    "quiet": "--quiet",
    "format": "--format",
    "benchmark": "--benchmark",
    "model_args": "--model_args",
    "batch_size": "--batch_size",
    "include_path": "--include_path",
    "output_path": "--output_path",
}
"""The one spelling of each shared option, by its argparse dest."""

MATRIX_COMMANDS = {"fit", "build", "estimate", "reliability", "rank"}
PROGRESS_COMMANDS = {"fit", "estimate", "reconstruct", "curve", "collect"}
LISTED = {
    "method": _options.METHODS,
    "methods": _options.METHODS,
    "estimator": _options.ESTIMATORS,
    "estimators": _options.ESTIMATORS,
    "default_estimator": _options.ESTIMATORS,
    "irt_model": _options.IRT_MODELS,
}


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every (sub)subcommand's parser by its name, e.g. ``adaptive build``."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found[f"{prefix}{name}"] = sub
                    walk(sub, f"{prefix}{name} ")

    walk(make_parser(), "")
    return found


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Actions shown in ``--help`` (every one: nothing is hidden)."""
    return [a for a in parser._actions if a.help != argparse.SUPPRESS]


def spellings(parser: argparse.ArgumentParser) -> set[str]:
    return {s for action in options(parser) for s in action.option_strings}


def test_every_help_renders_and_every_option_has_help(capsys):
    for name, parser in commands().items():
        if name in PASS_THROUGH:
            continue
        with pytest.raises(SystemExit) as exit_info:
            main([*name.split(), "--help"])
        assert exit_info.value.code == 0, name
        assert "usage: microbench" in capsys.readouterr().out
        for action in parser._actions:
            assert action.help != argparse.SUPPRESS, (name, action.dest)  # nothing hidden
            assert action.help and action.help.strip(), (name, action.dest)


def test_shared_options_have_one_spelling_everywhere():
    for name, parser in commands().items():
        for action in options(parser):
            expected = CANONICAL.get(action.dest)
            if expected and action.option_strings:
                assert action.option_strings == [expected], (name, action.option_strings)
        shown = spellings(parser)
        assert ("--out" in shown) == ("--overwrite" in shown), name
        if "--model" in shown:  # only ever lm-eval's model type
            (model,) = [a for a in parser._actions if "--model" in a.option_strings]
            assert "lm-eval model type" in model.help, name
    parsers = commands()
    for name in MATRIX_COMMANDS:
        assert "--responses" in spellings(parsers[name]), name
        assert "--irt-model" in spellings(parsers[name]) or name == "estimate"
    for name in PROGRESS_COMMANDS:
        assert "--quiet" in spellings(parsers[name]), name
    assert "--model" not in spellings(parsers["fit"]) | spellings(parsers["estimate"])


def test_out_help_says_the_overwrite_rule():
    for name, parser in commands().items():
        for action in options(parser):
            if "--out" in action.option_strings:
                assert "refuses to replace it without --overwrite" in action.help, name


def test_names_are_listed_in_the_help_and_match_the_registries():
    from lmeval_microbench.estimators import ESTIMATORS
    from lmeval_microbench.irt.params import MODEL_TYPES
    from lmeval_microbench.selection import SELECTORS

    assert _options.METHODS == tuple(sorted(SELECTORS))
    assert _options.ESTIMATORS == tuple(sorted(ESTIMATORS))
    assert _options.IRT_MODELS == MODEL_TYPES
    for name, parser in commands().items():
        for action in options(parser):
            for value in LISTED.get(action.dest, ()):
                assert value in action.help or value in (action.choices or ()), (name, value)


def test_bare_microbench_lists_the_commands(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "usage: microbench" in err
    for name in ("collect", "fit", "build", "estimate", "reconstruct", "eval", "reliability"):
        assert f"    {name}" in err


def test_a_bad_command_line_fails_in_one_line_before_any_work(tmp_path, capsys):
    never = str(tmp_path / "no-bundle")  # would fail later, when the work starts
    for argv, said in (
        (["estimate", never, "--responses", never, "--estimator", "krige"], "choose from"),
        (
            ["reconstruct", never, "--estimator", "nope"],
            "choose from anchor, anchor_sum, blend, calibrated",
        ),
        (["fit", "--responses", never, "--irt-model", "5pl", "--out", never], "invalid choice"),
        (["estimate", never, "--responses", never, "--level", "90"], "in (0, 1)"),
        (["build", "--responses", never, "--method", "nope", "--budget", "3"], "anchor_points"),
        (["build", "--responses", never, "--budget", "3", "--estimators", "mean,x"], "'x'"),
        (["estimate", never], "required: --responses"),
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err, err
        assert err.startswith(f"microbench {argv[0]}: error: ") and "no-bundle" not in err


# ---------------------------------------------------------------------------- old spellings
@pytest.fixture(scope="module")
def small_matrix(tmp_path_factory):
    from lmeval_microbench.synthetic import random_item_params, simulate_responses

    matrix, _ = simulate_responses(random_item_params(12, seed=1), 80, seed=2)
    path = tmp_path_factory.mktemp("options") / "m.parquet"
    matrix.to_parquet(path)
    return path


def test_fit_follows_the_one_overwrite_rule(small_matrix, tmp_path, capsys):
    out = tmp_path / "irt.json"
    argv = ["fit", "--responses", str(small_matrix), "--out", str(out), "--quiet"]
    assert main([*argv, "--irt-model", "1pl"]) == 0
    assert json.loads(out.read_text())["params"]["model"] == "1pl"
    # refused without --overwrite, before any fitting
    assert main(argv) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["fit", "MATRIX", "--out", "x.json"],
        ["fit", "--responses", "MATRIX", "--model", "1pl"],
        ["build", "MATRIX", "--budget", "4", "--out", "b"],
        ["build", "--task", "t", "--include-path", "tasks/", "--budget", "5", "--out", "o"],
        ["demo", "--batch-size", "4"],
        ["estimate", "BUNDLE", "--responses", "MATRIX", "--model", "a"],
    ],
    ids=[
        "fit positional",
        "fit --model",
        "build positional",
        "--include-path",
        "--batch-size",
        "estimate --model",
    ],
)
def test_the_old_spellings_are_gone_and_refused_in_one_line(small_matrix, argv, capsys):
    """Spellings renamed before any release (issue 24): no hidden aliases left."""
    argv = [str(small_matrix) if a == "MATRIX" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"microbench {argv[0]}: error:") and len(err.splitlines()) == 1


def toy_matrix(toy, folder, models: dict[str, int]):
    """The toy bundle's items answered by each model as ``run_of`` would (by seed)."""
    bundle, _ = toy
    rows = [list(reconstruct_support.pattern(bundle, seed).values()) for seed in models.values()]
    matrix = ResponseMatrix(np.array(rows), list(models), list(bundle.item_ids))
    path = folder / "toy.parquet"
    matrix.to_parquet(path)
    return path


def test_estimate_keeps_the_models_model_id_names(tmp_path, suite, toys, capsys):
    matrix = toy_matrix(toys["toya"], tmp_path, {"a": 1, "b": 2, "c": 3})
    argv = ["estimate", str(suite / "toya"), "--responses", str(matrix), "--format", "json"]
    assert main([*argv, "--model-id", "a", "--model-id", "c"]) == 0
    assert [r["model"] for r in json.loads(capsys.readouterr().out)] == ["a", "c"]


# ---------------------------------------------------------------------------- estimate
def test_estimate_reads_lmeval_output_as_reconstruct_does(tmp_path, suite, toys, capsys):
    out = tmp_path / "out"
    seeds = {"org/m1": 1, "org/m2": 2, "org/m3": 4}
    for model, seed in seeds.items():
        run_of(out, model, toys["toya"], seed=seed)
        run_of(out, model, toys["toyb"], seed=seed + 10)  # another bundle's run: skipped
    target = tmp_path / "est.json"
    argv = ["estimate", str(suite / "toya"), "--responses", str(out), "--quiet"]
    assert main([*argv, "--format", "json", "--out", str(target)]) == 0
    records = json.loads(capsys.readouterr().out)
    assert records == json.loads(target.read_text())
    assert "| org/m1 |" in target.with_suffix(".md").read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReconstructionWarning)
        expected = reconstruct_support.reconstruct(out, bundles=[suite], shipped=False)
    by_model = {e.model: e for e in expected.estimates if e.benchmark == "toya"}
    assert sorted(r["model"] for r in records) == sorted(seeds)
    for record in records:
        found = by_model[record["model"]]
        assert record["items_scored"] == BUDGET
        got = [record[f"estimate_{k}"] for k in ("value", "lower", "upper")]
        assert got == pytest.approx([found.value, found.lower, found.upper], abs=1e-12)
    # a matrix of the same answers gives the same numbers
    matrix = toy_matrix(toys["toya"], tmp_path, seeds)
    again = ["estimate", str(suite / "toya"), "--responses", str(matrix), "--format", "json"]
    assert main(again) == 0
    from_matrix = {r["model"]: r["estimate_value"] for r in json.loads(capsys.readouterr().out)}
    assert from_matrix == pytest.approx({r["model"]: r["estimate_value"] for r in records})
    # --out follows the one overwrite rule
    assert main([*argv, "--out", str(target)]) == 2
    assert "exists; pass --overwrite" in capsys.readouterr().err
    assert main([*argv, "--out", str(target), "--overwrite", "--model-id", "org/m2"]) == 0
    assert [r["model"] for r in json.loads(target.read_text())] == ["org/m2"]


def test_estimate_of_missing_items_from_a_run_is_nan_with_a_warning(tmp_path, suite, toys, capsys):
    bundle, docs = toys["toya"]
    kept = list(bundle.item_ids)[:4]
    reconstruct_support.write_run(
        tmp_path / "out", "m", "microbench_toya", [docs[i] for i in kept], [1.0, 0, 1, 0]
    )
    argv = ["estimate", str(suite / "toya"), "--responses", str(tmp_path / "out"), "--quiet"]
    assert main([*argv, "--format", "json"]) == 0
    captured = capsys.readouterr()
    (record,) = json.loads(captured.out)
    assert record["estimate_value"] is None and record["items_scored"] == 4
    assert "warning: " in captured.err and "estimate is NaN" in captured.err
    assert main([*argv, "--allow-missing", "--format", "json"]) == 0
    assert math.isfinite(json.loads(capsys.readouterr().out)[0]["estimate_value"])


def test_estimate_says_no_such_file(tmp_path, suite, capsys):
    missing = tmp_path / "new.parquet"
    assert main(["estimate", str(suite / "toya"), "--responses", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"{missing}: no such file or folder" in err and "parquet file" not in err
    assert main(["estimate", str(suite / "toya"), "--responses", str(tmp_path)]) == 2
    assert "no samples_*.jsonl" in capsys.readouterr().err


def test_build_help_gives_the_model_counts_the_choice_needs():
    """The help states where ``--method auto`` starts to choose; the counts come from the
    choice's constants, so a change there must reach the help too."""
    from lmeval_microbench.auto.choice import CHOICE_MARGIN
    from lmeval_microbench.estimators._fitting import MIN_CALIBRATION_MODELS, MIN_SOURCE_MODELS

    mean, other = MIN_SOURCE_MODELS + CHOICE_MARGIN, MIN_CALIBRATION_MODELS + CHOICE_MARGIN
    method = next(a for a in options(commands()["build"]) if "--method" in a.option_strings)
    assert f"under {mean} models ({other} against --scores" in " ".join(method.help.split())
