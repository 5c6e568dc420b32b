"""Where a model's answers place it against the source models, told beside its estimate:
by hand, through ``estimate_models``, ``microbench estimate``, the lm-eval run's log and the
reconstruction's table."""

from __future__ import annotations

import json
import logging
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from lmeval_microbench._types import Estimate
from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle import save_bundle
from lmeval_microbench.cli.app import main
from lmeval_microbench.harness import EstimateOptions, clear_registry, estimate_run, register_bundle
from lmeval_microbench.outside import Placement, beyond_weight, placement_records
from lmeval_microbench.outside.placement import legend, placement_note, side_mark
from lmeval_microbench.reconstruct import bundle_estimator, estimate_models
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.runs.report import BenchmarkEstimate, Reconstruction
from lmeval_microbench.synthetic import random_item_params, simulate_responses


# ---------------------------------------------------------------------------- by hand
def test_placement_by_hand():
    """A reading 0.95 +- 0.02 against sources spanning [0.1, 0.9] lies above them with
    probability sf(-2.5); one at the top edge with probability exactly one half, which names
    it (at least SIDE_P); one at 0.5 nowhere."""
    placement = Placement.locate(np.array([0.95, 0.9, 0.5, 0.06]), np.full(4, 0.02), 0.9, 0.1)
    np.testing.assert_allclose(placement.above[:3], [norm.sf(-2.5), 0.5, norm.sf(20)])
    np.testing.assert_allclose(placement.below[3], norm.cdf(2.0))
    assert placement.sides() == ["above", "above", "", "below"]
    np.testing.assert_allclose(
        placement.outside, beyond_weight(np.array([0.95, 0.9, 0.5, 0.06]), 0.02, 0.9, 0.1)
    )
    first = placement.records()[0]
    assert first["side"] == "above" and first["p_above"] == pytest.approx(norm.sf(-2.5))
    assert side_mark(first) == "↑" and side_mark(placement.records()[2]) == ""
    assert side_mark(None) == ""
    assert placement_note("m", "b", placement.records()[2]) == ""
    note = placement_note("m", "b", first)
    assert "model 'm', bundle 'b'" in note and "above every source model" in note
    assert "probability 0.99" in note


