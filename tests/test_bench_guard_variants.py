"""tools/bench_guard_variants.py: alternatives to the guard's rule, on the guard's own parts."""

from __future__ import annotations

import numpy as np
import pytest
from tools_support import tools_module

from lmeval_microbench.outside.guard import GuardBand


def _parts(**changes):
    """Guard parts of three models above a source range of [0.40, 0.50] (whole benchmark)."""
    parts = {
        "key": "m/all/random/50/0",
        "recipe": "balanced+guarded",
        "truth": np.array([0.45, 0.60, 0.70]),
        "inner": (
            np.array([0.45, 0.48, 0.49]),
            np.array([0.42, 0.45, 0.46]),
            np.array([0.48, 0.51, 0.52]),
        ),
        "reading": (np.array([0.46, 0.58, 0.72]), np.array([0.05, 0.05, 0.01])),
        "located": (np.array([0.46, 0.58, 0.72]), np.array([0.05, 0.05, 0.01])),
        "located_deshrunk": (np.array([0.45, 0.60, 0.72]), np.array([0.01, 0.01, 0.01])),
        "located_checked": (np.array([0.46, 0.58, 0.72]), np.array([0.05, 0.05, 0.01])),
        "band": (np.array([0.36, 0.48, 0.70]), np.array([0.56, 0.68, 0.74])),
        "top": 0.50,
        "bottom": 0.40,
        "guard_above": True,
        "floor": 0.0,
        "reach": None,
        # the band above is the reading +- 2 se: fold errors of 2 standard errors
        "guard_band": GuardBand(np.full(40, 2.0), np.full(40, 2.0)),
        "below": np.zeros(3, bool),
        "above_by": np.array([0.0, 0.08, 0.22]),
        # every upward fold target covered with half its interval's side to spare
        "fold_misses": np.full(20, 0.5),
        "fold_reach": 0.1,
    }
    parts.update(changes)
    parts["shipped"] = tools_module("bench_guard_variants").as_shipped(parts)
    return parts


def test_variants_recombine_the_guard_and_differ_where_they_should():
    tool = tools_module("bench_guard_variants")
    parts = _parts()
    shipped = tool.as_shipped(parts)
    # the far model (reading 0.72 +- 0.01) is outside for sure: estimate = reading, interval spans
    assert shipped[0][2] == pytest.approx(0.72) and shipped[1][2] == pytest.approx(0.46)
    # a model whose reading agrees with the inner estimate within their noise is not moved
    consistent = tool.consistent(parts)
    assert consistent[0][0] == pytest.approx(0.45) and shipped[0][0] > 0.45
    # one that disagrees far beyond it moves nearly all the way
    assert consistent[0][2] == pytest.approx(0.72, abs=0.005)
    # with the reading's band alone, the far model's interval loses the inner side
    alone = tool.band_alone(0.99)(parts)
    assert alone[1][2] == pytest.approx(0.70) and shipped[1][2] < 0.70
    # even prior odds count a model just inside the narrow range as less likely outside
    assert tool.even_prior(parts)[0][0] < shipped[0][0]
    # placed by the precise de-shrunk reading, the model in the middle of the range stays put,
    # and the one beyond moves as before
    deshrunk = tool.located_by("located_deshrunk")(parts)
    assert deshrunk[0][0] == pytest.approx(0.45) and deshrunk[0][2] == pytest.approx(0.72)
    # a move made whole at w = 0.5 reads the model placed beyond (w = 0.95) by the reading
    # alone, where the shipped move keeps a twentieth of the inner estimate, and moves the
    # one inside (w = 0.33) further than the shipped one
    steep = tool.steep(0.5)(parts)
    assert steep[0][1] == pytest.approx(0.58) and shipped[0][1] < 0.58
    assert steep[0][0] > shipped[0][0] > 0.45
    scored = tool.score_cell(parts)
    assert set(scored) == {"key", "recipe", "fold_targets", *tool.VARIANTS}
    assert scored["as shipped"]["coverage"] == pytest.approx(1.0)
    rows = tool.summary([scored])
    assert {r["variant"] for r in rows} == set(tool.VARIANTS)
    assert "| every cell | as shipped | 1 |" in tool.render(
        rows, {"command": "c", "seconds": 1, "load": [0, 0]}
    )


