"""From a response matrix to a bundle: select items, fit IRT, fit estimators, record reliability."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from ._types import ItemId
from .bundle import Bundle, DatasetCoordinates, EstimatorSpec, MetricSpec
from .crossfit import cross_fit_folds, needs_cross_fit, selection_cross_fit
from .errors import FewSourcesWarning, InputError
from .estimators import (
    DEFAULT_ESTIMATOR,
    ESTIMATORS,
    FITTED_BY_DEFAULT,
    GuardedEstimator,
    make_estimator,
)
from .estimators._fitting import MIN_SOURCE_MODELS
from .estimators.missing import inflation_draws
from .gaps import complete_core
from .irt import fit_source_irt
from .outside.readings.audit import FEW_AUDIT
from .personfit import build_spec, lowest_score
from .responses import ResponseMatrix
from .selection import make_selector, select_with_audit
from .selection.audit import AUDIT_KEY
from .subset import Subset

GUARDED = "guarded"
SOURCES_OUTSIDE_NOTE = 0.5
"""Share of the source models the guard itself counts as possibly outside them above which
the build says so: on the peer suite's random splits where it did, the guarded estimate erred
3.18 points against its inner regression's 2.47, elsewhere 2.22 against 2.19; on the strongest
fifth the guard still paid there, 2.04 against 2.78 (``bench/guard_cost.md``)."""


def selection_pool(
    source: ResponseMatrix, target: np.ndarray, budget: int
) -> tuple[ResponseMatrix, np.ndarray]:
    """The models and items the items are selected from: on a matrix with gaps, its part
    without them (:func:`.gaps.complete_core`), so that every model of that part can be fitted
    on the selected items; the whole matrix where it has no gaps or that part has too few
    models or items. Items drawn from anywhere on a matrix of 12 models with 2 % of its cells
    missing left 4 models with a score on every one of 50 items, too few to fit; of 66 such
    models, 24. The estimators are still fitted on every model scored on the subset."""
    if not np.isnan(source.values).any():
        return source, target
    try:
        core, core_target = complete_core(source, target, budget)
    except InputError:
        return source, target
    if core.n_models < MIN_SOURCE_MODELS:
        return source, target
    warnings.warn(
        f"{source.source}: items drawn from the {core.n_items} of {source.n_items} items that "
        f"{core.n_models} of {source.n_models} models answered in full (the matrix has gaps)",
        stacklevel=3,
    )
    return core, core_target


def build_bundle(
    source: ResponseMatrix,
    target: np.ndarray,
    *,
    name: str,
    benchmark: str,
    method: str,
    budget: int,
    seed: int = 0,
    estimators: Sequence[str] | None = None,
    default_estimator: str | None = None,
    irt_model: str = "2pl",
    metric: MetricSpec | None = None,
    dataset: DatasetCoordinates | None = None,
    license: str | None = None,
    chance: float | Mapping[ItemId, float] | None = None,
    choice: Mapping[str, Any] | None = None,
    audit: int = 0,
    progress: bool = True,
) -> Bundle:
    """Select ``budget`` items with ``method`` and fit the estimators on ``source``.

    ``estimators`` None fits :func:`default_names` (every estimator but ``blend`` that can read
    ``budget`` items, plus the default estimator).

    ``target`` is the true full score of each source model (fractions). The reliability
    summary records each estimator's cross-validated MAE on the source models.
    ``chance`` (a level for every item, per item id, or None: the weakest source models' item
    rates) sets the bundle's person-fit check (:func:`.personfit.build_spec`) and the floor of
    ``guarded``'s interval below the sources (:func:`.personfit.lowest_score`).
    ``choice`` (the record of ``--method auto``, :meth:`.auto.RecipeChoice.as_record`) is kept
    in the reliability summary under ``"auto"``, and the interval factor it measured for its
    chosen recipe widens that estimator's band (:func:`choice_widen`). ``default_estimator``
    None takes ``guarded`` when it is fitted (the estimate that stays right for models outside
    the sources), else the fitted estimator with the lowest cross-validated MAE
    (:func:`lowest_cv_error`); a name is kept. With a selection that looks at the sources'
    answers (all but ``random`` and ``stratified``) on fewer than
    :data:`.crossfit.CROSS_FIT_MAX_MODELS` source models every estimator's interval is
    calibrated on out-of-fold estimates whose folds re-selected the items
    (:func:`.crossfit.selection_cross_fit`). ``audit`` items of the budget are a random
    sample of the items the method left out (:func:`.selection.select_with_audit`).
    ``progress`` False hides the progress bars (``microbench build --quiet``).
    """
    names = list(estimators) if estimators else default_names(default_estimator, budget)
    if default_estimator is not None and default_estimator not in names:
        raise InputError(f"default estimator {default_estimator!r} is not among {names}")
    selector = make_selector(method)
    pool, pool_target = selection_pool(source, target, budget)
    subset = select_with_audit(selector, pool, budget, audit, seed=seed, target=pool_target)
    irt = fit_source_irt(source, model=irt_model, seed=seed)
    cross_fits = (
        selection_cross_fit(
            source, target, method, budget, names, seed=seed, irt=irt, n_audit=audit
        )
        if needs_cross_fit(selector, source)
        else {}
    )
    if cross_fits and cross_fit_folds(source.n_models) == 0:
        _note_not_cross_fitted(method, source)
    person_fit = build_spec(
        source, subset.item_ids, target, chance, irt_model=irt_model, seed=seed, progress=progress
    )
    fitted = []
    draws = inflation_draws(  # the partial runs every estimator's inflation is measured on
        irt.subset(list(subset.item_ids)),
        source.values[:, source.item_positions(subset.item_ids)],
        seed,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for estimator_name in tqdm(
            names, desc="fitting estimators", leave=False, disable=not progress
        ):
            estimator = make_estimator(estimator_name).fit(
                source, subset, target, irt=irt, cross_fit=cross_fits.get(estimator_name)
            )
            estimator.with_floor(lowest_score(person_fit))
            if estimator_name not in cross_fits:
                estimator.widen_intervals(choice_widen(choice, method, budget, estimator_name))
            estimator.with_imputation(irt).calibrate_missing(source, seed=seed, draws=draws)
            fitted.append(estimator)
    _warn_once_for_all(caught)
    cv_mae = {est.name: float(est.cv_mae_) for est in fitted}
    reliability = {
        "cv_mae_source": cv_mae,
        "n_source_models": int(source.n_models),
        "note": "cross-validated mean absolute error on the source models (fraction scale)",
    }
    if choice is not None:
        reliability["auto"] = dict(choice)
    default = default_estimator or default_for(cv_mae)
    chosen = next(est for est in fitted if est.name == default)
    if isinstance(chosen, GuardedEstimator):
        _note_sources_outside(chosen, source, subset)
        _note_small_audit(chosen, source, subset)
    return Bundle.from_parts(
        name=name,
        benchmark=benchmark,
        subset=subset,
        source=source,
        irt=irt,
        estimators=[EstimatorSpec(est.name, est.state_dict()) for est in fitted],
        default_estimator=default,
        metric=metric or MetricSpec(name="acc"),
        dataset=dataset,
        reliability=reliability,
        license=license,
        person_fit=person_fit,
    )


def _warn_once_for_all(caught: list[warnings.WarningMessage]) -> None:
    """The fits' warnings again, those that every estimator gave alike (too few sources for
    a calibration line) as one naming them all: six identical lines but for the name hid the
    rest of a build's output. Others keep their place and category."""
    few = [w.message for w in caught if _named_few_sources(w.message)]
    for detail in dict.fromkeys(m.detail for m in few):
        names = ", ".join(m.estimator for m in few if m.detail == detail)
        warnings.warn(FewSourcesWarning(names, detail), stacklevel=3)
    for w in caught:
        if not _named_few_sources(w.message):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def _named_few_sources(message: Warning | str) -> bool:
    return isinstance(message, FewSourcesWarning) and bool(message.estimator)


