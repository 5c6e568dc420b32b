"""Joint estimation across benchmarks on synthetic 2PL benchmarks with correlated abilities."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from lmeval_microbench.errors import InputError, ItemMismatchError
from lmeval_microbench.estimators.joint import (
    AVERAGE,
    JointEstimator,
    JointFallbackWarning,
    fit_ridge_head,
)
from lmeval_microbench.irt.params import ItemParams
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection.base import Subset

BENCHMARKS = ("alpha", "beta", "gamma")
N_SOURCE = 600
N_HELDOUT = 300
N_ITEMS = 60
BUDGET = 8


def simulate_benchmarks(seed: int, correlation: float) -> dict:
    """Three 2PL benchmarks whose abilities share a general factor with ``correlation``.

    The target of a benchmark is each model's expected score over its items (the score on a
    large benchmark of such items); subsets are random ``BUDGET``-item draws. Item ids are
    shuffled so column order never matches id order.
    """
    rng = np.random.default_rng(seed)
    n_models = N_SOURCE + N_HELDOUT
    general = rng.normal(size=n_models)
    models = [f"org/model-{k}" for k in range(n_models)]
    matrices, targets, subsets = {}, {}, {}
    for b in BENCHMARKS:
        theta = np.sqrt(correlation) * general + np.sqrt(1 - correlation) * rng.normal(
            size=n_models
        )
        ids = [f"{b}.{k}" for k in rng.permutation(N_ITEMS)]
        params = ItemParams(
            tuple(ids),
            rng.lognormal(0.2, 0.3, size=N_ITEMS),
            rng.normal(0.0, 1.2, size=N_ITEMS),
            np.zeros(N_ITEMS),
            np.ones(N_ITEMS),
            "2pl",
        )
        values = (rng.random((n_models, N_ITEMS)) < params.probability(theta)).astype(float)
        matrices[b] = ResponseMatrix(values, models, ids, source=f"<{b}>")
        targets[b] = params.probability(theta).mean(axis=1)  # the whole (large) benchmark
        chosen = tuple(rng.choice(ids, size=BUDGET, replace=False))
        subsets[b] = Subset(chosen, np.full(BUDGET, 1.0 / BUDGET), "random")
    source_ids, heldout_ids = models[:N_SOURCE], models[N_SOURCE:]
    return {
        "sources": {b: matrices[b].select_models(source_ids) for b in BENCHMARKS},
        "heldout": {b: matrices[b].select_models(heldout_ids) for b in BENCHMARKS},
        "source_targets": {b: targets[b][:N_SOURCE] for b in BENCHMARKS},
        "heldout_targets": {b: targets[b][N_SOURCE:] for b in BENCHMARKS},
        "subsets": subsets,
        "heldout_ids": heldout_ids,
    }


def fit_joint(world: dict, **kwargs) -> JointEstimator:
    return JointEstimator(**kwargs).fit(world["sources"], world["subsets"], world["source_targets"])


def heldout_errors(world: dict, joint: JointEstimator) -> tuple[dict, dict, dict]:
    """Mean absolute errors of joint and per-benchmark estimates, and joint coverage."""
    estimates = joint.estimate_matrix(world["heldout"])
    truth = {b: world["heldout_targets"][b] for b in BENCHMARKS}
    truth[AVERAGE] = np.mean([truth[b] for b in BENCHMARKS], axis=0)
    base = {b: joint.base_[b].estimate_matrix(world["heldout"][b])[0] for b in BENCHMARKS}
    base[AVERAGE] = np.mean([base[b] for b in BENCHMARKS], axis=0)
    joint_mae = {out: float(np.mean(np.abs(estimates[out][0] - truth[out]))) for out in truth}
    base_mae = {out: float(np.mean(np.abs(base[out] - truth[out]))) for out in truth}
    coverage = {
        out: float(np.mean((estimates[out][1] <= truth[out]) & (truth[out] <= estimates[out][2])))
        for out in truth
    }
    return joint_mae, base_mae, coverage


@pytest.fixture(scope="module")
def correlated() -> dict:
    return simulate_benchmarks(3, correlation=0.8)


@pytest.fixture(scope="module")
def fitted(correlated: dict) -> JointEstimator:
    return fit_joint(correlated)


# ---------------------------------------------------------------------- accuracy
def test_joint_beats_per_benchmark_on_correlated_benchmarks(correlated, fitted):
    joint_mae, base_mae, _ = heldout_errors(correlated, fitted)
    for out in (*BENCHMARKS, AVERAGE):
        assert joint_mae[out] < 0.95 * base_mae[out], (out, joint_mae[out], base_mae[out])
    assert np.mean([joint_mae[b] for b in BENCHMARKS]) < 0.9 * np.mean(
        [base_mae[b] for b in BENCHMARKS]
    )


def test_intervals_cover_near_nominal_level(correlated, fitted):
    _, _, coverage = heldout_errors(correlated, fitted)
    for out, share in coverage.items():
        assert 0.82 <= share <= 0.97, (out, share)


def test_independent_benchmarks_do_no_harm():
    """Without shared ability the other subsets carry nothing; GCV must not overfit them."""
    world = simulate_benchmarks(5, correlation=0.0)
    joint_mae, base_mae, _ = heldout_errors(world, fit_joint(world))
    for b in BENCHMARKS:
        assert joint_mae[b] < 1.05 * base_mae[b], (b, joint_mae[b], base_mae[b])


def test_ridge_head_recovers_a_linear_map_and_drops_noise_items():
    rng = np.random.default_rng(0)
    strong = rng.normal(size=(500, 2))
    noise = rng.integers(0, 2, size=(500, 40)).astype(float)
    y = np.column_stack([1 + strong @ [2.0, -1.0], strong[:, 0]]) + 0.01 * rng.normal(size=(500, 2))
    item_columns = np.r_[np.zeros(2, dtype=bool), np.ones(40, dtype=bool)]
    head = fit_ridge_head(np.column_stack([strong, noise]), y, item_columns)
    prediction = head.predict(np.column_stack([strong, noise]))
    assert np.sqrt(np.mean((prediction - y) ** 2)) < 0.02
    assert np.all(head.item_scale < 1.0)  # the noise item columns are shrunk away


# ---------------------------------------------------------------------- joins by id
def test_rows_and_targets_are_joined_by_model_id(correlated, fitted):
    """Shuffled rows and targets given as Series keyed by model id give the same fit."""
    rng = np.random.default_rng(1)
    sources, targets = {}, {}
    for b in BENCHMARKS:
        source = correlated["sources"][b]
        sources[b] = source.select_models(list(rng.permutation(source.model_ids)))
        series = pd.Series(correlated["source_targets"][b], index=source.model_ids)
        targets[b] = series.sample(frac=1.0, random_state=int(rng.integers(100)))
    joint = JointEstimator().fit(sources, correlated["subsets"], targets)
    assert joint.state_dict() == fitted.state_dict()
    shuffled = {
        b: correlated["heldout"][b].select_models(list(rng.permutation(correlated["heldout_ids"])))
        for b in BENCHMARKS
    }
    positions = correlated["heldout"][BENCHMARKS[0]].model_positions(
        shuffled[BENCHMARKS[0]].model_ids
    )
    reference = fitted.estimate_matrix(correlated["heldout"])
    for out, (value, _, _) in joint.estimate_matrix(shuffled).items():
        np.testing.assert_allclose(value, reference[out][0][positions], atol=1e-12)


def test_model_lacking_a_benchmark_serves_only_that_base_fit(correlated, fitted):
    first = BENCHMARKS[0]
    extra = correlated["heldout"][first].select_models(correlated["heldout_ids"][:1])
    sources = dict(correlated["sources"])
    sources[first] = ResponseMatrix.from_frame(
        pd.concat([sources[first].to_frame(), extra.to_frame()])
    )
    targets = dict(correlated["source_targets"])
    targets[first] = np.r_[targets[first], correlated["heldout_targets"][first][:1]]
    joint = JointEstimator().fit(sources, correlated["subsets"], targets)
    assert joint.n_source_ == fitted.n_source_ == N_SOURCE
    assert extra.model_ids[0] not in joint.model_ids_
    assert joint.base_[first].n_source_ == N_SOURCE + 1
    assert joint.base_[BENCHMARKS[1]].n_source_ == N_SOURCE


def test_single_estimate_matches_matrix_row_and_ignores_other_ids(correlated, fitted):
    model = correlated["heldout_ids"][7]
    scores = {}
    for b in BENCHMARKS:
        scores.update(correlated["heldout"][b].row(model))
    scores["unrelated.item"] = 1.0
    shuffled = dict(sorted(scores.items(), key=lambda kv: hash(kv[0]) % 97))
    result = fitted.estimate(shuffled)
    row = correlated["heldout"][BENCHMARKS[0]].model_positions([model])[0]
    reference = fitted.estimate_matrix(correlated["heldout"])
    assert set(result) == {*BENCHMARKS, AVERAGE}
    assert set(result.method.values()) == {"joint"} and result.missing == ()
    for out, estimate in result.items():
        assert estimate.value == pytest.approx(reference[out][0][row], abs=1e-12)
        assert estimate.lower <= estimate.value <= estimate.upper


def test_duplicate_item_ids_across_benchmarks_are_rejected(correlated):
    subsets = dict(correlated["subsets"])
    first, second = BENCHMARKS[:2]
    sources = dict(correlated["sources"])
    clash = subsets[first].item_ids[0]
    renamed = {correlated["subsets"][second].item_ids[0]: clash}
    frame = sources[second].to_frame().rename(columns=renamed)
    sources[second] = ResponseMatrix.from_frame(frame)
    subsets[second] = Subset(
        tuple(renamed.get(i, i) for i in subsets[second].item_ids),
        subsets[second].weights,
        "random",
    )
    with pytest.raises(InputError, match=f"item '{clash}' is in the subsets of both"):
        JointEstimator().fit(sources, subsets, correlated["source_targets"])


# ---------------------------------------------------------------------- missing benchmarks
def test_missing_benchmark_falls_back_to_per_benchmark_estimates(correlated, fitted):
    model = correlated["heldout_ids"][3]
    present = BENCHMARKS[:2]
    scores = {}
    for b in present:
        scores.update(correlated["heldout"][b].row(model))
    with pytest.warns(
        JointFallbackWarning, match=f"no scores for benchmarks \\['{BENCHMARKS[2]}'\\]"
    ):
        result = fitted.estimate(scores)
    assert set(result) == set(present) and AVERAGE not in result
    assert result.missing == (BENCHMARKS[2],)
    assert result.method == dict.fromkeys(present, "per-benchmark")
    for b in present:
        assert result[b].value == pytest.approx(fitted.base_[b].estimate(scores).value)


def test_partly_scored_benchmark_and_empty_scores_are_errors(correlated, fitted):
    model = correlated["heldout_ids"][0]
    scores = {}
    for b in BENCHMARKS:
        scores.update(correlated["heldout"][b].row(model))
    dropped = fitted.subsets_[BENCHMARKS[1]].item_ids[2]
    del scores[dropped]
    with pytest.raises(ItemMismatchError, match=f"{BENCHMARKS[1]}: no score for subset items"):
        fitted.estimate(scores)
    with pytest.raises(ItemMismatchError, match="no subset item of any benchmark"):
        fitted.estimate({"unrelated.item": 1.0})
    scores[dropped] = 1.5
    with pytest.raises(InputError, match=f"score of item '{dropped}'"):
        fitted.estimate(scores)


def test_estimate_matrix_names_a_model_with_a_missing_item(correlated, fitted):
    frame = pd.concat([correlated["heldout"][b].to_frame() for b in BENCHMARKS], axis=1)
    item = fitted.subsets_[BENCHMARKS[2]].item_ids[0]
    frame.loc[correlated["heldout_ids"][5], item] = np.nan
    with pytest.raises(InputError, match=f"{correlated['heldout_ids'][5]}.*{item}"):
        fitted.estimate_matrix(ResponseMatrix.from_frame(frame))


# ---------------------------------------------------------------------- source rows only
def test_cross_fitted_base_estimate_never_sees_its_own_target(correlated, fitted):
    """Changing one source model's target leaves its own out-of-fold feature unchanged."""
    targets = {b: correlated["source_targets"][b].copy() for b in BENCHMARKS}
    model = correlated["sources"][BENCHMARKS[0]].model_ids[17]
    for b in BENCHMARKS:
        targets[b][17] = 1.0 - targets[b][17]
    changed = JointEstimator().fit(correlated["sources"], correlated["subsets"], targets)
    row = fitted.model_ids_.index(model)  # cv_base_ follows the joint rows (sorted ids)
    assert changed.model_ids_ == fitted.model_ids_
    for b in BENCHMARKS:
        assert changed.cv_base_[b][row] == pytest.approx(fitted.cv_base_[b][row], abs=1e-12)
        assert not np.allclose(changed.cv_base_[b], fitted.cv_base_[b])


