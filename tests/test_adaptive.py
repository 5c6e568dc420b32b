"""Adaptive evaluation: selection, ability updates, stopping, resume and pools (no lm-eval)."""

from __future__ import annotations

import numpy as np
import pytest

from lmeval_microbench.adaptive import (
    AdaptiveSession,
    MaxInfoSelector,
    RandomesqueSelector,
    StoppingRule,
    build_pool,
    pool_state,
    replay,
)
from lmeval_microbench.adaptive.estimation import GridPosterior
from lmeval_microbench.adaptive.pool import estimate_pool
from lmeval_microbench.adaptive.simulate import exposure
from lmeval_microbench.bundle import load_bundle, save_bundle
from lmeval_microbench.errors import InputError
from lmeval_microbench.irt import estimate_abilities
from lmeval_microbench.synthetic import random_item_params, simulate_responses

PARAMS = random_item_params(40, seed=1)


@pytest.fixture(scope="module")
def pool():
    """A pool of 40 synthetic items fitted on 400 simulated models (true score = row mean);
    ``ridge`` keeps it fast (the shipped pools use ``kridge``)."""
    matrix, _ = simulate_responses(PARAMS, 400, seed=2)
    bundle = build_pool(
        matrix, matrix.mean_scores(), name="toy-pool", benchmark="toy", estimator="ridge"
    )
    return bundle


def test_grid_posterior_equals_the_package_eap():
    matrix, _ = simulate_responses(PARAMS, 20, seed=3)
    post = GridPosterior(PARAMS, 20)
    rows, items = np.nonzero(np.ones((20, 7), dtype=bool))
    post.update(rows, items, matrix.values[rows, items])
    mean, se = post.mean_se()
    expected, expected_se = estimate_abilities(PARAMS, matrix.values[:, :7], PARAMS.item_ids[:7])
    np.testing.assert_allclose(mean, expected[:, 0], atol=1e-9)
    np.testing.assert_allclose(se, expected_se[:, 0], atol=1e-9)


def test_max_info_picks_the_most_informative_available_items():
    theta = np.array([-1.0, 0.0, 2.0])
    available = np.ones((3, PARAMS.n_items), dtype=bool)
    available[:, 5] = False
    chosen = MaxInfoSelector().select(PARAMS, theta, available, 3, np.random.default_rng(0))
    info = PARAMS.information(theta)
    info[:, 5] = -np.inf
    np.testing.assert_array_equal(chosen, np.argsort(-info, axis=1)[:, :3])
    few = np.zeros((1, PARAMS.n_items), dtype=bool)
    few[0, [3, 9]] = True
    picked = MaxInfoSelector().select(PARAMS, theta[:1], few, 4, np.random.default_rng(0))
    assert sorted(picked[0, :2]) == [3, 9] and list(picked[0, 2:]) == [-1, -1]


def test_randomesque_stays_in_the_top_and_spreads_exposure():
    theta = np.zeros(500)
    available = np.ones((500, PARAMS.n_items), dtype=bool)
    chosen = RandomesqueSelector(5).select(PARAMS, theta, available, 1, np.random.default_rng(0))
    top5 = set(np.argsort(-PARAMS.information(theta[:1])[0])[:5])
    assert set(chosen[:, 0]) == top5
    greedy = MaxInfoSelector().select(PARAMS, theta, available, 1, np.random.default_rng(0))
    assert exposure(chosen, PARAMS.n_items).max() < 0.5 < exposure(greedy, PARAMS.n_items).max()


@pytest.mark.parametrize(
    ("rule", "state", "reason"),
    [
        (StoppingRule(10, 0.3), (4, 0.29, 30), "target_se"),
        (StoppingRule(10, 0.3), (10, 0.5, 30), "max_items"),
        (StoppingRule(50, 0.1), (40, 0.5, 0), "pool_exhausted"),
        (StoppingRule(10), (9, 0.01, 30), None),
    ],
)
def test_stopping_rule_names_its_reason(rule, state, reason):
    assert rule.reason(*state) == reason


def test_stopping_rule_cuts_the_last_batch_and_refuses_bad_values():
    assert StoppingRule(10).next_batch(8, 4, 30) == 2
    assert StoppingRule(10).next_batch(0, 4, 3) == 3
    with pytest.raises(InputError, match="target_se"):
        StoppingRule(10, -1.0)


