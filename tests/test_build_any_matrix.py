"""``microbench build`` with its defaults on awkward real-world matrices: a working bundle or
a one-line refusal that names what is wrong, never a traceback (issue 19, "bad input")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lmeval_microbench.auto import FALLBACK, FLOOR
from lmeval_microbench.bundle import load_bundle
from lmeval_microbench.cli.app import main
from lmeval_microbench.estimators import estimator_from_state
from lmeval_microbench.responses import ResponseMatrix


def matrix(n_models: int = 40, n_items: int = 60, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_models)
    difficulty = rng.normal(size=n_items)
    p = 1.0 / (1.0 + np.exp(-(theta[:, None] + difficulty[None, :])))
    return (rng.random(p.shape) < p).astype(float)


def write(path, values: np.ndarray) -> str:
    frame = pd.DataFrame(
        values,
        index=pd.Index([f"org/model-{k}" for k in range(values.shape[0])], name="model"),
        columns=[f"bench.{k}" for k in range(values.shape[1])],
    )
    frame.to_parquet(path)
    return str(path)


def build(tmp_path, values: np.ndarray, *extra: str) -> int:
    path = write(tmp_path / "m.parquet", values)
    argv = ["build", "--responses", path, "--budget", "15", "--benchmark", "bench"]
    return main([*argv, "--out", str(tmp_path / "bundle"), *extra])


def constant_items(values):
    values[:, 0], values[:, 1] = 1.0, 0.0
    return values


def identical_models(values):
    values[5] = values[6] = values[7]
    return values


def constant_models(values):
    values[3], values[4] = 1.0, 0.0
    return values


def weak_models_right_on_an_easy_item(values):
    """The weakest fifth all answer item 0 right: the old chance estimate was 1.0."""
    weakest = np.argsort(values.mean(axis=1))[: len(values) // 5]
    values[weakest, 0] = 1.0
    return values


@pytest.mark.parametrize(
    "damage",
    [constant_items, identical_models, constant_models, weak_models_right_on_an_easy_item],
)
def test_awkward_matrices_give_working_bundles(tmp_path, damage):
    values = damage(matrix())
    assert build(tmp_path, values) == 0
    bundle = load_bundle(tmp_path / "bundle")
    assert bundle.default_estimator == bundle.reliability["auto"]["chosen"]["estimator"]
    estimator = estimator_from_state(bundle.estimator_state())
    models = ResponseMatrix(values[:3], ["a", "b", "c"], [f"bench.{k}" for k in range(60)])
    value, lower, upper = estimator.estimate_matrix(models.select_items(bundle.item_ids))
    assert np.all(np.isfinite(value)) and np.all(lower <= value) and np.all(value <= upper)
    chance = bundle.person_fit.chance
    levels = list(chance.values()) if isinstance(chance, dict) else [chance]
    assert all(0.0 <= c < 1.0 for c in levels)


def test_ten_models_are_enough(tmp_path, capsys):
    assert build(tmp_path, matrix(n_models=10)) == 0
    bundle = load_bundle(tmp_path / "bundle")
    assert (bundle.subset.method, bundle.default_estimator) == (FALLBACK.method, FALLBACK.estimator)
    assert "too few to cross-validate" in capsys.readouterr().err


def test_fifteen_models_keep_the_floor_without_a_choice(tmp_path, capsys):
    assert build(tmp_path, matrix(n_models=15)) == 0
    bundle = load_bundle(tmp_path / "bundle")
    assert (bundle.subset.method, bundle.default_estimator) == (FLOOR.method, FLOOR.estimator)
    assert "too few to choose a recipe on" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("values", "extra", "message"),
    [
        (matrix(n_models=9), (), "9 models have responses and scores; a bundle needs at least 10"),
        (matrix(n_items=12), (), "--budget 15 exceeds the 12 items of"),
        (matrix(), ("--audit", "1"), "an audit needs at least 2 items"),
        (matrix(), ("--audit", "15"), "--audit 15 leaves none of the budget of 15 items"),
        (matrix(), ("--chance", "1.0"), "argument --chance: expected a number in [0, 1)"),
        (matrix(), ("--chance", "nan"), "argument --chance: expected a number in [0, 1)"),
    ],
)
def test_what_cannot_work_is_refused_in_one_line(tmp_path, capsys, values, extra, message):
    assert build(tmp_path, values, *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and "Traceback" not in "\n".join(err)
    assert not (tmp_path / "bundle").exists()


def test_an_existing_bundle_folder_is_refused_before_the_matrix_is_read(tmp_path, capsys):
    path = write(tmp_path / "m.parquet", matrix())
    (tmp_path / "bundle").mkdir()

    def too_late(*args, **kwargs):
        raise AssertionError("the matrix was read before --out was checked")

    argv = ["build", "--responses", path, "--budget", "15", "--benchmark", "bench"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ResponseMatrix, "read", too_late)
        assert main([*argv, "--out", str(tmp_path / "bundle")]) == 2
    assert "already exists" in capsys.readouterr().err.strip().splitlines()[-1]


def test_an_item_nobody_answered_is_left_out_by_name(tmp_path, capsys):
    values = matrix()
    values[:, 3] = np.nan
    assert build(tmp_path, values) == 0
    err = capsys.readouterr().err
    assert "1 of 60 items have no answer from any model and are left out ('bench.3')" in err
    assert "missing responses" not in err and "RuntimeWarning" not in err
    assert "bench.3" not in load_bundle(tmp_path / "bundle").item_ids


def test_a_chance_level_above_the_weak_sources_is_warned_about(tmp_path, capsys):
    assert build(tmp_path, matrix(), "--chance", "0.9") == 0  # most sources score under 85
    err = capsys.readouterr().err
    assert "warning: chance: a chance score of 90.0 lies more than 5 points above" in err


@pytest.mark.slow  # 9-17 s: the default run stays under 15 minutes
def test_an_audit_is_recorded_in_the_bundle(tmp_path):
    assert build(tmp_path, matrix(), "--audit", "5") == 0
    bundle = load_bundle(tmp_path / "bundle")
    audit = bundle.subset.info["audit_items"]
    assert len(audit) == 5 and set(audit) <= set(bundle.item_ids)
    assert bundle.reliability["auto"]["protocol"]["audit_items"] == 5


def test_the_chance_warning_needs_most_sources_far_under_chance():
    """Real models do score under chance on hard items: a minority there is no warning."""
    import warnings

    from lmeval_microbench.personfit.bundles import _warn_if_implausible

    scores = np.linspace(0.0, 1.0, 101)  # 15 % of them under 0.15
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_if_implausible(0.2, scores)
    with pytest.warns(UserWarning, match="a chance score of 60.0 lies more than 5 points"):
        _warn_if_implausible(0.6, scores)  # 55 % under 0.55