def test_models_without_a_target_are_not_used(correlated, fitted):
    """Rows with a NaN target (e.g. held-out models passed by mistake) do not change the fit."""
    sources, targets = {}, {}
    for b in BENCHMARKS:
        both = pd.concat([correlated["sources"][b].to_frame(), correlated["heldout"][b].to_frame()])
        sources[b] = ResponseMatrix.from_frame(both)
        targets[b] = np.r_[correlated["source_targets"][b], np.full(N_HELDOUT, np.nan)]
    padded = JointEstimator().fit(sources, correlated["subsets"], targets)
    assert not set(padded.model_ids_) & set(correlated["heldout_ids"])
    assert padded.state_dict() == fitted.state_dict()


# ---------------------------------------------------------------------- state
@pytest.mark.parametrize("features", [("estimates", "items"), ("estimates", "mirt")])
def test_state_round_trips_through_json(correlated, fitted, features):
    joint = fitted if "mirt" not in features else fit_joint(correlated, features=features)
    state = json.loads(json.dumps(joint.state_dict()))
    restored = JointEstimator.from_state(state)
    assert restored.get_params() == joint.get_params()
    original = joint.estimate_matrix(correlated["heldout"])
    for out, arrays in restored.estimate_matrix(correlated["heldout"]).items():
        for got, expected in zip(arrays, original[out], strict=True):
            np.testing.assert_allclose(got, expected, atol=1e-12)
    assert restored.state_dict() == json.loads(json.dumps(joint.state_dict()))


