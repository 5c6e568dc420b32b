"""Person fit wired into every printed estimate: bundles, the run, reconstruct and estimate.

A bundle's ``person_fit`` block (thresholds and chance levels, written by ``build_bundle``)
round-trips and is validated on load; bundles without it still load and report no check. A
simulated random responder gets a warning and an interval containing the chance score in
``estimate_models``, in the lm-eval aggregation and in ``microbench reconstruct`` /
``microbench estimate``; ordinary models like the source models are rarely flagged. The slow
test runs a tiny random-weights GPT-2 through the real lm-eval API on the shipped truthfulqa
task.
"""

from __future__ import annotations

import json
import logging
import uuid

import numpy as np
import pytest
import reconstruct_support
import test_harness

from lmeval_microbench._io import canonical_json, sha256_bytes
from lmeval_microbench.build import build_bundle
from lmeval_microbench.bundle import (
    BUNDLE_FILE,
    SCHEMA_VERSION,
    Bundle,
    MetricSpec,
    load_bundle,
    save_bundle,
)
from lmeval_microbench.bundle.fit_spec import PersonFitSpec
from lmeval_microbench.cli.app import main
from lmeval_microbench.errors import BundleError, InputError
from lmeval_microbench.harness import (
    EstimateOptions,
    TaskSpec,
    clear_registry,
    estimate_run,
    register_bundle,
    write_task,
)
from lmeval_microbench.reconstruct import FIT_MARK, estimate_models
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.runs import ReconstructionWarning, reconstruct_runs
from lmeval_microbench.synthetic import random_item_params, simulate_responses

tiny_model = test_harness.tiny_model  # the fixture: a random GPT-2 built locally

N_ITEMS, N_SOURCE, BUDGET, CHANCE = 60, 400, 30, 0.25


@pytest.fixture(autouse=True)
def _fresh_registry():
    yield
    clear_registry()


def four_choice_models(n_models: int, seed: int) -> ResponseMatrix:
    """Simulated models of a benchmark whose easiest answers still leave room for guessing."""
    params = random_item_params(N_ITEMS, seed=11)
    return simulate_responses(params, n_models, seed=seed)[0]


@pytest.fixture(scope="module")
def source() -> ResponseMatrix:
    return four_choice_models(N_SOURCE, seed=1)


@pytest.fixture(scope="module")
def bundle(source: ResponseMatrix) -> Bundle:
    return build_bundle(
        source,
        source.mean_scores(),
        name=f"pf-{uuid.uuid4().hex[:6]}",
        benchmark="toy",
        method="random",
        budget=BUDGET,
        estimators=["mean", "irt"],
        default_estimator="irt",
        metric=MetricSpec(name="acc"),
        chance=CHANCE,
    )


def random_responders(bundle: Bundle, n: int, seed: int = 7) -> ResponseMatrix:
    rng = np.random.default_rng(seed)
    values = (rng.random((n, bundle.budget)) < CHANCE).astype(float)
    return ResponseMatrix(values, [f"random-{k}" for k in range(n)], list(bundle.item_ids))


def random_scores(bundle: Bundle) -> list[tuple]:
    """What the hooks of a run emit for one random responder."""
    pattern = random_responders(bundle, 1, seed=3).values[0]
    return test_harness.item_scores(bundle, pattern.tolist())


# ---------------------------------------------------------------------------- the block
def test_build_writes_a_person_fit_block_that_round_trips(bundle, tmp_path):
    spec = bundle.person_fit
    assert spec is not None and spec.alpha == 0.01 and spec.chance == CHANCE
    assert spec.chance_score == CHANCE and "4 % quantile" in spec.lz_rule
    assert spec.lz_threshold < 0
    folder = save_bundle(bundle, tmp_path / "b")
    document = json.loads((folder / BUNDLE_FILE).read_text())
    assert document["schema_version"] == SCHEMA_VERSION
    assert document["person_fit"]["chance"] == CHANCE
    assert load_bundle(folder) == bundle and load_bundle(folder).person_fit == spec


def test_per_item_chance_is_kept_in_subset_order_and_scored_as_the_given_mean(source):
    chance = {item: (0.5 if k % 2 else 0.2) for k, item in enumerate(source.item_ids)}
    built = build_bundle(
        source,
        source.mean_scores(),
        name="per-item",
        benchmark="toy",
        method="random",
        budget=BUDGET,
        estimators=["mean"],
        default_estimator="mean",
        chance=chance,
    )
    spec = built.person_fit
    assert list(spec.chance) == list(built.item_ids)
    assert spec.chance_score == pytest.approx(np.mean(list(chance.values())))
    again = Bundle.from_dict(built.to_dict())
    assert again.person_fit == spec


