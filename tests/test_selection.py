import numpy as np
import pytest

from lmeval_microbench.errors import InputError
from lmeval_microbench.irt import IRTModel
from lmeval_microbench.responses import ResponseMatrix
from lmeval_microbench.selection import SELECTORS, make_selector
from lmeval_microbench.selection.anchor_points import medoid_indices
from lmeval_microbench.selection.dpp import greedy_dpp_map
from lmeval_microbench.selection.greedy import candidate_pool, cv_folds, tilted_model_weights
from lmeval_microbench.selection.metabench import round_robin_max_information
from lmeval_microbench.selection.random import allocate_proportionally, source_rates
from lmeval_microbench.synthetic import random_item_params, simulate_responses


@pytest.fixture(scope="module")
def source() -> ResponseMatrix:
    params = random_item_params(120, seed=1)
    matrix, _ = simulate_responses(params, 300, seed=2)
    items = matrix.items.copy()
    items["stratum"] = [f"s{k % 7}" for k in range(matrix.n_items)]
    return ResponseMatrix(matrix.values, matrix.model_ids, matrix.item_ids, items=items)


@pytest.mark.parametrize("name", sorted(SELECTORS))
def test_budget_weights_and_determinism(source, name):
    first = make_selector(name).select(source, 20, seed=7)
    again = make_selector(name).select(source, 20, seed=7)
    assert first.item_ids == again.item_ids
    np.testing.assert_array_equal(first.weights, again.weights)
    assert first.budget == 20
    assert len(set(first.item_ids)) == 20
    assert set(first.item_ids) <= set(source.item_ids)
    assert first.weights.sum() == pytest.approx(1.0)
    assert first.method == name


@pytest.mark.parametrize("name", sorted(SELECTORS))
def test_uses_only_given_rows(source, name):
    """Changing models outside the source rows cannot change the selection."""
    rows = source.model_ids[:200]
    a = make_selector(name).select(source.select_models(rows), 15, seed=3)
    altered = source.values.copy()
    altered[200:] = 1 - altered[200:]
    other = ResponseMatrix(altered, source.model_ids, source.item_ids, items=source.items)
    b = make_selector(name).select(other.select_models(rows), 15, seed=3)
    assert a.item_ids == b.item_ids


@pytest.mark.parametrize("name", sorted(SELECTORS))
def test_budget_errors(source, name):
    with pytest.raises(InputError, match="budget"):
        make_selector(name).select(source, 0)
    with pytest.raises(InputError, match="exceeds"):
        make_selector(name).select(source, source.n_items + 1)


def test_unknown_method_lists_known():
    with pytest.raises(InputError, match="anchor_points"):
        make_selector("nope")


def test_allocate_proportionally_hand_case():
    assert allocate_proportionally(np.array([50, 30, 20]), 10).tolist() == [5, 3, 2]
    assert allocate_proportionally(np.array([1, 1, 98]), 3).tolist() == [0, 0, 3]
    assert allocate_proportionally(np.array([2, 9]), 6).sum() == 6


def test_stratified_weights_are_stratum_shares(source):
    subset = make_selector("stratified").select(source, 14, seed=0)
    strata = source.items.loc[list(subset.item_ids), "stratum"].to_numpy()
    for label in np.unique(strata):
        share = np.mean(source.items["stratum"].to_numpy() == label)
        assert subset.weights[strata == label].sum() == pytest.approx(share)


def test_balanced_takes_one_item_per_difficulty_stratum():
    # 10 items whose source success rates rise with their index: budget 4 cuts them into
    # strata of 2, 3, 2, 3 items (edges 0, 2, 5, 7, 10), one item from each, each weighing
    # its stratum's share
    rates = np.linspace(0.05, 0.95, 10)
    values = (np.arange(40)[:, None] / 40 < rates[None, :]).astype(float)
    source = ResponseMatrix(values, [f"m{k}" for k in range(40)], [f"b.{k}" for k in range(10)])
    strata = [{0, 1}, {2, 3, 4}, {5, 6}, {7, 8, 9}]
    seen = set()
    for seed in range(40):
        subset = make_selector("balanced").select(source, 4, seed=seed)
        picked = [int(item.split(".")[1]) for item in subset.item_ids]
        assert [next(k for k, s in enumerate(strata) if p in s) for p in picked] == [0, 1, 2, 3]
        np.testing.assert_allclose(subset.weights, [0.2, 0.3, 0.2, 0.3])
        seen |= set(picked)
    assert seen == set(range(10))  # every item can be drawn