def test_bad_state_is_rejected(fitted):
    state = fitted.state_dict()
    with pytest.raises(InputError, match="state version"):
        JointEstimator.from_state({**state, "state_version": 99})
    with pytest.raises(InputError, match="lacks field 'head'"):
        JointEstimator.from_state({k: v for k, v in state.items() if k != "head"})
    with pytest.raises(InputError, match="not a joint estimator state"):
        JointEstimator.from_state(state["base"][BENCHMARKS[0]])


# ---------------------------------------------------------------------- arguments
def test_bad_arguments_are_named(correlated):
    sources, subsets, targets = (
        correlated["sources"],
        correlated["subsets"],
        correlated["source_targets"],
    )
    with pytest.raises(InputError, match="features must be"):
        JointEstimator(features=("theta",)).fit(sources, subsets, targets)
    with pytest.raises(InputError, match="unknown base estimator 'calibratd'"):
        JointEstimator(base_estimator="calibratd").fit(sources, subsets, targets)
    with pytest.raises(InputError, match="subsets are given for"):
        JointEstimator().fit(sources, {BENCHMARKS[0]: subsets[BENCHMARKS[0]]}, targets)
    with pytest.raises(InputError, match="target has 5 values"):
        JointEstimator().fit(sources, subsets, {**targets, BENCHMARKS[0]: np.zeros(5)})
    with pytest.raises(InputError, match="'average' is reserved"):
        JointEstimator().fit(
            {**sources, AVERAGE: sources[BENCHMARKS[0]]},
            {**subsets, AVERAGE: subsets[BENCHMARKS[0]]},
            {**targets, AVERAGE: targets[BENCHMARKS[0]]},
        )
    with pytest.raises(InputError, match=r"irt parameters given for unknown benchmarks \['zeta'\]"):
        JointEstimator().fit(sources, subsets, targets, irt={"zeta": None})
    with pytest.raises(InputError, match="not fitted"):
        JointEstimator().estimate({})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        percent = {**targets, BENCHMARKS[1]: 100 * targets[BENCHMARKS[1]]}
        with pytest.raises(InputError, match=f"{BENCHMARKS[1]}: targets must be fractions"):
            JointEstimator().fit(sources, subsets, percent)


