"""Inner extrapolation folds: the sources extrapolating to their own strongest and weakest.

Four folds, two each way. Two score the strongest fifth of the source models from a weaker
part: the other four fifths, and the weakest half (leaving a gap, so the distance beyond the
training models is larger, as it is for a new model far beyond all sources). The other two
mirror them: the weakest fifth from the other four fifths and from the strongest half. A new
model can as well lie below every source (an early checkpoint, a small or broken model),
where readings and selections fail in their own ways: a Rasch level without a guessing floor
puts a near-random model far too high, and items chosen to tell the sources apart say little
about a model below them. On MMLU's weakest fifth (50 items, the rest as sources, seed 0)
the default build erred by 19.3 points with upward folds alone and by 4.6 with all four
(``bench/peers.md``; the items moved too, from greedy to tinyBenchmarks, because
``--method auto`` scores the guarded estimator as these folds make it).
A fold needs :data:`MIN_TRAIN` training models. For every reading that can be fitted on its
training models, a fold records the guarded estimate's absolute errors (what chooses the
reading) and the reading's scaled errors ``|reading - truth| / se`` (what sizes its interval,
:class:`.guard.GuardBand`).
Folds measure what cross-validation over random folds cannot: how a reading behaves *beyond*
the models it was fitted on. They can still under-state the distance of a model far
outside all sources, which is why the readings are chosen among estimates that do
not regress towards the sources in the first place.

A reading whose map from the matrix mean to the target cannot be fitted on one fold's training
models (:class:`.readings.base.FlatScaleError`) skips that fold: on 113 random MuSR items read
against the whole benchmark's score, 66 sources spanning 10 points, the weakest half's matrix
means moved with their scores at a slope of 0.04 (all 66: 1.03), and that one fold refused the
whole build.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .guard import beyond_weight, guarded_interval
from .readings import READINGS, SourceView, make_reading
from .readings.base import FlatScaleError

UP, DOWN = "up", "down"
FOLDS = ((0.8, 0.2, UP), (0.5, 0.2, UP), (0.8, 0.2, DOWN), (0.5, 0.2, DOWN))
"""(share of sources trained on, share scored, direction) per fold: ``up`` trains on the
weakest and scores the strongest, ``down`` the reverse."""
MIN_TRAIN = 10
MIN_TARGETS = 2
MIN_SE = 0.005
"""Half a point: no reading's error is scaled by a smaller standard error than this."""

InnerFit = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, tuple[np.ndarray, ...]]]
"""``(train rows, test rows) -> (train out-of-fold estimates, (value, lower, upper) of test)``."""


def directed_folds(target: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """``(train rows, test rows, direction)`` of each fold the number of models allows."""
    n = target.size
    ascending = np.argsort(target, kind="stable")
    folds = []
    for train_share, test_share, direction in FOLDS:
        order = ascending if direction == UP else ascending[::-1]
        n_test = max(round(test_share * n), MIN_TARGETS)
        n_train = min(round(train_share * n), n - n_test)
        if n_train >= MIN_TRAIN and n_test <= n - n_train:
            folds.append((np.sort(order[:n_train]), np.sort(order[-n_test:]), direction))
    return folds


def extrapolation_folds(target: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(train rows, test rows)`` of the upward folds: the strongest from weaker ones.

    What ``--method auto`` validates on besides random folds. The downward folds stay out of
    that choice: tried there, they moved it away from recipes that were best above the
    sources (peer suite, MMLU's strongest fifth at 50 items, seed 0: anchor points 0.47 ->
    random items 2.21 points) and changed little below them.
    """
    return [(train, test) for train, test, direction in directed_folds(target) if direction == UP]


@dataclass
class ReadingScore:
    """A reading's guarded errors and scaled reading errors over all fold targets."""

    errors: list[np.ndarray] = field(default_factory=list)
    scaled: dict[str, list[np.ndarray]] = field(default_factory=lambda: {UP: [], DOWN: []})
    misses: dict[str, list[np.ndarray]] = field(default_factory=lambda: {UP: [], DOWN: []})
    """The reading's own absolute errors ``|reading - truth|``."""
    reach: dict[str, list[np.ndarray]] = field(default_factory=lambda: {UP: [], DOWN: []})
    """How far beyond its fold's training models the reading located each fold target."""

    @property
    def mae(self) -> float:
        return float(np.mean(np.concatenate(self.errors))) if self.errors else float("inf")

    @property
    def n_targets(self) -> int:
        return int(sum(e.size for e in self.errors))

    def residuals(self, direction: str = UP) -> np.ndarray:
        """Sorted scaled errors of the folds of one direction."""
        found = self.scaled[direction]
        return np.sort(np.concatenate(found)) if found else np.zeros(0)

    def miss(self, direction: str = UP) -> float:
        """The reading's mean absolute error on the folds of one direction (inf without)."""
        found = self.misses[direction]
        return float(np.mean(np.concatenate(found))) if found else float("inf")

    def furthest(self, direction: str = UP) -> float:
        """The greatest distance a fold target of one direction lay beyond its fold's
        training models, as the reading located it (0 without folds)."""
        found = self.reach[direction]
        return float(np.max(np.concatenate(found))) if found else 0.0


def score_readings(
    view: SourceView, names: Sequence[str], inner_fit: InnerFit
) -> tuple[dict[str, ReadingScore], dict[str, np.ndarray]]:
    """Fit each reading on every fold's training models and score the fold's targets.

    Also returns, per direction, the inner estimator's sorted absolute errors on the folds'
    targets (what sizes the interval where the estimate outside stays the inner one)."""
    scores = {name: ReadingScore() for name in names}
    inner_errors: dict[str, list[np.ndarray]] = {UP: [], DOWN: []}
    for train, test, direction in directed_folds(view.target):
        oof, inner = inner_fit(train, test)
        fold = view.rows(train, oof)
        truth = view.target[test]
        inner_errors[direction].append(np.abs(np.asarray(inner[0]) - truth))
        top, bottom = float(fold.target.max()), float(fold.target.min())
        for name in names:
            if READINGS[name].available(fold) is not None:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    reading = make_reading(name).fit(fold)
                except FlatScaleError:  # this fold's models only: the others may map
                    continue
                value, se = reading.read(view.values[test], inner[0])
                located = reading.locate(view.values[test], inner[0])
            weight = beyond_weight(*located, top, bottom)
            estimate, _, _ = guarded_interval(inner, value, (value - se, value + se), weight)
            scores[name].errors.append(np.abs(estimate - truth))
            scores[name].misses[direction].append(np.abs(value - truth))
            scores[name].scaled[direction].append(np.abs(value - truth) / np.maximum(se, MIN_SE))
            beyond = located[0] - top if direction == UP else bottom - located[0]
            scores[name].reach[direction].append(np.maximum(beyond, 0.0))
    return scores, {
        direction: np.sort(np.concatenate(found)) if found else np.zeros(0)
        for direction, found in inner_errors.items()
    }