def _note_not_cross_fitted(method: str, source: ResponseMatrix) -> None:
    """Say that a selection that looks at the sources' answers cannot be re-selected in any
    fold (10 source models: every fold would fit on 9): the intervals then rest on residuals
    of the very models the items were picked on, and come out too narrow
    (``bench/small_sources.md``)."""
    warnings.warn(
        f"{source.source}: {method} items look at the source models' answers, and "
        f"{source.n_models} models leave no fold enough to pick them again, so the "
        "intervals are calibrated on the models the items were picked on and may be too "
        "narrow (bench/small_sources.md); --method stratified (or random) keeps them honest",
        stacklevel=3,
    )


def _note_sources_outside(guard: GuardedEstimator, source: ResponseMatrix, subset: Subset) -> None:
    """Say when the default guard counts most of its own source models as possibly beyond
    them: the sources' scores then span a range narrow against what the subset says of one
    model, so the guard moves the estimates and widens the intervals of models like the
    sources too (MuSR with 25-100 sources, ``bench/guard_cost.md``). Nothing changes; more
    items narrow the reading."""
    share = guard.outside_share(source.values[:, source.item_positions(subset.item_ids)])
    if share > SOURCES_OUTSIDE_NOTE:
        span = 100 * (guard.top_ - guard.bottom_)
        warnings.warn(
            f"{source.source}: the guarded estimator counts {share:.0%} of the source models "
            f"themselves as possibly beyond them: their scores span {span:.1f} points, narrow "
            f"against what {subset.budget} items say of one model. Models like the sources will "
            "get wider intervals and noisier estimates than the inner regression alone would "
            "give them, the price of following models beyond the sources (bench/guard_cost.md); "
            "a larger budget narrows the reading",
            stacklevel=3,
        )


