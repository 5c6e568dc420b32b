import json

import numpy as np
import pandas as pd
import pytest

from lmeval_microbench.build import build_bundle, fit_source_irt
from lmeval_microbench.bundle import SCHEMA_VERSION, load_bundle, save_bundle
from lmeval_microbench.bundle.integrity import seal
from lmeval_microbench.errors import BundleError, InputError, ItemMismatchError
from lmeval_microbench.irt import CONSTANT_ITEM_LOGIT
from lmeval_microbench.reconstruct import estimate_models
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.synthetic import random_item_params, simulate_responses
from lmeval_microbench.truth import align_target, read_scores


@pytest.fixture(scope="module")
def matrix() -> ResponseMatrix:
    params = random_item_params(80, seed=11)
    matrix, _ = simulate_responses(params, 400, seed=12)
    return matrix


def test_fit_source_irt_covers_constant_items():
    params = random_item_params(30, seed=0)
    matrix, _ = simulate_responses(params, 300, seed=1)
    values = matrix.values.copy()
    values[:, 3] = 1.0
    values[:, 7] = 0.0
    matrix = ResponseMatrix(values, matrix.model_ids, matrix.item_ids)
    fitted = fit_source_irt(matrix, seed=0)
    assert fitted.item_ids == matrix.item_ids
    probs = fitted.probability(np.zeros(1))[0]
    assert fitted.a[3, 0] == 0 and fitted.d[3] == CONSTANT_ITEM_LOGIT and probs[3] > 0.99
    assert fitted.a[7, 0] == 0 and probs[7] < 0.01


def test_build_then_estimate_recovers_row_means(matrix, tmp_path):
    source = matrix.select_models(matrix.model_ids[:300])
    heldout = matrix.select_models(matrix.model_ids[300:])
    source, target = align_target(source, None)
    bundle = build_bundle(
        source,
        target,
        name="toy",
        benchmark="toy",
        method="anchor_points",
        budget=20,
        seed=0,
        estimators=["mean", "anchor", "calibrated"],
        default_estimator="calibrated",
    )
    folder = save_bundle(bundle, tmp_path / "toy")
    loaded = load_bundle(folder)
    assert loaded == bundle
    records = estimate_models(loaded, heldout)
    truth = heldout.mean_scores()
    values = np.array([r["estimate_value"] for r in records])
    # 20 of 80 items: a random 20-item mean has MAE ~0.07 here, so 0.07 is a real bar
    assert np.mean(np.abs(values - truth)) < 0.07
    assert np.corrcoef(values, truth)[0, 1] > 0.85
    assert [r["model"] for r in records] == list(heldout.model_ids)
    assert set(loaded.reliability["cv_mae_source"]) == {"mean", "anchor", "calibrated"}


def test_align_target_leaves_out_models_that_answered_nothing(matrix):
    """A row of no answers has no row mean (the truth without scores) and nothing to read:
    the model is left out with a warning instead of failing the build later."""
    values = matrix.values[:30].copy()
    values[4] = np.nan
    values[9, :5] = np.nan
    source = ResponseMatrix(values, matrix.model_ids[:30], matrix.item_ids, source="holes.csv")
    with pytest.warns(UserWarning, match="holes.csv: 1 of 30 models answered no item"):
        kept, target = align_target(source, None)
    assert matrix.model_ids[4] not in kept.model_ids and kept.n_models == 29
    assert np.isfinite(target).all()
    assert target[kept.model_ids.index(matrix.model_ids[9])] == np.nanmean(values[9])
    scores = pd.Series(np.linspace(0.2, 0.8, 30), index=list(matrix.model_ids[:30]))
    with pytest.warns(UserWarning, match="1 of 30 models answered no item"):
        kept, target = align_target(source, scores)
    assert kept.n_models == 29 and np.array_equal(target, scores.drop(matrix.model_ids[4]))
    with pytest.raises(InputError, match="no model answered any item"):
        align_target(ResponseMatrix(np.full((3, 4), np.nan), ["a", "b", "c"], list("wxyz")), None)


