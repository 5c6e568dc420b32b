"""tools/bench_guess_weight.py: rules for how far a run flagged as guessing moves toward
chance, applied through the product's own ``widen_for_fit``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tools_support import tools_module

from lmeval_microbench.adaptive.pool import estimate_pool, posterior_estimate
from lmeval_microbench.personfit import POSTERIOR_ABILITY_SD

CHANCE = 0.5  # the pool of the ``coin_flip_pool`` fixture (conftest.py)


@pytest.fixture(scope="module")
def read(coin_flip_pool):
    pool, values, order = coin_flip_pool
    return tools_module("bench_guess_weight").read_rules(pool, values, order, 20)


def test_the_products_rule_is_what_estimate_pool_prints(coin_flip_pool, read):
    pool, values, order = coin_flip_pool
    ids = pool.item_ids
    flagged = np.flatnonzero(read["guessing"])
    assert flagged.size and (~read["guessing"]).any()
    for k in (flagged[0], flagged[-1], np.flatnonzero(~read["guessing"])[0]):
        scores = {ids[j]: float(values[k, j]) for j in order[k, :20]}
        printed = estimate_pool(pool, scores)
        product = read["rules"]["P(guessing)"][:, k]
        np.testing.assert_allclose(product, [printed.value, printed.lower, printed.upper])
        assert read["posterior"][k] == pytest.approx(printed.person_fit["guess_posterior"])


def test_rules_differ_only_in_how_far_flagged_runs_move(coin_flip_pool, read):
    pool, values, order = coin_flip_pool
    ids = pool.item_ids
    rules, guessing, p = read["rules"], read["guessing"], read["posterior"]
    raw = np.array(
        [
            posterior_estimate(pool, {ids[j]: float(values[k, j]) for j in order[k, :20]})[0].value
            for k in range(len(values))
        ]
    )
    product = rules["P(guessing)"]
    for name, rows in rules.items():
        np.testing.assert_allclose(rows[1:], product[1:], err_msg=name)  # one interval
        np.testing.assert_allclose(rows[0][~guessing], raw[~guessing], err_msg=name)
    above = guessing & (raw > CHANCE)
    assert above.any()
    np.testing.assert_allclose(rules["widen only"][0], raw)
    share = (raw[above] - rules["P(guessing)"][0][above]) / (raw[above] - CHANCE)
    np.testing.assert_allclose(share, p[above])  # moved by P(guessing) of the way
    odds = p[above] / (1 - p[above]) * 4  # the product's prior odds 1:4 restated as 1:1
    even = (raw[above] - rules["even odds"][0][above]) / (raw[above] - CHANCE)
    np.testing.assert_allclose(even, odds / (1 + odds), atol=1e-9)
    beyond = (raw[above] - rules["odds beyond even"][0][above]) / (raw[above] - CHANCE)
    np.testing.assert_allclose(beyond, np.clip(2 * even - 1, 0, 1), atol=1e-9)
    product_value = rules["P(guessing)"][0][above]
    assert np.all(rules["even odds"][0][above] <= product_value + 1e-12)  # a longer move
    assert np.all(rules["prior 0.1"][0][above] >= product_value - 1e-12)  # a shorter one
    for name in ("ability sd 1 (before)", "ability sd 2"):  # a move between none and all the way
        assert np.all(rules[name][0][above] <= raw[above] + 1e-12)
        assert np.all(rules[name][0][above] >= CHANCE - 1e-12)
    assert np.any(np.abs(rules["ability sd 1 (before)"][0][above] - product[0][above]) > 1e-6)


def test_the_products_ability_sd_gives_the_products_posterior(coin_flip_pool, read, monkeypatch):
    tool = tools_module("bench_guess_weight")
    same = {"the product's sd": POSTERIOR_ABILITY_SD}
    monkeypatch.setattr(tools_module("guess_rules"), "ABILITY_SD", same)
    pool, values, order = coin_flip_pool
    for k in np.flatnonzero(read["guessing"])[:3]:
        scores = {pool.item_ids[j]: float(values[k, j]) for j in order[k, :20]}
        posterior = tool.run_wide_posteriors(pool.bundle, scores)["the product's sd"]
        assert posterior == pytest.approx(read["posterior"][k])


def test_the_base_rate_rule_at_the_products_prior_is_the_products(coin_flip_pool, read):
    tool = tools_module("bench_guess_weight")
    rules = read["rules"]
    np.testing.assert_allclose(rules[tool.BASE_RATE], rules["P(guessing)"])
    pool, values, order = coin_flip_pool
    lower = tool.read_rules(pool, values, order, 20, base_rate=0.01)["rules"]
    flagged = read["guessing"]
    assert np.all(  # a lower prior moves no run further toward chance, and some less far
        np.abs(lower[tool.BASE_RATE][0] - CHANCE)
        >= np.abs(rules["P(guessing)"][0] - CHANCE) - 1e-12
    )
    assert np.any(lower[tool.BASE_RATE][0][flagged] != rules["P(guessing)"][0][flagged])


def test_the_sources_base_rate_by_hand():
    rules = tools_module("guess_rules")
    # sources the ratio places beyond doubt: 2 guessers of 10 (the rate is their share)
    ratio = np.array([60.0] * 8 + [-60.0] * 2)
    assert rules.sources_base_rate(ratio) == pytest.approx(0.2)
    # undecided sources (likelihood equal under both models) leave the prior as it is
    assert rules.sources_base_rate(np.zeros(5)) == pytest.approx(0.2)
    # no source is more likely a guesser than an ordinary model: the rate falls to its bound
    assert rules.sources_base_rate(np.array([60.0, 60.0, 60.0, 1.0, -1.0])) == 1e-6
    mixed = np.array([60.0] * 6 + [-3.0, -2.0, 0.5, 1.0])
    rate = rules.sources_base_rate(mixed)
    posterior = 1 / (1 + np.exp(-(np.log(rate / (1 - rate)) - mixed)))
    assert rate == pytest.approx(posterior.mean(), abs=1e-8)  # a fixed point of EM
    assert 0.1 < rate < 0.4


def test_guessers_scored_by_hand():
    tool = tools_module("bench_guess_weight")
    rules = {name: np.array([[0.3, 0.5], [0.2, 0.3], [0.4, 0.6]]) for name in tool.NAMES}
    rules["widen only"] = np.array([[0.45, 0.5], [0.2, 0.3], [0.4, 0.6]])
    part = {"rules": rules, "guessing": np.array([True, False])}
    scored = tool.score_guessers(part, 0.25)
    assert scored["distance"][tool.PRODUCT] == pytest.approx(15.0)  # 5 and 25 points
    assert scored["distance"]["widen only"] == pytest.approx(22.5)
    assert scored["coverage"] == 0.5 and scored["guessing"] == 0.5  # 0.25 in [0.2, 0.4] only
    assert scored["responders"] == 2
    rows = [{"protocol": "random", "items": 10, "guessers": scored}]
    summed = tool.totals(rows, tool.guesser_distance)["random 10"]
    assert summed["widen only"]["sum"] == pytest.approx(22.5)
    assert summed["widen only"]["worse"] == 1 and summed[tool.PRODUCT]["near_best"] == 1


def test_scores_and_totals_by_hand():
    tool = tools_module("bench_guess_weight")
    truth = np.array([0.5, 0.7])
    rules = {name: np.array([[0.5, 0.8], [0.4, 0.6], [0.9, 0.9]]) for name in tool.RULES}
    rules["widen only"] = np.array([[0.6, 0.8], [0.4, 0.6], [0.9, 0.9]])
    part = {"rules": rules, "guessing": np.array([True, False]), "posterior": np.array([0.8, 0.1])}
    scored = tool.score_rules(part, truth)
    assert scored["mae"]["P(guessing)"] == pytest.approx(5.0)
    assert scored["mae"]["widen only"] == pytest.approx(10.0)
    assert scored["bias"]["widen only"] == pytest.approx(10.0)
    assert scored["coverage"] == 1.0 and scored["width"] == pytest.approx(40.0)
    assert scored["same_interval"] and scored["median_posterior"] == pytest.approx(0.8)
    rows = [{"protocol": "weak", "items": 10, **scored}] * 2
    summed = tool.totals(rows)["weak 10"]
    assert summed["widen only"] == {
        "sum": pytest.approx(20.0), "near_best": 0, "better": 0, "worse": 2,
    }  # fmt: skip
    assert summed["P(guessing)"] == {
        "sum": pytest.approx(10.0), "near_best": 2, "better": 0, "worse": 0,
    }  # fmt: skip


@pytest.mark.slow
def test_a_musr_weak_cell_is_run_end_to_end(shared_data, tmp_path):
    tool = tools_module("bench_guess_weight")
    args = ["--shared", str(shared_data), "--benchmarks", "musr", "--protocols", "weak"]
    cell = ["--items", "10", "--max-targets", "8", "--guessers", "6", "--out", str(tmp_path)]
    tool.main([*args, *cell])
    saved = json.loads((tmp_path / "guess_weight.json").read_text())
    (row,) = saved["rows"]
    assert (row["benchmark"], row["protocol"], row["items"], row["targets"]) == (
        "musr", "weak", 10, 8,
    )  # fmt: skip
    assert row["same_interval"] and set(row["mae"]) == set(tool.NAMES)
    assert "| musr | weak | 10 | 8 |" in (tmp_path / "guess_weight.md").read_text()
    assert set(saved["totals"]["weak 10"]) == set(tool.NAMES)
    guessers = row["guessers"]
    assert guessers["responders"] == 6 and set(guessers["distance"]) == set(tool.NAMES)
    assert 0 <= row["base_rate"] < 1 and set(saved["guesser_totals"]["weak 10"]) == set(tool.NAMES)
    assert (
        "Random responders on the same pools (6 per pool"
        in (tmp_path / "guess_weight.md").read_text()
    )
