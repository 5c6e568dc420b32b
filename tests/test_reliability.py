import math

import numpy as np
import pytest

from lmeval_microbench import reliability
from lmeval_microbench.errors import InputError
from lmeval_microbench.estimators import ESTIMATORS
from lmeval_microbench.estimators.mean import MeanEstimator
from lmeval_microbench.reliability import (
    extrapolation_splits,
    gap_agreement_counts,
    holdout_splits,
    interval_coverage,
    json_ready,
    kendall_tau,
    loo_splits,
    markdown_report,
    mdad,
    mdad_from_counts,
    parse_budgets,
    pooled_mdad,
    random_splits,
    run_reliability,
)
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import SELECTORS
from lmeval_microbench.selection.random import RandomSelector
from lmeval_microbench.synthetic import random_item_params, simulate_responses

# four models, true scores in points; pair gaps: 1, 2.5, 4, 1.5, 3, 1.5
TRUTH4 = np.array([10.0, 11.0, 12.5, 14.0])


@pytest.fixture(scope="module")
def synthetic():
    params = random_item_params(40, seed=11)
    matrix, _ = simulate_responses(params, 150, seed=12)
    return matrix, matrix.mean_scores()


# ---------------------------------------------------------------------- MDAD
def test_pair_counts_by_gap_bin():
    pairs, agreeing = gap_agreement_counts(TRUTH4, TRUTH4, bin_width=0.5)
    expected = np.zeros(9, dtype=int)
    expected[[2, 3, 5, 6, 8]] = [1, 2, 1, 1, 1]  # gaps 1 | 1.5, 1.5 | 2.5 | 3 | 4
    np.testing.assert_array_equal(pairs, expected)
    np.testing.assert_array_equal(agreeing, expected)


def test_mdad_perfect_estimates_is_the_smallest_gap_bin():
    assert mdad(TRUTH4, TRUTH4, min_pairs=1) == 1.0
    assert mdad(TRUTH4 * 2 + 3, TRUTH4, min_pairs=1) == 1.0  # only the order matters


def test_mdad_one_swapped_pair_moves_it_above_that_gap():
    swapped = np.array([11.0, 10.0, 12.5, 14.0])  # wrong on the 1-point pair only
    assert mdad(swapped, TRUTH4, min_pairs=1) == 1.5


def test_mdad_merges_sparse_bins_upward():
    swapped = np.array([11.0, 10.0, 12.5, 14.0])
    # min_pairs=2: {1, 1.5, 1.5} from 1.0 (2/3 agree), {2.5, 3} from 2.5 plus the lone 4 (all
    # agree) -> the 1.0 group fails, MDAD is the next group's lower edge
    assert mdad(swapped, TRUTH4, min_pairs=2) == 2.5
    # a threshold of 2/3 lets the first group pass
    assert mdad(swapped, TRUTH4, min_pairs=2, threshold=2 / 3) == 1.0


def test_mdad_sparse_tail_joins_the_group_below():
    pairs = np.array([0, 0, 5, 0, 1])  # 5 pairs at gap 1.0, one lone pair at gap 2.0
    # the lone pair neither counts alone (0/1 would fail) nor is dropped (4/5 would pass)
    assert mdad_from_counts(pairs, np.array([0, 0, 5, 0, 0]), min_pairs=2) == 1.0
    assert mdad_from_counts(pairs, np.array([0, 0, 4, 0, 0]), min_pairs=2) == math.inf


def test_mdad_reversed_is_never_and_too_few_pairs_is_nan():
    assert mdad(-TRUTH4, TRUTH4, min_pairs=1) == math.inf
    assert math.isnan(mdad(TRUTH4, TRUTH4))  # 6 pairs < the default 10


def test_mdad_ties_disagree_and_zero_gaps_are_left_out():
    tied = np.array([10.0, 10.0, 12.5, 14.0])
    assert mdad(tied, TRUTH4, min_pairs=1) == 1.5
    truth = np.array([10.0, 10.0, 12.0, 14.0])
    estimate = np.array([12.0, 10.0, 13.0, 14.0])  # the equal-truth pair is ordered anyhow
    pairs, _ = gap_agreement_counts(estimate, truth)
    assert pairs.sum() == 5
    assert mdad(estimate, truth, min_pairs=1) == 2.0  # (10 vs 12) gap 2 is right


