"""Ranking many models: tiers, rank intervals, rounds, DIoR and the replay CLI."""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pytest

from lmeval_microbench.cli.app import main
from lmeval_microbench.errors import InputError
from lmeval_microbench.rank import (
    Evaluated,
    RoundOptions,
    Scored,
    decision_impact,
    dior,
    parse_tiers,
    rank_intervals,
    run_rounds,
    top_k_agreement,
)
from lmeval_microbench.rank.evaluation import ranking_quality
from lmeval_microbench.rank.replay import default_levels
from lmeval_microbench.rank.tiers import check_covers, level_cap, resolved
from lmeval_microbench.synthetic import random_item_params, simulate_responses

Z90 = 1.6448536269514722


# ---------------------------------------------------------------------------- tiers
def test_flash_helm_tiers_parse_with_default_resolutions():
    tiers = parse_tiers()
    assert [t.label for t in tiers] == ["1-4", "5-9", "10-19", "20-50", "51-"]
    assert [t.resolution for t in tiers][:4] == [4, 5, 10, 31]
    assert tiers[-1].resolution == np.inf
    assert parse_tiers("1-4:2,5-")[0].resolution == 2


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("2-4,5-", "contiguous from rank 1"),
        ("1-4,6-", "expected 5"),
        ("1-,5-9", "only the last tier may be open"),
        ("1-4,x", "is not FIRST-LAST"),
        ("", "empty"),
    ],
)
def test_bad_tiers_are_one_line_errors(text, match):
    with pytest.raises(InputError, match=match):
        parse_tiers(text)


def test_tiers_must_cover_the_model_count():
    with pytest.raises(InputError, match="cover ranks 1-9 but 12 models"):
        check_covers(parse_tiers("1-4,5-9"), 12)
    check_covers(parse_tiers("1-4,5-9"), 9)


def test_resolution_is_judged_by_the_finest_tier_reached():
    tiers = parse_tiers()
    assert resolved(tiers, 1, 4) and not resolved(tiers, 1, 5)
    assert not resolved(tiers, 9, 20)  # reaches tier 5-9: at most 5 ranks wide
    assert resolved(tiers, 60, 200)  # the open tier needs no resolution


# ---------------------------------------------------------------------------- intervals
def test_separated_models_get_exact_rank_intervals():
    value = np.array([0.2, 0.8, 0.5])
    for method in ("simulate", "overlap"):
        ranks = rank_intervals(value, value - 0.01, value + 0.01, method=method)
        assert ranks.rank.tolist() == [3, 1, 2]
        assert ranks.low.tolist() == ranks.high.tolist() == [3, 1, 2]


def test_overlapping_models_share_their_ranks():
    value = np.array([0.50, 0.51, 0.9])
    ranks = rank_intervals(value, value - 0.1, value + 0.1, method="overlap")
    assert ranks.low.tolist() == [2, 2, 1] and ranks.high.tolist() == [3, 3, 1]
    simulated = rank_intervals(value, value - 0.1, value + 0.1, seed=1)
    assert simulated.low.tolist() == [2, 2, 1] and simulated.high.tolist() == [3, 3, 1]


def test_simulated_rank_intervals_hold_true_ranks_on_calibrated_estimates():
    rng = np.random.default_rng(0)
    truth = rng.uniform(0.3, 0.8, 200)
    sd = 0.03
    value = truth + rng.normal(0, sd, truth.size)
    ranks = rank_intervals(value, value - Z90 * sd, value + Z90 * sd, seed=2)
    true_rank = np.argsort(np.argsort(-truth)) + 1
    coverage = np.mean((ranks.low <= true_rank) & (true_rank <= ranks.high))
    assert coverage >= 0.9
    assert np.all((ranks.low <= ranks.rank) & (ranks.rank <= ranks.high))


def test_intervals_must_hold_their_estimates():
    with pytest.raises(InputError, match="lower <= value <= upper"):
        rank_intervals(np.array([0.5, 0.6]), np.array([0.6, 0.5]), np.array([0.7, 0.7]))


# ---------------------------------------------------------------------------- rounds
class FakeEvaluator:
    """Estimates = truth + sd(level) x a fixed normal draw per model; logs every call."""

    def __init__(self, truth: dict[str, float], sds: Sequence[float], levels, fail=()):
        self.truth, self.sds, self.levels = truth, list(sds), tuple(levels)
        names = sorted(truth)
        self.noise = dict(
            zip(names, np.random.default_rng(3).standard_normal(len(names)), strict=True)
        )
        self.calls: list[tuple[int, list[str]]] = []
        self.fail = set(fail)

    def evaluate(self, models, level):
        self.calls.append((level, list(models)))
        out = Evaluated()
        sd = self.sds[level]
        for m in models:
            if (m, level) in self.fail or m in self.fail:
                out.failures[m] = "boom"
                continue
            v = self.truth[m] + sd * self.noise[m]
            out.scores[m] = Scored(v, v - Z90 * sd, v + Z90 * sd)
        return out