@pytest.fixture(scope="module")
def floor_bundle(source: ResponseMatrix) -> Bundle:
    """Built without chance levels: the weakest source models stand in."""
    return build_bundle(
        source,
        source.mean_scores(),
        name="floor",
        benchmark="toy",
        method="random",
        budget=BUDGET,
        estimators=["mean"],
        default_estimator="mean",
    )


def test_no_chance_falls_back_to_the_weakest_source_models(source, floor_bundle):
    built = floor_bundle
    spec = built.person_fit
    weakest = np.sort(source.mean_scores())[: round(0.05 * N_SOURCE)]
    assert spec.chance_score == pytest.approx(weakest.mean())
    assert set(spec.chance) == set(built.item_ids) and "weakest 5 %" in spec.chance_rule
    assert spec.stand_in and spec.chance_from == "weakest_sources"
    # a flagged model keeps its value: the weakest sources' score is a floor, not a guesser's
    held_out = four_choice_models(300, seed=21)
    raw = estimate_models(Bundle.from_dict({**built.to_dict(), "person_fit": None}), held_out)
    checked = estimate_models(built, held_out)
    guessing = [k for k, r in enumerate(checked) if r["person_fit"]["guessing"]]
    assert guessing  # the weakest held-out models look like the weakest sources
    for k in guessing:
        assert checked[k]["estimate_value"] == raw[k]["estimate_value"]
        low, high = checked[k]["estimate_lower"], checked[k]["estimate_upper"]
        assert low <= spec.chance_score <= high
        assert "estimate kept" in checked[k]["person_fit"]["note"]


def test_bundles_before_1_3_say_where_chance_came_from_in_words(bundle, floor_bundle):
    assert bundle.person_fit.chance_from == "given" and not bundle.person_fit.stand_in
    for built, stand_in in ((bundle, False), (floor_bundle, True)):
        document = built.to_dict()
        document["schema_version"] = "1.2"
        del document["person_fit"]["chance_from"]
        assert Bundle.from_dict(document).person_fit.stand_in is stand_in


def test_a_chance_mapping_must_cover_the_subset(source):
    with pytest.raises(InputError, match="no chance level for subset items"):
        build_bundle(
            source,
            source.mean_scores(),
            name="x",
            benchmark="toy",
            method="random",
            budget=BUDGET,
            estimators=["mean"],
            default_estimator="mean",
            chance={source.item_ids[0]: 0.25},
        )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: f.update(alpha=1.5), r"person_fit\.alpha: must lie in \(0, 1\)"),
        (lambda f: f.update(chance=1.0), r"person_fit\.chance: a chance level must lie in"),
        (lambda f: f.update(chance={"nope": 0.2}), r"person_fit\.chance: items not in the subset"),
        (lambda f: f.update(chance_score="low"), r"person_fit\.chance_score: expected number"),
        (lambda f: f.pop("lz_rule"), r"person_fit: missing required field 'lz_rule'"),
        (lambda f: f.update(extra=1), r"person_fit: unknown fields \['extra'\]"),
        (lambda f: f.update(lz_threshold=True), r"person_fit\.lz_threshold: expected number"),
        (lambda f: f.update(chance_from="guess"), r"person_fit\.chance_from: one of"),
    ],
)
def test_a_bad_block_is_refused_naming_the_field(bundle, edit, message):
    document = bundle.to_dict()
    edit(document["person_fit"])
    with pytest.raises(BundleError, match=message):
        Bundle.from_dict(document, source="b.json")


def test_a_block_without_irt_parameters_is_refused(bundle):
    document = bundle.to_dict()
    document["irt"] = None
    document["estimators"] = [e for e in document["estimators"] if e["name"] == "mean"]
    document["default_estimator"] = "mean"
    with pytest.raises(BundleError, match="person_fit: a person-fit check needs the bundle's IRT"):
        Bundle.from_dict(document, source="b.json")