def test_estimate_joins_by_item_id(matrix):
    source, target = align_target(matrix.select_models(matrix.model_ids[:300]), None)
    bundle = build_bundle(
        source,
        target,
        name="t",
        benchmark="t",
        method="random",
        budget=15,
        estimators=["anchor"],
        default_estimator="anchor",
    )
    heldout = matrix.select_models(matrix.model_ids[300:])
    shuffled = heldout.select_items(list(reversed(heldout.item_ids)))
    a = estimate_models(bundle, heldout)
    b = estimate_models(bundle, shuffled)
    assert [r["estimate_value"] for r in a] == [r["estimate_value"] for r in b]


def test_estimate_names_missing_items_and_wrong_benchmark(matrix):
    source, target = align_target(matrix.select_models(matrix.model_ids[:300]), None)
    bundle = build_bundle(
        source,
        target,
        name="t",
        benchmark="t",
        method="random",
        budget=10,
        estimators=["anchor", "pirt"],
        default_estimator="anchor",
    )
    heldout = matrix.select_models(matrix.model_ids[300:])
    dropped = bundle.subset.item_ids[0]
    with pytest.raises(ItemMismatchError, match=dropped):
        estimate_models(bundle, heldout.drop_items([dropped]))
    partial = estimate_models(
        bundle, heldout.drop_items([dropped]), estimator="pirt", allow_missing=True
    )
    assert all(r["items_scored"] == 9 for r in partial)
    # a model that scored none of the bundle's items cannot be estimated; with allow_missing
    # it is left out by name and every other model keeps its estimate
    values = heldout.values.copy()
    values[3, heldout.item_positions(bundle.subset.item_ids)] = np.nan
    holes = ResponseMatrix(values, heldout.model_ids, heldout.item_ids, source="holes.csv")
    with pytest.warns(
        UserWarning, match=f"1 of 100 models scored no item.*'{heldout.model_ids[3]}'"
    ):
        kept = estimate_models(bundle, holes, estimator="pirt", allow_missing=True)
    assert [r["model"] for r in kept] == [m for k, m in enumerate(heldout.model_ids) if k != 3]
    with pytest.raises(ItemMismatchError, match="no model scored any item"):
        estimate_models(bundle, holes.select_models([heldout.model_ids[3]]), allow_missing=True)
    other = ResponseMatrix(np.ones((2, 2)), ["a", "b"], ["x.1", "x.2"])
    with pytest.raises(ItemMismatchError, match="wrong benchmark"):
        estimate_models(bundle, other)


def test_default_estimator_must_be_fitted(matrix):
    source, target = align_target(matrix, None)
    with pytest.raises(InputError, match="default estimator"):
        build_bundle(
            source,
            target,
            name="t",
            benchmark="t",
            method="random",
            budget=5,
            estimators=["mean"],
            default_estimator="calibrated",
        )


def test_read_scores_percent_and_errors(tmp_path):
    path = tmp_path / "scores.csv"
    pd.DataFrame({"model": ["a", "b"], "s": [50.0, 75.0]}).to_csv(path, index=False)
    scores = read_scores(path, "s")
    assert scores.to_dict() == {"a": 0.5, "b": 0.75}
    with pytest.raises(InputError, match="no column 'x'"):
        read_scores(path, "x")
    pd.DataFrame({"model": ["a", "a"], "s": [0.1, 0.2]}).to_csv(path, index=False)
    with pytest.raises(InputError, match="more than once: \\['a'\\]"):
        read_scores(path, "s")
    pd.DataFrame({"model": ["a", "b"], "s": ["0.1", "oops"]}).to_csv(path, index=False)
    with pytest.raises(InputError, match="non-numeric 's' for models \\['b'\\]"):
        read_scores(path, "s")


def test_align_target_drops_unscored_models_with_warning(matrix):
    scores = pd.Series({m: 0.5 for m in matrix.model_ids[:10]})
    with pytest.warns(UserWarning, match="390 of 400 models have no true score"):
        source, target = align_target(matrix, scores)
    assert source.model_ids == matrix.model_ids[:10]
    assert np.all(target == 0.5)


