"""``lmeval_microbench.curve``: step ordering, noise statistics and the paired step test on
hand-checkable data; then ``microbench curve`` over written lm-eval run folders (the toy
bundles and run writer of test_reconstruct), including the bad inputs it must survive."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import reconstruct_support
from reconstruct_support import run_of, write_run

from lmeval_microbench.cli.app import main
from lmeval_microbench.curve import (
    RunIdentity,
    TraceOptions,
    order_runs,
    paired_flip_test,
    rank_agreement,
    series_stats,
    trace_runs,
)
from lmeval_microbench.curve.ordering import number_of
from lmeval_microbench.curve.statistics import isotonic_increasing, monotone_fit
from lmeval_microbench.errors import InputError
from lmeval_microbench.runs import ReconstructionWarning

toys = reconstruct_support.toys  # fixtures: two toy bundles and their task suite
suite = reconstruct_support.suite


# ---------------------------------------------------------------------------- ordering
def ident(label: str, model: str = "m", args: str | None = None) -> RunIdentity:
    return RunIdentity(label, model, args)


def test_step_regex_reads_folder_then_model_name_with_multipliers():
    runs = [
        ident("out/ckpt-b", "PY007/TinyLlama-1.1B-intermediate-step-240k-503b"),
        ident("out/step-50K", "x"),
        ident("out/ckpt-a", "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T"),
    ]
    ordering = order_runs(runs, step_regex=r"step-(\d+[kK])")
    assert [r.step for r in ordering.runs] == [50_000, 240_000, 1_431_000]
    assert ordering.runs[0].step_from == "--step-regex on the folder name"
    assert ordering.runs[1].step_from == "--step-regex on the model id"
    assert ordering.notes == []
    assert number_of("2.5k-steps") == 2500 and number_of("none") is None


def test_revision_model_arg_orders_runs_and_given_order_is_the_fallback():
    runs = [
        ident("a", args="pretrained=EleutherAI/pythia-70m,revision=step3000"),
        ident("b", args="pretrained=EleutherAI/pythia-70m,revision=step1000"),
    ]
    ordering = order_runs(runs)
    assert ordering.rule == "revision"
    assert [r.label for r in ordering.runs] == ["b", "a"]
    given = order_runs([ident("z"), ident("y")])
    assert given.rule == "given" and [r.label for r in given.runs] == ["z", "y"]
    assert {"revision": "step7"} and order_runs(
        [ident("c", args={"pretrained": "p", "revision": "step7"})]
    ).runs[0].step == 7


def test_shared_steps_and_unparseable_names_are_left_out_naming_the_runs():
    runs = [ident("r/step-1"), ident("s/step-1"), ident("r/step-2"), ident("r/final")]
    ordering = order_runs(runs, step_regex=r"step-(\d+)")
    assert [r.label for r in ordering.runs] == ["r/step-2"]
    text = " ".join(ordering.notes)
    assert "r/step-1, s/step-1 all have step 1" in text
    assert "run r/final" in text and "no step found" in text
    with pytest.raises(InputError, match="r/final"):
        order_runs([ident("r/final")], step_regex=r"step-(\d+)")
    with pytest.raises(InputError, match="not a regular expression"):
        order_runs(runs, step_regex="step-(")
    with pytest.raises(InputError, match="needs --step-regex"):
        order_runs(runs, rule="regex")


# ---------------------------------------------------------------------------- statistics
def test_statistics_of_a_hand_checkable_series():
    found = series_stats(np.array([1.0, 2.0, 1.0, 3.0]))
    assert found.total_variation == pytest.approx(4.0)
    assert found.share_down == pytest.approx(1 / 3)
    # isotonic fit 1, 1.5, 1.5, 3: residuals 0, .5, -.5, 0
    assert found.fit_direction == "increasing"
    assert found.residual_variance == pytest.approx(0.125)
    assert found.snr == pytest.approx(2.0 / math.sqrt(0.125))
    np.testing.assert_allclose(isotonic_increasing(np.array([3.0, 1.0, 2.0])), [2.0, 2.0, 2.0])


def test_monotone_series_has_no_noise_and_falling_series_fit_downwards():
    rising = series_stats(np.array([0.1, 0.2, 0.25]))
    assert rising.residual_variance == 0 and math.isinf(rising.snr) and rising.share_down == 0
    fit, direction = monotone_fit(np.array([3.0, 2.0, 2.5, 1.0]))
    assert direction == "decreasing"
    np.testing.assert_allclose(fit, [3.0, 2.25, 2.25, 1.0])
    assert math.isnan(series_stats(np.array([0.5, np.nan])).total_variation)


def test_rank_agreement_with_the_truth():
    truth = np.array([0.1, 0.2, 0.3, 0.4])
    assert rank_agreement(np.array([1.0, 2.0, 3.0, 4.0]), truth) == pytest.approx(1.0)
    assert rank_agreement(np.array([4.0, 3.0, 2.0, 1.0]), truth) == pytest.approx(-1.0)
    assert math.isnan(rank_agreement(np.array([1.0, 1.0, 1.0, 1.0]), truth))


# ---------------------------------------------------------------------------- significance
def mean_score(values: np.ndarray) -> np.ndarray:
    return np.nanmean(values, axis=1)


def test_identical_answers_are_no_change():
    answers = np.array([1.0, 0.0, 1.0, 1.0])
    test = paired_flip_test(mean_score, answers, answers)
    assert test.delta == 0 and test.discordant == 0 and not test.significant
    assert test.p_value == 1.0 and test.exact


def test_exact_test_on_discordant_items():
    earlier = np.zeros(20)
    later = earlier.copy()
    later[:6] = 1  # six items gained, none lost: 2 of 64 swaps reach |6/20|
    test = paired_flip_test(mean_score, earlier, later, permutations=999)
    assert test.exact and test.discordant == 6
    assert test.p_value == pytest.approx(2 / 64) and test.significant and test.direction == 1
    later[6:9] = np.nan  # items one checkpoint did not score are never swapped
    assert paired_flip_test(mean_score, earlier, later).discordant == 6
    mixed = earlier.copy()
    mixed[:3], mixed[3:6] = 1, np.nan
    assert not paired_flip_test(mean_score, earlier, mixed).significant


def test_gains_balanced_by_losses_are_noise_for_any_score():
    earlier = np.array([1, 1, 1, 0, 0, 0, 1, 0], dtype=float)
    later = np.array([0, 0, 0, 1, 1, 1, 1, 0], dtype=float)
    weights = np.linspace(0.5, 1.5, 8)

    def weighted(values: np.ndarray) -> np.ndarray:
        return values @ weights / weights.sum()

    for score in (mean_score, weighted):
        assert not paired_flip_test(score, earlier, later).significant


def test_false_calls_and_false_signs_stay_at_their_level():
    """Null pairs (same answer probabilities) are called at most at the level's rate; with
    a small true gain, significant calls almost never have the wrong sign."""
    rng = np.random.default_rng(0)
    p = rng.uniform(0.2, 0.8, 60)
    null_calls = sum(
        paired_flip_test(mean_score, *(rng.random((2, 60)) < p).astype(float), seed=k).significant
        for k in range(200)
    )
    assert null_calls / 200 <= 0.13
    wrong = right = 0
    for k in range(200):
        earlier = (rng.random(60) < p).astype(float)
        later = (rng.random(60) < np.clip(p + 0.08, 0, 1)).astype(float)
        test = paired_flip_test(mean_score, earlier, later, seed=k)
        wrong += test.direction == -1
        right += test.direction == 1
    assert right > 20 * max(wrong, 1) / 5 and wrong / 200 <= 0.05


# ---------------------------------------------------------------------------- command
TIMES = {"toya": reconstruct_support.TS, "toyb": "2025-01-02T00-00-00.000001"}
"""One lm-eval invocation per benchmark: each run has its own results json."""


def write_series(out: Path, toys, steps=(300, 100, 200), benchmarks=("toya", "toyb")):
    for k, step in enumerate(steps):
        for j, bm in enumerate(benchmarks):
            model = f"org/model-step{step}"
            run_of(out / f"ckpt-{step}", model, toys[bm], seed=10 * k + j, ts=TIMES[bm])


def trace(paths, suite: Path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReconstructionWarning)
        return trace_runs(
            [str(p) for p in paths], bundles=[suite], shipped=False, progress=False, **kwargs
        )


def test_curve_orders_checkpoints_and_matches_reconstruct(tmp_path, suite, toys):
    write_series(tmp_path, toys)
    paths = [tmp_path / f"ckpt-{s}" for s in (300, 100, 200)]
    report = trace(paths, suite, step_regex=r"step(\d+)")
    assert [r.step for r in report.runs] == [100, 200, 300]
    assert [c.benchmark for c in report.curves] == ["toya", "toyb"]
    recon = reconstruct_support.reconstruct([str(p) for p in paths], bundles=[suite], shipped=False)
    for curve in report.curves:
        assert len(curve.points) == 3 and set(curve.steps) == {"raw", "ability", "estimate"}
        for point in curve.points:
            same = recon.get(point.model, curve.benchmark)
            assert point.estimate.value == pytest.approx(same.value, abs=1e-12)
            assert point.raw == pytest.approx(same.subset_mean)
            assert point.ability_se > 0


def test_cli_writes_json_markdown_and_plots_once_without_overwrite(tmp_path, suite, toys, capsys):
    write_series(tmp_path, toys)
    paths = [str(tmp_path / f"ckpt-{s}") for s in (300, 100, 200)]
    out = tmp_path / "curve"
    args = ["curve", *paths, "--step-regex", r"step(\d+)", "--bundle", str(suite), "--quiet"]
    assert main([*args, "--out", str(out)]) == 0
    data = json.loads((out / "curve.json").read_text())
    assert [r["step"] for r in data["order"]["runs"]] == [100, 200, 300]
    assert set(data["benchmarks"]["toya"]["statistics"]) == {"raw", "ability", "estimate"}
    assert (out / "curve_toya.png").read_bytes()[:4] == b"\x89PNG"
    assert "curve.json" in (out / "curve.md").read_text().splitlines()[-1]
    assert main([*args, "--out", str(out)]) == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert main([*args, "--out", str(out), "--overwrite", "--no-plots"]) == 0


def test_bad_runs_are_named_and_the_rest_of_the_curve_is_drawn(tmp_path, suite, toys):
    write_series(tmp_path, toys, steps=(100, 200, 300, 400))
    # step 200 misses toyb; step 300 ran toya as another task version; a twin of step 400;
    # a folder without samples; a name without a step
    for path in (tmp_path / "ckpt-200").rglob("samples_microbench_toyb_*"):
        path.unlink()
    bundle, docs = toys["toya"]
    items = list(bundle.item_ids)
    for path in (tmp_path / "ckpt-300").rglob("*microbench_toya*"):
        path.unlink()
    for path in (tmp_path / "ckpt-300").rglob(f"results_{TIMES['toya']}.json"):
        path.unlink()
    write_run(
        tmp_path / "ckpt-300",
        "org/model-step300",
        "microbench_toya",
        [docs[i] for i in items],
        [1.0] * len(items),
        version=2.0,
    )
    run_of(tmp_path / "twin-step400", "org/twin-step400", toys["toya"], seed=99)
    (tmp_path / "empty-step500").mkdir()
    run_of(tmp_path / "final", "org/final", toys["toya"], seed=98)
    paths = [
        tmp_path / n
        for n in (
            "ckpt-100",
            "ckpt-200",
            "ckpt-300",
            "ckpt-400",
            "twin-step400",
            "empty-step500",
            "final",
        )
    ]
    report = trace(paths, suite, step_regex=r"step-?(\d+)")
    notes = " | ".join(report.notes)
    assert "ckpt-400, " in notes and "twin-step400 all have step 400" in notes
    assert "empty-step500: no samples_" in notes
    assert "run " + str(tmp_path / "final") in notes
    assert "toyb: no run in " + str(tmp_path / "ckpt-200") in notes
    assert "version 2.0" in notes and str(tmp_path / "ckpt-300") in notes
    curves = {c.benchmark: c for c in report.curves}
    assert [p.step for p in curves["toya"].points] == [100, 200]
    assert [p.step for p in curves["toyb"].points] == [100, 300]


def test_runs_given_twice_and_nothing_readable_are_errors(tmp_path, suite, toys):
    write_series(tmp_path, toys, steps=(100,))
    with pytest.raises(InputError, match="more than once"):
        trace([tmp_path / "ckpt-100"] * 2, suite)
    (tmp_path / "nothing").mkdir()
    with pytest.raises(InputError, match="nothing: no samples_"):
        trace([tmp_path / "nothing"], suite)


def test_missing_items_give_no_estimate_unless_imputed(tmp_path, suite, toys):
    bundle, docs = toys["toya"]
    items = list(bundle.item_ids)
    for k, step in enumerate((1, 2)):
        kept = items[:-1] if step == 2 else items
        write_run(
            tmp_path / f"s{step}",
            f"m-{step}",
            "microbench_toya",
            [docs[i] for i in kept],
            [float((j + k) % 2) for j in range(len(kept))],
        )
    paths = [tmp_path / "s1", tmp_path / "s2"]
    report = trace(paths, suite, order="given")
    (curve,) = report.curves
    assert curve.points[1].estimate is None and "no estimate" in " ".join(report.notes)
    imputed = trace(paths, suite, order="given", options=TraceOptions(allow_missing=True))
    assert imputed.curves[0].points[1].estimate is not None