def test_a_bundle_written_before_the_block_loads_and_reports_no_check(bundle, tmp_path):
    folder = save_bundle(bundle, tmp_path / "old")
    document = json.loads((folder / BUNDLE_FILE).read_text())
    files = document.pop("checksums")["files"]
    document.pop("person_fit")
    document["schema_version"] = "1.1"  # as 1.1 wrote it: no block, the document sealed
    from lmeval_microbench.bundle.integrity import seal

    (folder / BUNDLE_FILE).write_text(json.dumps(seal(document, files)))
    old = load_bundle(folder)
    assert old.person_fit is None
    (record,) = estimate_models(old, random_responders(old, 1))
    assert record["person_fit"] == {"checked": False}
    assert sha256_bytes(canonical_json(old.to_dict())) != ""  # re-serialisable


def test_the_spec_checks_its_own_numbers():
    with pytest.raises(BundleError, match=r"chance_score: must lie in \[0, 1\]"):
        PersonFitSpec(-2.0, 0.01, 0.25, 1.5, "given", "default")
    with pytest.raises(BundleError, match="chance_rule: expected a non-empty string"):
        PersonFitSpec(-2.0, 0.01, 0.25, 0.25, " ", "default")


# ---------------------------------------------------------------------------- estimates
def test_random_responders_are_flagged_and_their_intervals_contain_chance(bundle):
    records = estimate_models(bundle, random_responders(bundle, 40))
    fits = [r["person_fit"] for r in records]
    assert all(f["checked"] for f in fits)
    flagged = [r for r in records if r["person_fit"]["guessing"]]
    assert len(flagged) >= 36  # alpha 0.01: about 99 % of random responders
    for record in flagged:
        assert record["estimate_lower"] <= CHANCE <= record["estimate_upper"]
        assert "cannot be told from guessing" in record["person_fit"]["note"]
    json.dumps(records, allow_nan=False)  # strict JSON


def test_ordinary_models_like_the_source_are_rarely_flagged(bundle):
    held_out = four_choice_models(200, seed=99)  # same items, new models
    truth = held_out.mean_scores()
    records = estimate_models(bundle, held_out)
    ordinary = truth > CHANCE + 0.1
    flagged = np.array([r["person_fit"]["flagged"] for r in records])
    # a 400-model toy fit: its in-sample threshold is tighter than on the leaderboard, where
    # held-out ordinary models are flagged 0.5-4.6 % of the time (bench/personfit.md)
    assert flagged[ordinary].mean() <= 0.15
    unflagged = [r for r, f in zip(records, flagged, strict=True) if not f]
    assert all(r["person_fit"]["note"] == "" and not r["person_fit"]["widened"] for r in unflagged)


def test_many_right_answers_in_an_odd_pattern_are_not_called_guessing(bundle):
    rng = np.random.default_rng(5)
    odd = (rng.random((20, bundle.budget)) < 0.8).astype(float)  # right anywhere, 80 %
    rows = ResponseMatrix(odd, [f"odd-{k}" for k in range(20)], list(bundle.item_ids))
    fits = [r["person_fit"] for r in estimate_models(bundle, rows)]
    assert not any(f["guessing"] for f in fits)
    assert max(f["score_p_value"] for f in fits) < 0.01


def test_the_run_aggregation_warns_and_widens(bundle, caplog):
    register_bundle(bundle, EstimateOptions(model="org/random-gpt"))
    scores = random_scores(bundle)
    with caplog.at_level(logging.WARNING, logger="lmeval_microbench.harness"):
        result = estimate_run(scores)
    assert result.person_fit is not None and result.person_fit.guessing
    assert result.lower <= CHANCE <= result.upper
    assert f"model 'org/random-gpt', bundle '{bundle.name}': person fit:" in caplog.text
    assert "cannot be told from guessing" in result.fit_note


def test_a_partial_run_checks_the_scored_items_only(bundle, caplog):
    register_bundle(bundle, EstimateOptions(estimator="irt", allow_missing=True))
    scores = random_scores(bundle)[:20]
    result = estimate_run(scores)
    assert result.person_fit.n_scored == 20 and result.n_scored == 20
    assert np.isfinite(result.value)
    clear_registry()
    caplog.clear()
    register_bundle(bundle)  # missing items not allowed: NaN estimate, fit still reported
    with caplog.at_level(logging.WARNING, logger="lmeval_microbench.harness"):
        nan = estimate_run(scores)
    assert np.isnan(nan.value) and nan.person_fit.n_scored == 20 and nan.fit_note == ""
    assert "person fit" not in caplog.text