# ---------------------------------------------------------------------- real data
@pytest.mark.slow
def test_joint_beats_per_benchmark_on_real_leaderboard_models(shared_data):
    """Three Open LLM Leaderboard v1 benchmarks, 15 random items each, held-out models."""
    data = shared_data / "openllm_v1"
    benchmarks = ("arc", "mmlu", "winogrande")
    matrices = {
        b: ResponseMatrix.read_parquet(data / "responses" / f"{b}_B.parquet") for b in benchmarks
    }
    truths = {}
    for b in benchmarks:
        table = pd.read_csv(data / "scores" / f"{b}_B_scores.csv").drop_duplicates("model")
        truths[b] = table.set_index("model")["full_score_metabench"].dropna() / 100.0
    common = sorted(
        set.intersection(*(set(matrices[b].model_ids) & set(truths[b].index) for b in benchmarks))
    )
    rng = np.random.default_rng(0)
    order = rng.permutation(len(common))
    heldout_ids = [common[k] for k in order[:400]]
    source_ids = [common[k] for k in order[400:]]
    sources = {b: matrices[b].select_models(source_ids) for b in benchmarks}
    subsets = {
        b: Subset(
            tuple(rng.choice(sources[b].item_ids, size=15, replace=False)),
            np.full(15, 1 / 15),
            "random",
        )
        for b in benchmarks
    }
    targets = {b: truths[b] for b in benchmarks}  # Series: joined on model id
    joint = JointEstimator().fit(sources, subsets, targets)
    heldout = {b: matrices[b].select_models(heldout_ids) for b in benchmarks}
    estimates = joint.estimate_matrix(heldout)
    joint_mae, base_mae = [], []
    for b in benchmarks:
        truth = truths[b].loc[heldout_ids].to_numpy()
        joint_mae.append(np.mean(np.abs(estimates[b][0] - truth)))
        base_mae.append(np.mean(np.abs(joint.base_[b].estimate_matrix(heldout[b])[0] - truth)))
    assert np.mean(joint_mae) < 0.9 * np.mean(base_mae), (joint_mae, base_mae)