# ---------------------------------------------------------------------------- issue 8
def test_an_estimator_state_with_a_wrong_length_vector_is_named_at_load(matrix, tmp_path):
    source, target = align_target(matrix.select_models(matrix.model_ids[:300]), None)
    bundle = build_bundle(
        source,
        target,
        name="t",
        benchmark="t",
        method="random",
        budget=10,
        estimators=["anchor", "mean"],
        default_estimator="anchor",
    )
    folder = save_bundle(bundle, tmp_path / "b")
    text = (folder / "bundle.json").read_text()
    for k, name in enumerate(("anchor", "mean")):
        document = json.loads(text)
        document.pop("checksums")
        state = document["estimators"][k]["state"]
        state["weights"] = state["weights"][:-1]  # one entry short
        (folder / "bundle.json").write_text(json.dumps(seal(document)))
        with pytest.raises(
            BundleError, match=rf"b/bundle\.json: estimator '{name}' has an unusable state"
        ):
            load_bundle(folder)


def weak_models(seed: int = 5) -> tuple[ResponseMatrix, np.ndarray]:
    """300 models right on 0.05-0.3% of 1,000 items, and that rate: percents all below 1."""
    rng = np.random.default_rng(seed)
    rate = rng.uniform(0.0005, 0.003, 300)
    values = (rng.random((300, 1000)) < rate[:, None]).astype(float)
    models = [f"org/weak-{k}" for k in range(300)]
    return ResponseMatrix(values, models, [f"gsm8k.{k}" for k in range(1000)]), rate


def scores_file(path, models, values):
    pd.DataFrame({"model": models, "s": values}).to_csv(path, index=False)
    return path


def test_percent_scores_all_below_one_are_read_as_percent(tmp_path):
    matrix, rate = weak_models()
    path = scores_file(tmp_path / "scores.csv", matrix.model_ids, 100 * rate)
    _, target = align_target(matrix, read_scores(path, "s"))
    np.testing.assert_allclose(target, rate)


def test_fractions_near_the_row_means_stay_fractions(tmp_path):
    matrix, rate = weak_models()
    path = scores_file(tmp_path / "scores.csv", matrix.model_ids, 2 * rate)
    _, target = align_target(matrix, read_scores(path, "s"))
    np.testing.assert_allclose(target, 2 * rate)


def test_scores_of_no_clear_scale_are_refused_naming_the_option(tmp_path):
    matrix, rate = weak_models()
    path = scores_file(tmp_path / "scores.csv", matrix.model_ids, 10 * rate)
    with pytest.raises(InputError, match=r"scores\.csv: .*fractions or percent.*--score-scale"):
        align_target(matrix, read_scores(path, "s"))
    _, target = align_target(matrix, read_scores(path, "s", scale="percent"))  # told: obeyed
    np.testing.assert_allclose(target, rate / 10)
    nothing_right = ResponseMatrix(np.zeros_like(matrix.values), matrix.model_ids, matrix.item_ids)
    with pytest.raises(InputError, match="--score-scale"):
        align_target(nothing_right, read_scores(path, "s"))


