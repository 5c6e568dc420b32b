"""Choose selection method, estimator and budget for one matrix by nested cross-validation.

Defaults of the package were tuned on thousands of leaderboard models; on a matrix of a few
dozen models they can lose to random items read with their plain mean (greedy selection did,
by 3 points, on 22 models). So the recipe is chosen on the user's own source models:

* *inner* cross-validation over the source models measures every candidate's held-out MAE,
  on random folds (models like the sources) and on extrapolation folds (the strongest
  sources estimated from weaker ones), and the rule of :mod:`._rule` picks the one with the
  lowest mean of the two among candidates whose intervals held, ties to the floor (balanced
  random items + the guarded estimator, or the user's fixed method/estimator with the other
  one the floor's); every fold selects its own items, so the errors are those of "select, then
  fit";
* *outer* cross-validation (``outer_repeats`` folds, off by default for speed) repeats that
  whole choice on part of the models and scores the chosen recipe on the rest, so the error
  it reports is that of "choose, then fit", not the optimistic inner MAE of the winner. It
  is reported beside the floor's outer MAE.

The chosen recipe's random folds also measure whether its interval holds for a model scored
as a new one is (:mod:`.widen`); the bundle's band is widened by what they show.

Matrices of thousands of models are subsampled for the choice (it is about the recipe, not
the fit), and IRT candidates are left out of the default list on very wide matrices, where
one IRT fit per split takes seconds; the record says both.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from .._rng import spawn
from ..errors import InputError
from ..estimators import ESTIMATORS, make_estimator
from ..estimators._fitting import MIN_CALIBRATION_MODELS, MIN_SOURCE_MODELS
from ..gaps import filled
from ..reliability import (
    IRTCache,
    Split,
    check_budgets,
    needs_irt,
)
from ..responses import ResponseMatrix
from ..selection import make_selector
from ..truth import is_matrix_mean
from ._cv import (
    FAILURES,
    Candidate,
    Outcome,
    SplitScheme,
    Table,
    estimate_split,
    evaluate,
    make_splits,
    select_split,
)
from ._cv import split_scheme as _split_scheme
from ._cv import units as _units
from ._rule import candidate_rows, pick
from .record import BudgetChoice, RecipeChoice
from .widen import fold_widen, widen_interval

AUTO = "auto"
FLOOR = Candidate("balanced", "guarded")
"""What the choice keeps unless a candidate scores lower: random items spread over the
sources' difficulty (``balanced``) need no choice (none of it can be tuned to the source
models' scores), and the guarded estimator stays right for models outside them. Random
items with their calibrated mean were the floor before: under extrapolation that line
regresses the strongest models towards the sources (chosen on 2 of 3 IFEval splits at 100
items, it erred by 5.9 points there and its intervals covered 0.43). Uniformly random items
were the floor's items until ``balanced`` ones, read with ``guarded``, erred less in 53 of
76 cells of the peer suite's splits over six draws each, most under extrapolation (the
strongest fifth with all sources: 2.96 -> 2.76 points, ``bench/balanced_guarded.md``)."""
FALLBACK = Candidate("stratified", "blend")
"""What a matrix too small to cross-validate a choice gets where the truth is the matrix mean
(10 source models): random items by subject, read with the mean of ``guarded`` and
``similar`` (:mod:`..estimators.blend`). Not the floor's ``balanced`` items: they look at the
sources' answers, which makes an interval calibrated on those same sources optimistic unless
each fold re-selects the items (:mod:`..crossfit`), and with 10 models no fold leaves enough to
fit on. On the peer suite's matrices cut to 10 sources (``tools/bench_small_sources.py``) the
floor's 90 % intervals covered 0.87 of held-out models on random splits, random items read
with ``guarded`` 0.91 at the same error. Read with the blend instead of ``guarded`` alone
(the fallback before it), those items erred 3.86 -> 3.71 points on the strongest fifth and
3.57 -> 3.53 on random splits (psn: 2.82 -> 2.76, 4.94 -> 4.61), random-split coverage 0.91 ->
0.93."""
FALLBACK_CALIBRATED = Candidate("stratified", "guarded")
"""The fallback where the truth is another score than the matrix mean (up to 20 source
models): there ``similar`` maps the matrix mean to the target by a line fitted on those few
models, and beyond them its intervals held too seldom, so the blend gained nothing (the Open
LLM Leaderboard v1 matrices against the whole benchmarks' scores, 12 and 20 sources, random
items at 25 and 50, strongest and weakest fifths: ``similar`` covered 0.63-0.79, the blend
0.85-0.98 against ``guarded``'s 0.91-0.99, at about the same error; a scratch run)."""
DEFAULT_METHODS = ("balanced", "stratified", "anchor_points", "tinybenchmarks")
"""Selections the default choice (random and extrapolation folds) tries."""
INSIDE_METHODS = (*DEFAULT_METHODS, "dpp", "greedy")
"""Selections of the choice for models like the sources (``extrapolation=False``). ``greedy``
(items that predict the sources' scores) and ``dpp`` (items that tell the sources apart) are
tried only there: beyond the sources they failed where the inner folds could not show it,
because those folds extrapolate within the sources' range. Picked by the default choice in
the peer suite, greedy erred by 3.7 and 5.1 points on TruthfulQA's strongest fifth at 100
items (random items with their mean: 1.3 and 1.1) and by 13.8 on ARC's weakest fifth, and
dpp by 29.1 on TruthfulQA's strongest fifth at 10 items (``bench/peers_inside_methods.md``)."""
DEFAULT_ESTIMATORS = ("guarded",)
"""Estimators of the default choice. Plain ``kridge`` was one too, kept only where its
intervals held on the folds; but its range guard looks up only, so for models below the
sources its intervals were too narrow where no fold showed it (HellaSwag's weakest fifth at
50 items: 0.31 on the seed it was picked). Without it the peer suite's weakest-fifth coverage
is 0.87-0.99 (was 0.59-0.99) and no target case got worse by more than 0.1 points
(``bench/peers_guarded_only.md``). The choice for models like the sources
(``extrapolation=False``, ``build --new-models like-sources``) keeps them too: that claim
cannot be checked, so an interval must still widen for a model beyond the sources, which
``kridge``'s did not (covering 0.13-0.64 of the strongest fifth on IFEval and MuSR,
``bench/supervised.md``)."""
PAIRED_CANDIDATES = (Candidate("anchor_points", "anchor_sum"),)
"""Default candidates beyond methods x estimators: an estimator that only makes sense with
one selector. Anchor Points' uncalibrated cluster-weighted sum led benchpred's methods under
extrapolation on the Open LLM v1 matrices and lagged the random-item mean on whole current
benchmarks; the folds decide between the two."""
IRT_METHODS = frozenset({"tinybenchmarks", "metabench"})
"""Selectors that fit their own IRT model on every call."""
BUDGET_GRID = (10, 25, 50, 100, 200, 400)
MAX_MODELS = 300
"""Models the choice runs on at most (a seeded random subsample above).

The bundle is then fitted on every source model, so a selection that gains more than the
others from many models could rank lower on 300 than it errs when built on all. It did not
show: on the peer suite's v1 random splits with 1,000 sources, the random folds' MAE lay
0.16-0.22 points above the built recipes' held-out MAE for anchor points, balanced and
tinyBenchmarks items alike. A scratch rerun of the choice with up to 1,000 models on the v1
cells with 1,000 sources (96: seeds 0-2, 25/50/100 items): 31 picks changed, and the picks'
held-out MAE (each candidate's own from ``bench/choice_rules.json``) moved 1.98 -> 1.99
points on random splits and 1.76 -> 1.74 on the strongest fifth (oracle 1.88 and 1.40).
Winogrande's strongest fifth at 25 items gained on seed 2 (4.69 -> 1.31) and lost on seed 0
(1.23 -> 4.40). The choice took 20-34 s per cell instead of 4-8 s (three cells, one process
on the 2-core machine), so the cap stays."""
WIDE_ITEMS = 3000
"""Above this many items IRT candidates leave the default list (seconds per IRT fit)."""
CHOICE_MARGIN = 10
"""Models beyond the fewest a fold trains on (10 where the score is the matrix mean, 20
otherwise: a calibration line) that the choice needs before it cross-validates; below, the
floor is kept without a choice. Folds of a handful of models pick a candidate by its luck on
three or four of them. Measured on the peer suite's matrices (``tools/bench_small_sources.py``):
where the score is the matrix mean, with 15 sources the choice erred 4.00 points on the
strongest fifth and 3.54 on random splits where the floor erred 3.52 and 3.48 (more on six
and four of the eight matrices), with 20 the two were level (3.45 / 3.57 against 3.41 / 3.53;
``bench/small_sources_before_min_choice.md``); against the v1 matrices' whole-benchmark
scores, with 22 sources the choice erred 4.35 and 2.96 where the floor erred 3.57 and 2.84,
with 28 they were about level (3.55 / 2.84 against 3.68 / 2.79;
``bench/small_sources_before_margin.md``)."""
INNER_REPEATS = 5
"""Random folds of the choice (each model a target once)."""
OUTER_REPEATS = 0


# ---------------------------------------------------------------------- candidates and checks
def default_candidates(
    methods: Sequence[str] | None,
    estimators: Sequence[str] | None,
    source: ResponseMatrix,
    extrapolation: bool = True,
) -> tuple[list[Candidate], list[str]]:
    """Method x estimator candidates, and what the defaults left out (and why).

    Only *default* lists are trimmed; names the caller gives are kept. ``stratified`` draws
    uniformly random items when the matrix has one stratum (the floor's ``balanced`` items are
    the random sample of the default choice), so it goes; on matrices wider than
    :data:`WIDE_ITEMS` the IRT selectors and estimators go.
    """
    notes: list[str] = []
    method_names = list(methods or (DEFAULT_METHODS if extrapolation else INSIDE_METHODS))
    estimator_names = list(estimators) if estimators else list(DEFAULT_ESTIMATORS)
    if not methods and len(set(source.strata())) < 2:
        method_names.remove("stratified")
        notes.append(
            "method stratified left out (one stratum: it would draw uniformly random items)"
        )
    if source.n_items > WIDE_ITEMS:
        wide = f"{source.n_items} items > {WIDE_ITEMS}: one IRT fit per split costs seconds"
        if not estimators:
            notes += [f"estimator {e} left out ({wide})" for e in estimator_names if needs_irt(e)]
            estimator_names = [e for e in estimator_names if not needs_irt(e)]
        if not methods:
            notes += [f"method {m} left out ({wide})" for m in method_names if m in IRT_METHODS]
            method_names = [m for m in method_names if m not in IRT_METHODS]
    candidates = [Candidate(m, e) for m in method_names for e in estimator_names]
    if not methods and not estimators and extrapolation:  # like-sources: guarded ones only
        candidates += [c for c in PAIRED_CANDIDATES if c.method in method_names]
    return candidates, notes


def check_names(methods: Sequence[str], estimators: Sequence[str]) -> None:
    """Unknown method or estimator names are an :class:`InputError` before any work."""
    for method in methods:
        make_selector(method)
    for name in estimators:
        make_estimator(name)


def check_target_mae(target_mae: float | None) -> None:
    if target_mae is not None and not (math.isfinite(target_mae) and 0 < target_mae < 100):
        raise InputError(
            f"target MAE must be in score points, between 0 and 100 (exclusive), got {target_mae!r}"
        )


def budget_grid(n_items: int, grid: Sequence[int] = BUDGET_GRID) -> tuple[int, ...]:
    """Budgets of ``grid`` the matrix can hold (its item count itself when it holds none)."""
    fitting = tuple(b for b in grid if b <= n_items)
    return fitting or (n_items,)


def required_sources(source: ResponseMatrix, truth: np.ndarray) -> int:
    """Fewest source models per split every estimator can be fitted on.

    Below ``MIN_CALIBRATION_MODELS`` estimators fit no calibration line, which is right only
    when the truth is the mean over the matrix items; otherwise that many are needed.
    """
    return MIN_SOURCE_MODELS if is_matrix_mean(source.values, truth) else MIN_CALIBRATION_MODELS


# ---------------------------------------------------------------------- choice
@dataclass
class _Run:
    """What every stage of one choice shares: candidates, budgets, floor, caches, progress."""

    candidates: list[Candidate]
    grid: tuple[int, ...]
    floor: Candidate
    required: int
    inner_repeats: int
    irt_cache: IRTCache
    bar: Any = None
    n_audit: int = 0
    extrapolation: bool = True
    dropped: dict[int, list[str]] = field(default_factory=dict)
    """Per budget, why the floor could not be fitted on each split left out."""

    def inner(self, n_models: int) -> SplitScheme | None:
        return _split_scheme(n_models, self.required, self.inner_repeats, self.extrapolation)

    def splits(
        self, matrix: ResponseMatrix, truth: np.ndarray, scheme: SplitScheme, seed: int, stage: str
    ) -> list[Split]:
        return make_splits(matrix, truth, scheme, seed, stage, self.required)

    def evaluate(self, splits: Sequence[Split]) -> Table:
        """Every candidate's errors over ``splits``; the splits the floor could not be fitted
        on are left out and counted in :attr:`dropped`."""
        table, dropped = evaluate(
            splits, self.candidates, self.grid, self.irt_cache, self.bar, self.n_audit, self.floor
        )
        for budget, why in dropped.items():
            self.dropped.setdefault(budget, []).extend(why)
        return table

    def units(self, n_splits: int) -> int:
        return _units(n_splits, self.candidates, self.grid)


def choose_recipe(
    source: ResponseMatrix,
    target: np.ndarray,
    *,
    methods: Sequence[str] | None = None,
    estimators: Sequence[str] | None = None,
    budgets: Sequence[int] | None = None,
    target_mae: float | None = None,
    floor: Candidate = FLOOR,
    seed: int = 0,
    irt_model: str = "2pl",
    inner_repeats: int = INNER_REPEATS,
    outer_repeats: int = OUTER_REPEATS,
    max_models: int = MAX_MODELS,
    progress: bool = True,
    audit: int = 0,
    extrapolation: bool = True,
) -> RecipeChoice:
    """Choose method x estimator (x budget) for ``source`` by nested cross-validation.

    Parameters
    ----------
    source, target
        Responses of the source models and their true full scores (fractions).
    methods, estimators
        Candidate names (default :data:`DEFAULT_METHODS`, or :data:`INSIDE_METHODS` without
        extrapolation, x :data:`DEFAULT_ESTIMATORS`); the
        ``floor`` candidate is always added.
    budgets
        Budgets to evaluate (default :data:`BUDGET_GRID`, capped at the item count); each gets
        its own choice (``per_budget``).
    target_mae
        In score points: the recipe takes the smallest budget whose chosen candidate's
        inner-CV score is at most this; the largest budget (with a note) when none is, or
        when no target is given.
    inner_repeats, outer_repeats
        Random folds of the choice and of the nested estimate (0 outer: none); matrices too
        small for such folds get leave-one-model-out cycles. Extrapolation folds are added
        to the inner folds wherever the matrix leaves enough training models.
    max_models
        Models the choice runs on (a seeded random subsample of larger matrices).
    audit
        Items of every budget drawn as an audit sample (:func:`.selection.select_with_audit`).
    extrapolation
        Whether the score includes the extrapolation folds (False: random folds only, the
        error on models like the sources and nothing else; the default methods are then
        :data:`INSIDE_METHODS`).
    """
    check_target_mae(target_mae)
    candidates, notes = default_candidates(methods, estimators, source, extrapolation)
    if floor not in candidates:
        candidates.append(floor)
    check_names([c.method for c in candidates], [c.estimator for c in candidates])
    grid = tuple(sorted(set(budgets))) if budgets else budget_grid(source.n_items)
    check_budgets(grid, source.n_items, source.source)
    matrix, truth = _choice_models(source, np.asarray(target, dtype=np.float64), max_models, seed)
    run = _Run(
        candidates,
        grid,
        floor,
        required_sources(matrix, truth),
        inner_repeats,
        IRTCache(irt_model),
        n_audit=audit,
        extrapolation=extrapolation,
    )
    inner = run.inner(matrix.n_models)
    if inner is None or matrix.n_models < run.required + CHOICE_MARGIN:
        foldable = inner is not None
        return _fallback(source, matrix, truth, run, seed, notes, target_mae, foldable)
    outer, outer_note = _outer_scheme(matrix.n_models, run, outer_repeats)
    with tqdm(
        total=run.units(_n_splits(run, inner, outer)),
        desc="auto",
        unit="subset",
        disable=not progress,
    ) as run.bar:
        run.bar.set_postfix_str("choice")
        per_budget = _choose_per_budget(
            run.evaluate(run.splits(matrix, truth, inner, seed, "choice")), run
        )
        if outer is not None:
            run.bar.set_postfix_str("nested")
            _nested(matrix, truth, outer, seed, run, per_budget)
    budget, budget_note = _pick_budget(per_budget, target_mae)
    chosen = per_budget[budget].chosen
    protocol = {
        "models_total": int(source.n_models),
        "models_used": int(matrix.n_models),
        "items_used": int(matrix.n_items),
        "subsampled": matrix.n_models < source.n_models,
        "min_sources_per_split": run.required,
        "inner": inner.as_record(),
        "outer": outer.as_record() if outer else None,
        "budgets": list(grid),
        "seed": seed,
        "irt_model": irt_model,
        "audit_items": audit,
        "irt_fits": run.irt_cache.fits,
        "irt_unconverged": run.irt_cache.unconverged,
        "left_out": notes,
        "dropped_splits": {str(b): len(why) for b, why in run.dropped.items()},
    }
    extra = [n for n in (budget_note, outer_note, _dropped_note(run.dropped)) if n]
    return RecipeChoice(
        chosen.method, chosen.estimator, budget, floor, per_budget, protocol, target_mae, extra
    )


def _dropped_note(dropped: dict[int, list[str]]) -> str | None:
    """One line on the splits the floor could not be fitted on, or None."""
    if not dropped:
        return None
    counts = ", ".join(f"{len(why)} at budget {b}" for b, why in sorted(dropped.items()))
    first = next(iter(dropped.values()))[0]
    return (
        f"splits left out for every candidate ({counts}): the floor could not be fitted on "
        f"their sources ({first})"
    )


def _n_splits(run: _Run, inner: SplitScheme, outer: SplitScheme | None) -> int:
    """Splits evaluated in all: the choice's, plus each outer split's inner ones and itself."""
    if outer is None:
        return inner.total
    nested_inner = run.inner(outer.sources)
    return inner.total + outer.splits * ((nested_inner.total if nested_inner else 0) + 1)


def _fallback(
    source: ResponseMatrix,
    matrix: ResponseMatrix,
    truth: np.ndarray,
    run: _Run,
    seed: int,
    notes: list[str],
    target_mae: float | None,
    foldable: bool,
) -> RecipeChoice:
    """:data:`FALLBACK` where there are too few models to cross-validate a choice
    (:data:`FALLBACK_CALIBRATED` where the truth is not the matrix mean, or the budget is
    smaller than the blend can read); the floor where folds could be cut but are too small to
    choose on (``foldable``: fewer than :data:`CHOICE_MARGIN` models beyond a fold's least).

    Every estimator needs ``MIN_SOURCE_MODELS``; below that the matrix is refused.
    """
    grid, floor = run.grid, run.floor
    if matrix.n_models < MIN_SOURCE_MODELS:
        raise InputError(
            f"{source.source}: {matrix.n_models} models have responses and scores; a bundle "
            f"needs at least {MIN_SOURCE_MODELS} source models"
        )
    if foldable:
        chosen = floor
        note = (
            f"{matrix.n_models} models are too few to choose a recipe on (folds of a handful of "
            f"models choose by luck; with fewer than {CHOICE_MARGIN} beyond the "
            f"{run.required} a fold trains on, a choice erred more than the floor, "
            f"bench/small_sources.md): {chosen.label}, without a measured error"
        )
    else:
        chosen = _unfoldable(matrix, truth, grid, floor)
        why = "as asked" if floor != FLOOR else "random items whose interval needs no folds"
        note = (
            f"{matrix.n_models} models are too few to cross-validate a choice (each fold would "
            f"leave fewer source models than an estimator needs): {chosen.label}, {why}, "
            "without a measured error"
        )
    per_budget = {b: BudgetChoice(b, chosen, []) for b in grid}
    protocol = {
        "models_total": int(source.n_models),
        "models_used": int(matrix.n_models),
        "items_used": int(matrix.n_items),
        "subsampled": False,
        "inner": None,
        "outer": None,
        "budgets": list(grid),
        "seed": seed,
        "left_out": notes,
    }
    return RecipeChoice(
        chosen.method,
        chosen.estimator,
        grid[-1],
        floor,
        per_budget,
        protocol,
        target_mae,
        [note],
    )


def _unfoldable(
    matrix: ResponseMatrix, truth: np.ndarray, grid: tuple[int, ...], floor: Candidate
) -> Candidate:
    """What a matrix no fold can be cut from gets: the user's own method (``floor`` not the
    default), else :data:`FALLBACK`, or :data:`FALLBACK_CALIBRATED` where the truth is not
    the matrix mean or the budget is smaller than the blend can read."""
    if floor != FLOOR:
        return floor
    blend_reads = grid[-1] >= ESTIMATORS[FALLBACK.estimator].min_items
    return FALLBACK if blend_reads and is_matrix_mean(matrix.values, truth) else FALLBACK_CALIBRATED


def _choice_models(
    source: ResponseMatrix, truth: np.ndarray, max_models: int, seed: int
) -> tuple[ResponseMatrix, np.ndarray]:
    """The matrix with its gaps filled (:func:`..gaps.filled`), at most ``max_models`` models
    of it (a seeded random subsample)."""
    matrix, truth = filled(source, truth)
    if matrix.n_models <= max_models:
        return matrix, truth
    rows = np.sort(spawn(seed, 1)[0].choice(matrix.n_models, max_models, replace=False))
    return matrix.select_models([matrix.model_ids[r] for r in rows]), truth[rows]


def _outer_scheme(
    n_models: int, run: _Run, outer_repeats: int
) -> tuple[SplitScheme | None, str | None]:
    """Outer splits that leave every inner split enough sources, or None and why."""
    if outer_repeats < 1:
        return None, None
    outer = _split_scheme(n_models, run.required + 1, outer_repeats, extrapolation=False)
    if outer is None:
        return None, (
            f"no nested estimate: {n_models} models leave too few for an inner "
            f"cross-validation with {run.required} sources per fit; the inner-CV MAE of the "
            "chosen recipe is optimistic"
        )
    return outer, None


def _choose_per_budget(table: Table, run: _Run) -> dict[int, BudgetChoice]:
    choices = {}
    for budget in run.grid:
        rows = candidate_rows(table, run.candidates, budget, run.floor)
        chosen = pick(rows, run.floor)
        if chosen is None:
            status = next(r["status"] for r in rows if _candidate(r) == run.floor)
            if (run.floor, budget) not in table and run.dropped.get(budget):
                status = f"failed on every split: {run.dropped[budget][0]}"
            raise InputError(
                f"auto: the floor {run.floor.label} cannot be evaluated at budget {budget}: "
                f"{status}"
            )
        widen = fold_widen(table[(chosen, budget)])
        choices[budget] = BudgetChoice(budget, chosen, rows, widen=widen)
    return choices


def _candidate(row: dict) -> Candidate:
    return Candidate(row["method"], row["estimator"])


def _pick_budget(per_budget: dict[int, BudgetChoice], target_mae: float | None) -> tuple[int, str]:
    """The smallest budget whose chosen recipe's score reaches ``target_mae``; else (or
    without one) the largest."""
    grid = sorted(per_budget)
    if target_mae is None:
        return grid[-1], ""
    for budget in grid:
        if per_budget[budget].cv_mae <= target_mae:
            return budget, ""
    best = per_budget[grid[-1]].cv_mae
    return grid[-1], (
        f"no budget of {grid} reaches the target MAE of {target_mae:g} points; using the "
        f"largest, {grid[-1]} items (inner-CV MAE {best:.2f} points)"
    )


# ---------------------------------------------------------------------- nested estimate
def _nested(
    matrix: ResponseMatrix,
    truth: np.ndarray,
    outer: SplitScheme,
    seed: int,
    run: _Run,
    per_budget: dict[int, BudgetChoice],
) -> None:
    """Repeat the choice inside each outer split; score the choice and the floor on its targets."""
    auto = {b: Outcome() for b in run.grid}
    base = {b: Outcome() for b in run.grid}
    picks: dict[int, Counter[str]] = {b: Counter() for b in run.grid}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, split in enumerate(run.splits(matrix, truth, outer, seed + 1, "outer")):
            inner = run.inner(split.source.n_models)
            assert inner is not None  # _outer_scheme left room for it
            stage = f"outer{k}"
            table = run.evaluate(
                run.splits(split.source, split.source_truth, inner, split.selection_seed, stage)
            )
            for budget in run.grid:
                rows = candidate_rows(table, run.candidates, budget, run.floor)
                chosen = pick(rows, run.floor) or run.floor
                picks[budget][chosen.label] += 1
                widen = fold_widen(table.get((chosen, budget), Outcome()))
                _score(split, chosen, budget, auto[budget], run, widen)
                _score(split, run.floor, budget, base[budget], run)
            run.bar.update(run.units(1))
    for budget in run.grid:
        per_budget[budget].nested = {
            "splits": outer.splits,
            "auto_mae": auto[budget].mae(),
            "floor_mae": base[budget].mae(),
            "auto_coverage90": auto[budget].coverage(),
            "floor_coverage90": base[budget].coverage(),
            "failure": auto[budget].failure or base[budget].failure,
            "picks": dict(picks[budget].most_common()),
        }


def _score(
    split: Split, candidate: Candidate, budget: int, outcome: Outcome, run: _Run, widen: float = 1.0
) -> None:
    """Fit ``candidate`` on the outer split's sources and add its target errors, its interval
    widened by ``widen`` (the whole interval: for ``guarded`` a bundle widens the inner band
    only, so beyond the sources this is a little wider than the bundle's)."""
    if outcome.failure is not None:
        return
    irt = run.irt_cache.get(split) if needs_irt(candidate.estimator) else None
    try:
        subset = select_split(candidate.method, split, budget, run.n_audit)
        estimates = estimate_split(split, subset, candidate.estimator, irt)
        outcome.add(split.target_truth, *widen_interval(*estimates, widen))
    except FAILURES as exc:
        outcome.failure = f"{candidate.label}: {exc}"