def population(n: int = 30) -> dict[str, float]:
    return {f"m{k:02d}": 0.2 + 0.6 * k / n for k in range(n)}


def test_rounds_promote_only_unresolved_models_and_stop_when_resolved():
    truth = population()
    ev = FakeEvaluator(truth, [0.05, 0.01, 0.0005], [10, 20, 40])
    ranking = run_rounds(ev, list(truth), RoundOptions(parse_tiers("1-4,5-9,10-")))
    assert ev.calls[0] == (0, list(truth))
    first = ev.evaluate(list(truth), 0).scores
    value, lower, upper = (
        np.array([getattr(first[m], k) for m in truth]) for k in ("value", "lower", "upper")
    )
    ranks = rank_intervals(value, lower, upper, seed=0)
    tiers = parse_tiers("1-4,5-9,10-")
    needy = {
        m
        for m, lo, hi in zip(truth, ranks.low, ranks.high, strict=True)
        if not resolved(tiers, int(lo), int(hi))
    }
    assert set(ev.calls[1][1]) == needy and 0 < len(needy) < len(truth)
    assert ranking.stop_reason == "every rank interval meets its tier's resolution"
    assert all(row["resolved"] for row in ranking.models)
    assert ranking.items_spent == sum(row["items"] for row in ranking.models)
    assert ranking.items_spent < len(truth) * 40
    assert [row["rank"] for row in ranking.models] == list(range(1, len(truth) + 1))


def test_item_budget_caps_the_rounds():
    truth = population()
    ev = FakeEvaluator(truth, [0.05, 0.03, 0.02], [10, 20, 40])
    options = RoundOptions(parse_tiers("1-4,5-9,10-"), max_items=30 * 10 + 50)
    ranking = run_rounds(ev, list(truth), options)
    assert ranking.items_spent <= 350
    assert ranking.stop_reason == "item budget spent"
    with pytest.raises(InputError, match="first round alone needs 300 items"):
        run_rounds(ev, list(truth), RoundOptions(parse_tiers(), max_items=299))


def test_last_level_stops_unresolvable_models():
    truth = {"a": 0.5, "b": 0.5001, "c": 0.95}
    ev = FakeEvaluator(truth, [0.3, 0.3], [5, 10])
    ranking = run_rounds(ev, list(truth), RoundOptions(parse_tiers("1-1,2-2,3-")))
    assert ranking.stop_reason == "unresolved models are at their tier's last level"
    assert max(row["items"] for row in ranking.models) == 10


def test_level_caps_give_coarser_tiers_fewer_levels():
    """Flash-HELM's schedule: the top tier may climb to every item, the next tier one level
    less, ...; without caps every unresolved model climbs to the last level."""
    truth = population(40)
    ev = FakeEvaluator(truth, [0.2, 0.1, 0.05, 0.03], [5, 10, 20, 40])
    tiers = parse_tiers("1-2,3-5,6-10,11-")
    capped = run_rounds(ev, list(truth), RoundOptions(tiers))
    uncapped = run_rounds(ev, list(truth), RoundOptions(tiers, level_caps=False))
    assert capped.items_spent < uncapped.items_spent
    assert max(row["items"] for row in capped.models) == 40
    held = [r for r in capped.models if not r["resolved"] and r["items"] < 40]
    assert held and all(r["rank_low"] > 2 for r in held)  # held back by a coarser tier's cap
    assert all(r["items"] == 40 for r in uncapped.models if not r["resolved"])
    assert level_cap(0, 4) == 3 and level_cap(2, 4) == 1 and level_cap(7, 4) == 0


def test_failed_models_are_reported_and_the_rest_ranked():
    truth = population(12)
    later = {(m, 1) for m in truth}  # every promotion fails
    ev = FakeEvaluator(truth, [0.1, 0.001], [10, 20], fail={"m03"} | later)
    ranking = run_rounds(ev, list(truth), RoundOptions(parse_tiers("1-4,5-9,10-")))
    names = [row["model"] for row in ranking.models]
    assert "m03" not in names and ranking.failures["m03"] == "boom"
    promoted = ev.calls[1][1]
    assert promoted and set(promoted) <= set(ranking.failures)
    assert set(promoted) <= set(names)  # they keep their first-round estimates
    assert len(names) == 11 and len(ev.calls) == 2  # a failed model is not retried