def test_below_variants_keep_the_move_above_and_the_interval_and_drop_it_below():
    tool = tools_module("bench_guard_variants")
    # a source range of [0.40, 0.50]: the first model read clearly below it (0.30 +- 0.01),
    # the second just under its weakest source (0.38 +- 0.05: below with probability 0.66),
    # the third far above (0.72 +- 0.01)
    located = (np.array([0.30, 0.38, 0.72]), np.array([0.01, 0.05, 0.01]))
    band = (located[0] - 2 * located[1], located[0] + 2 * located[1])  # the reading +- 2 se
    parts = _parts(reading=located, located=located, band=band, below=np.array([True, True, False]))
    shipped = tool.as_shipped(parts)
    never = tool.below_moves_only(False)(parts)
    clearly = tool.below_moves_only(True)(parts)
    inner = parts["inner"][0]
    # shipped: both models below move towards their readings
    assert shipped[0][0] == pytest.approx(0.30) and shipped[0][1] < inner[1]
    # never: neither moves; only the clearly placed one moves, all the way
    assert never[0][:2] == pytest.approx(inner[:2])
    assert clearly[0][0] == pytest.approx(0.30) and clearly[0][1] == pytest.approx(inner[1])
    # the model above moves as shipped, and every interval is the shipped one
    assert never[0][2] == pytest.approx(shipped[0][2]) == pytest.approx(clearly[0][2])
    for variant in (never, clearly):
        assert np.allclose(variant[1], shipped[1]) and np.allclose(variant[2], shipped[2])
    # by even prior odds, the model just under a narrow range (10 points) is below with
    # probability 0.18, not 0.66: it moves an eighth of the way instead of two thirds
    even = tool.even_prior_below(parts)
    share = (even[0][1] - inner[1]) / (located[0][1] - inner[1])
    assert share == pytest.approx((0.178 - 0.05) / 0.95, abs=0.01)
    assert even[0][2] == pytest.approx(shipped[0][2]) and np.allclose(even[1:], shipped[1:])
    # where the target is not the matrix mean the guard's own split of sides stays
    other = _parts(reading=located, located=located, band=band, guard_above=False)
    assert np.allclose(tool.below_moves_only(False)(other), tool.as_shipped(other))


def test_the_recombination_reaches_the_own_readings_spread_above_the_sources():
    tool = tools_module("bench_guard_variants")
    own = (np.array([0.47, 0.60, 0.90]), np.array([0.05, 0.05, 0.01]))
    parts = _parts(reach=own)
    # the third model's own reading lies far above: its upper edge reaches 0.90 + 1.645 * 0.01
    assert tool.as_shipped(parts)[2][2] == pytest.approx(0.90 + 1.645 * 0.01, abs=1e-3)
    assert tool.as_shipped(_parts())[2][2] < 0.8


def test_the_recombination_reaches_the_own_readings_spread_below_the_sources():
    tool = tools_module("bench_guard_variants")
    # the first model's own reading lies wholly under the weakest source (0.40): its lower
    # edge reaches 0.10 - 1.645 * 0.01, as the guard's does (outside.guard.reached_below)
    own = (np.array([0.10, 0.60, 0.90]), np.array([0.01, 0.05, 0.01]))
    lower = tool.as_shipped(_parts(reach=own))[1]
    assert lower[0] == pytest.approx(0.10 - 1.645 * 0.01, abs=1e-3)
    assert np.allclose(lower[1:], tool.as_shipped(_parts())[1][1:])


def test_reach_variants_drop_the_reach_where_the_guard_acted_or_everywhere():
    tool = tools_module("bench_guard_variants")
    parts = _parts(
        reach=(np.array([0.47, 0.60, 0.90]), np.array([0.05, 0.05, 0.01])),
        located=(np.array([0.45, 0.58, 0.72]), np.array([0.005, 0.05, 0.01])),
    )
    shipped = tool.as_shipped(parts)
    # the third model is placed beyond (w near 1): the band spans it, the reach is dropped
    assert tool.reach_inside(parts)[2][2] == pytest.approx(0.74)
    assert tool.no_reach(parts)[2][2] == pytest.approx(0.74)
    assert shipped[2][2] == pytest.approx(0.90 + 1.645 * 0.01, abs=1e-3)
    # the first lies inside (w <= W_MIN) and its own reading's spread crosses the top: only
    # the variant without any reach drops it
    assert tool.shipped_weight(parts)[0] <= tool.W_MIN
    assert shipped[2][0] == pytest.approx(0.47 + 1.645 * 0.05, abs=1e-3)
    assert tool.reach_inside(parts)[2][0] == pytest.approx(shipped[2][0])
    assert tool.no_reach(parts)[2][0] == pytest.approx(0.48)