# ---------------------------------------------------------------------------- a real bundle
def built(matrix: ResponseMatrix, name: str, budget: int, estimators: list[str]):
    """A bundle of ``budget`` random items of ``matrix`` (a whole benchmark), the first of
    ``estimators`` its default."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_bundle(
            matrix,
            matrix.mean_scores(),
            name=name,
            benchmark="toy",
            method="random",
            budget=budget,
            seed=0,
            estimators=estimators,
            default_estimator=estimators[0],
        )


@pytest.fixture(scope="module")
def bundle():
    """Guarded (default) and kridge estimators over 300 simulated models, 12 of 40 items."""
    matrix, _ = simulate_responses(random_item_params(40, seed=3), 300, seed=4)
    return built(matrix, "placed", 12, ["guarded", "kridge"])


@pytest.fixture(scope="module")
def models(bundle):
    """A model right on every item, one wrong on every item, one like the sources' median."""
    items = list(bundle.item_ids)
    typical = np.array([1.0, 0.0] * (len(items) // 2))
    values = np.vstack([np.ones(len(items)), np.zeros(len(items)), typical])
    return ResponseMatrix(values, ["strong", "weak", "typical"], items, source="new models")


def test_guard_names_the_side_and_leaves_the_typical_model(bundle, models):
    records = estimate_models(bundle, models)
    sides = [r["placement"]["side"] for r in records]
    assert sides == ["above", "below", ""]
    assert records[0]["placement"]["p_above"] > 0.5 > records[2]["placement"]["p_above"]
    # the weight the guard acts on is the same location
    fitted = bundle_estimator(bundle)
    np.testing.assert_allclose(
        fitted.outside_weight(models.values), fitted.placement(models.values).outside
    )


def test_no_guard_or_an_unscored_item_names_nothing(bundle, models):
    assert all(r["placement"] is None for r in estimate_models(bundle, models, estimator="kridge"))
    values = models.values.copy()
    values[0, 0] = np.nan
    records = placement_records(bundle_estimator(bundle), values)
    assert records[0] is None and records[1]["side"] == "below"


def test_estimate_cli_shows_the_side(bundle, models, tmp_path, capsys):
    folder = save_bundle(bundle, tmp_path / "bundle")
    path = tmp_path / "models.parquet"
    models.to_parquet(path)
    assert main(["estimate", str(folder), "--responses", str(path)]) == 0
    out = capsys.readouterr().out
    assert "| beyond |" in out
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    assert rows["strong"].rstrip(" |").endswith("above")
    assert rows["weak"].rstrip(" |").endswith("below")
    assert legend("beyond:") in out
    assert main(["estimate", str(folder), "--responses", str(path), "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["placement"]["side"] for r in records] == ["above", "below", ""]


def test_lm_eval_run_logs_a_model_beyond_the_sources(bundle, caplog):
    clear_registry()
    register_bundle(bundle, EstimateOptions(model="my/strong"))
    emitted = [(bundle.name, item, "acc", 1.0) for item in bundle.item_ids]
    with caplog.at_level(logging.WARNING, logger="lmeval_microbench.harness"):
        result = estimate_run(emitted)
    assert result.placement is not None and result.placement["side"] == "above"
    assert any(
        "model 'my/strong'" in r.message and "above every source model" in r.message
        for r in caplog.records
    )
    # every item right: the interval is open above, and the log says why
    assert result.estimate.upper == 1.0
    opened = f"answered every item of bundle {bundle.name!r} right"
    assert any(opened in r.message for r in caplog.records)
    caplog.clear()
    slipped = [(*emitted[0][:3], 0.0), *emitted[1:]]
    with caplog.at_level(logging.WARNING, logger="lmeval_microbench.harness"):
        result = estimate_run(slipped)
    # one wrong answer: no such note (the guard's own reach may still open the interval)
    assert result.n_scored == len(emitted)
    assert not any(opened in r.message for r in caplog.records)
    clear_registry()


def test_reconstruction_table_marks_the_side():
    def found(model: str, placement: dict | None) -> BenchmarkEstimate:
        return BenchmarkEstimate(
            model=model,
            benchmark="toy",
            task="microbench_toy",
            bundle="placed",
            estimator="guarded",
            metric="acc",
            items_scored=12,
            items_in_bundle=12,
            full_size=None,
            subset_mean=1.0,
            estimate=Estimate(0.9, 0.8, 1.0, 0.9, 0.05),
            placement=placement,
        )

    above = {"side": "above", "p_above": 0.97, "p_below": 0.0}
    table = Reconstruction([found("a", above), found("b", None)], []).to_markdown()
    assert "| a | 90.0 [80.0, 100.0] ↑ |" in table and "| b | 90.0 [80.0, 100.0] |" in table
    assert legend() in table
    assert found("a", above).to_dict()["placement"] == above
    quiet = Reconstruction([found("b", None)], []).to_markdown()
    assert legend() not in quiet


def test_a_blend_is_placed_by_its_guard():
    """The 10-source fallback reads ``blend`` (guarded and similar): its guarded member says
    where a model lies, the same as guarded fitted alone on the same items."""
    matrix, _ = simulate_responses(random_item_params(60, seed=5), 10, seed=6)
    bundle = built(matrix, "fallback", 20, ["blend", "guarded"])
    answers = np.vstack([np.ones(20), np.zeros(20), matrix.select_items(bundle.item_ids).values])
    blend = placement_records(bundle_estimator(bundle), answers)
    alone = placement_records(bundle_estimator(bundle, "guarded"), answers)
    assert [r["side"] for r in blend[:2]] == ["above", "below"]
    assert blend == alone