def test_duplicate_models_and_uncovered_tiers_are_errors():
    ev = FakeEvaluator({"a": 0.1, "b": 0.2}, [0.01], [5])
    with pytest.raises(InputError, match="duplicate model names: 'a'"):
        run_rounds(ev, ["a", "b", "a"], RoundOptions(parse_tiers()))
    truth = population(12)
    ev = FakeEvaluator(truth, [0.01], [5])
    with pytest.raises(InputError, match="cover ranks 1-9 but 12 models"):
        run_rounds(ev, list(truth), RoundOptions(parse_tiers("1-4,5-9")))


def test_default_levels_double_to_every_item():
    assert default_levels(100) == (12, 24, 48, 100)
    assert default_levels(102, 12) == (12, 24, 48, 102)
    assert default_levels(10) == (5, 10)


# ---------------------------------------------------------------------------- DIoR
def test_dior_is_the_lower_end_of_the_95_interval_of_the_draws():
    assert dior(np.arange(41) / 40) == pytest.approx(0.025)
    assert dior([0.9, float("nan"), 0.9]) == pytest.approx(0.9)
    assert np.isnan(dior([]))


def test_decision_impact_on_a_hand_checkable_case():
    truth = np.array([4.0, 3.0, 2.0, 1.0])
    same = (truth.copy(), truth)
    swapped = (np.array([3.0, 4.0, 2.0, 1.0]), truth)  # one discordant pair of 6: tau 2/3
    impact = decision_impact([same, swapped], k=1)
    assert impact.tau_mean == pytest.approx((1 + 2 / 3) / 2)
    # 2.5 % quantile of {1, 2/3}, linear: 2/3 + 0.025 * 1/3
    assert impact.tau_dior == pytest.approx(2 / 3 + 0.025 / 3)
    assert impact.top_k_mean == 0.5 and impact.top_k_dior == pytest.approx(0.025)
    assert top_k_agreement(swapped[0], truth, 2) == 1.0


def test_ranking_quality_counts_coverage_and_errors():
    rows = [
        {"model": "a", "estimate": 0.9, "rank_low": 1, "rank_high": 1},
        {"model": "b", "estimate": 0.5, "rank_low": 2, "rank_high": 2},
        {"model": "c", "estimate": 0.6, "rank_low": 2, "rank_high": 2},
    ]
    quality = ranking_quality(rows, {"a": 0.9, "b": 0.6, "c": 0.5}, k=1)
    assert quality["rank_coverage"] == pytest.approx(2 / 3)
    assert quality["top1"] == 1.0
    assert quality["rank_error"]["1-4"] == pytest.approx(2 / 3)


# ---------------------------------------------------------------------------- CLI replay
@pytest.fixture(scope="module")
def matrix_file(tmp_path_factory):
    matrix, _ = simulate_responses(random_item_params(40, seed=1), 160, seed=2)
    path = tmp_path_factory.mktemp("rank") / "m.parquet"
    matrix.to_parquet(path)
    return path


def _check_replay_against_the_matrix(document: dict, matrix_file) -> None:
    """The replay check recomputed from the rows and the matrix: the truth of a replay without
    --scores is each model's mean over the matrix items; a true rank breaks ties in row order."""
    from scipy.stats import kendalltau, rankdata

    from lmeval_microbench.responses import ResponseMatrix

    matrix = ResponseMatrix.read(matrix_file)
    means = dict(zip(matrix.model_ids, np.nanmean(matrix.values, axis=1), strict=True))
    rows = document["ranking"]
    truth = np.array([means[row["model"]] for row in rows])
    estimate = np.array([row["estimate"] for row in rows])
    true_rank = rankdata(-truth, method="ordinal")
    low, high = (np.array([row[k] for row in rows]) for k in ("rank_low", "rank_high"))
    check = document["replay_check"]
    covered = (low <= true_rank) & (true_rank <= high)
    assert check["rank_coverage"] == pytest.approx(np.mean(covered))
    assert check["kendall_tau"] == pytest.approx(kendalltau(estimate, truth).statistic)
    assert check["rank_width"] == pytest.approx(np.mean(high - low + 1))