def test_balanced_mean_is_unbiased_and_closer_than_uniform_items(source):
    # one model's full score: every item enters with probability 1 / its stratum's size and
    # weighs size / N, so the weighted mean's expectation is the full mean; with answers that
    # follow difficulty its spread is smaller than that of uniform random items
    model = source.values[0]
    full = model.mean()
    estimates = {name: [] for name in ("random", "balanced")}
    for seed in range(400):
        for name, found in estimates.items():
            subset = make_selector(name).select(source, 12, seed=seed)
            positions = source.item_positions(subset.item_ids)
            found.append(float(model[positions] @ subset.weights))
    balanced, uniform = np.asarray(estimates["balanced"]), np.asarray(estimates["random"])
    assert abs(balanced.mean() - full) < 3 * balanced.std() / np.sqrt(balanced.size)
    assert np.mean((balanced - full) ** 2) < 0.8 * np.mean((uniform - full) ** 2)


def test_balanced_reads_items_nobody_answered_as_middling():
    values = np.array([[1.0, 0.0, np.nan, 1.0], [1.0, 0.0, np.nan, 0.0]])
    source = ResponseMatrix(values, ["a", "b"], ["b.0", "b.1", "b.2", "b.3"])
    np.testing.assert_allclose(source_rates(source), [1.0, 0.0, 0.5, 0.5])


def test_anchor_points_groups_duplicated_items():
    """Items that are exact copies of each other share one anchor and its weight."""
    rng = np.random.default_rng(0)
    base = (rng.random((200, 4)) < np.array([0.2, 0.4, 0.6, 0.8])).astype(float)
    values = np.repeat(base, [5, 3, 1, 1], axis=1)
    ids = [f"i{k}" for k in range(values.shape[1])]
    matrix = ResponseMatrix(values, [f"m{k}" for k in range(200)], ids)
    subset = make_selector("anchor_points").select(matrix, 4, seed=0)
    assert sorted(np.round(subset.weights * 10).astype(int).tolist()) == [1, 1, 3, 5]
    assert subset.weights @ matrix.select_items(subset.item_ids).values.T == pytest.approx(
        matrix.values.mean(axis=1)
    )


# ------------------------------------------------------------------ the target argument
@pytest.mark.parametrize("name", sorted(SELECTORS))
def test_target_is_checked(source, name):
    with pytest.raises(InputError, match="target has 3 values"):
        make_selector(name).select(source, 5, seed=0, target=np.ones(3) / 2)
    with pytest.raises(InputError, match="percent"):
        make_selector(name).select(source, 5, seed=0, target=source.mean_scores() * 100)


@pytest.mark.parametrize("name", sorted(n for n, cls in SELECTORS.items() if not cls.uses_target))
def test_unsupervised_selectors_ignore_target(source, name):
    plain = make_selector(name).select(source, 10, seed=4)
    other = make_selector(name).select(source, 10, seed=4, target=np.linspace(0, 1, 300))
    assert plain.item_ids == other.item_ids


# ------------------------------------------------------------------ metabench
def test_round_robin_hand_case():
    information = np.array([[5.0, 4.0, 0.0], [5.0, 1.0, 3.0]])
    # grid point 0 takes item 0; point 1 cannot, takes item 2 (3 > 1); point 0 takes item 1
    assert round_robin_max_information(information, 3).tolist() == [0, 2, 1]


def test_metabench_single_quantile_picks_most_informative_items(source):
    subset = make_selector("metabench", n_quantiles=1).select(source, 4, seed=0)
    fit = IRTModel("2pl", 1).fit(source)
    median = np.quantile(fit.abilities_[:, 0], 0.5)
    information = fit.params_.information(np.array([median]))[0]
    expected = [source.item_ids[k] for k in np.argsort(-information)[:4]]
    assert subset.info["pick_order"] == expected
    assert subset.info["ability_grid"] == pytest.approx([median])
    np.testing.assert_allclose(subset.weights, 0.25)


def test_metabench_rejects_bad_options(source):
    with pytest.raises(InputError, match="n_quantiles"):
        make_selector("metabench", n_quantiles=0).select(source, 3)
    with pytest.raises(InputError, match="irt_model"):
        make_selector("metabench", irt_model="5pl").select(source, 3)


# ------------------------------------------------------------------ matrices with copies
def duplicated_items(repeats: list[int], n_models: int = 200, seed: int = 0) -> ResponseMatrix:
    """Distinct random items, item k copied ``repeats[k]`` times (ids ``g{k}_{copy}``)."""
    rng = np.random.default_rng(seed)
    levels = np.linspace(0.2, 0.8, len(repeats))
    ability = rng.normal(size=(n_models, 1))
    base = (rng.random((n_models, len(repeats))) < levels - 0.15 * ability).astype(float)
    values = np.repeat(base, repeats, axis=1)
    ids = [f"g{k}_{c}" for k, r in enumerate(repeats) for c in range(r)]
    return ResponseMatrix(values, [f"m{k}" for k in range(n_models)], ids)