def _note_small_audit(guard: GuardedEstimator, source: ResponseMatrix, subset: Subset) -> None:
    """Say when the default guard reads models beyond the sources by an audit of fewer than
    :data:`~.outside.readings.audit.FEW_AUDIT` items: its correction (the mean residual of
    those items) is then noisy enough to raise the error it should lower. Nothing changes;
    the intervals stay calibrated on the sources' folds."""
    n_audit = len(subset.info.get(AUDIT_KEY, ()))
    if guard.reading_name_ != "audit" or n_audit >= FEW_AUDIT:
        return
    warnings.warn(
        f"{source.source}: the guarded estimator reads models beyond the sources by the audit "
        f"correction of only {n_audit} audit items, whose mean residual is too noisy to lower "
        "the error: in bench/audit_counts.md audits of 5 and 10 items raised it there (MuSR, "
        "lasso items in a budget of 50, strongest fifth held out: 5.05 points without an "
        f"audit, 7.29 with 5, 6.92 with 10, 4.35 with 25); ask for {FEW_AUDIT} or more audit "
        "items, or none",
        stacklevel=3,
    )


def choice_widen(
    choice: Mapping[str, Any] | None, method: str, budget: int, estimator: str
) -> float:
    """The interval factor ``--method auto`` measured for its chosen recipe
    (:mod:`.auto.widen`) when this is that recipe; 1 otherwise.

    Not applied where the build's own selection cross-fit already re-selected the items in
    each fold (:mod:`.crossfit`): that band measured the same shortfall itself.
    """
    chosen = (choice or {}).get("chosen") or {}
    recipe = (chosen.get("method"), chosen.get("budget"), chosen.get("estimator"))
    if recipe != (method, budget, estimator):
        return 1.0
    return float(chosen.get("interval_widen", 1.0))


def default_names(default_estimator: str | None, budget: int) -> list[str]:
    """The estimators a build fits when none are named: :data:`.estimators.FITTED_BY_DEFAULT`
    that can read ``budget`` items (``similar`` needs 4), and the default estimator where it
    is not among them."""
    names = [n for n in FITTED_BY_DEFAULT if ESTIMATORS[n].min_items <= budget]
    if default_estimator is not None and default_estimator not in names:
        names.append(default_estimator)
    return names


def default_for(cv_mae: Mapping[str, float]) -> str:
    """``guarded`` when fitted, else :func:`lowest_cv_error`."""
    return GUARDED if GUARDED in cv_mae else lowest_cv_error(cv_mae)


def lowest_cv_error(cv_mae: Mapping[str, float]) -> str:
    """The estimator with the lowest cross-validated MAE on the source models (first on a tie).

    What the bundle's own reliability summary says is best; an estimator whose error could not
    be measured (NaN) never wins, and with none measured the package default (or the first)
    stands.
    """
    measured = {name: mae for name, mae in cv_mae.items() if math.isfinite(mae)}
    if not measured:
        return DEFAULT_ESTIMATOR if DEFAULT_ESTIMATOR in cv_mae else next(iter(cv_mae))
    return min(measured, key=measured.__getitem__)