def test_pooled_mdad_forms_pairs_within_groups_only():
    groups = [
        (np.array([10.0, 11.0]), np.array([10.0, 11.0])),
        (np.array([0.0, 1.0]), np.array([10.5, 11.5])),  # other subset, other level: fine
    ]
    assert pooled_mdad(groups, min_pairs=1) == 1.0
    merged = (np.concatenate([g[0] for g in groups]), np.concatenate([g[1] for g in groups]))
    assert mdad(*merged, min_pairs=1) == math.inf  # cross-group pairs would be compared


def test_pair_counts_match_a_direct_enumeration_across_blocks():
    rng = np.random.default_rng(0)
    truth = np.round(rng.uniform(0, 100, 1100), 1)
    estimate = truth + rng.normal(0, 5, truth.size)
    pairs, agreeing = gap_agreement_counts(estimate, truth)
    i, j = np.triu_indices(truth.size, k=1)
    gap = np.abs(truth[i] - truth[j])
    keep = gap > 1e-9
    bins = np.floor(gap[keep] / 0.5 + 1e-9).astype(int)
    agree = np.sign(estimate[i] - estimate[j]) == np.sign(truth[i] - truth[j])
    np.testing.assert_array_equal(pairs, np.bincount(bins))
    np.testing.assert_array_equal(agreeing, np.bincount(bins, weights=agree[keep]))


# ---------------------------------------------------------------------- tau and coverage
def test_kendall_tau_hand_case():
    # pairs: 5 concordant, 1 discordant -> (5 - 1) / 6
    assert kendall_tau(np.array([1, 2, 3, 4]), np.array([1, 3, 2, 4])) == pytest.approx(4 / 6)
    assert math.isnan(kendall_tau(np.array([1.0, 1.0]), np.array([1.0, 2.0])))
    assert math.isnan(kendall_tau(np.array([1.0]), np.array([1.0])))


def test_interval_coverage_hand_case():
    truth = np.array([0.5, 0.6, 0.7])
    lower = np.array([0.4, 0.65, 0.7])
    upper = np.array([0.6, 0.7, 0.8])
    assert interval_coverage(truth, lower, upper) == pytest.approx(2 / 3)  # ends count as in


# ---------------------------------------------------------------------- splits
def test_random_splits_partition_and_reproduce(synthetic):
    matrix, truth = synthetic
    splits = list(random_splits(matrix, truth, repeats=3, seed=5))
    again = list(random_splits(matrix, truth, repeats=3, seed=5))
    for split, same in zip(splits, again, strict=True):
        assert split.target.n_models == 30 and split.source.n_models == 120
        assert not set(split.source.model_ids) & set(split.target.model_ids)
        assert split.target.model_ids == same.target.model_ids
        rows = matrix.model_positions(split.target.model_ids)
        np.testing.assert_array_equal(split.target_truth, truth[rows])
    assert splits[0].target.model_ids != splits[1].target.model_ids


def test_extrapolation_targets_are_exactly_the_top_fifth(synthetic):
    matrix, truth = synthetic
    splits = list(extrapolation_splits(matrix, truth, repeats=3, seed=0))
    cutoff = np.sort(truth)[::-1][29]
    for split in splits:
        assert split.target.n_models == 30
        assert split.target_truth.min() >= split.source_truth.max()
        assert split.target_truth.min() == cutoff
        assert split.key == "extrapolation"
    assert splits[0].target.model_ids == splits[2].target.model_ids
    assert len({s.selection_seed for s in splits}) == 3
    assert len({s.irt_seed for s in splits}) == 1


def test_weakest_targets_are_exactly_the_bottom_fifth(synthetic):
    from lmeval_microbench.reliability import weakest_splits

    matrix, truth = synthetic
    splits = list(weakest_splits(matrix, truth, repeats=2, seed=0))
    cutoff = np.sort(truth)[29]
    for split in splits:
        assert split.target.n_models == 30 and split.protocol == "weak"
        assert split.target_truth.max() <= split.source_truth.min()
        assert split.target_truth.max() == cutoff
    assert splits[0].target.model_ids == splits[1].target.model_ids
    assert splits[0].selection_seed != splits[1].selection_seed


def test_holdout_split_uses_every_main_model_as_source(synthetic):
    matrix, truth = synthetic
    main = matrix.select_models(matrix.model_ids[:100])
    held = matrix.select_models(matrix.model_ids[100:])
    [split] = holdout_splits(main, truth[:100], held, truth[100:], repeats=1, seed=0)
    assert split.source.model_ids == main.model_ids
    assert split.target.model_ids == held.model_ids
    with pytest.raises(InputError, match="also source models"):
        list(holdout_splits(main, truth[:100], main, truth[:100], repeats=1, seed=0))
    short = held.drop_items([held.item_ids[3]])
    with pytest.raises(InputError, match=held.item_ids[3]):
        list(holdout_splits(main, truth[:100], short, truth[100:], repeats=1, seed=0))