def test_reconstruct_marks_flagged_estimates_in_json_and_table(bundle, tmp_path):
    spec = TaskSpec(
        task="microbench_toy", data_dir="toy", output_type="multiple_choice",
        process_results="process_acc",
    )  # fmt: skip
    docs = [test_harness.toy_doc(item, k, bundle.name) for k, item in enumerate(bundle.item_ids)]
    write_task(tmp_path / "suite", spec, bundle, docs)
    randoms = random_responders(bundle, 1, seed=3).values[0].tolist()
    reconstruct_support.write_run(tmp_path / "out", "random", "microbench_toy", docs, randoms)
    with pytest.warns(ReconstructionWarning, match=r"model 'random', bundle .*person fit"):
        result = reconstruct_runs(
            tmp_path / "out", bundles=[tmp_path / "suite"], shipped=False, progress=False
        )
    (found,) = result.estimates
    assert found.flagged and found.lower <= CHANCE <= found.upper
    record = result.to_dict()["models"][0]["benchmarks"]["toy"]["person_fit"]
    assert record["guessing"] and record["chance_score"] == CHANCE
    assert record["widened"] == ("interval widened" in record["note"])
    table = result.to_markdown()
    assert f"] {FIT_MARK} |" in table and f"{FIT_MARK} the answers do not fit" in table
    assert any("person fit" in note for note in result.notes)


def test_estimate_command_prints_a_warning_and_a_marked_table(bundle, tmp_path, capsys):
    folder = save_bundle(bundle, tmp_path / "b")
    path = tmp_path / "m.parquet"
    random_responders(bundle, 1, seed=3).to_parquet(path)
    assert main(["estimate", str(folder), "--responses", str(path)]) == 0
    out, err = capsys.readouterr()
    assert f"warning: model 'random-0', bundle '{bundle.name}': person fit:" in err
    assert f"| {FIT_MARK} |" in out and "the answers do not fit" in out
    assert main(["estimate", str(folder), "--responses", str(path), "--format", "json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["person_fit"]["flagged"] and record["person_fit"]["checked"]


# ---------------------------------------------------------------------------- real model
@pytest.mark.slow
def test_a_random_weights_gpt2_on_the_shipped_truthfulqa_task_is_flagged(tiny_model, caplog):
    lm_eval = pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    from lmeval_microbench.harness import include_path

    shipped = load_bundle(include_path() / "openllm_v1" / "truthfulqa")
    chance = shipped.person_fit.chance_score
    with caplog.at_level(logging.WARNING, logger="lmeval_microbench.harness"):
        results = lm_eval.simple_evaluate(
            model="hf",
            model_args=test_harness.model_args(tiny_model),
            tasks=["microbench_truthfulqa"],
            task_manager=TaskManager(include_path=str(include_path()), include_defaults=False),
            batch_size=8,
        )
    found = results["results"]["microbench_truthfulqa"]
    assert found["estimate_lower,none"] <= chance <= found["estimate_upper,none"]
    assert f"bundle '{shipped.name}': person fit:" in caplog.text


def test_the_joint_outputs_carry_the_guessing_widening():
    """A benchmark whose answers may be guesses may be at chance in the joint output too, and
    the joint average may be the mean with it at chance (hand-checked numbers)."""
    from types import SimpleNamespace

    from lmeval_microbench._types import Estimate
    from lmeval_microbench.runs import guessing_chances, widen_joint

    def record(model, benchmark, guessing):
        fit = {"flagged": True, "guessing": guessing, "chance_score": 0.25}
        return SimpleNamespace(model=model, benchmark=benchmark, flagged=True, person_fit=fit)

    estimates = [record("m", "mmlu", True), record("m", "arc", False), record("x", "gsm8k", True)]
    assert guessing_chances(estimates, "m") == {"mmlu": 0.25}
    outputs = {
        "mmlu": Estimate(0.60, 0.55, 0.65, 0.9),
        "arc": Estimate(0.70, 0.66, 0.74, 0.9),
        "average": Estimate(0.65, 0.62, 0.68, 0.9),
    }
    widened = widen_joint(outputs, {"mmlu": 0.25})
    assert (widened["mmlu"].lower, widened["mmlu"].upper) == (0.25, 0.65)
    assert widened["arc"] == outputs["arc"]
    assert widened["average"].lower == pytest.approx((0.25 + 0.70) / 2)
    assert widened["average"].value == 0.65 and widened["average"].upper == 0.68
    assert widen_joint(outputs, {}) == outputs