def test_resumed_session_asks_what_an_uninterrupted_one_asks():
    matrix, _ = simulate_responses(PARAMS, 1, seed=5)
    answers = matrix.values[0]

    def session():
        return AdaptiveSession(
            PARAMS, selector=RandomesqueSelector(4), rule=StoppingRule(12), batch=2, seed=7
        )

    whole, log = session(), []
    while whole.stop_reason() is None:
        chosen = whole.propose()
        whole.record(chosen, answers[chosen])
        log.append(([PARAMS.item_ids[k] for k in chosen[0]], list(answers[chosen[0]])))
    resumed = session()
    for items, scores in log[:3]:
        resumed.record_items(items, scores)
    while resumed.stop_reason() is None:
        chosen = resumed.propose()
        resumed.record(chosen, answers[chosen])
    np.testing.assert_array_equal(np.concatenate(resumed.order, 1), np.concatenate(whole.order, 1))
    np.testing.assert_allclose(resumed.ability()[0], whole.ability()[0])


def test_session_refuses_an_item_asked_twice():
    session = AdaptiveSession(PARAMS, selector=MaxInfoSelector(), rule=StoppingRule(5))
    session.record(np.array([[3]]), np.array([[1.0]]))
    with pytest.raises(InputError, match="twice"):
        session.record(np.array([[3]]), np.array([[0.0]]))


def test_pool_round_trips_and_estimates_improve_with_items(pool, tmp_path):
    folder = save_bundle(pool, tmp_path / "pool")
    loaded = pool_state(load_bundle(folder))
    assert loaded.item_ids == PARAMS.item_ids and len(loaded.state.score_map.bands) > 3
    matrix, _ = simulate_responses(PARAMS, 300, seed=9)
    truth = matrix.mean_scores()
    result = replay(
        loaded.params,
        matrix.values,
        selector=MaxInfoSelector(),
        max_items=40,
        score_map=loaded.state.score_map,
        checkpoints=(3, 40),
    )
    errors = {n: np.mean(np.abs(result.predictions[n] - truth)) for n in (3, 40)}
    assert errors[40] < errors[3] / 3
    lower, upper = loaded.state.score_map.interval(result.predictions[3], 3, span=result.spans[3])
    assert 0.8 <= np.mean((lower <= truth) & (truth <= upper)) <= 0.98


def test_estimate_pool_ignores_the_order_of_answers(pool):
    view = pool_state(pool)
    scores = {PARAMS.item_ids[k]: float(k % 3 == 0) for k in (4, 11, 2, 30)}
    forward = estimate_pool(view, scores)
    backward = estimate_pool(view, dict(reversed(list(scores.items()))))
    assert forward == backward and forward.n_items == 4
    assert forward.lower <= forward.value <= forward.upper


def test_a_plain_bundle_is_not_a_pool(pool):
    import dataclasses

    plain = dataclasses.replace(pool, estimators=pool.estimators[:1])
    with pytest.raises(InputError, match="not an item pool"):
        pool_state(plain)


def test_batches_hit_every_checkpoint_and_take_fewer_steps():
    matrix, _ = simulate_responses(PARAMS, 50, seed=11)
    one = replay(PARAMS, matrix.values, selector=MaxInfoSelector(), max_items=20)
    four = replay(PARAMS, matrix.values, selector=MaxInfoSelector(), max_items=20, batch=4,
                  checkpoints=(10,))  # fmt: skip
    assert one.counts == list(range(1, 21))
    assert four.counts == [4, 8, 10, 14, 18, 20] and four.order.shape == (50, 20)
    assert all(len(set(row)) == 20 for row in four.order)


def test_shipped_pools_load_and_match_their_documents():
    from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS
    from lmeval_microbench.harness.docs import check_docs_match_bundle, read_docs

    folders = sorted(SHIPPED_POOLS.glob("openllm_v1/*/bundle.json"))
    assert {f.parent.name for f in folders} == {
        "arc", "gsm8k", "hellaswag", "mmlu", "truthfulqa", "winogrande"
    }  # fmt: skip
    for path in folders:
        bundle = load_bundle(path.parent)
        pool = pool_state(bundle)
        docs = read_docs(path.parent / "items.jsonl")
        check_docs_match_bundle(bundle, docs, where=str(path.parent))
        assert len(pool.item_ids) == len(docs) == bundle.provenance.n_source_items