def test_least_quantile_above_moves_only_bands_that_the_floor_sized():
    tool = tools_module("bench_guard_variants")
    value, se = np.array([0.46, 0.58, 0.72]), np.array([0.05, 0.05, 0.01])
    exact = GuardBand(np.zeros(40), np.zeros(40))  # the reading was exact on every fold
    parts = _parts(guard_band=exact, band=(value - 0.5 * se, value + 0.5 * se))
    shipped = tool.as_shipped(parts)
    # the far model's upper edge is its band's: half a standard error above the reading as
    # shipped, a whole one with the old floor, none without a floor
    assert shipped[2][2] == pytest.approx(0.725)
    assert tool.least_quantile_above(1.0)(parts)[2][2] == pytest.approx(0.73)
    assert tool.least_quantile_above(0.0)(parts)[2][2] == pytest.approx(0.72)
    assert np.allclose(tool.least_quantile_above(0.5)(parts), shipped)
    # a band sized by its folds above the floor, or below the sources, stays
    assert np.allclose(tool.least_quantile_above(1.0)(_parts()), tool.as_shipped(_parts()))
    below = _parts(guard_band=exact, below=np.ones(3, bool))
    assert np.allclose(tool.least_quantile_above(0.0)(below), tool.as_shipped(below))


def test_side_misses_measure_the_truth_in_units_of_the_interval_side_towards_it():
    tool = tools_module("bench_guard_variants")
    interval = (np.array([0.5, 0.5, 0.5]), np.array([0.4, 0.4, 0.4]), np.array([0.7, 0.7, 0.7]))
    missed = tool.side_misses(interval, np.array([0.6, 0.35, 0.5]))
    assert missed == pytest.approx([0.5, 1.5, 0.0])


def test_fold_calibrated_intervals_shrink_only_where_the_guard_acted_above():
    tool = tools_module("bench_guard_variants")
    parts = _parts()
    value, lower, upper = tool.as_shipped(parts)
    acted = tool.shipped_weight(parts) > tool.W_MIN
    assert acted.all()  # all three lie possibly above the sources' [0.40, 0.50]
    shrunk = tool.fold_calibrated()(parts)
    # the folds' 90 % quantile of misses is 0.5: each acted-on interval half as wide
    assert np.allclose(shrunk[0], value)
    assert np.allclose((shrunk[2] - shrunk[1])[acted], 0.5 * (upper - lower)[acted])
    # fold misses beyond 1 never widen the shrunk variant; too few fold targets keep it shipped
    assert np.allclose(
        tool.fold_calibrated()(_parts(fold_misses=np.full(20, 3.0))), (value, lower, upper)
    )
    assert np.allclose(
        tool.fold_calibrated()(_parts(fold_misses=np.full(5, 0.5))), (value, lower, upper)
    )
    # the largest miss, not the 90 % quantile
    misses = np.sort(np.r_[np.full(19, 0.5), 0.8])
    largest = tool.fold_calibrated(level=1.0)(_parts(fold_misses=misses))
    assert np.allclose((largest[2] - largest[1])[acted], 0.8 * (upper - lower)[acted])
    # within the folds' reach only: the far model (0.22 above the sources) keeps its interval
    near = tool.fold_calibrated(within_reach=True)(parts)
    assert near[1][2] == pytest.approx(lower[2]) and near[2][2] == pytest.approx(upper[2])
    assert near[2][1] - near[1][1] == pytest.approx(0.5 * (upper[1] - lower[1]))
    # below the sources nothing shrinks
    below = _parts(below=np.ones(3, bool))
    assert np.allclose(tool.fold_calibrated()(below), tool.as_shipped(below))


def test_a_recombination_that_differs_from_the_estimator_is_refused():
    tool = tools_module("bench_guard_variants")
    parts = _parts()
    parts["shipped"] = tuple(np.asarray(a) + 0.01 for a in parts["shipped"])
    with pytest.raises(AssertionError, match="differs from the estimator"):
        tool.score_cell(parts)


@pytest.mark.filterwarnings("ignore")
def test_parts_of_a_real_cell_recombine_to_the_estimators_output(shared_data):
    tool = tools_module("bench_guard_variants")
    scored = tool.measure(("musr/50/random/50/0", "balanced+guarded", str(shared_data)))
    # MuSR with 50 sources: the guard moves models of a random split for nothing, and a move
    # that waits for the reading to disagree beyond its noise errs less
    assert scored["move: consistent"]["mae"] < scored["as shipped"]["mae"] - 0.5
    # and so does one that places models by the de-shrunk reading (the cell's is ``design``)
    assert scored["locate: de-shrunk"]["mae"] < scored["as shipped"]["mae"] - 0.3
    assert tool.measure(("mmlu/all/random/100/0", "anchor_points+anchor_sum", "x")) is None
    # the upward folds' targets rebuilt: MuSR's 50 sources give two folds of 10 targets
    assert 10 <= scored["fold_targets"] <= 20