def test_loo_leaves_out_each_model_once_per_repeat(synthetic):
    matrix, truth = synthetic
    small = matrix.select_models(matrix.model_ids[:25])
    splits = list(loo_splits(small, truth[:25], repeats=2, seed=0))
    assert len(splits) == 50
    for split in splits:
        [target] = split.target.model_ids
        assert target not in split.source.model_ids and split.source.n_models == 24
    targets = [s.target.model_ids[0] for s in splits if s.repeat == 1]
    assert sorted(targets) == sorted(small.model_ids)


# ---------------------------------------------------------------------- budgets and checks
def test_parse_budgets():
    assert parse_budgets("10, all,25,10") == (10, "all", 25)
    for bad in ("ten", "0", "5,,6"):
        with pytest.raises(InputError):
            parse_budgets(bad)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"budgets": [41]}, "budget 41 exceeds the 40 items"),
        ({"methods": ["nope"]}, "unknown selection method 'nope'"),
        ({"estimators": ["nope"]}, "unknown estimator 'nope'"),
        ({"protocols": ["sideways"]}, "unknown protocol 'sideways'"),
        ({"protocols": ["holdout"]}, "needs a holdout matrix"),
    ],
)
def test_bad_plans_fail_before_any_work(synthetic, kwargs, message):
    matrix, truth = synthetic
    options = {"methods": ["random"], "estimators": ["mean"], "budgets": [5]} | kwargs
    with pytest.raises(InputError, match=message):
        run_reliability(matrix, truth, progress=False, **options)


def test_too_few_source_models_is_an_error(synthetic):
    matrix, truth = synthetic
    from lmeval_microbench.estimators._fitting import MIN_SOURCE_MODELS

    n = MIN_SOURCE_MODELS  # leave-one-out leaves one source model too few
    small = matrix.select_models(matrix.model_ids[:n])
    with pytest.raises(InputError, match=f"{n - 1} source models"):
        run_reliability(small, truth[:n], estimators=["mean"], budgets=[5], progress=False)


# ---------------------------------------------------------------------- end to end
def test_all_items_with_row_mean_truth_is_exact(synthetic):
    matrix, truth = synthetic
    result = run_reliability(
        matrix,
        truth,
        methods=["random"],
        estimators=["mean"],
        budgets=[8, "all"],
        protocols=["random"],
        repeats=2,
        progress=False,
    )
    by_budget = {r["budget"]: r for r in result.records}
    assert set(by_budget) == {8, "all"}
    full = by_budget["all"]
    assert full["method"] == "all" and full["items"] == 40
    assert full["mae"] < 1e-6 and full["kendall_tau"] == pytest.approx(1.0)
    # the smallest non-zero gap of two 40-item means is 100/40 = 2.5 points, all ordered right
    assert full["mdad"] == 2.5
    assert by_budget[8]["mae"] > 1.0 and by_budget[8]["kendall_tau"] < 1.0
    assert by_budget[8]["repeats"] == 2 and by_budget[8]["n_targets"] == 30


def test_loo_is_the_default_for_small_matrices(synthetic):
    matrix, truth = synthetic
    small = matrix.select_models(matrix.model_ids[:25])
    result = run_reliability(
        small, truth[:25], methods=["random"], estimators=["mean"], budgets=[10], progress=False
    )
    assert result.info["protocols"] == ["loo"]
    [record] = result.records
    assert record["protocol"] == "loo" and record["n_sources"] == 24
    assert record["n_targets"] == 25 and record["repeats"] == 5
    assert -1.0 <= record["kendall_tau"] <= 1.0


class SpySelector(RandomSelector):
    """Random items; records what it was shown."""

    name = "spy"
    seen: list = []  # noqa: RUF012 - a test log shared by the instances of one test

    def select(self, source, budget, *, seed=None, target=None):
        subset = super().select(source, budget, seed=seed)
        SpySelector.seen.append(
            (source.model_ids, source.fingerprint(), subset.item_ids, np.asarray(target))
        )
        return subset


class SpyEstimator(MeanEstimator):
    name = "spy_mean"
    seen: list = []  # noqa: RUF012

    def fit(self, source, subset, target, *, irt=None):
        SpyEstimator.seen.append((source.model_ids, source.fingerprint()))
        return super().fit(source, subset, target, irt=irt)