def test_estimate_targets_gives_held_out_estimates_per_budget():
    from lmeval_microbench.adaptive.evaluate import estimate_targets

    matrix, _ = simulate_responses(PARAMS, 300, seed=12)
    source = matrix.select_models(matrix.model_ids[:250])
    target = matrix.select_models(matrix.model_ids[250:])
    truth = matrix.mean_scores()
    found = estimate_targets(source, truth[:250], target, (5, 30))
    assert set(found) == {5, 30}
    errors = {n: np.mean(np.abs(found[n][0] - truth[250:])) for n in found}
    assert errors[30] < errors[5]
    value, lower, upper = found[30]
    assert np.all(lower <= value) and np.all(value <= upper)


def test_reconstruct_gives_an_adaptive_run_the_pools_estimate(pool):
    """An adaptive run's logged answers (some of the pool's items) -> the pool's estimate, not
    NaN for the unasked items: what ``microbench reconstruct`` prints for an adaptive run."""
    from types import SimpleNamespace

    from lmeval_microbench.runs.reconstruct import _estimate_group

    items = list(pool.item_ids)[:12]
    scores = {item: float(k % 3 != 0) for k, item in enumerate(items)}
    run = SimpleNamespace(
        model="m",
        task="microbench_pool_toy",
        path="samples.jsonl",
        metric="acc",
        match=SimpleNamespace(ref=SimpleNamespace(bundle=pool)),
        scores=scores,
        missing=[],
        in_run=None,
    )
    (result,) = _estimate_group([run], None, 0.9, False)
    expected = estimate_pool(pool_state(pool), scores, 0.9)
    assert result.estimator == "adaptive" and result.items_scored == 12
    assert result.missing == ()
    assert (result.estimate.value, result.estimate.lower, result.estimate.upper) == (
        expected.value,
        expected.lower,
        expected.upper,
    )
    assert result.placement == expected.placement and expected.placement is not None


def test_a_step_log_of_another_model_or_pool_is_refused_naming_both(tmp_path):
    from lmeval_microbench.adaptive.runner import check_resumed_log

    mine = {"model": "hf", "model_args": "pretrained=B", "task": "microbench_pool_arc",
            "pool": "openllm-v1-arc-pool", "pool_sha256": "a" * 64}  # fmt: skip
    theirs = {**mine, "model_args": "pretrained=A"}
    log = tmp_path / "adaptive_microbench_pool_arc.jsonl"
    with pytest.raises(InputError, match=r"pretrained=A.*this run is .*pretrained=B"):
        check_resumed_log(log, [{"run": theirs, "items": [], "scores": []}], mine)
    other_pool = {**mine, "pool_sha256": "b" * 64}
    with pytest.raises(InputError, match="pool_sha256"):
        check_resumed_log(log, [{"run": other_pool, "items": [], "scores": []}], mine)
    check_resumed_log(log, [{"run": dict(mine), "items": [], "scores": []}], mine)  # same run
    check_resumed_log(log, [{"items": [], "scores": []}], mine)  # a log of an older version