def test_cli_replay_writes_a_ranking_and_refuses_to_overwrite(matrix_file, tmp_path, capsys):
    out = tmp_path / "rank"
    argv = ["rank", "--responses", str(matrix_file), "--population", "40", "--out", str(out)]
    argv += ["--tiers", "1-4,5-9,10-", "--estimator", "mean", "--no-plots"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    document = json.loads((out / "ranking.json").read_text())
    assert printed["cost"]["items_spent"] == sum(r["items"] for r in document["ranking"])
    assert printed["cost"]["flat_subset_items"] == 40 * 40
    assert len(document["ranking"]) == 40
    assert 0 <= document["replay_check"]["rank_coverage"] <= 1
    _check_replay_against_the_matrix(document, matrix_file)
    assert "| rank | model |" in (out / "ranking.md").read_text()
    assert main(argv) == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0
    assert document["level_caps"] is True
    capsys.readouterr()
    assert main([*argv, "--overwrite", "--no-level-caps"]) == 0
    uncapped = json.loads((out / "ranking.json").read_text())
    assert uncapped["level_caps"] is False
    assert uncapped["cost"]["items_spent"] >= document["cost"]["items_spent"]


def test_cli_needs_exactly_one_mode(matrix_file, capsys):
    argv = ["rank", "--responses", str(matrix_file), "--model_args", "pretrained=x"]
    assert main(argv) == 2
    assert "either --responses" in capsys.readouterr().err


def test_rank_out_naming_a_file_is_refused_before_any_work(tmp_path, capsys):
    from lmeval_microbench.cli.app import main

    afile = tmp_path / "afile"
    afile.write_text("keep me")
    for extra in ((), ("--overwrite",)):
        code = main(["rank", "--responses", str(tmp_path / "none.parquet"), "--out", str(afile),
                     *extra])  # fmt: skip
        assert code == 2
        assert "is a file" in capsys.readouterr().err
    assert afile.read_text() == "keep me"


# ---------------------------------------------------------------------------- small populations
def test_small_populations_and_vacuous_tiers_are_ranked_pairwise():
    """Flash-HELM's first tier (1-4) holds 2-4 models at any rank: it would call them all
    resolved after one round, so 10 models or fewer are placed one rank each."""
    from lmeval_microbench.rank.tiers import SMALL_POPULATION, pairwise_tiers, tiers_for

    for n in (2, 3, SMALL_POPULATION):
        tiers, rule = tiers_for(n)
        assert tiers == pairwise_tiers(n) and rule.startswith("pairwise")
        assert not resolved(tiers, 1, 2) and resolved(tiers, 2, 2)
    assert tiers_for(SMALL_POPULATION + 1)[0] == parse_tiers()  # a leaderboard: Flash-HELM
    assert tiers_for(3, parse_tiers("1-1,2-"))[0] == parse_tiers("1-1,2-")  # meaningful: kept
    assert tiers_for(15, parse_tiers("1-20,21-"))[0] == pairwise_tiers(15)  # vacuous
    assert tiers_for(15, parse_tiers("1-20:2,21-"))[0] == parse_tiers("1-20:2,21-")


def test_three_models_under_default_tiers_climb_until_placed():
    """Close models stay unresolved and climb to every item; the rows say so."""
    truth = {"a": 0.50, "b": 0.56, "c": 0.90}
    ev = FakeEvaluator(truth, [0.02, 0.01, 0.0005], [5, 10, 40])
    ranking = run_rounds(ev, list(truth), RoundOptions(seed=1))
    assert ranking.tier_rule.startswith("pairwise") and len(ev.calls) > 1
    assert ranking.stop_reason == "every model is placed at a single rank"
    assert all(r["rank_low"] == r["rank_high"] for r in ranking.models)
    assert {r["status"] for r in ranking.models} == {"resolved"}
    assert [r["model"] for r in ranking.models] == ["c", "b", "a"]
    stuck = run_rounds(FakeEvaluator(truth, [0.02, 0.01], [5, 10]), list(truth), RoundOptions())
    assert stuck.stop_reason == "unresolved models have used every item"
    open_rows = [r for r in stuck.models if not r["resolved"]]
    assert open_rows and all(r["status"] == "all items" and r["items"] == 10 for r in open_rows)


def _settled(row: dict, last: int) -> bool:
    """A pairwise row is done only at a single rank, or with no next level to give it."""
    return row["rank_low"] == row["rank_high"] or row["items"] == last


@pytest.mark.parametrize("n_models", [2, 3, 10])
def test_cli_replay_ranks_small_populations_pairwise(matrix_file, tmp_path, capsys, n_models):
    out = tmp_path / "rank"
    argv = ["rank", "--responses", str(matrix_file), "--population", str(n_models)]
    argv += ["--estimator", "mean", "--no-plots", "--out", str(out), "--seed", "3"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    document = json.loads((out / "ranking.json").read_text())
    last = document["levels"][-1]
    assert all(_settled(row, last) for row in document["ranking"]), document["ranking"]
    assert document["tiers"] == [f"1-{n_models}"]
    assert printed["tier_rule"].startswith("pairwise")
    for row in document["ranking"]:
        assert row["resolved"] == (row["rank_low"] == row["rank_high"])
        assert row["status"] in ("resolved", "all items")
    assert len(document["rounds"]) > 1  # 5 items never tell every pair apart


def test_replay_agreement_is_printed_and_in_the_markdown(matrix_file, tmp_path, capsys):
    out = tmp_path / "rank"
    argv = ["rank", "--responses", str(matrix_file), "--population", "40", "--out", str(out)]
    argv += ["--estimator", "mean", "--no-plots"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    document = json.loads((out / "ranking.json").read_text())
    assert printed["replay_check"] == document["replay_check"]
    assert printed["stop_reason"] == document["stop_reason"]
    check = document["replay_check"]
    text = (out / "ranking.md").read_text()
    assert "## Replay against the true scores" in text
    assert f"Kendall tau with the true ranking: {check['kendall_tau']:.3f}" in text
    assert f"top-10 agreement: {check['top10']:.3f}" in text
    coverage = f"rank coverage (rank intervals holding the true rank): {check['rank_coverage']:.3f}"
    assert coverage in text


def test_live_rankings_have_no_replay_section():
    from lmeval_microbench.rank.report import markdown

    row = {"model": "a", "rank": 1, "estimate": 0.5, "lower": 0.4, "upper": 0.6, "rank_low": 1,
           "rank_high": 2, "tier": "1-2", "items": 10, "resolved": False,
           "status": "budget"}  # fmt: skip
    document = {"cost": {"models": 2, "items_spent": 20, "flat_subset_items": 40,
                         "full_benchmark_items": None}, "levels": [10, 20], "stop_reason": "x",
                "failures": {}, "ranking": [row], "tier_rule": "pairwise"}  # fmt: skip
    text = markdown(document)
    assert "Replay against" not in text and "no: item budget spent" in text


def test_plot_title_counts_the_models_it_draws(monkeypatch):
    """The CLI titled the plot with every ranked model but drew only the best 60."""
    import argparse
    import re

    from matplotlib.figure import Figure

    from lmeval_microbench.cli.rank import _png

    drawn: list[Figure] = []
    real_savefig = Figure.savefig

    def capture(self, *args, **kwargs):
        drawn.append(self)
        return real_savefig(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", capture)
    for n in (100, 250):
        rows = [{"model": f"m{k}", "rank": k, "rank_low": k, "rank_high": k, "resolved": True}
                for k in range(1, n + 1)]  # fmt: skip
        document = {"cost": {"models": n}, "ranking": rows}
        assert _png(argparse.Namespace(no_plots=False), document)
        ax = drawn[-1].axes[0]
        ticks, title = len(ax.get_yticks()), ax.get_title()
        assert int(re.findall(r"(\d+) (?:of \d+ )?models", title)[0]) == ticks
        assert f"of {n} models" in title if ticks < n else f"({n} models)" in title
    assert "best 200 of 250 models" in drawn[-1].axes[0].get_title()


@pytest.mark.parametrize("n_models", [3, 10])
def test_real_matrix_small_populations_are_ranked_pairwise(shared_data, tmp_path, capsys, n_models):
    """ARC on the leaderboard's models: before, 3 models stopped at 12 of 100 items with
    every interval called resolved, 2-3 ranks wide for most draws."""
    data = shared_data / "openllm_v1"
    out = tmp_path / "rank"
    argv = ["rank", "--responses", str(data / "responses" / "arc_B.parquet"), "--scores",
            str(data / "scores" / "arc_B_scores.csv"), "--score-column", "full_score_metabench",
            "--population", str(n_models), "--max-sources", "600", "--no-plots", "--out",
            str(out), "--seed", "1"]  # fmt: skip
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    document = json.loads((out / "ranking.json").read_text())
    assert all(_settled(row, 100) for row in document["ranking"]), document["ranking"]
    assert printed["replay_check"]["rank_coverage"] >= 0.6
    assert "## Replay against the true scores" in (out / "ranking.md").read_text()