def test_only_source_models_reach_selection_and_fits(synthetic, monkeypatch):
    matrix, truth = synthetic
    monkeypatch.setitem(SELECTORS, "spy", SpySelector)
    monkeypatch.setitem(ESTIMATORS, "spy_mean", SpyEstimator)
    fitted: list = []
    real_fit = reliability.evaluate.fit_source_irt

    def spy_fit(source, **kwargs):
        fitted.append(source.fingerprint())
        return real_fit(source, **kwargs)

    monkeypatch.setattr(reliability.evaluate, "fit_source_irt", spy_fit)

    def run(values):
        SpySelector.seen, SpyEstimator.seen = [], []
        changed = ResponseMatrix(values, matrix.model_ids, matrix.item_ids, source="spy")
        result = run_reliability(
            changed,
            truth,
            methods=["spy"],
            estimators=["spy_mean", "irt"],
            budgets=[6],
            protocols=["extrapolation"],
            repeats=2,
            progress=False,
        )
        return list(SpySelector.seen), list(SpyEstimator.seen), result

    selected, estimated, first = run(matrix.values)
    targets = set(matrix.model_ids[k] for k in np.argsort(-truth, kind="stable")[:30])
    flipped = matrix.values.copy()
    rows = matrix.model_positions(sorted(targets))
    flipped[rows] = 1.0 - flipped[rows]
    selected_again, estimated_again, second = run(flipped)

    assert len(selected) == 2 and len(fitted) == 2  # one IRT fit per source set
    assert fitted[0] == fitted[1]
    for (ids, fingerprint, items, target), again in zip(selected, selected_again, strict=True):
        assert not set(ids) & targets
        assert (fingerprint, items) == again[1:3]
        np.testing.assert_array_equal(target, truth[matrix.model_positions(ids)])
    assert [fp for _, fp in estimated] == [fp for _, fp in estimated_again]
    assert all(not set(ids) & targets for ids, _ in estimated)
    # the targets' answers did change, and so did their estimates
    assert first.records[0]["mae"] != second.records[0]["mae"]


def test_reports_are_strict_json_and_markdown(synthetic):
    matrix, truth = synthetic
    result = run_reliability(
        matrix,
        truth,
        methods=["random"],
        estimators=["mean"],
        budgets=[3],
        protocols=["extrapolation"],
        repeats=1,
        progress=False,
    )
    record = dict(result.records[0], mdad=math.inf, kendall_tau=math.nan)
    [safe] = json_ready([record])
    assert safe["mdad"] is None and safe["kendall_tau"] is None and safe["mae"] == record["mae"]
    text = markdown_report(result, truth_note="row mean")
    assert "## extrapolation: 120 source models per split, 30 target models per repeat" in text
    assert "| random | mean | 3 |" in text


def test_rows_without_intervals_have_no_coverage_by_thirds() -> None:
    """Baseline rows (NaN bounds) give NaN per third, not a coverage of 0."""
    truth = np.linspace(0.0, 1.0, 9)
    nan = np.full(9, np.nan)
    thirds = reliability.coverage_by_thirds(truth, truth, nan, nan)
    assert all(np.isnan(v) for v in thirds.values())
    assert set(reliability.coverage_by_thirds(truth, truth, truth, truth)) == set(
        reliability.THIRD_FIELDS
    )


def test_no_repeats_given_means_one_loo_cycle(synthetic):
    """The CLI's default: one leave-one-out cycle (issue 13: five took over an hour)."""
    matrix, truth = synthetic
    small = matrix.select_models(matrix.model_ids[:25])
    result = run_reliability(
        small,
        truth[:25],
        methods=["random"],
        estimators=["mean"],
        budgets=[10],
        repeats=None,
        progress=False,
    )
    [record] = result.records
    assert result.info["repeats"] == 1
    assert record["repeats"] == 1 and record["n_targets"] == 25
    assert reliability.default_repeats(("random", "extrapolation")) == 5


def test_summaries_carry_dior_beside_mdad():
    """Perfect rankings in every repeat: DIoR 1; one reversed repeat drags the lower bound down."""
    from lmeval_microbench.reliability.metrics import decision_metrics

    truth = np.linspace(0.2, 0.8, 30)
    bounds = (truth - 0.01, truth + 0.01)
    perfect = [(truth, truth + 0.001, *bounds) for _ in range(5)]
    assert decision_metrics(perfect) == {"tau_dior": 1.0, "top10": 1.0, "top10_dior": 1.0}
    mixed = decision_metrics([*perfect[:4], (truth, truth[::-1], *bounds)])
    assert mixed["tau_dior"] < 0  # the reversed draw is in the 2.5 % tail of five
    assert mixed["top10"] == pytest.approx(0.8)