@pytest.mark.parametrize("quality", ["uniform", "discrimination"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dpp_takes_distinct_items_before_copies(seed, quality):
    matrix = duplicated_items([4, 3, 2, 1, 1])
    subset = make_selector("dpp", quality=quality).select(matrix, 5, seed=seed)
    groups = sorted(item.split("_")[0] for item in subset.item_ids)
    assert groups == ["g0", "g1", "g2", "g3", "g4"]
    # every copy is represented by the pick of its own group
    groups_of = [item.split("_")[0] for item in subset.item_ids]
    shares = dict(zip(groups_of, subset.weights, strict=True))
    assert [shares[f"g{k}"] * 11 for k in range(5)] == pytest.approx([4, 3, 2, 1, 1])


def test_greedy_dpp_map_second_pick_maximises_determinant():
    rng = np.random.default_rng(5)
    features = rng.normal(size=(9, 4))
    kernel = features @ features.T + 1e-6 * np.eye(9)
    picked = greedy_dpp_map(features, 3, np.random.default_rng(0))
    assert picked[0] == np.argmax(np.diagonal(kernel))
    for step in (1, 2):
        dets = [
            np.linalg.det(kernel[np.ix_([*picked[:step], c], [*picked[:step], c])])
            if c not in picked[:step]
            else -np.inf
            for c in range(9)
        ]
        assert picked[step] == int(np.argmax(dets))


def test_tinybenchmarks_weights_are_cluster_shares():
    matrix = duplicated_items([5, 3, 1, 1])
    subset = make_selector("tinybenchmarks").select(matrix, 4, seed=0)
    assert sorted(item.split("_")[0] for item in subset.item_ids) == ["g0", "g1", "g2", "g3"]
    assert sorted(np.round(subset.weights * 10).astype(int).tolist()) == [1, 1, 3, 5]


def test_tinybenchmarks_fills_budget_beyond_distinct_items():
    matrix = duplicated_items([5, 3, 1, 1])
    subset = make_selector("tinybenchmarks").select(matrix, 6, seed=0)
    assert subset.budget == 6
    assert {item.split("_")[0] for item in subset.item_ids} == {"g0", "g1", "g2", "g3"}


def test_medoid_of_equally_close_members_is_the_first_row():
    # a two-item cluster's members are equally far from its centre, their midpoint; rounding
    # made the second one closer here, and which one rounding favours differs between CPUs
    points = np.array([[0.1, 0.7], [0.3, 0.9], [5.0, 5.0]])
    labels = np.array([0, 0, 1])
    centres = np.array([points[:2].mean(axis=0), points[2]])
    gaps = np.sum((points[:2] - centres[0]) ** 2, axis=1)
    assert np.argmin(gaps) == 1  # the case the tie rule is for
    assert medoid_indices(points, labels, centres).tolist() == [0, 2]


def test_medoids_do_not_move_with_rounding_noise():
    rng = np.random.default_rng(3)
    base = np.repeat(rng.normal(size=(40, 2)), 2, axis=0)
    base[1::2] += 0.01 * rng.normal(size=(40, 2))  # pairs of near items: 40 two-item clusters
    labels = np.repeat(np.arange(40), 2)
    picks = []
    for noise in (0.0, 1e-15, -1e-15):
        points = base * (1.0 + noise * rng.normal(size=base.shape))
        centres = np.stack([points[labels == j].mean(axis=0) for j in range(40)])
        picks.append(medoid_indices(points, labels, centres).tolist())
    assert picks[0] == picks[1] == picks[2] == list(range(0, 80, 2))


def test_irt_selectors_survive_constant_items(source):
    values = source.values.copy()
    values[:, 0] = 1.0
    values[:, 1] = 0.0
    matrix = ResponseMatrix(values, source.model_ids, source.item_ids)
    for name in ("tinybenchmarks", "metabench", "dpp", "greedy"):
        assert make_selector(name).select(matrix, 30, seed=0).budget == 30
    last = make_selector("metabench").select(matrix, matrix.n_items, seed=0).info["pick_order"]
    assert set(last[-2:]) == {source.item_ids[0], source.item_ids[1]}


# ------------------------------------------------------------------ greedy
def brute_force_cv_error(
    x: np.ndarray,
    y: np.ndarray,
    folds: np.ndarray,
    columns: list[int],
    alpha: float,
    weights: np.ndarray,
) -> float:
    """Weighted K-fold MAE of an explicit weighted ridge fit (intercept unpenalised)."""
    total = 0.0
    for fold in np.unique(folds):
        held = folds == fold
        w = weights[~held]
        xt, yt = x[~held][:, columns], y[~held]
        x_mean, y_mean = w @ xt / w.sum(), w @ yt / w.sum()
        xc = (xt - x_mean) * np.sqrt(w)[:, None]
        yc = (yt - y_mean) * np.sqrt(w)
        coef = np.linalg.solve(xc.T @ xc + alpha * w.sum() * np.eye(len(columns)), xc.T @ yc)
        prediction = y_mean + (x[held][:, columns] - x_mean) @ coef
        total += float(weights[held] @ np.abs(y[held] - prediction))
    return total / weights.sum()


@pytest.mark.parametrize("strong_tilt", [0.0, 1.0])
def test_greedy_path_matches_brute_force(strong_tilt):
    rng = np.random.default_rng(11)
    n_models, n_items = 150, 12
    values = (rng.random((n_models, n_items)) < rng.uniform(0.2, 0.8, n_items)).astype(float)
    target = np.clip(values[:, [2, 5, 7]] @ [0.3, 0.2, 0.1] + rng.normal(0, 0.05, n_models), 0, 1)
    item_ids = [f"i{k}" for k in range(n_items)]
    matrix = ResponseMatrix(values, [f"m{k}" for k in range(n_models)], item_ids)
    alpha = 0.01
    subset = make_selector("greedy", alpha=alpha, strong_tilt=strong_tilt).select(
        matrix, 3, seed=9, target=target
    )
    generator = np.random.default_rng(9)
    candidate_pool(n_items, 1000, generator)  # the selector draws the pool first, then folds
    folds = cv_folds(n_models, 5, generator)
    weights = tilted_model_weights(target, strong_tilt)
    chosen: list[int] = []
    for step in range(3):
        errors = [
            brute_force_cv_error(values, target, folds, [*chosen, c], alpha, weights)
            if c not in chosen
            else np.inf
            for c in range(n_items)
        ]
        best = int(np.argmin(errors))
        assert subset.info["pick_order"][step] == f"i{best}"
        assert subset.info["cv_error"][step] == pytest.approx(errors[best], rel=1e-9)
        chosen.append(best)


def test_greedy_first_pick_is_the_item_that_is_the_target(source):
    target = np.clip(source.values[:, 17] * 0.6 + 0.2, 0, 1)
    subset = make_selector("greedy").select(source, 5, seed=0, target=target)
    assert subset.info["pick_order"][0] == source.item_ids[17]
    # ridge shrinks the one coefficient a little, but the error is a small part of the spread
    assert subset.info["cv_error"][0] < 0.1 * np.mean(np.abs(target - target.mean()))


def test_greedy_candidate_pool_bounds_the_choice(source):
    subset = make_selector("greedy", max_candidates=40).select(source, 10, seed=1)
    assert subset.info["n_candidates"] == 40
    with pytest.raises(InputError, match="max_candidates"):
        make_selector("greedy", max_candidates=5).select(source, 10)
    with pytest.raises(InputError, match="loss"):
        make_selector("greedy", loss="mape").select(source, 3)


def test_kmeans_distances_match_the_definition_without_changing_the_input():
    """k-means' squared distances are computed in place on the product: they must still be
    each row's squared distance to each centre, never negative, and leave the rows as given."""
    from lmeval_microbench.selection.anchor_points import _squared_distances

    rng = np.random.default_rng(4)
    points = rng.standard_normal((6, 30)).T  # a transposed view, as the item profiles are
    centres = np.vstack([points[:3], rng.standard_normal((2, 6))])
    kept = points.copy()
    found = _squared_distances(points, centres)
    expected = ((points[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    np.testing.assert_allclose(found, expected, atol=1e-9)
    assert (found >= 0).all() and np.array_equal(points, kept)


def test_kmeans_cluster_means_match_a_loop_over_members():
    """The centre update is one sparse product: it must be each cluster's mean, and leave an
    empty cluster empty (size 0) for k-means to reseed."""
    from lmeval_microbench.selection.anchor_points import _cluster_means, kmeans

    rng = np.random.default_rng(3)
    points = rng.standard_normal((40, 6))
    labels = rng.integers(0, 4, size=40)
    labels[labels == 2] = 1  # cluster 2 empty
    means, sizes = _cluster_means(points, labels, 5)
    assert sizes.tolist() == [int((labels == j).sum()) for j in range(5)]
    for j in (0, 1, 3):
        np.testing.assert_allclose(means[j], points[labels == j].mean(axis=0), rtol=1e-12)
    assert not means[2].any() and not means[4].any()
    # k-means sums a C-contiguous copy of the transposed item profiles: the same sums, bit for bit
    view = np.ascontiguousarray(points.T).T
    np.testing.assert_array_equal(_cluster_means(view, labels, 5)[0], means)
    found, centres = kmeans(points, 4, np.random.default_rng(0))
    for j in range(4):  # a fixed point of Lloyd's step: every centre its members' mean
        np.testing.assert_allclose(centres[j], points[found == j].mean(axis=0), rtol=1e-12)