def test_adaptive_refuses_an_output_path_that_is_a_file_and_names_a_missing_model(tmp_path, capsys):
    from lmeval_microbench.cli.app import main

    afile = tmp_path / "afile"
    afile.write_text("keep me")
    argv = ["adaptive", "--model", "hf", "--model_args", "pretrained=/no/such/model",
            "--tasks", "microbench_mmlu", "--max-items", "2"]  # fmt: skip
    assert main([*argv, "--output_path", str(afile)]) == 2
    assert "is a file" in capsys.readouterr().err and afile.read_text() == "keep me"
    assert main([*argv, "--output_path", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "could not load model 'hf'" in err[-1] and "/no/such/model" in err[-1]
    assert not any("Traceback" in line for line in err)


def test_a_target_se_the_prior_already_meets_is_refused_before_the_model_loads(tmp_path, capsys):
    """Issue 21: --target-se 10 loaded the model, then said there was nothing to estimate."""
    from lmeval_microbench.cli.app import main

    argv = ["adaptive", "--model", "hf", "--model_args", "pretrained=/no/such/model",
            "--tasks", "microbench_mmlu", "--target-se", "10", "--output_path",
            str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--target-se 10 is not below the prior sd" in err and "could not load" not in err


# ---------------------------------------------------------------------------- person fit
def test_every_shipped_pool_checks_person_fit():
    from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS

    folders = sorted(SHIPPED_POOLS.glob("*/*/bundle.json"))
    assert len(folders) == 8
    for path in folders:
        spec = load_bundle(path.parent).person_fit
        assert spec is not None, path
        assert 0 <= spec.chance_score < 1 and spec.lz_threshold < 0


def test_a_chance_level_adaptive_run_is_moved_to_chance_and_widened():
    """Issue 21: 2 of 4 winogrande pool items right gave 79.8 [72.7, 87.0] with no flag."""
    from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS

    pool = pool_state(load_bundle(SHIPPED_POOLS / "openllm_v1" / "winogrande"))
    first = replay(pool.params, np.ones((1, len(pool.item_ids))), selector=MaxInfoSelector(),
                   max_items=4).order[0]  # fmt: skip
    scores = {pool.item_ids[k]: float(j % 2) for j, k in enumerate(first)}
    found = estimate_pool(pool, scores)
    assert found.flagged and found.person_fit["guessing"] and found.person_fit["widened"]
    assert found.lower <= 0.5 <= found.upper
    assert abs(found.value - 0.5) < 0.15 and "P(guessing)" in found.note


def test_random_responders_on_a_shipped_pool_land_at_chance_and_ordinary_ones_do_not():
    from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS

    pool = pool_state(load_bundle(SHIPPED_POOLS / "openllm_v1" / "hellaswag"))
    rng = np.random.default_rng(5)
    answers = (rng.random((30, len(pool.item_ids))) < 0.25).astype(np.float64)
    order = replay(pool.params, answers, selector=MaxInfoSelector(), max_items=30).order
    found = [
        estimate_pool(pool, {pool.item_ids[k]: answers[r, k] for k in row})
        for r, row in enumerate(order)
    ]
    assert np.mean([f.lower <= 0.25 <= f.upper for f in found]) >= 0.95
    assert np.mean([abs(f.value - 0.25) for f in found]) <= 0.05
    # a model answering like a strong source model (p = 0.85 on every item) is not flagged
    strong = (rng.random((30, len(pool.item_ids))) < 0.85).astype(np.float64)
    order = replay(pool.params, strong, selector=MaxInfoSelector(), max_items=30).order
    flagged = [
        estimate_pool(pool, {pool.item_ids[k]: strong[r, k] for k in row}).person_fit["guessing"]
        for r, row in enumerate(order)
    ]
    assert np.mean(flagged) <= 0.05


def test_every_shipped_pool_places_its_side_bands_by_ability():
    from lmeval_microbench.adaptive.pool_task import SHIPPED_POOLS

    for path in sorted(SHIPPED_POOLS.glob("*/*/bundle.json")):
        sides = pool_state(load_bundle(path.parent)).state.score_map.sides
        assert {side.side for side in sides} == {"below", "above"}, path
        below, above = sorted(sides, key=lambda side: side.side != "below")
        assert below.ability_edge < 0.0 < above.ability_edge, path


def test_ability_edges_added_to_an_older_pool_are_the_ones_a_build_fits(pool):
    """An older pool (no ability edges) refreshed from its source matrix gets exactly the
    edges a build fits; another matrix is refused."""
    from dataclasses import replace

    from lmeval_microbench.adaptive.pool import ADAPTIVE
    from lmeval_microbench.adaptive.refresh import with_ability_edges
    from lmeval_microbench.bundle import EstimatorSpec

    state = pool_state(pool).state
    fitted = {side.side: side.ability_edge for side in state.score_map.sides}
    assert all(edge is not None for edge in fitted.values())
    stripped = state.to_dict()
    for side in ("below", "above"):
        del stripped[side]["ability_edge"]
    older = replace(
        pool,
        estimators=tuple(
            EstimatorSpec(ADAPTIVE, stripped) if spec.name == ADAPTIVE else spec
            for spec in pool.estimators
        ),
    )
    assert all(side.ability_edge is None for side in pool_state(older).state.score_map.sides)
    matrix, _ = simulate_responses(PARAMS, 400, seed=2)
    again = pool_state(with_ability_edges(older, matrix)).state.score_map.sides
    assert {side.side: side.ability_edge for side in again} == pytest.approx(fitted, abs=1e-12)
    other, _ = simulate_responses(PARAMS, 400, seed=5)
    with pytest.raises(InputError, match="another source matrix"):
        with_ability_edges(older, other)