def test_read_scores_keeps_model_ids_and_names_unreadable_files(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_text("model,s\n007,50\nNA,25\nnull,NA\n")
    assert read_scores(path, "s").to_dict() == {"007": 0.5, "NA": 0.25}
    path.write_text("model,s\n,50\nb,25\n")
    with pytest.raises(InputError, match=r"scores\.csv: rows 1 have no model id"):
        read_scores(path, "s")
    broken = {
        "missing.csv": None,
        "empty.csv": b"",
        "latin1.csv": b"model,s\n\xe9t\xe9,50\n",
        "ragged.csv": b"model,s\na,50\nb,60,70,80\n",
        "text.parquet": b"model,s\na,50\n",
    }
    for name, content in broken.items():
        if content is not None:
            (tmp_path / name).write_bytes(content)
        with pytest.raises(InputError, match=rf"{name}: not a readable scores file"):
            read_scores(tmp_path / name, "s")


def test_the_suite_tool_reseals_without_refitting(tmp_path):
    import importlib.util
    import shutil
    import sys
    from pathlib import Path

    from lmeval_microbench._io import json_checksum
    from lmeval_microbench.estimators.joint import load_state
    from lmeval_microbench.harness import include_path

    repo = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(
        "build_openllm_v1", repo / "tools" / "build_openllm_v1.py"
    )
    tool = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tool
    spec.loader.exec_module(tool)
    suite = shutil.copytree(include_path() / "openllm_v1", tmp_path / "suite")
    before = {bm: load_bundle(suite / bm) for bm in tool.BENCHMARKS}
    for bm in tool.BENCHMARKS:  # as version 1.0 wrote them, with a bare joint state
        document = json.loads((suite / bm / "bundle.json").read_text())
        document.pop("checksums")
        document["schema_version"] = "1.0"
        checksums = {"algorithm": "sha256", "payload": json_checksum(document), "files": {}}
        (suite / bm / "bundle.json").write_text(json.dumps({**document, "checksums": checksums}))
    joint = json.loads((suite / "joint.json").read_text())
    joint.pop("checksums", None)
    (suite / "joint.json").write_text(json.dumps(joint))
    assert tool.main(["--reseal", "--out", str(suite)]) == 0
    for bm, bundle in before.items():
        again = load_bundle(suite / bm)
        assert again == bundle and again.provenance.created == bundle.provenance.created
        document = json.loads((suite / bm / "bundle.json").read_text())
        assert document["schema_version"] == SCHEMA_VERSION
    assert load_state(suite / "joint.json").state_dict() == joint


def test_default_estimator_is_the_lowest_cross_validated_error_unless_named(matrix):
    source, target = align_target(matrix.select_models(matrix.model_ids[:200]), None)
    common = dict(name="toy", benchmark="toy", method="random", budget=15, seed=0)
    chosen = build_bundle(source, target, estimators=["mean", "kridge", "calibrated"], **common)
    cv = chosen.reliability["cv_mae_source"]
    assert chosen.default_estimator == min(cv, key=cv.get)
    assert len(set(cv.values())) == 3  # a real choice among three measured errors
    named = build_bundle(
        source, target, estimators=["mean", "kridge"], default_estimator="mean", **common
    )
    assert named.default_estimator == "mean"


def test_selections_that_read_the_sources_answers_are_cross_fitted_on_few_sources(matrix):
    """Balanced strata, anchor points and tinyBenchmarks look at the sources' answers: on
    fewer than 1,000 sources their intervals come from folds that re-select the items; a
    uniform or stratified draw keeps the fixed-subset band, and so does a large population."""
    from lmeval_microbench.crossfit import needs_cross_fit
    from lmeval_microbench.selection import make_selector

    for name in ("balanced", "anchor_points", "tinybenchmarks", "greedy"):
        assert needs_cross_fit(make_selector(name), matrix), name
    for name in ("random", "stratified"):
        assert not needs_cross_fit(make_selector(name), matrix), name
    many = ResponseMatrix(
        np.tile(matrix.values, (1000 // matrix.n_models + 1, 1)),
        [f"m{k}" for k in range((1000 // matrix.n_models + 1) * matrix.n_models)],
        matrix.item_ids,
    )
    assert not needs_cross_fit(make_selector("balanced"), many)


@pytest.mark.parametrize("n_models", [11, 12, 13, 40])
def test_a_re_selecting_cross_fit_estimates_every_model_from_eleven_sources_on(matrix, n_models):
    """Five folds of 11 or 12 models train on 8-10, which no estimator fits: those models
    kept optimistic fixed-subset estimates. One model per fold leaves 10 or 11."""
    from lmeval_microbench.crossfit import cross_fit_folds, selection_cross_fit

    small = matrix.select_models(matrix.model_ids[:n_models])
    assert cross_fit_folds(n_models) == (n_models if n_models < 13 else 5)
    cross = selection_cross_fit(small, small.mean_scores(), "balanced", 15, ["mean"], seed=0)
    assert np.isfinite(cross["mean"]).all()


def test_a_re_selecting_cross_fit_sizes_guardeds_interval_not_its_estimate(matrix):
    """The guard's readings are fitted beside the inner estimator's fixed-subset estimates;
    a cross-fit whose folds re-selected the items widens the interval only."""
    from lmeval_microbench.crossfit import selection_cross_fit
    from lmeval_microbench.estimators import make_estimator
    from lmeval_microbench.selection import make_selector

    target = matrix.mean_scores()
    subset = make_selector("balanced").select(matrix, 15, seed=0)
    cross = selection_cross_fit(matrix, target, "balanced", 15, ["guarded"], seed=0)["guarded"]
    plain = make_estimator("guarded").fit(matrix, subset, target)
    crossed = make_estimator("guarded").fit(matrix, subset, target, cross_fit=cross)
    rows = matrix.select_items(subset.item_ids)
    value, lower, upper = plain.estimate_matrix(rows)
    value_x, lower_x, upper_x = crossed.estimate_matrix(rows)
    np.testing.assert_allclose(value_x, value)
    assert np.mean(upper_x - lower_x) != pytest.approx(np.mean(upper - lower))


def test_guarded_fits_its_readings_beside_re_selected_estimates_only_for_supervised_items(matrix):
    """Greedy items were chosen for the sources' scores: their fixed-subset estimates of the
    sources are optimistic, so the readings are fitted beside the re-selected ones; for any
    other selection beside the fixed-subset ones."""
    from lmeval_microbench.estimators import make_estimator
    from lmeval_microbench.estimators.guarded import GuardedEstimator, _supervised
    from lmeval_microbench.selection import make_selector

    target = matrix.mean_scores()
    assert _supervised(make_selector("greedy").select(matrix, 10, seed=0, target=target))
    subset = make_selector("balanced").select(matrix, 10, seed=0)
    assert not _supervised(subset)
    shifted = np.clip(target + 0.3, 0, 1)  # stands for re-selected estimates
    inner = make_estimator("kridge").fit(matrix, subset, target, cross_fit=shifted)
    everyone = np.ones(matrix.n_models, bool)
    crossed = GuardedEstimator._inner_oof(inner, everyone)
    fixed = GuardedEstimator._inner_oof(inner, everyone, fixed=True)
    np.testing.assert_allclose(fixed, inner.fixed_oof_)
    assert np.mean(np.abs(crossed - shifted)) < 0.05
    assert np.mean(np.abs(fixed - target)) < 0.5 * np.mean(np.abs(shifted - target))


def test_too_few_sources_for_a_calibration_line_is_said_once_for_every_estimator(matrix):
    """Ten sources: every estimator that calibrates fits no line and says why; the build
    says it once, naming them all, and passes other warnings on."""
    from lmeval_microbench.errors import FewSourcesWarning

    source = matrix.select_models(matrix.model_ids[:10])
    source, target = align_target(source, None)
    with pytest.warns(UserWarning) as caught:
        build_bundle(
            source, target, name="few", benchmark="toy", method="random", budget=20, seed=0,
            estimators=["mean", "anchor", "calibrated"], default_estimator="mean",
        )  # fmt: skip
    few = [w.message for w in caught if isinstance(w.message, FewSourcesWarning)]
    assert len(few) == 1
    assert few[0].estimator == "mean, anchor, calibrated" and "fewer than 20" in few[0].detail
    assert str(few[0]).startswith("mean, anchor, calibrated: 10 source models")


def test_other_warnings_of_the_fits_keep_their_category_and_place():
    import warnings

    from lmeval_microbench.build import _warn_once_for_all
    from lmeval_microbench.errors import ConvergenceWarning, FewSourcesWarning

    with warnings.catch_warnings(record=True) as fits:
        warnings.simplefilter("always")
        warnings.warn_explicit("irt: stopped at 500 iterations", ConvergenceWarning, "irt.py", 7)
        for name in ("mean", "irt"):
            warnings.warn(FewSourcesWarning(name, "9 source models"), stacklevel=1)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        _warn_once_for_all(fits)
    assert [str(w.message) for w in shown] == [
        "mean, irt: 9 source models",
        "irt: stopped at 500 iterations",
    ]
    assert shown[1].category is ConvergenceWarning and (shown[1].filename, shown[1].lineno) == (
        "irt.py",
        7,
    )