# ---------------------------------------------------------------------- issue 8
def test_a_sealed_state_file_refuses_a_changed_number(fitted, tmp_path):
    from lmeval_microbench._io import seal_json
    from lmeval_microbench.estimators.joint import load_state
    from lmeval_microbench.runs import load_joint

    path = tmp_path / "joint.json"
    path.write_text(json.dumps(seal_json(fitted.state_dict())))
    plain = json.loads(json.dumps(fitted.state_dict()))
    assert load_state(path).state_dict() == plain
    state = json.loads(path.read_text())
    state["head"]["intercept"][-1] -= 0.007  # the joint average moves by 0.7 points
    path.write_text(json.dumps(state))
    for load in (load_state, load_joint):
        with pytest.raises(InputError, match=r"joint\.json: joint: checksum mismatch"):
            load(path)
    path.write_text(json.dumps(plain))
    with pytest.raises(InputError, match=r"joint\.json: the joint estimator state has no checksum"):
        load_state(path)
    state = seal_json({**plain, "head": {**plain["head"], "coef": [[1.0], [2.0, 3.0]]}})
    with pytest.raises(InputError, match="joint: estimator state is malformed"):
        JointEstimator.from_state(state)


def test_malformed_states_are_input_errors(fitted):
    from lmeval_microbench._io import seal_json

    plain = json.loads(json.dumps(fitted.state_dict()))
    cut = {**plain["head"], "coef": plain["head"]["coef"][:1]}
    bad = {
        "head.coef has shape": {**plain, "head": cut},
        "malformed": {**plain, "cv_mae": [0.1]},
    }
    for message, state in bad.items():
        with pytest.raises(InputError, match=message):
            JointEstimator.from_state(seal_json(state))


def test_every_item_of_a_benchmark_right_opens_it_and_raises_the_average(correlated, fitted):
    """A model with every subset item of the first benchmark right: that benchmark's upper end
    is 1, the average's rises by what that benchmark could add (its gap to 1, over B); the
    other benchmarks' upper ends are their bands' as before."""
    model = correlated["heldout_ids"][3]
    scores = {}
    for b in BENCHMARKS:
        scores.update(correlated["heldout"][b].row(model))
    first = BENCHMARKS[0]
    scores.update(dict.fromkeys(fitted.subsets_[first].item_ids, 1.0))
    right = fitted.estimate(scores)

    def band_upper(out: str) -> float:
        value = np.array([right[out].value])
        return float(np.clip(value + fitted.bands_[out].half_width(value, 0.9), 0.0, 1.0)[0])

    assert right[first].upper == 1.0 and band_upper(first) < 1.0
    for b in BENCHMARKS[1:]:
        assert right[b].upper == pytest.approx(band_upper(b))
    raised = band_upper(AVERAGE) + (1.0 - band_upper(first)) / len(BENCHMARKS)
    assert right[AVERAGE].upper == pytest.approx(min(raised, 1.0))
