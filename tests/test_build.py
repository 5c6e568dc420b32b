import numpy as np
import pandas as pd
import pytest

from lmeval_microbench.build import CONSTANT_ITEM_LOGIT, build_bundle, fit_source_irt
from lmeval_microbench.bundle import load_bundle, save_bundle
from lmeval_microbench.errors import InputError, ItemMismatchError
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
